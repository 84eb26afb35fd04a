/* The protocol part of the C driver (worker protocol v6, protocol/README.md), shared by
 * c-thread (taskmeter_c.c) and the C++ driver (drivers/cpp): see taskmeter_core.h. libc and
 * pthreads only. */
#define _GNU_SOURCE
#include "taskmeter_core.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

tm_plan P;
const char *tm_runtime;
tm_unit *tm_units;
uint64_t tm_started, tm_measure_start_ns, tm_end_ns, tm_create_start, tm_run_start;
tm_atomic_bool tm_stop_requested, tm_interrupted;
tm_atomic_u64 tm_counter;
char tm_start_error[700];

/* One buffer for every frame: the main thread uses it before the writer starts and after it
   stops, the writer in between. */
static unsigned char out[1 << 22];
static size_t out_len;

/* Frames are little-endian: native integers are copied as they are (a byte-by-byte encoding
   made the writer 10x slower, and a starved writer loses samples). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "this driver needs a little-endian machine");

void tm_flush_out(void) {
    for (size_t done = 0; done < out_len;) {
        ssize_t w = write(STDOUT_FILENO, out + done, out_len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { fprintf(stderr, "taskmeter: cannot write to stdout: %s\n", strerror(errno)); exit(1); }
        done += (size_t)w;
    }
    out_len = 0;
}

/* One writev(2) to the sample file: one system call, so on a file open for appending the frames
   of the writer and of units writing at once never interleave. A short write is a failure, never
   completed by a second write (another thread's frame could come between). */
static bool append_samples(const struct iovec *iov, int n, size_t len) {
    ssize_t w;
    while ((w = writev(TM_SAMPLE_FD, iov, n)) < 0 && errno == EINTR) {}
    return w == (ssize_t)len;
}

/* The writer's buffer of whole sample frames, in one write. */
static void flush_samples(void) {
    if (out_len && !append_samples(&(struct iovec){ out, out_len }, 1, out_len)) {
        fprintf(stderr, "taskmeter: cannot append %zu bytes to the sample file: %s\n", out_len, strerror(errno));
        exit(1);
    }
    out_len = 0;
}

/* Room for one frame of `len` bytes in the buffer: writes its header, returns its payload. */
static unsigned char *frame(char kind, size_t len) {
    if (out_len + 5 + len > sizeof out) tm_flush_out();
    unsigned char *f = out + out_len;
    f[0] = (unsigned char)kind;
    memcpy(f + 1, &(uint32_t){ (uint32_t)len }, 4);
    out_len += 5 + len;
    return f + 5;
}

void tm_json(char kind, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(frame(kind, (size_t)n), buf, (size_t)n);
}

void tm_fail(int status, const char *fmt, ...) {
    char msg[700];   /* may hold a start_error */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);   /* never holds '"' or '\\': no escaping needed */
    va_end(ap);
    tm_json('E', "{\"message\":\"%s\"}", msg);
    tm_flush_out();
    exit(status);
}

static char plan[4096];   /* one flat JSON line, already checked by the orchestrator */

static const char *find(const char *key) {
    char pattern[40];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *v = strstr(plan, pattern);
    return v ? v + strlen(pattern) : NULL;
}
const char *tm_value(const char *key) {
    const char *v = find(key);
    if (!v) tm_fail(2, "the plan has no '%s' (this worker speaks protocol %d)", key, TM_PROTOCOL);
    return v;
}
uint64_t tm_num(const char *key) { return strtoull(tm_value(key), NULL, 10); }
bool tm_is(const char *key, const char *word) {
    const char *v = tm_value(key);
    size_t n = strlen(word);
    return v[0] == '"' && !strncmp(v + 1, word, n) && v[n + 1] == '"';
}

/* The index of the plan's string `key` in `names` (NULL-terminated), or -1. */
static int which(const char *key, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (tm_is(key, names[i])) return i;
    return -1;
}

/* Read with read(2), one byte at a time, up to the '\n': stdio would buffer past it and take
   the end of file that the stop watcher must see. */
void tm_read_plan(const char *const *served) {
    size_t n = 0;
    while (n < sizeof plan - 1) {
        char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || c == '\n') break;
        plan[n++] = c;
    }
    if (n == sizeof plan - 1) tm_fail(2, "the plan line is longer than %zu bytes", sizeof plan - 1);
    if (tm_num("protocol") != TM_PROTOCOL)
        tm_fail(2, "unsupported protocol version %" PRIu64 " (this worker speaks %d)", tm_num("protocol"), TM_PROTOCOL);
    int r = which("runtime", served);
    if (r < 0) {
        const char *v = tm_value("runtime");
        char list[200] = "";
        for (int i = 0; served[i]; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", served[i]);
        tm_fail(2, "runtime '%.*s' is not served by this driver (%s)", (int)strcspn(v + 1, "\"\\"), v + 1, list);
    }
    tm_runtime = served[r];
    P.atomic_sum = tm_is("experiment", "atomic-sum");
    P.units = tm_num("units"), P.classes = tm_num("classes"), P.start_limit = tm_num("start_limit_ns");
    P.warmup = tm_num("warmup_ns"), P.duration = tm_num("duration_ns");
    P.absolute = tm_is("mode", "absolute");
    P.schedule = tm_is("schedule", "by-unit") ? TM_BY_UNIT : tm_is("schedule", "modulo") ? TM_MODULO
               : tm_is("schedule", "none") ? TM_NONE : TM_FIXED;
    P.sleep = tm_num("sleep_ns"), P.modulo = tm_num("modulo");
    P.iters = tm_num("busy_iters"), P.yield = !strncmp(tm_value("busy_yield"), "true", 4);
    P.ring = tm_num("ring"), P.flush = tm_num("flush_ns");
    P.room_known = *tm_value("room_threads") != 'n', P.room = tm_num("room_threads");
    P.room_why = tm_value("room_threads_why") + 1, P.room_why_len = (int)strcspn(P.room_why, "\"");
}

int tm_read_recipe(const char *const *recipes) {
    const char *v = find("wait");
    if (!v || tm_is("wait", "sleep")) return -1;
    int r = which("wait", recipes);
    if (r < 0) {
        size_t n = strcspn(v + 1, "\"\\");
        tm_fail(2, "runtime %s has no wait recipe '%.*s'", tm_runtime, (int)(n > 40 ? 40 : n), v + 1);
    }
    return r;
}

void tm_hello(const char *version, const char *priority, const char *recipe) {
    char wait[64] = "";
    if (recipe) snprintf(wait, sizeof wait, ",\"wait\":\"%s\"", recipe);
    tm_json('H', "{\"protocol\":%d,\"runtime\":\"%s\",\"runtime_version\":\"%s\",\"clock\":\"CLOCK_MONOTONIC\","
            "\"pid\":%ld,\"priority\":\"%s\"%s}", TM_PROTOCOL, tm_runtime, version, (long)getpid(), priority, wait);
    tm_flush_out();
}

/* Started by hand, fd 3 may be an unrelated file: write only to one open for appending. */
void tm_check_sample_file(void) {
    int fl = fcntl(TM_SAMPLE_FD, F_GETFL);
    if (fl == -1 || !(fl & O_APPEND) || (fl & O_ACCMODE) == O_RDONLY)
        tm_fail(2, "fd 3, the sample file, is not open for appending (taskmeter opens it for every worker it starts)");
}

uint64_t tm_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct timespec tm_timespec(uint64_t ns) {
    return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u) };
}

uint64_t tm_expected(uint64_t u, uint64_t k) {
    return P.schedule == TM_BY_UNIT ? u * P.sleep : P.schedule == TM_MODULO ? (k % P.modulo + 1) * P.sleep : P.sleep;
}

uint64_t tm_busy(uint64_t iters, bool yield) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < iters; i++) {
        total = tm_busy_step(total);
        if (yield) sched_yield();
    }
    return total;
}

/* ---- The ring and the writer (protocol: "Storage: the ring", "The writer"). ---- */

/* The 29 bytes before a sample frame's samples: kind, length, unit, count, origin, first. */
static void sample_header(unsigned char *f, char kind, const tm_unit *un, uint64_t count, uint64_t first) {
    f[0] = (unsigned char)kind;
    memcpy(f + 1, (uint32_t[3]){ (uint32_t)(24 + 32 * count), (uint32_t)un->id, (uint32_t)count }, 12);
    memcpy(f + 13, (uint64_t[2]){ un->origin, first }, 16);
}

/* The ring is full (the writer fell behind): the unit takes its samples back with a
   compare-and-swap of tail (if it fails, the writer took them and there is room) and appends them
   as one F frame itself, straight from the ring's two halves, which stay its own until its next
   put. So the unit never waits for the writer; a failed write loses the samples, counted. */
static void write_own_ring(tm_unit *un, uint64_t t, uint64_t h) {
    if (!atomic_compare_exchange_strong(&un->tail, &t, h)) return;
    uint64_t at = h % P.ring;   /* the oldest sample's slot: h - t == P.ring */
    unsigned char header[29];
    sample_header(header, 'F', un, P.ring, t);
    struct iovec iov[3] = { { header, 29 }, { un->ring + 4 * at, 32 * (P.ring - at) }, { un->ring, 32 * at } };
    if (!append_samples(iov, 3, 29 + 32 * P.ring)) un->lost += P.ring;
}

void tm_put_sample(tm_unit *un, uint64_t t0, uint64_t t1, uint64_t intended, uint64_t t2) {
    uint64_t h = atomic_load_explicit(&un->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&un->tail, memory_order_acquire);
    if (h - t == P.ring) write_own_ring(un, t, h);
    uint64_t *s = un->ring + 4 * (h % P.ring);
    s[0] = t0; s[1] = t1; s[2] = intended; s[3] = t2;
    atomic_store_explicit(&un->head, h + 1, memory_order_release);
}

/* Write every byte of the ring: malloc'd pages are mapped only when first written, and that
   page fault must not happen inside the loop. */
void tm_fill_ring(tm_unit *un) {
    if (un->ring) memset(un->ring, 0xff, P.ring * 32);
}

static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t phase_changed;   /* on CLOCK_MONOTONIC */
static int phase;                      /* 0: before G, 1: units run, 2: every unit has ended */
static pthread_t writer_thread;

/* One unit's new samples as S frames, each one copy: two when they wrap around the ring's end
   (more only beyond the output buffer). A frame is kept only if the compare-and-swap of tail from
   the value read succeeds, which gives its slots back to the unit; if it fails, the unit took
   those samples itself meanwhile and may be rewriting their slots: the copy is dropped. */
static void drain(tm_unit *un) {
    uint64_t t = atomic_load_explicit(&un->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&un->head, memory_order_acquire);
    while (t < head) {
        if (out_len + 29 + 32 > sizeof out) flush_samples();
        uint64_t at = t % P.ring, count = head - t, room = (sizeof out - out_len - 29) / 32;
        if (count > P.ring - at) count = P.ring - at;
        if (count > room) count = room;
        sample_header(out + out_len, 'S', un, count, t);
        memcpy(out + out_len + 29, un->ring + 4 * at, 32 * count);
        if (!atomic_compare_exchange_strong(&un->tail, &t, t + count)) return;
        out_len += 29 + 32 * count;
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
    tm_json('G', "{\"create_start_ns\":%" PRIu64 ",\"run_start_ns\":%" PRIu64 ",\"units\":%" PRIu64 "%s%s%s}",
            tm_create_start, tm_run_start, tm_started, tm_start_error[0] ? ",\"start_error\":\"" : "", tm_start_error,
            tm_start_error[0] ? "\"" : "");
    tm_flush_out();
    for (;;) {
        struct timespec at = tm_timespec(tm_now_ns() + P.flush);
        while (phase == 1 && pthread_cond_timedwait(&phase_changed, &phase_lock, &at) != ETIMEDOUT) {}
        bool last = phase == 2;
        pthread_mutex_unlock(&phase_lock);
        for (uint64_t i = 0; i < tm_started; i++) drain(&tm_units[i]);
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
    atomic_store(&tm_stop_requested, true);
    return NULL;
}

static void start_watcher(void) {
    pthread_t watcher;
    int rc = pthread_create(&watcher, NULL, watch_stdin, NULL);
    if (rc) tm_fail(1, "cannot start the stdin thread: %s", strerror(rc));
    pthread_detach(watcher);
}

/* The helper threads exist before the units, so a thread limit reached by the units cannot
   refuse them. No process can have more threads than Linux's PID_MAX_LIMIT (2^22), so neither
   can the unit table (calloc maps it lazily). */
uint64_t tm_prepare_units(void) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&phase_changed, &ca);
    int rc = pthread_create(&writer_thread, NULL, writer, NULL);
    if (rc) tm_fail(1, "cannot start the writer thread: %s", strerror(rc));
    start_watcher();
    /* Its name lets the orchestrator find it and run it above the units (protocol: "The
       writer"); set here, before any unit exists, so that it is set when G is read. */
    pthread_setname_np(writer_thread, "tm-writer");
    uint64_t table = P.units < (1u << 22) ? P.units : 1u << 22;
    if (!(tm_units = calloc((size_t)table, sizeof *tm_units))) tm_fail(1, "cannot allocate the unit table: %s", strerror(errno));
    tm_create_start = tm_now_ns();
    return table;
}

#define STOP(...) (snprintf(tm_start_error, sizeof tm_start_error, __VA_ARGS__), false)
bool tm_may_start(uint64_t plan_read, uint64_t table) {
    uint64_t u = tm_started;
    tm_unit *un = &tm_units[u];
    size_t ring_bytes = P.schedule == TM_NONE ? 0 : (size_t)P.ring * 32;
    if (u > 0 && tm_now_ns() - plan_read >= P.start_limit)
        return STOP("start limit of %" PRIu64 " ns reached after %" PRIu64 " units", P.start_limit, u);
    if (u > 0 && u == table) return STOP("unit %" PRIu64 ": no process can have more than %" PRIu64 " threads", u + 1, table);
    if (u > 0 && atomic_load(&tm_stop_requested)) return STOP("stopped after %" PRIu64 " units: end of file on stdin", u);
    if (ring_bytes && !(un->ring = malloc(ring_bytes)))
        return STOP("cannot allocate the ring of unit %" PRIu64 ": %s", u + 1, strerror(errno));
    un->id = u + 1, un->klass = (int)(u % P.classes);
    return true;
}

/* Arrivals at the start gate are counted under a mutex; how a unit then parks is the runtime's. */
static pthread_mutex_t arrival_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t arrival = PTHREAD_COND_INITIALIZER;
static uint64_t arrived;

void tm_arrive(void) {
    pthread_mutex_lock(&arrival_lock);
    arrived++;
    pthread_cond_signal(&arrival);
    pthread_mutex_unlock(&arrival_lock);
}

void tm_wait_arrivals(void) {
    pthread_mutex_lock(&arrival_lock);
    while (arrived < tm_started) pthread_cond_wait(&arrival, &arrival_lock);
    pthread_mutex_unlock(&arrival_lock);
    tm_run_start = tm_now_ns();
    tm_measure_start_ns = tm_run_start + P.warmup;
    tm_end_ns = tm_measure_start_ns + P.duration;
}

void tm_gate_opened(void) { set_phase(1); }

void tm_finish(void) {
    set_phase(2);
    pthread_join(writer_thread, NULL);
    uint64_t ran = 0;   /* the first unit that ran an iteration computed busy(iters) */
    while (ran < tm_started && tm_units[ran].n == 0) ran++;
    uint64_t result = ran < tm_started ? tm_units[ran].busy_result : tm_busy(P.iters, false);
    for (uint64_t i = 0; i < tm_started; i++) {
        tm_unit *un = &tm_units[i];
        /* Binary, 36 bytes: unit (u32), origin, iterations, measured iterations, lost (u64). */
        unsigned char *f = frame('U', 36);
        memcpy(f, &(uint32_t){ (uint32_t)un->id }, 4);
        memcpy(f + 4, (uint64_t[4]){ un->origin, un->n, un->n_meas, un->lost }, 32);
    }
    char sum[40] = "";
    if (P.atomic_sum) snprintf(sum, sizeof sum, ",\"atomic_sum\":%" PRIu64, atomic_load(&tm_counter));
    tm_json('D', "{\"interrupted\":%s,\"busy_result\":\"%" PRIu64 "\"%s}", atomic_load(&tm_interrupted) ? "true" : "false",
            result, sum);
    tm_flush_out();
}

/* ---- The granularity experiment (protocol: "The granularity experiment"). ---- */
tm_grain_plan G;
tm_atomic_u64 tm_tasks_started, tm_tasks_completed, tm_tasks_wrong;

void tm_check(uint64_t result) {
    if (result != G.expected) atomic_fetch_add(&tm_tasks_wrong, 1);
}

uint64_t tm_task_work(void) {
    uint64_t result = tm_busy(G.iters, false);
    atomic_fetch_add(&tm_tasks_completed, 1);
    return result;
}

/* ns per busy iteration: the shortest of three calls of busy(n), for the first n (1024,
   doubling) whose call takes a quarter of calibrate_ns. */
static double ns_per_iter(void) {
    uint64_t n = 1024, shortest = UINT64_MAX;
    for (;; n *= 2) {
        uint64_t t = tm_now_ns();
        tm_busy(n, false);
        if (tm_now_ns() - t >= G.calibrate / 4) break;
    }
    for (int i = 0; i < 3; i++) {
        uint64_t t = tm_now_ns();
        tm_busy(n, false);
        uint64_t took = tm_now_ns() - t;
        if (took < shortest) shortest = took;
    }
    return (double)(shortest ? shortest : 1) / (double)n;
}

/* Serial: busy(iters) one call after another, the clock read only between batches, so it is
   not counted as work, until calibrate_ns has passed. Returns the calls, their time in *ns. */
static uint64_t serial(uint64_t *ns) {
    uint64_t batch = 10000 / G.iters ? 10000 / G.iters : 1, calls = 0, start = tm_now_ns();
    do {
        for (uint64_t i = 0; i < batch; i++) tm_check(tm_busy(G.iters, false));
        calls += batch;
    } while ((*ns = tm_now_ns() - start) < G.calibrate);
    return calls;
}

void tm_grain_begin(tm_grain *g, uint64_t plan_read) {
    G.pattern = tm_is("pattern", "chain") ? TM_CHAIN : tm_is("pattern", "stencil") ? TM_STENCIL : TM_TRIVIAL;
    G.width = tm_num("width"), G.steps = tm_num("steps"), G.calibrate = tm_num("calibrate_ns");
    start_watcher();
    tm_json('G', "{\"create_start_ns\":%" PRIu64 ",\"run_start_ns\":%" PRIu64 ",\"units\":1}", plan_read, tm_now_ns());
    tm_flush_out();
    g->per_iter = ns_per_iter();
    g->next = tm_value("grains_ns") + 1;
}

bool tm_grain_next(tm_grain *g) {
    if (*g->next == '"') return false;
    char *after;
    g->grain = strtoull(g->next, &after, 10);
    g->next = after + (*after == ',');
    G.iters = (uint64_t)((double)g->grain / g->per_iter + 0.5);
    if (G.iters == 0) G.iters = 1;
    G.expected = tm_busy(G.iters, false);
    g->calls = serial(&g->serial_ns);
    return true;
}

void tm_grain_measure(tm_grain *g) {
    g->before[0] = tm_tasks_started, g->before[1] = tm_tasks_completed, g->before[2] = tm_tasks_wrong;
    g->start = tm_now_ns();
}

void tm_grain_send(tm_grain *g, uint64_t rounds, uint64_t wall, uint64_t cores) {
    uint64_t counts[3] = { tm_tasks_started, tm_tasks_completed, tm_tasks_wrong };
    /* The task alone again, after its rounds: one of the two may have been disturbed. */
    uint64_t serial_after_ns, calls_after = serial(&serial_after_ns);
    tm_json('P', "{\"grain_ns\":%" PRIu64 ",\"iters\":%" PRIu64 ",\"busy_result\":\"%" PRIu64 "\",\"serial_tasks\":%" PRIu64
            ",\"serial_ns\":%" PRIu64 ",\"serial_after_tasks\":%" PRIu64 ",\"serial_after_ns\":%" PRIu64 ",\"rounds\":%"
            PRIu64 ",\"tasks\":%" PRIu64 ",\"completed\":%" PRIu64 ",\"wrong\":%" PRIu64 ",\"wall_ns\":%" PRIu64
            ",\"cores\":%" PRIu64 "}", g->grain, G.iters, G.expected, g->calls, g->serial_ns, calls_after, serial_after_ns,
            rounds, counts[0] - g->before[0], counts[1] - g->before[1], counts[2] - g->before[2], wall, cores);
    tm_flush_out();
}

void tm_grain_end(bool stopped) {
    tm_json('D', "{\"interrupted\":%s,\"busy_result\":\"0\"}", stopped ? "true" : "false");
    tm_flush_out();
}
