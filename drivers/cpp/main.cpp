// taskmeter C++ driver, runtimes "cpp-asio" and "cpp-asio-pool": a C++20 coroutine per unit
// (asio::awaitable, co_spawn) on one asio::io_context, run by one thread (cpp-asio) or by a pool
// of threads, one per CPU the worker may use (cpp-asio-pool). Worker protocol v6: the protocol's
// part (plan, clock, frames, rings, writer, granularity's steps) is the C driver's
// taskmeter_core.c, compiled in; this file is what Asio adds: its units, sleeps, yield, gate and
// tasks. Standalone Asio (Debian's libasio-dev), header-only.
// Build: g++ -O2 -std=c++20 -pthread -o driver main.cpp -x c taskmeter_core.c
#include "taskmeter_core.h"
#include <asio.hpp>
#include <asio/version.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <sched.h>
#include <sys/timerfd.h>
#include <thread>
#include <unistd.h>
#include <vector>

using asio::awaitable;
using asio::use_awaitable;
using std::chrono::nanoseconds;

static asio::io_context *io;

static std::chrono::steady_clock::time_point at(uint64_t ns) {
    // libstdc++'s steady_clock is CLOCK_MONOTONIC: a deadline of our clock is its time point.
    return std::chrono::steady_clock::time_point(nanoseconds(ns));
}

// The runtime's plain yield: the coroutine is posted behind every handler already queued.
static awaitable<void> yield() {
    co_await asio::post(co_await asio::this_coro::executor, use_awaitable);
}

// busy(iters, true): the protocol's arithmetic with a coroutine yield after every step.
static awaitable<uint64_t> busy_yielding(uint64_t iters) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < iters; i++) {
        total = tm_busy_step(total);
        co_await yield();
    }
    co_return total;
}

// A one-shot event coroutines wait for, from any thread of the pool: each waiter's completion
// handler is kept under a mutex and posted to its own executor once the event is set. (An
// Asio timer cancelled to wake its waiters would be touched from several threads at once.)
class Event {
    std::mutex lock;
    bool set_ = false;
    std::vector<std::function<void()>> waiting;

  public:
    void set() {
        std::vector<std::function<void()>> wake;
        {
            std::lock_guard<std::mutex> g(lock);
            set_ = true;
            wake.swap(waiting);
        }
        for (auto &w : wake) w();
    }
    void reset() {
        std::lock_guard<std::mutex> g(lock);
        set_ = false;
    }
    awaitable<void> wait() {
        co_await asio::async_initiate<decltype(use_awaitable), void()>(
            [this](auto handler) {
                std::unique_lock<std::mutex> g(lock);
                if (set_) {
                    g.unlock();
                    asio::post(std::move(handler));
                    return;
                }
                auto h = std::make_shared<decltype(handler)>(std::move(handler));
                waiting.push_back([h] { asio::post(std::move(*h)); });
            },
            use_awaitable);
    }
};

// ---- Wait recipes (protocol: "Wait recipes"): other ways to wait until an absolute
// CLOCK_MONOTONIC deadline, each short enough to copy into a program. ----

// Reads the clock until the deadline, yielding to the io_context between reads: the thread
// stays busy, other coroutines still run.
static awaitable<void> wait_spin_yield(uint64_t deadline) {
    while (tm_now_ns() < deadline) co_await yield();
}

// A timerfd armed at the deadline (TFD_TIMER_ABSTIME), awaited through the io_context's reactor
// (epoll), one per wait (as tokio's AsyncFd recipe): the kernel's hrtimer at the deadline itself,
// rather than Asio's heap behind its one timerfd, armed relative in whole microseconds.
static awaitable<void> wait_timerfd(uint64_t deadline) {
    auto ex = co_await asio::this_coro::executor;
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd < 0) {
        perror("taskmeter-cpp: timerfd_create");
        exit(1);
    }
    asio::posix::stream_descriptor timer(ex, fd);
    itimerspec when = {};
    when.it_value = tm_timespec(deadline);
    timerfd_settime(fd, TFD_TIMER_ABSTIME, &when, nullptr);
    uint64_t expirations;
    co_await timer.async_wait(asio::posix::stream_descriptor::wait_read, use_awaitable);
    (void)!read(fd, &expirations, sizeof expirations);
}

static const char *const RECIPE_NAMES[] = {"spin-yield", "timerfd", nullptr};
static awaitable<void> (*const RECIPES[])(uint64_t) = {wait_spin_yield, wait_timerfd};
static awaitable<void> (*recipe)(uint64_t);   // null: the runtime's own sleep

static Event gate;   // opened by the main thread once every unit has arrived

// The work loop of the protocol README, line for line, after the unit's preparation.
static awaitable<void> run_unit(tm_unit *un) {
    tm_fill_ring(un);
    tm_arrive();
    co_await gate.wait();
    asio::steady_timer timer(co_await asio::this_coro::executor);
    uint64_t origin = un->origin = tm_now_ns(), k = 0, next = origin + tm_expected(un->id, 0);
    for (;;) {
        uint64_t t0 = tm_now_ns(), t1 = t0, t2 = 0, intended = 0, p = k;
        if (t0 >= tm_end_ns) break;
        if (tm_stop_requested.load()) {
            tm_interrupted.store(true);
            break;
        }
        if (P.iters > 0) {
            un->busy_result = P.yield ? co_await busy_yielding(P.iters) : tm_busy(P.iters, false);
            t1 = tm_now_ns();
        }
        if (P.schedule == TM_NONE) {
            co_await yield();   // the same yield as busy_yield; nothing is recorded
        } else {
            uint64_t e = tm_expected(un->id, p);
            if (P.absolute) intended = next;
            else intended = t1 + e;
            if (recipe) co_await recipe(intended);
            else {
                if (P.absolute) timer.expires_at(at(next));
                else timer.expires_after(nanoseconds(e));
                co_await timer.async_wait(use_awaitable);
            }
            t2 = tm_now_ns();
            k++;
            if (P.absolute) {   // skips the periods whose deadlines t2 passed (the orchestrator counts them)
                next += tm_expected(un->id, k);
                while (t2 > next) {
                    k++;
                    next += tm_expected(un->id, k);
                }
            }
        }
        if (P.atomic_sum) tm_counter.fetch_add(1);   // seq_cst
        un->n++;
        if (t0 >= tm_measure_start_ns) un->n_meas++;
        if (P.schedule != TM_NONE) tm_put_sample(un, t0, t1, intended, t2);
    }
}

// A coroutine that ended with an exception ends the worker: no unit may vanish silently.
static void ended(std::exception_ptr e) {
    if (!e) return;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception &x) {
        fprintf(stderr, "taskmeter-cpp: a coroutine failed: %s\n", x.what());
    }
    exit(1);
}

// ---- The granularity experiment: a task is a coroutine co_spawned on the io_context, its
// result handed to its completion handler; the grain loop is itself a coroutine there. ----
static Event round_done;
static std::atomic<uint64_t> remaining;   // tasks (trivial, stencil) or chains left in the round

static void spawn_task() {
    tm_tasks_started.fetch_add(1);
    asio::co_spawn(*io, []() -> awaitable<uint64_t> { co_return tm_task_work(); },
                   [](std::exception_ptr e, uint64_t result) {
                       ended(e);
                       tm_check(result);
                       if (remaining.fetch_sub(1) == 1) round_done.set();
                   });
}

// Link `index` of a chain: its busy work, then it starts the next link with its result.
static awaitable<void> chain_link(uint64_t index, uint64_t handed) {
    if (index > 0) tm_check(handed);
    uint64_t result = tm_task_work();
    if (index + 1 < G.steps) {
        tm_tasks_started.fetch_add(1);
        asio::co_spawn(*io, chain_link(index + 1, result), ended);
    } else {
        tm_check(result);
        if (remaining.fetch_sub(1) == 1) round_done.set();
    }
    co_return;
}

static awaitable<void> run_round() {
    uint64_t w = G.width;
    for (uint64_t s = 0; s < (G.pattern == TM_STENCIL ? G.steps : 1); s++) {
        round_done.reset();
        remaining = G.pattern == TM_STENCIL ? w : G.pattern == TM_TRIVIAL ? w * G.steps : w;
        for (uint64_t i = 0; i < (G.pattern == TM_TRIVIAL ? w * G.steps : w); i++) {
            if (G.pattern == TM_CHAIN) {
                tm_tasks_started.fetch_add(1);
                asio::co_spawn(*io, chain_link(0, 0), ended);
            } else spawn_task();
        }
        co_await round_done.wait();
    }
}

static awaitable<void> granularity(uint64_t plan_read, uint64_t cores) {
    tm_grain g;
    tm_grain_begin(&g, plan_read);
    bool stopped = false;
    while (!stopped && tm_grain_next(&g)) {
        uint64_t warm_start = tm_now_ns();
        do {
            co_await run_round();
            stopped = tm_stop_requested.load();
        } while (!stopped && tm_now_ns() - warm_start < P.warmup);
        if (stopped) break;
        tm_grain_measure(&g);
        uint64_t rounds = 0, wall;
        do {
            co_await run_round();
            rounds++;
            stopped = tm_stop_requested.load();
        } while ((wall = tm_now_ns() - g.start) < P.duration && !stopped);
        if (stopped) break;
        tm_grain_send(&g, rounds, wall, cores);
    }
    tm_grain_end(stopped);
}

int main() {
    tm_read_plan((const char *const[]){"cpp-asio", "cpp-asio-pool", nullptr});
    int r = tm_read_recipe(RECIPE_NAMES);
    if (r >= 0) recipe = RECIPES[r];
    uint64_t plan_read = tm_now_ns();   // start_limit_ns counts from here
    bool pool = tm_runtime == std::string("cpp-asio-pool");
    cpu_set_t cpus;
    uint64_t threads = !pool ? 1 : sched_getaffinity(0, sizeof cpus, &cpus) ? 1 : (uint64_t)CPU_COUNT(&cpus);

    // Coroutines have no priority in Asio; the pool's threads take any coroutine, so a
    // thread's nice value would not follow a unit.
    const char *priority = P.classes == 1 ? "none"
                           : pool         ? "none: Asio has no task priority, and a unit runs on whichever pool thread takes it"
                                          : "none: Asio has no task priority";
    char version[40];
    snprintf(version, sizeof version, "Asio %d.%d.%d (g++ %d.%d)", ASIO_VERSION / 100000, ASIO_VERSION / 100 % 1000,
             ASIO_VERSION % 100, __GNUC__, __GNUC_MINOR__);
    tm_hello(version, priority, r >= 0 ? RECIPE_NAMES[r] : nullptr);

    // Hint 1: one thread runs the io_context (no thread-private queues to balance).
    asio::io_context context(pool ? (int)threads : 1);
    io = &context;
    auto work = asio::make_work_guard(context);
    std::vector<std::thread> runners;
    auto run_threads = [&] {
        for (uint64_t i = 0; i < threads; i++) runners.emplace_back([&] { context.run(); });
    };
    if (tm_is("experiment", "granularity")) {
        asio::co_spawn(context, granularity(plan_read, threads), ended);
        work.reset();
        run_threads();
        for (auto &t : runners) t.join();
        return 0;
    }
    tm_check_sample_file();
    uint64_t table = tm_prepare_units();
    run_threads();
    // Start units in order; each fills its ring on the io_context and waits at the gate.
    // Before unit u > 1, stop at the start limit, a stop request or the first failure.
    for (; tm_started < P.units; tm_started++) {
        tm_unit *un = &tm_units[tm_started];
        if (tm_may_start(plan_read, table)) {
            try {
                asio::co_spawn(context, run_unit(un), ended);
                continue;
            } catch (const std::bad_alloc &) {
                snprintf(tm_start_error, sizeof tm_start_error, "cannot allocate the coroutine of unit %" PRIu64, un->id);
            }
        }
        if (tm_started == 0) tm_fail(1, "%s", tm_start_error);
        break;
    }
    tm_wait_arrivals();   // run_start and the window, then the gate opens
    gate.set();
    tm_gate_opened();   // the writer sends G
    work.reset();       // run() returns once every unit has ended
    for (auto &t : runners) t.join();
    tm_finish();
    return 0;
}
