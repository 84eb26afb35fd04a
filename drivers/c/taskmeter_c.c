/* taskmeter C driver, runtime "c-thread": one POSIX thread per unit, worker protocol v6
 * (protocol/README.md). The protocol's part (plan, clock, frames, rings, writer, granularity's
 * steps) is taskmeter_core.c, shared with the C++ driver; this file is what c-thread adds: a
 * thread per unit and per task, its sleeps, recipes, priority classes and start gate. libc and
 * pthreads only.
 * Build: cc -O2 -std=gnu11 -pthread -o driver taskmeter_c.c taskmeter_core.c */
#define _GNU_SOURCE
#include "taskmeter_core.h"
#include <errno.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* Threads besides the units: main, the writer and the stdin watcher (/proc/self/status shows
   Threads: 3 before unit 1). The plan's room was measured before they existed. */
#define OWN_THREADS 3

/* C calls nanosleep even for 0 ns (Rust's std::thread::sleep skips the call): a zero sleep is a
   real system call that blocks for about the timer slack (~55 us by default). */
static void sleep_for(uint64_t ns) {
    struct timespec req = tm_timespec(ns), rem;
    while (nanosleep(&req, &rem) == -1 && errno == EINTR) req = rem;
}

/* Called even when the deadline has passed, as the protocol asks of an absolute sleep. */
static void sleep_until(uint64_t deadline) {
    struct timespec ts = tm_timespec(deadline);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* Wait recipes (protocol: "Wait recipes"): other ways to wait until an absolute CLOCK_MONOTONIC
   deadline, each short enough to copy into a program. The plan's "wait" picks one. */

/* nanosleep for what is left: the most common way, which drifts by the time spent before it. */
static void wait_nanosleep(uint64_t deadline) {
    uint64_t now = tm_now_ns();
    sleep_for(deadline > now ? deadline - now : 0);
}

/* A timerfd armed at the deadline (TFD_TIMER_ABSTIME), then read(2): the event-loop way. One
   timerfd per thread, made on first use. */
static void wait_timerfd(uint64_t deadline) {
    static __thread int fd = -1;
    if (fd < 0 && (fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)) < 0) tm_fail(1, "timerfd_create: %s", strerror(errno));
    struct itimerspec at = { .it_value = tm_timespec(deadline) };
    timerfd_settime(fd, TFD_TIMER_ABSTIME, &at, NULL);
    uint64_t expirations;
    while (read(fd, &expirations, sizeof expirations) != sizeof expirations) {}
}

/* Reads the clock until the deadline: the most precise wait, and a core kept busy. */
static void wait_spin(uint64_t deadline) {
    while (tm_now_ns() < deadline) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

/* clock_nanosleep to HYBRID_MARGIN_NS before the deadline, then spin (what Rust's spin_sleep
   crate does): nearly a spin's precision for a fraction of its CPU. */
#define HYBRID_MARGIN_NS 100000u
static void wait_hybrid(uint64_t deadline) {
    if (deadline > tm_now_ns() + HYBRID_MARGIN_NS) sleep_until(deadline - HYBRID_MARGIN_NS);
    wait_spin(deadline);
}

static const char *const RECIPE_NAMES[] = { "nanosleep", "timerfd", "spin", "hybrid", NULL };
static void (*const RECIPES[])(uint64_t) = { wait_nanosleep, wait_timerfd, wait_spin, wait_hybrid };
static void (*recipe)(uint64_t);   /* NULL: the runtime's own sleep */

/* The worker's own scheduling, read once: units inherit it, and class 1 lowers it. */
static struct { int policy, nice, rt; bool realtime; const char *name; } S;
static atomic_bool priority_failed;
static char priority_error[300];   /* written by the first unit that fails, before it parks */

/* Class c's real-time priority (p, max(1, p - 1)) under FIFO and RR, else its nice value (n, min(19, n + 10)). */
static int class_value(int c) {
    if (S.realtime) return c == 0 || S.rt <= 1 ? S.rt : S.rt - 1;
    return c == 0 ? S.nice : S.nice + 10 > 19 ? 19 : S.nice + 10;
}

static const char *policy_name(int p) {
    return p == SCHED_OTHER ? "SCHED_OTHER" : p == SCHED_BATCH ? "SCHED_BATCH" : p == SCHED_IDLE ? "SCHED_IDLE"
         : p == SCHED_FIFO ? "SCHED_FIFO" : p == SCHED_RR ? "SCHED_RR" : NULL;
}

/* On the unit's own thread, before it parks: class 0 keeps the inherited priority, class 1
   lowers it (on Linux nice and policy belong to the thread). Every unit then reads its values
   back from the kernel (this catches e.g. SCHED_RESET_ON_FORK), so no unit runs in a class it
   did not get. */
static void apply_priority(const tm_unit *un) {
    int c = un->klass, want = class_value(c), rc;
    char why[200] = "";
    struct sched_param sp = { .sched_priority = want };
    if (c == 1 && S.realtime && (rc = pthread_setschedparam(pthread_self(), S.policy, &sp)))
        snprintf(why, sizeof why, "pthread_setschedparam(%s, %d): %s", S.name, want, strerror(rc));
    else if (c == 1 && !S.realtime && setpriority(PRIO_PROCESS, (id_t)gettid(), want))
        snprintf(why, sizeof why, "setpriority(%d): %s", want, strerror(errno));
    else {
        int policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK, nice = getpriority(PRIO_PROCESS, (id_t)gettid());
        int got = S.realtime ? (sched_getparam(0, &sp) ? -1 : sp.sched_priority) : nice;
        if (policy != S.policy)
            snprintf(why, sizeof why, "the thread runs under %s, expected %s", policy_name(policy) ?: "another policy", S.name);
        else if (got != want)
            snprintf(why, sizeof why, "read back %s %d, expected %d", S.realtime ? "rt_priority" : "nice", got, want);
    }
    if (why[0] && !atomic_exchange(&priority_failed, true))
        snprintf(priority_error, sizeof priority_error, "unit %" PRIu64 " (class %d): %s", un->id, c, why);
}

/* The start gate: each unit parks here once it has arrived; the main thread opens it when
   every unit it created has arrived (taskmeter_core.c counts them), so creating threads overlaps
   no unit's loop. The gate is a rwlock that the main thread holds for writing while it creates
   units: each unit waits for it as a reader, and unlocking it releases every reader at once.
   A condvar would make all of them take its mutex again, one after the other: with 20,000
   units, 99 % had left the gate 1.7 s after it opened that way, 0.5 s with the rwlock. */
static pthread_rwlock_t gate = PTHREAD_RWLOCK_INITIALIZER;

static void park_at_gate(void) {
    tm_arrive();
    pthread_rwlock_rdlock(&gate);   /* returns once the main thread has opened the gate */
    pthread_rwlock_unlock(&gate);
}

/* The work loop of the protocol README, line for line, after the unit's preparation. */
static void *run_unit(void *arg) {
    tm_unit *un = arg;
    if (P.classes == 2) apply_priority(un);
    tm_fill_ring(un);
    park_at_gate();   /* a unit whose priority failed arrives too; the gate then never opens */
    uint64_t origin = un->origin = tm_now_ns(), k = 0, next = origin + tm_expected(un->id, 0);
    for (;;) {
        uint64_t t0 = tm_now_ns(), t1 = t0, t2 = 0, intended = 0, p = k;
        if (t0 >= tm_end_ns) break;
        if (atomic_load(&tm_stop_requested)) { atomic_store(&tm_interrupted, true); break; }
        if (P.iters > 0) { un->busy_result = tm_busy(P.iters, P.yield); t1 = tm_now_ns(); }
        if (P.schedule == TM_NONE) {
            sched_yield();   /* the same yield as busy_yield; nothing is recorded */
        } else {
            uint64_t e = tm_expected(un->id, p);
            if (P.absolute) intended = next;
            else intended = t1 + e;
            if (recipe) recipe(intended);
            else if (P.absolute) sleep_until(next);
            else sleep_for(e);
            t2 = tm_now_ns();
            k++;
            if (P.absolute) {   /* skips the periods whose deadlines t2 passed (the orchestrator counts them) */
                next += tm_expected(un->id, k);
                while (t2 > next) { k++; next += tm_expected(un->id, k); }
            }
        }
        if (P.atomic_sum) atomic_fetch_add(&tm_counter, 1);   /* seq_cst */
        un->n++;
        if (t0 >= tm_measure_start_ns) un->n_meas++;
        if (P.schedule != TM_NONE) tm_put_sample(un, t0, t1, intended, t2);
    }
    return NULL;
}

/* ---- The granularity experiment (protocol: "The granularity experiment"): a new pthread per
   task, joined (trivial, stencil), or started by its predecessor with its result (chain). ---- */
static void *task(void *arg) {
    (void)arg;
    return (void *)(uintptr_t)tm_task_work();
}

/* A thread the OS refuses ends the worker after G: the grains already sent are kept. */
static pthread_t start_task(void *(*body)(void *), void *arg) {
    pthread_t thread;
    atomic_fetch_add(&tm_tasks_started, 1);
    int rc = pthread_create(&thread, NULL, body, arg);
    if (rc) {
        fprintf(stderr, "taskmeter-c: cannot start a task's thread: %s\n", strerror(rc));
        exit(1);
    }
    return thread;
}

static void join_all(pthread_t *threads, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        void *result;
        pthread_join(threads[i], &result);
        tm_check((uint64_t)(uintptr_t)result);
    }
}

/* Chain j's link k is links[j * steps + k]; each link's thread starts the next one's. */
typedef struct { uint64_t index, handed; } chain_link;
static pthread_mutex_t chains_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t chain_ended = PTHREAD_COND_INITIALIZER;
static uint64_t chains_running;

static void *run_link(void *arg) {
    chain_link *link = arg;
    if (link->index > 0) tm_check(link->handed);
    uint64_t result = tm_task_work();
    if (link->index + 1 < G.steps) {
        link[1].handed = result;
        pthread_detach(start_task(run_link, link + 1));
    } else {
        tm_check(result);
        pthread_mutex_lock(&chains_lock);
        chains_running--;
        pthread_cond_signal(&chain_ended);
        pthread_mutex_unlock(&chains_lock);
    }
    return NULL;
}

static void run_round(pthread_t *threads, chain_link *links) {
    uint64_t w = G.width, n = G.width * G.steps;
    if (G.pattern == TM_TRIVIAL) {
        for (uint64_t i = 0; i < n; i++) threads[i] = start_task(task, NULL);
        join_all(threads, n);
    } else if (G.pattern == TM_STENCIL) {
        for (uint64_t s = 0; s < G.steps; s++) {
            for (uint64_t i = 0; i < w; i++) threads[i] = start_task(task, NULL);
            join_all(threads, w);
        }
    } else {
        chains_running = w;
        for (uint64_t j = 0; j < w; j++) pthread_detach(start_task(run_link, &links[j * G.steps]));
        pthread_mutex_lock(&chains_lock);
        while (chains_running > 0) pthread_cond_wait(&chain_ended, &chains_lock);
        pthread_mutex_unlock(&chains_lock);
    }
}

static int granularity(uint64_t plan_read) {
    tm_grain g;
    tm_grain_begin(&g, plan_read);
    cpu_set_t cpus;
    uint64_t cores = sched_getaffinity(0, sizeof cpus, &cpus) ? 1 : (uint64_t)CPU_COUNT(&cpus);
    uint64_t n = G.width * G.steps;
    pthread_t *threads = malloc(n * sizeof *threads);
    chain_link *links = malloc(n * sizeof *links);
    if (!threads || !links) tm_fail(1, "cannot allocate a round of %" PRIu64 " tasks", n);
    for (uint64_t i = 0; i < n; i++) links[i].index = i % G.steps;
    bool stopped = false;
    while (!stopped && tm_grain_next(&g)) {
        uint64_t warm_start = tm_now_ns();
        do {
            run_round(threads, links);
            stopped = atomic_load(&tm_stop_requested);
        } while (!stopped && tm_now_ns() - warm_start < P.warmup);
        if (stopped) break;
        tm_grain_measure(&g);
        uint64_t rounds = 0, wall;
        do {
            run_round(threads, links);
            rounds++;
            stopped = atomic_load(&tm_stop_requested);
        } while ((wall = tm_now_ns() - g.start) < P.duration && !stopped);
        if (stopped) break;
        tm_grain_send(&g, rounds, wall, cores);
    }
    tm_grain_end(stopped);
    return 0;
}

int main(void) {
    tm_read_plan((const char *const[]){ "c-thread", NULL });
    int r = tm_read_recipe(RECIPE_NAMES);
    if (r >= 0) recipe = RECIPES[r];
    uint64_t plan_read = tm_now_ns();   /* start_limit_ns counts from here */

    char priority[200] = "none";
    if (P.classes == 2) {
        struct sched_param sp;
        errno = 0;
        S.policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
        S.nice = getpriority(PRIO_PROCESS, 0);   /* on Linux: the calling thread's */
        if (sched_getparam(0, &sp) || errno) tm_fail(1, "cannot read the scheduling of the worker: %s", strerror(errno));
        S.rt = sp.sched_priority;
        S.realtime = S.policy == SCHED_FIFO || S.policy == SCHED_RR;
        if (!(S.name = policy_name(S.policy))) tm_fail(2, "scheduling policy %d has no thread priority this driver can set", S.policy);
        snprintf(priority, sizeof priority, "%s: high %d, low %d (%s; %s on the low units' threads, read back)",
                 S.realtime ? "rt-priority" : "nice", class_value(0), class_value(1), S.name,
                 S.realtime ? "pthread_setschedparam" : "setpriority");
    }
    char version[40];
    snprintf(version, sizeof version, "glibc %s", gnu_get_libc_version());
    tm_hello(version, priority, r >= 0 ? RECIPE_NAMES[r] : NULL);
    if (tm_is("experiment", "granularity")) return granularity(plan_read);
    tm_check_sample_file();

    /* Create units in order with the default attributes (default stack: its cost is part of
       what a thread costs); each parks at the gate once ready. Before unit u > 1, stop at the
       machine's room, the start limit, a stop request or the first failure. */
    pthread_rwlock_wrlock(&gate);   /* the gate is closed while units are created */
    uint64_t table = tm_prepare_units();
    pthread_t *threads = calloc((size_t)table, sizeof *threads);
    if (!threads) tm_fail(1, "cannot allocate the thread table: %s", strerror(errno));
    /* A thread a unit, within the plan's room less the worker's own threads. */
    uint64_t room_units = P.room > OWN_THREADS ? P.room - OWN_THREADS : 0;
    char room_note[600] = "";   /* for a refusal within that room: other processes took it */
    if (P.room_known)
        snprintf(room_note, sizeof room_note, " (the machine's room as this worker started: %.*s)", P.room_why_len, P.room_why);
    for (; tm_started < P.units && !atomic_load(&priority_failed); tm_started++) {
        tm_unit *un = &tm_units[tm_started];
        if (tm_started > 0 && P.room_known && tm_started >= room_units)
            snprintf(tm_start_error, sizeof tm_start_error, "c-thread stops at %" PRIu64 " units, the machine's room: the plan "
                     "leaves room for %" PRIu64 " threads, of which %d are the worker's own; %.*s", room_units, P.room,
                     OWN_THREADS, P.room_why_len, P.room_why);
        else if (tm_may_start(plan_read, table)) {
            int rc = pthread_create(&threads[tm_started], NULL, run_unit, un);
            if (!rc) continue;
            snprintf(tm_start_error, sizeof tm_start_error, "pthread_create for unit %" PRIu64 ": %s%s", un->id,
                     strerror(rc), room_note);
        }
        if (tm_started == 0) tm_fail(1, "%s", tm_start_error);
        break;
    }

    /* When every unit created has parked: run_start, the window, then the gate opens. */
    tm_wait_arrivals();
    if (atomic_load(&priority_failed)) tm_fail(1, "cannot apply the priority class of %s", priority_error);
    pthread_rwlock_unlock(&gate);   /* the units' rdlock sees the window written before */
    tm_gate_opened();               /* the writer sends G */
    for (uint64_t i = 0; i < tm_started; i++) pthread_join(threads[i], NULL);
    tm_finish();
    return 0;
}
