/* taskmeter C driver, runtime "c-thread": one POSIX thread per unit, worker protocol v4
 * (protocol/README.md): a flat plan on stdin, binary frames on stdout, sample frames in the
 * sample file (fd 3). libc and pthreads only.
 * Build: cc -O2 -std=gnu11 -pthread -o driver taskmeter_c.c */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RUNTIME "c-thread"
#define SAMPLE_FD 3   /* the sample file, opened for appending by taskmeter */
/* Threads besides the units: main, the writer and the stdin watcher (/proc/self/status shows
   Threads: 3 before unit 1). The plan's room was measured before they existed. */
#define OWN_THREADS 3

enum { FIXED, BY_UNIT, MODULO, NONE };
static struct {
    uint64_t units, classes, start_limit, warmup, duration, sleep, modulo, iters, ring, flush;
    int schedule;
    bool atomic_sum, absolute, yield;
    bool room_known;            /* room_threads is a number, not null */
    uint64_t room;              /* room_threads */
    int room_why_len;           /* room_threads_why, without its quotes */
    const char *room_why;
} P;

typedef struct {
    pthread_t thread;
    uint64_t id, origin, n, n_meas, lost, busy_result;   /* n, n_meas: the loop's counts */
    int klass;
    uint64_t *ring;                  /* P.ring samples of six u64, written before the gate */
    _Atomic uint64_t head, tail;     /* the unit publishes head; tail moves by compare-and-swap,
                                        by the writer or by the unit when its ring is full */
} unit;

static unit *units;
static uint64_t started, measure_start_ns, end_ns;   /* fixed before the gate opens */
static atomic_bool stop_requested, interrupted;
static _Atomic uint64_t counter;                     /* atomic-sum: shared by every unit */

/* One buffer for every frame: the main thread uses it before the writer starts and after it
   stops, the writer in between. */
static unsigned char out[1 << 22];
static size_t out_len;

/* Frames are little-endian: native integers are copied as they are (a byte-by-byte encoding
   made the writer 10x slower, and a starved writer loses samples). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "this driver needs a little-endian machine");

static void flush_out(void) {
    for (size_t done = 0; done < out_len;) {
        ssize_t w = write(STDOUT_FILENO, out + done, out_len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { fprintf(stderr, "taskmeter-c: cannot write to stdout: %s\n", strerror(errno)); exit(1); }
        done += (size_t)w;
    }
    out_len = 0;
}

/* One writev(2) to the sample file: one system call, so on a file open for appending the frames
   of the writer and of units writing at once never interleave. A short write is a failure, never
   completed by a second write (another thread's frame could come between). */
static bool append_samples(const struct iovec *iov, int n, size_t len) {
    ssize_t w;
    while ((w = writev(SAMPLE_FD, iov, n)) < 0 && errno == EINTR) {}
    return w == (ssize_t)len;
}

/* The writer's buffer of whole sample frames, in one write. */
static void flush_samples(void) {
    if (out_len && !append_samples(&(struct iovec){ out, out_len }, 1, out_len)) {
        fprintf(stderr, "taskmeter-c: cannot append %zu bytes to the sample file: %s\n", out_len, strerror(errno));
        exit(1);
    }
    out_len = 0;
}

/* Room for one frame of `len` bytes in the buffer: writes its header, returns its payload. */
static unsigned char *frame(char kind, size_t len) {
    if (out_len + 5 + len > sizeof out) flush_out();
    unsigned char *f = out + out_len;
    f[0] = (unsigned char)kind;
    memcpy(f + 1, &(uint32_t){ (uint32_t)len }, 4);
    out_len += 5 + len;
    return f + 5;
}

static void json(char kind, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(frame(kind, (size_t)n), buf, (size_t)n);
}

/* E frame, then exit: 2 for a plan this worker refuses, 1 for a failure. Only before G. */
static _Noreturn void fail(int status, const char *fmt, ...) {
    char msg[700];   /* may hold a start_error */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);   /* never holds '"' or '\\': no escaping needed */
    va_end(ap);
    json('E', "{\"message\":\"%s\"}", msg);
    flush_out();
    exit(status);
}

static char plan[4096];   /* one flat JSON line, already checked by the orchestrator */

static const char *value(const char *key) {
    char pattern[40];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *v = strstr(plan, pattern);
    if (!v) fail(2, "the plan has no '%s' (this worker speaks protocol 4)", key);
    return v + strlen(pattern);
}
static bool has(const char *key) {
    char pattern[40];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    return strstr(plan, pattern) != NULL;
}
static uint64_t num(const char *key) { return strtoull(value(key), NULL, 10); }
static bool is(const char *key, const char *word) {
    const char *v = value(key);
    size_t n = strlen(word);
    return v[0] == '"' && !strncmp(v + 1, word, n) && v[n + 1] == '"';
}

/* Read with read(2), one byte at a time, up to the '\n': stdio would buffer past it and take
   the end of file that the stop watcher must see. */
static void read_plan(void) {
    size_t n = 0;
    while (n < sizeof plan - 1) {
        char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || c == '\n') break;
        plan[n++] = c;
    }
    if (n == sizeof plan - 1) fail(2, "the plan line is longer than %zu bytes", sizeof plan - 1);
    if (num("protocol") != 4) fail(2, "unsupported protocol version %" PRIu64 " (this worker speaks 4)", num("protocol"));
    if (!is("runtime", RUNTIME)) {
        const char *r = value("runtime");
        fail(2, "runtime '%.*s' is not served by this driver (" RUNTIME ")", (int)strcspn(r + 1, "\"\\"), r + 1);
    }
    P.atomic_sum = is("experiment", "atomic-sum");
    P.units = num("units"), P.classes = num("classes"), P.start_limit = num("start_limit_ns");
    P.warmup = num("warmup_ns"), P.duration = num("duration_ns");
    P.absolute = is("mode", "absolute");
    P.schedule = is("schedule", "by-unit") ? BY_UNIT : is("schedule", "modulo") ? MODULO : is("schedule", "none") ? NONE : FIXED;
    P.sleep = num("sleep_ns"), P.modulo = num("modulo");
    P.iters = num("busy_iters"), P.yield = !strncmp(value("busy_yield"), "true", 4);
    P.ring = num("ring"), P.flush = num("flush_ns");
    P.room_known = *value("room_threads") != 'n', P.room = num("room_threads");
    P.room_why = value("room_threads_why") + 1, P.room_why_len = (int)strcspn(P.room_why, "\"");
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct timespec to_timespec(uint64_t ns) {
    return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u) };
}

static uint64_t expected(uint64_t u, uint64_t k) {
    return P.schedule == BY_UNIT ? u * P.sleep : P.schedule == MODULO ? (k % P.modulo + 1) * P.sleep : P.sleep;
}

/* The barriers make the compiler keep every step: it may neither fold the loop nor skip it. */
static uint64_t busy(uint64_t iters, bool yield) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < iters; i++) {
        total = total + 1;
        __asm__ volatile("" : "+r"(total));
        total = (total * 3) / 2;
        __asm__ volatile("" : "+r"(total));
        if (yield) sched_yield();
    }
    return total;
}

/* C calls nanosleep even for 0 ns (Rust's std::thread::sleep skips the call): a zero sleep is a
   real system call that blocks for about the timer slack (~55 us by default). */
static void sleep_for(uint64_t ns) {
    struct timespec req = to_timespec(ns), rem;
    while (nanosleep(&req, &rem) == -1 && errno == EINTR) req = rem;
}

/* Called even when the deadline has passed, as the protocol asks of an absolute sleep. */
static void sleep_until(uint64_t deadline) {
    struct timespec ts = to_timespec(deadline);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* Wait recipes (protocol: "Wait recipes"): other ways to wait until an absolute CLOCK_MONOTONIC
   deadline, each short enough to copy into a program. The plan's "wait" picks one. */

/* nanosleep for what is left: the most common way, which drifts by the time spent before it. */
static void wait_nanosleep(uint64_t deadline) {
    uint64_t now = now_ns();
    sleep_for(deadline > now ? deadline - now : 0);
}

/* A timerfd armed at the deadline (TFD_TIMER_ABSTIME), then read(2): the event-loop way. One
   timerfd per thread, made on first use. */
static void wait_timerfd(uint64_t deadline) {
    static __thread int fd = -1;
    if (fd < 0 && (fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)) < 0) fail(1, "timerfd_create: %s", strerror(errno));
    struct itimerspec at = { .it_value = to_timespec(deadline) };
    timerfd_settime(fd, TFD_TIMER_ABSTIME, &at, NULL);
    uint64_t expirations;
    while (read(fd, &expirations, sizeof expirations) != sizeof expirations) {}
}

/* Reads the clock until the deadline: the most precise wait, and a core kept busy. */
static void wait_spin(uint64_t deadline) {
    while (now_ns() < deadline) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

/* clock_nanosleep to HYBRID_MARGIN_NS before the deadline, then spin (what Rust's spin_sleep
   crate does): nearly a spin's precision for a fraction of its CPU. */
#define HYBRID_MARGIN_NS 100000u
static void wait_hybrid(uint64_t deadline) {
    if (deadline > now_ns() + HYBRID_MARGIN_NS) sleep_until(deadline - HYBRID_MARGIN_NS);
    wait_spin(deadline);
}

static const struct { const char *name; void (*until)(uint64_t); } RECIPES[] = {
    { "nanosleep", wait_nanosleep }, { "timerfd", wait_timerfd }, { "spin", wait_spin }, { "hybrid", wait_hybrid },
};
static const char *recipe_name;          /* NULL: the runtime's own sleep */
static void (*recipe)(uint64_t);

static void read_recipe(void) {
    if (!has("wait")) return;
    const char *v = value("wait") + 1;
    size_t n = strcspn(v, "\"\\");
    if (n == 5 && !strncmp(v, "sleep", 5)) return;
    for (size_t i = 0; i < sizeof RECIPES / sizeof RECIPES[0]; i++) {
        if (strlen(RECIPES[i].name) == n && !strncmp(v, RECIPES[i].name, n)) {
            recipe_name = RECIPES[i].name, recipe = RECIPES[i].until;
            return;
        }
    }
    fail(2, "runtime " RUNTIME " has no wait recipe '%.*s'", (int)(n > 40 ? 40 : n), v);
}

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
static void apply_priority(const unit *un) {
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

/* The start gate: each unit parks here once ready; the main thread opens it when every unit it
   created has arrived, so creating threads overlaps no unit's loop. Arrivals are counted under
   a mutex. The gate itself is a rwlock that the main thread holds for writing while it creates
   units: each unit waits for it as a reader, and unlocking it releases every reader at once.
   A condvar would make all of them take its mutex again, one after the other: with 20,000
   units, 99 % had left the gate 1.7 s after it opened that way, 0.5 s with the rwlock. */
static pthread_mutex_t arrival_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t arrival = PTHREAD_COND_INITIALIZER;
static uint64_t arrived;
static pthread_rwlock_t gate = PTHREAD_RWLOCK_INITIALIZER;

static void park_at_gate(void) {
    pthread_mutex_lock(&arrival_lock);
    arrived++;
    pthread_cond_signal(&arrival);
    pthread_mutex_unlock(&arrival_lock);
    pthread_rwlock_rdlock(&gate);   /* returns once the main thread has opened the gate */
    pthread_rwlock_unlock(&gate);
}

/* The 29 bytes before a sample frame's samples: kind, length, unit, count, origin, first. */
static void sample_header(unsigned char *f, char kind, const unit *un, uint64_t count, uint64_t first) {
    f[0] = (unsigned char)kind;
    memcpy(f + 1, (uint32_t[3]){ (uint32_t)(24 + 48 * count), (uint32_t)un->id, (uint32_t)count }, 12);
    memcpy(f + 13, (uint64_t[2]){ un->origin, first }, 16);
}

/* The ring is full (the writer fell behind): the unit takes its samples back with a
   compare-and-swap of tail (if it fails, the writer took them and there is room) and appends them
   as one F frame itself, straight from the ring's two halves, which stay its own until its next
   put. So the unit never waits for the writer; a failed write loses the samples, counted. */
static void write_own_ring(unit *un, uint64_t t, uint64_t h) {
    if (!atomic_compare_exchange_strong(&un->tail, &t, h)) return;
    uint64_t at = h % P.ring;   /* the oldest sample's slot: h - t == P.ring */
    unsigned char header[29];
    sample_header(header, 'F', un, P.ring, t);
    struct iovec iov[3] = { { header, 29 }, { un->ring + 6 * at, 48 * (P.ring - at) }, { un->ring, 48 * at } };
    if (!append_samples(iov, 3, 29 + 48 * P.ring)) un->lost += P.ring;
}

static void put_sample(unit *un, uint64_t p, uint64_t t0, uint64_t t1, uint64_t intended, uint64_t t2, uint64_t m) {
    uint64_t h = atomic_load_explicit(&un->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&un->tail, memory_order_acquire);
    if (h - t == P.ring) write_own_ring(un, t, h);
    uint64_t *s = un->ring + 6 * (h % P.ring);
    s[0] = p; s[1] = t0; s[2] = t1; s[3] = intended; s[4] = t2; s[5] = m;
    atomic_store_explicit(&un->head, h + 1, memory_order_release);
}

/* The work loop of the protocol README, line for line, after the unit's preparation. */
static void *run_unit(void *arg) {
    unit *un = arg;
    if (P.classes == 2) apply_priority(un);
    /* Write every byte of the ring: malloc'd pages are mapped only when first written, and
       that page fault must not happen inside the loop. */
    if (un->ring) memset(un->ring, 0xff, P.ring * 48);
    park_at_gate();   /* a unit whose priority failed arrives too; the gate then never opens */
    uint64_t origin = un->origin = now_ns(), k = 0, next = origin + expected(un->id, 0);
    for (;;) {
        uint64_t t0 = now_ns(), t1 = t0, t2 = 0, intended = 0, m = 0, p = k;
        if (t0 >= end_ns) break;
        if (atomic_load(&stop_requested)) { atomic_store(&interrupted, true); break; }
        if (P.iters > 0) { un->busy_result = busy(P.iters, P.yield); t1 = now_ns(); }
        if (P.schedule == NONE) {
            sched_yield();   /* the same yield as busy_yield; nothing is recorded */
        } else {
            uint64_t e = expected(un->id, p);
            if (P.absolute) intended = next;
            else intended = t1 + e;
            if (recipe) recipe(intended);
            else if (P.absolute) sleep_until(next);
            else sleep_for(e);
            t2 = now_ns();
            k++;
            if (P.absolute) {   /* skipped periods are stored with the sample that overran */
                next += expected(un->id, k);
                while (t2 > next) { m++; k++; next += expected(un->id, k); }
            }
        }
        if (P.atomic_sum) atomic_fetch_add(&counter, 1);   /* seq_cst */
        un->n++;
        if (t0 >= measure_start_ns) un->n_meas++;
        if (P.schedule != NONE) put_sample(un, p, t0, t1, intended, t2, m);
    }
    return NULL;
}

static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t phase_changed;   /* on CLOCK_MONOTONIC */
static int phase;                      /* 0: before G, 1: units run, 2: every unit has ended */
static uint64_t create_start, run_start;   /* for G: written before phase 1 */
static char start_error[700];   /* with room_threads_why (at most 500 bytes); G stays below 1024 */

/* One unit's new samples as S frames, each one copy: two when they wrap around the ring's end
   (more only beyond the output buffer). A frame is kept only if the compare-and-swap of tail from
   the value read succeeds, which gives its slots back to the unit; if it fails, the unit took
   those samples itself meanwhile and may be rewriting their slots: the copy is dropped. */
static void drain(unit *un) {
    uint64_t t = atomic_load_explicit(&un->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&un->head, memory_order_acquire);
    while (t < head) {
        if (out_len + 29 + 48 > sizeof out) flush_samples();
        uint64_t at = t % P.ring, count = head - t, room = (sizeof out - out_len - 29) / 48;
        if (count > P.ring - at) count = P.ring - at;
        if (count > room) count = room;
        sample_header(out + out_len, 'S', un, count, t);
        memcpy(out + out_len + 29, un->ring + 6 * at, 48 * count);
        if (!atomic_compare_exchange_strong(&un->tail, &t, t + count)) return;
        out_len += 29 + 48 * count;
        t += count;
    }
}

/* Sends G once the gate is open; then wakes every flush_ns (sooner when every unit has ended),
   appends what the rings hold to the sample file, and after the units' end takes what is left
   once more and stops. */
static void *writer(void *arg) {
    (void)arg;
    pthread_mutex_lock(&phase_lock);
    while (phase == 0) pthread_cond_wait(&phase_changed, &phase_lock);
    json('G', "{\"create_start_ns\":%" PRIu64 ",\"run_start_ns\":%" PRIu64 ",\"units\":%" PRIu64 "%s%s%s}", create_start,
         run_start, started, start_error[0] ? ",\"start_error\":\"" : "", start_error, start_error[0] ? "\"" : "");
    flush_out();
    for (;;) {
        struct timespec at = to_timespec(now_ns() + P.flush);
        while (phase == 1 && pthread_cond_timedwait(&phase_changed, &phase_lock, &at) != ETIMEDOUT) {}
        bool last = phase == 2;
        pthread_mutex_unlock(&phase_lock);
        for (uint64_t i = 0; i < started; i++) drain(&units[i]);
        flush_samples();
        if (last) return NULL;
        pthread_mutex_lock(&phase_lock);
    }
}

static void set_phase(int p) {
    pthread_mutex_lock(&phase_lock);
    phase = p;
    pthread_cond_signal(&phase_changed);
    pthread_mutex_unlock(&phase_lock);
}

/* End of file (or an error) on stdin after the plan means: stop early. */
static void *watch_stdin(void *arg) {
    char buf[256];
    (void)arg;
    for (ssize_t r; (r = read(STDIN_FILENO, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR);) {}
    atomic_store(&stop_requested, true);
    return NULL;
}

/* ---- The granularity experiment (protocol: "The granularity experiment"): a new pthread per
   task, joined (trivial, stencil), or started by its predecessor with its result (chain). ---- */
enum { TRIVIAL, CHAIN, STENCIL };
static struct { int pattern; uint64_t width, steps, iters, expected, calibrate; } G;
static _Atomic uint64_t tasks_started, tasks_completed, tasks_wrong;

static void check(uint64_t result) {
    if (result != G.expected) atomic_fetch_add(&tasks_wrong, 1);
}

/* A task's body: the busy work, counted once it has returned. */
static uint64_t task_work(void) {
    uint64_t result = busy(G.iters, false);
    atomic_fetch_add(&tasks_completed, 1);
    return result;
}

static void *task(void *arg) {
    (void)arg;
    return (void *)(uintptr_t)task_work();
}

/* A thread the OS refuses ends the worker after G: the grains already sent are kept. */
static pthread_t start_task(void *(*body)(void *), void *arg) {
    pthread_t thread;
    atomic_fetch_add(&tasks_started, 1);
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
        check((uint64_t)(uintptr_t)result);
    }
}

/* Chain j's link k is links[j * steps + k]; each link's thread starts the next one's. */
typedef struct { uint64_t index, handed; } chain_link;
static pthread_mutex_t chains_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t chain_ended = PTHREAD_COND_INITIALIZER;
static uint64_t chains_running;

static void *run_link(void *arg) {
    chain_link *link = arg;
    if (link->index > 0) check(link->handed);
    uint64_t result = task_work();
    if (link->index + 1 < G.steps) {
        link[1].handed = result;
        pthread_detach(start_task(run_link, link + 1));
    } else {
        check(result);
        pthread_mutex_lock(&chains_lock);
        chains_running--;
        pthread_cond_signal(&chain_ended);
        pthread_mutex_unlock(&chains_lock);
    }
    return NULL;
}

static void run_round(pthread_t *threads, chain_link *links) {
    uint64_t w = G.width, n = G.width * G.steps;
    if (G.pattern == TRIVIAL) {
        for (uint64_t i = 0; i < n; i++) threads[i] = start_task(task, NULL);
        join_all(threads, n);
    } else if (G.pattern == STENCIL) {
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

/* ns per busy iteration: the shortest of three calls of busy(n), for the first n (1024,
   doubling) whose call takes a quarter of calibrate_ns. */
static double ns_per_iter(void) {
    uint64_t n = 1024, shortest = UINT64_MAX;
    for (;; n *= 2) {
        uint64_t t = now_ns();
        busy(n, false);
        if (now_ns() - t >= G.calibrate / 4) break;
    }
    for (int i = 0; i < 3; i++) {
        uint64_t t = now_ns();
        busy(n, false);
        uint64_t took = now_ns() - t;
        if (took < shortest) shortest = took;
    }
    return (double)(shortest ? shortest : 1) / (double)n;
}

/* Serial: busy(iters) one call after another, the clock read only between batches, so it is
   not counted as work, until calibrate_ns has passed. Returns the calls, their time in *ns. */
static uint64_t serial(uint64_t *ns) {
    uint64_t batch = 10000 / G.iters ? 10000 / G.iters : 1, calls = 0, start = now_ns();
    do {
        for (uint64_t i = 0; i < batch; i++) check(busy(G.iters, false));
        calls += batch;
    } while ((*ns = now_ns() - start) < G.calibrate);
    return calls;
}

static int granularity(uint64_t plan_read) {
    G.pattern = is("pattern", "chain") ? CHAIN : is("pattern", "stencil") ? STENCIL : TRIVIAL;
    G.width = num("width"), G.steps = num("steps"), G.calibrate = num("calibrate_ns");
    pthread_t watcher;
    int rc = pthread_create(&watcher, NULL, watch_stdin, NULL);
    if (rc) fail(1, "cannot start the stdin thread: %s", strerror(rc));
    pthread_detach(watcher);
    cpu_set_t cpus;
    uint64_t cores = sched_getaffinity(0, sizeof cpus, &cpus) ? 1 : (uint64_t)CPU_COUNT(&cpus);
    uint64_t n = G.width * G.steps;
    pthread_t *threads = malloc(n * sizeof *threads);
    chain_link *links = malloc(n * sizeof *links);
    if (!threads || !links) fail(1, "cannot allocate a round of %" PRIu64 " tasks", n);
    for (uint64_t i = 0; i < n; i++) links[i].index = i % G.steps;
    json('G', "{\"create_start_ns\":%" PRIu64 ",\"run_start_ns\":%" PRIu64 ",\"units\":1}", plan_read, now_ns());
    flush_out();
    double per_iter = ns_per_iter();
    bool stopped = false;
    for (const char *g = value("grains_ns") + 1; *g != '"' && !stopped; g += *g == ',') {
        char *after;
        uint64_t grain = strtoull(g, &after, 10);
        g = after;
        G.iters = (uint64_t)((double)grain / per_iter + 0.5);
        if (G.iters == 0) G.iters = 1;
        G.expected = busy(G.iters, false);
        uint64_t serial_ns, calls = serial(&serial_ns);
        uint64_t warm_start = now_ns();
        do {
            run_round(threads, links);
            stopped = atomic_load(&stop_requested);
        } while (!stopped && now_ns() - warm_start < P.warmup);
        if (stopped) break;
        uint64_t before[3] = { tasks_started, tasks_completed, tasks_wrong }, rounds = 0, start = now_ns(), wall;
        do {
            run_round(threads, links);
            rounds++;
            stopped = atomic_load(&stop_requested);
        } while ((wall = now_ns() - start) < P.duration && !stopped);
        if (stopped) break;
        uint64_t counts[3] = { tasks_started, tasks_completed, tasks_wrong };
        /* The task alone again, after its rounds: one of the two may have been disturbed. */
        uint64_t serial_after_ns, calls_after = serial(&serial_after_ns);
        json('P', "{\"grain_ns\":%" PRIu64 ",\"iters\":%" PRIu64 ",\"busy_result\":\"%" PRIu64 "\",\"serial_tasks\":%" PRIu64
             ",\"serial_ns\":%" PRIu64 ",\"serial_after_tasks\":%" PRIu64 ",\"serial_after_ns\":%" PRIu64 ",\"rounds\":%"
             PRIu64 ",\"tasks\":%" PRIu64 ",\"completed\":%" PRIu64 ",\"wrong\":%" PRIu64 ",\"wall_ns\":%" PRIu64
             ",\"cores\":%" PRIu64 "}", grain, G.iters, G.expected, calls, serial_ns, calls_after, serial_after_ns, rounds,
             counts[0] - before[0], counts[1] - before[1], counts[2] - before[2], wall, cores);
        flush_out();
    }
    json('D', "{\"interrupted\":%s,\"busy_result\":\"0\"}", stopped ? "true" : "false");
    flush_out();
    return 0;
}

int main(void) {
    read_plan();
    read_recipe();
    uint64_t plan_read = now_ns();   /* start_limit_ns counts from here */

    char priority[200] = "none";
    if (P.classes == 2) {
        struct sched_param sp;
        errno = 0;
        S.policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
        S.nice = getpriority(PRIO_PROCESS, 0);   /* on Linux: the calling thread's */
        if (sched_getparam(0, &sp) || errno) fail(1, "cannot read the scheduling of the worker: %s", strerror(errno));
        S.rt = sp.sched_priority;
        S.realtime = S.policy == SCHED_FIFO || S.policy == SCHED_RR;
        if (!(S.name = policy_name(S.policy))) fail(2, "scheduling policy %d has no thread priority this driver can set", S.policy);
        snprintf(priority, sizeof priority, "%s: high %d, low %d (%s; %s on the low units' threads, read back)",
                 S.realtime ? "rt-priority" : "nice", class_value(0), class_value(1), S.name,
                 S.realtime ? "pthread_setschedparam" : "setpriority");
    }
    char wait[64] = "";
    if (recipe_name) snprintf(wait, sizeof wait, ",\"wait\":\"%s\"", recipe_name);
    json('H', "{\"protocol\":4,\"runtime\":\"" RUNTIME "\",\"runtime_version\":\"glibc %s\",\"clock\":\"CLOCK_MONOTONIC\","
         "\"pid\":%ld,\"priority\":\"%s\"%s}", gnu_get_libc_version(), (long)getpid(), priority, wait);
    flush_out();
    if (is("experiment", "granularity")) return granularity(plan_read);
    /* Started by hand, fd 3 may be an unrelated file: write only to one open for appending. */
    int fl = fcntl(SAMPLE_FD, F_GETFL);
    if (fl == -1 || !(fl & O_APPEND) || (fl & O_ACCMODE) == O_RDONLY)
        fail(2, "fd 3, the sample file, is not open for appending (taskmeter opens it for every worker it starts)");

    /* The helper threads exist before the units, so a thread limit reached by the units
       cannot refuse them. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&phase_changed, &ca);
    pthread_t writer_thread, watcher;
    int rc = pthread_create(&writer_thread, NULL, writer, NULL);
    if (rc || (rc = pthread_create(&watcher, NULL, watch_stdin, NULL)))
        fail(1, "cannot start the writer and stdin threads: %s", strerror(rc));
    pthread_detach(watcher);
    /* Its name lets the orchestrator find it and run it above the units (protocol: "The
       writer"); set here, before any unit exists, so that it is set when G is read. */
    pthread_setname_np(writer_thread, "tm-writer");

    /* Create units in order with the default attributes (default stack: its cost is part of
       what a thread costs); each parks at the gate once ready. Before unit u > 1, stop at the
       start limit, a stop request or the first failure. No process can have more threads than
       Linux's PID_MAX_LIMIT (2^22), so neither can the unit table (calloc maps it lazily). */
    uint64_t table = P.units < (1u << 22) ? P.units : 1u << 22;
    size_t ring_bytes = P.schedule == NONE ? 0 : (size_t)P.ring * 48;
    if (!(units = calloc((size_t)table, sizeof *units))) fail(1, "cannot allocate the unit table: %s", strerror(errno));
    pthread_rwlock_wrlock(&gate);   /* the gate is closed while units are created */
    create_start = now_ns();
#define STOP(...) snprintf(start_error, sizeof start_error, __VA_ARGS__)
    /* A thread a unit, within the plan's room less the worker's own threads. */
    uint64_t room_units = P.room > OWN_THREADS ? P.room - OWN_THREADS : 0;
    char room_note[600] = "";   /* for a refusal within that room: other processes took it */
    if (P.room_known)
        snprintf(room_note, sizeof room_note, " (the machine's room as this worker started: %.*s)", P.room_why_len, P.room_why);
    for (; started < P.units && !atomic_load(&priority_failed); started++) {
        unit *un = &units[started];
        if (started > 0 && P.room_known && started >= room_units)
            STOP(RUNTIME " stops at %" PRIu64 " units, the machine's room: the plan leaves room for %" PRIu64
                 " threads, of which %d are the worker's own; %.*s", room_units, P.room, OWN_THREADS, P.room_why_len, P.room_why);
        else if (started > 0 && now_ns() - plan_read >= P.start_limit)
            STOP("start limit of %" PRIu64 " ns reached after %" PRIu64 " units", P.start_limit, started);
        else if (started > 0 && started == table)
            STOP("unit %" PRIu64 ": no process can have more than %" PRIu64 " threads", started + 1, table);
        else if (started > 0 && atomic_load(&stop_requested))
            STOP("stopped after %" PRIu64 " units: end of file on stdin", started);
        else if (ring_bytes && !(un->ring = malloc(ring_bytes)))
            STOP("cannot allocate the ring of unit %" PRIu64 ": %s", started + 1, strerror(errno));
        else {
            un->id = started + 1, un->klass = (int)(started % P.classes);
            if (!(rc = pthread_create(&un->thread, NULL, run_unit, un))) continue;
            STOP("pthread_create for unit %" PRIu64 ": %s%s", un->id, strerror(rc), room_note);
        }
        if (started == 0) fail(1, "%s", start_error);
        break;
    }

    /* When every unit created has parked: run_start, the window, then the gate opens. */
    pthread_mutex_lock(&arrival_lock);
    while (arrived < started) pthread_cond_wait(&arrival, &arrival_lock);
    pthread_mutex_unlock(&arrival_lock);
    if (atomic_load(&priority_failed)) fail(1, "cannot apply the priority class of %s", priority_error);
    run_start = now_ns();
    measure_start_ns = run_start + P.warmup;
    end_ns = measure_start_ns + P.duration;
    pthread_rwlock_unlock(&gate);   /* the units' rdlock sees the window written above */
    set_phase(1);                   /* the writer sends G */
    for (uint64_t i = 0; i < started; i++) pthread_join(units[i].thread, NULL);
    set_phase(2);
    pthread_join(writer_thread, NULL);

    uint64_t ran = 0;   /* the first unit that ran an iteration computed busy(iters) */
    while (ran < started && units[ran].n == 0) ran++;
    uint64_t result = ran < started ? units[ran].busy_result : busy(P.iters, false);
    for (uint64_t i = 0; i < started; i++)
        json('U', "{\"unit\":%" PRIu64 ",\"origin_ns\":%" PRIu64 ",\"iterations\":%" PRIu64 ",\"measured_iterations\":%"
             PRIu64 ",\"lost\":%" PRIu64 "}", units[i].id, units[i].origin, units[i].n, units[i].n_meas, units[i].lost);
    char sum[40] = "";
    if (P.atomic_sum) snprintf(sum, sizeof sum, ",\"atomic_sum\":%" PRIu64, atomic_load(&counter));
    json('D', "{\"interrupted\":%s,\"busy_result\":\"%" PRIu64 "\"%s}", atomic_load(&interrupted) ? "true" : "false", result, sum);
    flush_out();
    return 0;
}
