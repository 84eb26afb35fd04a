/* taskmeter C driver, runtime id "c-thread": one POSIX thread per unit.
 * Implements worker protocol v2 (protocol/README.md): plan on stdin, NDJSON on stdout.
 * Build: cc -O2 -std=gnu11 -pthread -o taskmeter-c taskmeter_c.c   (libc + pthreads only) */
#define _GNU_SOURCE
#include <errno.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define RUNTIME "c-thread"
#define MAX_PLAN (1u << 20)   /* bytes in the plan line */
#define MAX_DEPTH 64          /* JSON nesting; bounds the parser's recursion */
#define SAMPLE_BUDGET (1u << 22)   /* samples reserved before the gate, shared by all units (192 MiB) */

/* ---------- output helpers ---------- */

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, surrogates or > U+10FFFF), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, const unsigned char *end) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if ((size_t)(end - s) < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return n;
}

/* JSON string; invalid UTF-8 (e.g. a quote cut by truncation) becomes U+FFFD so the line stays valid. */
static void put_jstr(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    putchar('"');
    for (size_t i = 0; i < n;) {
        size_t l;
        if (s[i] == '"' || s[i] == '\\') { putchar('\\'); putchar(s[i++]); }
        else if (s[i] < 0x20 || s[i] == 0x7F) printf("\\u%04x", s[i++]);
        else if (s[i] < 0x80) putchar(s[i++]);
        else if ((l = utf8_len(s + i, s + n))) { fwrite(s + i, 1, l, stdout); i += l; }
        else { fputs("\\ufffd", stdout); i++; }
    }
    putchar('"');
}

/* error line, then exit: 2 for a refused plan, 1 for a failure */
static _Noreturn void fail(int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fputs("{\"type\":\"error\",\"message\":", stdout);
    put_jstr(msg, strlen(msg));
    fputs("}\n", stdout);
    fflush(stdout);
    exit(status);
}
#define refuse(...) fail(2, __VA_ARGS__)

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n, size);
    if (!p) fail(1, "cannot allocate %zu x %zu bytes: %s", n, size, strerror(errno));
    return p;
}

/* ---------- JSON ---------- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
typedef struct jv {
    int type;
    bool b;                   /* J_BOOL */
    bool is_int, neg, ovf;    /* J_NUM: no fraction/exponent, leading '-', magnitude > 2^64-1 */
    uint64_t u;               /* J_NUM: magnitude */
    const char *lex;          /* J_NUM: the number as written (points into the input) */
    char *s;                  /* J_STR: decoded bytes (owned), length n; J_NUM: lexeme length n */
    size_t n;
    char *key;                /* member name when inside an object (owned) */
    size_t klen;
    struct jv *kids, *next;   /* J_ARR / J_OBJ children, in order */
} jv;

typedef struct { const char *p, *beg, *end; int depth; char err[128]; } parser;

static bool perr(parser *ps, const char *what) {
    if (!ps->err[0]) snprintf(ps->err, sizeof ps->err, "%s at byte %zu", what, (size_t)(ps->p - ps->beg));
    return false;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static long hex4(const char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i] | 0x20;   /* lower-case letters; digits are unchanged */
        int d = (p[i] >= '0' && p[i] <= '9') ? p[i] - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* ps->p is at the opening quote; the decoded string is never longer than its source. */
static bool parse_string(parser *ps, char **out, size_t *len) {
    const char *q = ++ps->p;
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) return perr(ps, "unterminated string");
    char *d = *out = xcalloc(1, (size_t)(q - ps->p) + 1);
    size_t n = 0;
    while (ps->p < q) {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) return perr(ps, "control character in string");
        if (c >= 0x80) {
            size_t l = utf8_len((const unsigned char *)ps->p, (const unsigned char *)q);
            if (!l) return perr(ps, "invalid UTF-8 in string");
            memcpy(d + n, ps->p, l); n += l; ps->p += l;
            continue;
        }
        if (c != '\\') { d[n++] = (char)c; ps->p++; continue; }
        char e = ps->p[1];
        const char *simple = strchr("\"\\/bfnrt", e), *repl = "\"\\/\b\f\n\r\t";
        if (e && simple) { d[n++] = repl[simple - "\"\\/bfnrt"]; ps->p += 2; continue; }
        if (e != 'u') return perr(ps, "invalid escape");
        long cp = q - ps->p >= 6 ? hex4(ps->p + 2) : -1;
        if (cp < 0) return perr(ps, "invalid \\u escape");
        ps->p += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return perr(ps, "lone low surrogate");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            long lo = q - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u' ? hex4(ps->p + 2) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF) return perr(ps, "lone high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            ps->p += 6;
        }
        if (cp < 0x80) d[n++] = (char)cp;
        else if (cp < 0x800) { d[n++] = (char)(0xC0 | cp >> 6); d[n++] = (char)(0x80 | (cp & 0x3F)); }
        else if (cp < 0x10000) {
            d[n++] = (char)(0xE0 | cp >> 12); d[n++] = (char)(0x80 | (cp >> 6 & 0x3F)); d[n++] = (char)(0x80 | (cp & 0x3F));
        } else {
            d[n++] = (char)(0xF0 | cp >> 18); d[n++] = (char)(0x80 | (cp >> 12 & 0x3F));
            d[n++] = (char)(0x80 | (cp >> 6 & 0x3F)); d[n++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    ps->p++;   /* closing quote */
    *len = n;
    return true;
}

static bool is_digit(parser *ps) { return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9'; }

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, integers kept exactly up to 2^64-1 */
static bool parse_number(parser *ps, jv *v) {
    v->type = J_NUM; v->lex = ps->p; v->is_int = true;
    if (*ps->p == '-') { v->neg = true; ps->p++; }
    if (!is_digit(ps)) return perr(ps, "invalid number");
    if (*ps->p == '0') ps->p++;
    else for (; is_digit(ps); ps->p++) {
        unsigned d = (unsigned)(*ps->p - '0');
        if (v->u > (UINT64_MAX - d) / 10) v->ovf = true;
        else v->u = v->u * 10 + d;
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++; v->is_int = false;
        if (!is_digit(ps)) return perr(ps, "invalid number");
        while (is_digit(ps)) ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++; v->is_int = false;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (!is_digit(ps)) return perr(ps, "invalid number");
        while (is_digit(ps)) ps->p++;
    }
    v->n = (size_t)(ps->p - v->lex);
    return true;
}

static bool literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) return perr(ps, "invalid literal");
    ps->p += n;
    return true;
}

static bool parse_value(parser *ps, jv *v);

/* Children are linked into the tree before they are parsed, so an error leaves nothing unowned. */
static bool parse_container(parser *ps, jv *v, bool obj) {
    char close = obj ? '}' : ']';
    v->type = obj ? J_OBJ : J_ARR;
    if (++ps->depth > MAX_DEPTH) return perr(ps, "nesting too deep");
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) { ps->p++; ps->depth--; return true; }
    for (jv **tail = &v->kids;;) {
        jv *c = *tail = xcalloc(1, sizeof *c);
        tail = &c->next;
        if (obj) {
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') return perr(ps, "expected a member name");
            if (!parse_string(ps, &c->key, &c->klen)) return false;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return perr(ps, "expected ':'");
            ps->p++;
        }
        if (!parse_value(ps, c)) return false;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == close) { ps->p++; ps->depth--; return true; }
        return perr(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool parse_value(parser *ps, jv *v) {
    skip_ws(ps);
    if (ps->p >= ps->end) return perr(ps, "unexpected end of input");
    switch (*ps->p) {
    case '{': return parse_container(ps, v, true);
    case '[': return parse_container(ps, v, false);
    case '"': v->type = J_STR; return parse_string(ps, &v->s, &v->n);
    case 't': v->type = J_BOOL; v->b = true; return literal(ps, "true");
    case 'f': v->type = J_BOOL; return literal(ps, "false");
    case 'n': v->type = J_NULL; return literal(ps, "null");
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) return parse_number(ps, v);
        return perr(ps, "unexpected character");
    }
}

static void free_kids(jv *v) {
    for (jv *c = v->kids, *next; c; c = next) {
        next = c->next;
        free_kids(c);
        free(c);
    }
    if (v->type == J_STR) free(v->s);
    free(v->key);
}

/* ---------- plan ---------- */

enum { FIXED, BY_UNIT, MODULO, NONE };
static struct {
    uint64_t units, classes, start_limit, duration, warmup, ns, m, iters;
    int kind;
    bool atomic_sum, absolute, yield;
} P;

static const jv *field(const jv *obj, const char *pre, const char *name) {
    const jv *found = NULL;
    size_t n = strlen(name);
    for (const jv *c = obj->kids; c; c = c->next)
        if (c->klen == n && !memcmp(c->key, name, n)) {
            if (found) refuse("duplicate field %s%s", pre, name);
            found = c;
        }
    if (!found) refuse("missing field %s%s", pre, name);
    return found;
}

static const jv *get_typed(const jv *obj, const char *pre, const char *name, int type, const char *what) {
    const jv *v = field(obj, pre, name);
    if (v->type != type) refuse("%s%s must be %s", pre, name, what);
    return v;
}

static uint64_t get_uint(const jv *obj, const char *pre, const char *name, uint64_t min) {
    const jv *v = get_typed(obj, pre, name, J_NUM, "an integer");
    if (!v->is_int) refuse("%s%s must be an integer (got %.*s)", pre, name, (int)(v->n > 40 ? 40 : v->n), v->lex);
    if ((v->neg && v->u) || v->u < min) refuse("%s%s must be >= %" PRIu64, pre, name, min);
    if (v->ovf) refuse("%s%s is out of range", pre, name);
    return v->u;
}

static bool is(const jv *s, const char *word) { return s->n == strlen(word) && !memcmp(s->s, word, s->n); }
#define QUOTE(s) (int)((s)->n > 64 ? 64 : (s)->n), (s)->s   /* for "%.*s" */

static void load_plan(const jv *root) {
    if (root->type != J_OBJ) refuse("the plan must be a JSON object");
    const jv *pv = get_typed(root, "", "protocol", J_NUM, "an integer");
    if (!pv->is_int || pv->neg || pv->ovf || pv->u != 2)
        refuse("unsupported protocol version %.*s (this worker speaks 2)", (int)(pv->n > 40 ? 40 : pv->n), pv->lex);
    const jv *s = get_typed(root, "", "experiment", J_STR, "a string");
    if (is(s, "atomic-sum")) P.atomic_sum = true;
    else if (!is(s, "sleep")) refuse("unknown experiment \"%.*s\" (this worker runs \"sleep\" and \"atomic-sum\")", QUOTE(s));
    s = get_typed(root, "", "runtime", J_STR, "a string");
    if (!is(s, RUNTIME)) refuse("runtime \"%.*s\" is not served by this driver (" RUNTIME ")", QUOTE(s));
    P.units = get_uint(root, "", "units", 1);
    P.classes = get_uint(root, "", "priority_classes", 1);
    if (P.classes > 2) refuse("priority_classes must be 1 or 2 (got %" PRIu64 ")", P.classes);
    P.start_limit = get_uint(root, "", "start_limit_ns", 1);
    P.duration = get_uint(root, "", "duration_ns", 1);
    P.warmup = get_uint(root, "", "warmup_ns", 0);
    const jv *sl = get_typed(root, "", "sleep", J_OBJ, "an object");
    s = get_typed(sl, "sleep.", "mode", J_STR, "a string");
    if (is(s, "absolute")) P.absolute = true;
    else if (!is(s, "relative")) refuse("unknown sleep mode \"%.*s\"", QUOTE(s));
    const jv *sc = get_typed(sl, "sleep.", "schedule", J_OBJ, "an object");
    s = get_typed(sc, "sleep.schedule.", "kind", J_STR, "a string");
    if (is(s, "fixed")) P.kind = FIXED;
    else if (is(s, "by-unit")) P.kind = BY_UNIT;
    else if (is(s, "modulo")) P.kind = MODULO;
    else if (is(s, "none")) P.kind = NONE;
    else refuse("unknown schedule kind \"%.*s\"", QUOTE(s));
    if (P.kind == MODULO) P.m = get_uint(sc, "sleep.schedule.", "m", 1);
    if (P.kind != NONE) P.ns = get_uint(sc, "sleep.schedule.", "ns", 0);
    const jv *b = get_typed(root, "", "busy", J_OBJ, "an object");
    P.iters = get_uint(b, "busy.", "iters", 0);
    P.yield = get_typed(b, "busy.", "yield", J_BOOL, "true or false")->b;

    /* Keep every deadline below 2^64: timestamps (uptime) are far below 2^63 ns, so a run
       length and a longest period below 2^63 cannot overflow end, intended or next. */
    uint64_t longest, mult = P.kind == BY_UNIT ? P.units : P.kind == MODULO ? P.m : 1;
    if (P.duration > INT64_MAX || P.warmup > INT64_MAX - P.duration) refuse("warmup_ns + duration_ns must be below 2^63");
    if (__builtin_mul_overflow(mult, P.ns, &longest) || longest > INT64_MAX)
        refuse("the longest sleep of the schedule must be below 2^63 ns");
    /* With a zero period the absolute deadline never moves and the missed-period rule never ends. */
    if (P.absolute && P.kind != NONE && P.ns == 0)
        refuse("sleep.schedule.ns must be >= 1 in absolute mode (a zero period never advances)");
}

/* The plan line, read(2) one byte at a time: stdio would buffer past the '\n' and steal the
   end of file that the stop watcher must see. */
static char *read_plan(size_t *len) {
    size_t n = 0, cap = 512;
    char *buf = xcalloc(1, cap), c;
    for (;;) {
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) fail(1, "cannot read the plan: %s", strerror(errno));
        if (r == 0 || c == '\n') break;
        if (n + 1 == cap) {
            if (cap >= MAX_PLAN) refuse("the plan line is longer than %u bytes", MAX_PLAN);
            if (!(buf = realloc(buf, cap *= 2))) fail(1, "cannot allocate memory: %s", strerror(errno));
        }
        buf[n++] = c;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* ---------- measurement ---------- */

typedef struct { uint64_t expected, start, busy_end, intended, wake, missed; } sample;
typedef struct {
    pthread_t thread;
    uint64_t id, origin, busy_result, n, n_meas;   /* n, n_meas: the loop's iteration counts */
    uint64_t grown;   /* times the sample array outgrew its reserve */
    int klass;
    bool busy_ran, out_of_memory;
    sample *s;
    size_t len, cap;
} unit;

static uint64_t measure_start_ns, end_ns;   /* written before the gate opens, read after */
static atomic_bool stop_requested, interrupted, aborted;
static _Atomic uint64_t counter;   /* atomic-sum: one counter shared by every unit */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct timespec to_timespec(uint64_t ns) {
    return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u) };
}

static uint64_t expected(uint64_t u, uint64_t k) {
    switch (P.kind) {
    case FIXED: return P.ns;
    case BY_UNIT: return u * P.ns;
    case MODULO: return (k % P.m + 1) * P.ns;
    default: return 0;   /* NONE: no sleep */
    }
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
   real system call that arms a timer and blocks for about the timer slack (~55 us by default). */
static void sleep_for(uint64_t ns) {
    struct timespec req = to_timespec(ns), rem;
    while (nanosleep(&req, &rem) == -1 && errno == EINTR) req = rem;
}

static void sleep_until(uint64_t deadline) {
    struct timespec ts = to_timespec(deadline);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* ---------- priority classes ---------- */

/* The worker's own scheduling, read once at startup; units inherit it, and class 1 lowers it. */
static struct { int policy, nice, rt; bool realtime; const char *name; } S;
static atomic_flag priority_failed = ATOMIC_FLAG_INIT;
static char priority_error[256];

static int class_nice(int c) { return c == 0 ? S.nice : S.nice + 10 > 19 ? 19 : S.nice + 10; }
static int class_rt(int c) { return c == 0 ? S.rt : S.rt - 1 < 1 ? 1 : S.rt - 1; }

static const char *policy_name(long policy) {
    switch (policy) {
    case SCHED_OTHER: return "SCHED_OTHER";
    case SCHED_BATCH: return "SCHED_BATCH";
    case SCHED_IDLE: return "SCHED_IDLE";
    case SCHED_FIFO: return "SCHED_FIFO";
    case SCHED_RR: return "SCHED_RR";
    default: return NULL;
    }
}

static void read_scheduling(void) {
    struct sched_param sp;
    S.policy = sched_getscheduler(0);
    if (S.policy < 0 || sched_getparam(0, &sp)) fail(1, "cannot read the scheduling policy: %s", strerror(errno));
    S.policy &= ~SCHED_RESET_ON_FORK;
    S.rt = sp.sched_priority;
    errno = 0;
    S.nice = getpriority(PRIO_PROCESS, 0);   /* on Linux: the calling thread's nice */
    if (S.nice == -1 && errno) fail(1, "cannot read the nice value: %s", strerror(errno));
    S.name = policy_name(S.policy);
    S.realtime = S.policy == SCHED_FIFO || S.policy == SCHED_RR;
}

/* Fields 19 (nice), 40 (rt_priority) and 41 (policy) of /proc/thread-self/stat: what the kernel
   really applies to this thread. Fields start after the ')' that closes the command name. */
static bool read_thread_stat(long *nice, long *rt, long *policy) {
    char buf[1024];
    FILE *f = fopen("/proc/thread-self/stat", "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p) return false;
    long v[42] = { 0 };
    int field = 2;   /* the ')' ends field 2 */
    for (p++; *p && field < 41;) {
        char *endp;
        long x = strtol(p, &endp, 10);
        field++;
        if (endp == p) { while (*p == ' ') p++; while (*p && *p != ' ') p++; }   /* the state letter */
        else { v[field] = x; p = endp; }
    }
    if (field < 41) return false;
    *nice = v[19]; *rt = v[40]; *policy = v[41];
    return true;
}

static bool priority_fails(uint64_t id, int c, const char *fmt, ...) {
    if (!atomic_flag_test_and_set(&priority_failed)) {
        va_list ap;
        int n = snprintf(priority_error, sizeof priority_error, "unit %" PRIu64 " (class %d): ", id, c);
        va_start(ap, fmt);
        vsnprintf(priority_error + n, sizeof priority_error - (size_t)n, fmt, ap);
        va_end(ap);
    }
    atomic_store(&aborted, true);   /* a run whose classes are wrong measures nothing: stop all */
    return false;
}

static bool priority_is(uint64_t id, int c, const char *source, long nice, long rt, long policy) {
    if (policy != S.policy) {
        char other[32];
        const char *name = policy_name(policy);
        if (!name) snprintf(other, sizeof other, "policy %ld", policy), name = other;
        return priority_fails(id, c, "%s: the thread runs under %s, expected %s", source, name, S.name);
    }
    if (S.realtime && rt != class_rt(c)) return priority_fails(id, c, "%s: rt_priority %ld, expected %d", source, rt, class_rt(c));
    if (!S.realtime && nice != class_nice(c)) return priority_fails(id, c, "%s: nice %ld, expected %d", source, nice, class_nice(c));
    return true;
}

/* Run by the unit on its own thread, before its origin: class 0 keeps the inherited priority,
   class 1 lowers it. Then every unit reads its thread's values back from the kernel; the first
   unit of each class also reads /proc, which shows what the scheduler applies (the other units
   skip it: it would double the ~50 us that starting a thread costs here). */
static bool apply_priority(uint64_t id, int c) {
    if (c == 1 && S.realtime) {
        struct sched_param sp = { .sched_priority = class_rt(c) };
        int rc = pthread_setschedparam(pthread_self(), S.policy, &sp);
        if (rc) return priority_fails(id, c, "pthread_setschedparam(%s, %d): %s", S.name, class_rt(c), strerror(rc));
    } else if (c == 1 && setpriority(PRIO_PROCESS, (id_t)gettid(), class_nice(c)))
        return priority_fails(id, c, "setpriority(PRIO_PROCESS, gettid(), %d): %s", class_nice(c), strerror(errno));
    struct sched_param sp;
    long nice, rt, policy;
    errno = 0;
    nice = getpriority(PRIO_PROCESS, (id_t)gettid());   /* 0 would do as well: Linux's nice is per thread */
    if (nice == -1 && errno) return priority_fails(id, c, "getpriority: %s", strerror(errno));
    if ((policy = sched_getscheduler(0)) < 0 || sched_getparam(0, &sp))   /* 0: the calling thread */
        return priority_fails(id, c, "sched_getscheduler: %s", strerror(errno));
    if (!priority_is(id, c, "getpriority/sched_getparam", nice, sp.sched_priority, policy & ~SCHED_RESET_ON_FORK))
        return false;
    if (id > 2) return true;
    if (!read_thread_stat(&nice, &rt, &policy)) return priority_fails(id, c, "cannot read /proc/thread-self/stat");
    return priority_is(id, c, "/proc/thread-self/stat", nice, rt, policy);
}

/* ---------- the units ---------- */

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

/* Waits until `units` units are parked, then reads run_start, fixes the window and opens the gate. */
static uint64_t open_gate(uint64_t units) {
    pthread_mutex_lock(&arrival_lock);
    while (arrived < units) pthread_cond_wait(&arrival, &arrival_lock);
    pthread_mutex_unlock(&arrival_lock);
    uint64_t run_start = now_ns();
    measure_start_ns = run_start + P.warmup;
    end_ns = measure_start_ns + P.duration;
    pthread_rwlock_unlock(&gate);   /* the units' rdlock sees the window written above */
    return run_start;
}

/* The work loop of the protocol README, line for line, after the unit's preparation. */
static void *run_unit(void *arg) {
    unit *un = arg;
    bool ready = P.classes == 1 || apply_priority(un->id, un->klass);
    /* Write every byte of the reserve (then treat it as empty): malloc'd pages are mapped only
       when first written, and that page fault must not happen inside the loop. */
    if (un->cap) memset(un->s, 0xff, un->cap * sizeof(sample));
    park_at_gate();   /* a unit that failed arrives too, so the gate still opens */
    if (!ready) return NULL;
    uint64_t origin = un->origin = now_ns(), k = 0, next = origin + expected(un->id, 0);
    for (;;) {
        uint64_t t0 = now_ns();
        if (t0 >= end_ns || atomic_load(&aborted)) break;
        if (atomic_load(&stop_requested)) { atomic_store(&interrupted, true); break; }
        uint64_t t1 = t0;
        if (P.iters > 0) {
            un->busy_result = busy(P.iters, P.yield);
            un->busy_ran = true;
            t1 = now_ns();
        }
        if (P.kind == NONE) {
            sched_yield();   /* the same yield as busy.yield; nothing is recorded */
        } else {
            uint64_t e = expected(un->id, k), intended, m = 0;
            if (P.absolute) { intended = next; sleep_until(next); }
            else { intended = t1 + e; sleep_for(e); }
            uint64_t t2 = now_ns();
            k++;
            if (P.absolute) {   /* skipped periods are stored with the sample that overran */
                next += expected(un->id, k);
                while (t2 > next) { m++; k++; next += expected(un->id, k); }
            }
            if (un->len == un->cap) {   /* beyond the reserve: memory only, never I/O; counted */
                size_t cap = 2 * un->cap;
                sample *s = realloc(un->s, cap * sizeof *s);
                if (!s) { un->out_of_memory = true; atomic_store(&aborted, true); break; }
                un->s = s;
                un->cap = cap;
                un->grown++;
            }
            un->s[un->len++] = (sample){ e, t0, t1, intended, t2, m };
        }
        if (P.atomic_sum) atomic_fetch_add(&counter, 1);   /* seq_cst */
        un->n++;
        if (t0 >= measure_start_ns) un->n_meas++;
    }
    return NULL;
}

/* End of file (or an error) on stdin after the plan means: stop early. */
static void *watch_stdin(void *arg) {
    char buf[256];
    (void)arg;
    for (;;) {
        ssize_t r = read(STDIN_FILENO, buf, sizeof buf);
        if (r > 0 || (r < 0 && errno == EINTR)) continue;
        break;
    }
    atomic_store(&stop_requested, true);
    return NULL;
}

/* reserve(u) of the protocol's "Storage", the same in every worker: as many samples as the
   schedule allows (an iteration lasts at least its sleep, counted as at least 1 us; a modulo
   cycle of m periods sleeps m(m+1)/2 x ns), plus 16, within SAMPLE_BUDGET / units, at least 16.
   128-bit arithmetic: total * m may not fit in 64 bits. */
static size_t reserve(uint64_t u) {
    if (P.kind == NONE) return 0;
    unsigned __int128 total = P.warmup + P.duration, estimate;
    if (P.kind == MODULO) {
        unsigned __int128 m = P.m, ns = P.ns < 1000 ? 1000 : P.ns;
        estimate = total * m / (ns * (m * (m + 1) / 2)) + m + 16;
    } else {
        uint64_t e = expected(u, 0);
        estimate = total / (e < 1000 ? 1000 : e) + 16;
    }
    uint64_t share = SAMPLE_BUDGET / P.units;
    size_t n = (size_t)(estimate < share ? estimate : share);
    return n < 16 ? 16 : n;
}

/* No process can have more threads than kernel.pid_max (at most 2^22 on Linux), so units
   beyond it are never prepared: the unit table stays bounded for any plan. */
static uint64_t pid_max(void) {
    unsigned long long v = 0;
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    if (f) { if (fscanf(f, "%llu", &v) != 1) v = 0; fclose(f); }
    return v ? v : 1u << 22;
}

static const char *duration_text(uint64_t ns, char *buf, size_t size) {
    static const struct { uint64_t div; const char *unit; } u[] = { { 1000000000, "s" }, { 1000000, "ms" }, { 1000, "us" }, { 1, "ns" } };
    size_t i = 0;
    while (ns % u[i].div) i++;
    snprintf(buf, size, "%" PRIu64 " %s", ns / u[i].div, u[i].unit);
    return buf;
}

static void put_u64(uint64_t v) {
    char b[20];
    int i = sizeof b;
    do b[--i] = (char)('0' + v % 10); while (v /= 10);
    fwrite(b + i, 1, sizeof b - (size_t)i, stdout);
}

static void put_column(const unit *un, const char *name, size_t offset) {
    printf(",\"%s\":[", name);
    for (size_t i = 0; i < un->len; i++) {
        if (i) putchar(',');
        put_u64(*(const uint64_t *)((const char *)&un->s[i] + offset));
    }
    putchar(']');
}

int main(void) {
    static char outbuf[1 << 20];   /* the unit lines go out in large writes, after measuring */
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);

    size_t len;
    char *line = read_plan(&len);
    uint64_t plan_read = now_ns();   /* start_limit_ns counts from here */
    parser ps = { .p = line, .beg = line, .end = line + len };
    jv root = { 0 };
    bool ok = parse_value(&ps, &root);
    skip_ws(&ps);
    if (ok && ps.p != ps.end) ok = perr(&ps, "unexpected data after the plan");
    if (!ok) refuse("the plan is not valid JSON: %s", ps.err);
    load_plan(&root);
    free_kids(&root);
    free(line);

    char priority[256] = "none";
    if (P.classes == 2) {
        read_scheduling();
        if (!S.name) fail(1, "scheduling policy %d has no priority for threads that this driver can set", S.policy);
        if (S.realtime)
            snprintf(priority, sizeof priority, "rt-priority: high %d, low %d (%s; pthread_setschedparam on "
                     "the low units' threads, read back)", class_rt(0), class_rt(1), S.name);
        else
            snprintf(priority, sizeof priority, "nice: high %d, low %d (%s; setpriority on the low units' "
                     "threads, read back)", class_nice(0), class_nice(1), S.name);
    }

    /* The unit table: no process can have more threads than kernel.pid_max. */
    char start_error[256] = "";
    uint64_t table = P.units < pid_max() ? P.units : pid_max();
    unit *units = xcalloc((size_t)table, sizeof *units);

    char version[64];
    snprintf(version, sizeof version, "glibc %s", gnu_get_libc_version());
    fputs("{\"type\":\"hello\",\"protocol\":2,\"runtime\":\"" RUNTIME "\",\"runtime_version\":", stdout);
    put_jstr(version, strlen(version));
    printf(",\"clock\":\"CLOCK_MONOTONIC\",\"pid\":%ld,\"priority\":", (long)getpid());
    put_jstr(priority, strlen(priority));
    fputs("}\n", stdout);
    fflush(stdout);

    pthread_t watcher;
    pthread_attr_t detached;
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&watcher, &detached, watch_stdin, NULL);
    pthread_attr_destroy(&detached);
    if (rc) fail(1, "cannot start the stdin watcher thread: %s", strerror(rc));

    /* Create units in order with the default attributes (default stack: its cost is part of
       what a thread costs); each parks at the gate once ready. Before unit u > 1, stop at the
       start limit or the first failure. Then open the gate: run_start. */
    pthread_rwlock_wrlock(&gate);   /* the gate is closed while units are created */
    uint64_t create_start = now_ns(), started = 0;
    for (; started < P.units; started++) {
        unit *un = &units[started];
        if (started > 0) {
            char d[32];
            if (now_ns() - plan_read >= P.start_limit) {
                snprintf(start_error, sizeof start_error, "start limit of %s reached after %" PRIu64 " unit%s",
                         duration_text(P.start_limit, d, sizeof d), started, started == 1 ? "" : "s");
                break;
            }
            if (started == table) {
                snprintf(start_error, sizeof start_error, "unit %" PRIu64 ": no more than kernel.pid_max = %"
                         PRIu64 " threads can exist", table + 1, table);
                break;
            }
            if (atomic_load(&aborted)) break;   /* a unit failed: the run ends in an error line */
        }
        un->id = started + 1;
        un->klass = (int)(started % P.classes);
        un->cap = reserve(un->id);
        if (un->cap && !(un->s = malloc(un->cap * sizeof(sample)))) {
            if (started == 0) fail(1, "cannot reserve %zu samples for unit 1: %s", un->cap, strerror(errno));
            snprintf(start_error, sizeof start_error, "cannot reserve %zu samples for unit %" PRIu64 ": %s",
                     un->cap, un->id, strerror(errno));
            break;
        }
        if ((rc = pthread_create(&un->thread, NULL, run_unit, un))) {
            if (started == 0) fail(1, "pthread_create for unit 1: %s", strerror(rc));
            snprintf(start_error, sizeof start_error, "pthread_create for unit %" PRIu64 ": %s", un->id, strerror(rc));
            break;
        }
    }
    uint64_t run_start = open_gate(started);
    for (uint64_t i = 0; i < started; i++) pthread_join(units[i].thread, NULL);

    if (atomic_flag_test_and_set(&priority_failed)) fail(1, "cannot apply the priority class of %s", priority_error);
    uint64_t samples = 0, missed = 0, grown = 0, iterations = 0, result = 0;
    bool have_result = false;
    for (uint64_t i = 0; i < started; i++) {
        if (units[i].out_of_memory)
            fail(1, "cannot store the samples of unit %" PRIu64 ": %s", i + 1, strerror(ENOMEM));
        if (units[i].busy_ran && !have_result) { result = units[i].busy_result; have_result = true; }
    }
    if (!have_result) result = busy(P.iters, false);   /* no unit got to run its busy phase */

    for (uint64_t i = 0; i < started; i++) {
        const unit *un = &units[i];
        printf("{\"type\":\"unit\",\"unit\":%" PRIu64 ",\"class\":%d,\"origin_ns\":%" PRIu64
               ",\"iterations\":%" PRIu64 ",\"measured_iterations\":%" PRIu64,
               un->id, un->klass, un->origin, un->n, un->n_meas);
        put_column(un, "expected_ns", offsetof(sample, expected));
        put_column(un, "start_ns", offsetof(sample, start));
        put_column(un, "busy_end_ns", offsetof(sample, busy_end));
        put_column(un, "intended_ns", offsetof(sample, intended));
        put_column(un, "wake_ns", offsetof(sample, wake));
        put_column(un, "missed", offsetof(sample, missed));
        fputs("}\n", stdout);
        samples += un->len;
        grown += un->grown;
        iterations += un->n;
        for (size_t j = 0; j < un->len; j++) missed += un->s[j].missed;
    }
    for (uint64_t i = 0; i < table; i++) free(units[i].s);
    free(units);
    printf("{\"type\":\"done\",\"create_start_ns\":%" PRIu64 ",\"run_start_ns\":%" PRIu64 ",\"measure_start_ns\":%"
           PRIu64 ",\"end_ns\":%" PRIu64 ",\"units\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"missed\":%" PRIu64
           ",\"storage_grown\":%" PRIu64 ",\"interrupted\":%s,\"busy_result\":\"%" PRIu64 "\"",
           create_start, run_start, measure_start_ns, end_ns, started, samples, missed, grown,
           atomic_load(&interrupted) ? "true" : "false", result);
    if (started < P.units) { fputs(",\"start_error\":", stdout); put_jstr(start_error, strlen(start_error)); }
    if (P.atomic_sum) {
        uint64_t sum = atomic_load(&counter);
        if (sum != iterations)   /* cannot happen with a real atomic; say so loudly if it does */
            fprintf(stderr, "taskmeter-c: atomic_sum %" PRIu64 " != sum of iterations %" PRIu64 "\n", sum, iterations);
        printf(",\"atomic_sum\":%" PRIu64, sum);
    }
    fputs("}\n", stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "taskmeter-c: cannot write the results: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
