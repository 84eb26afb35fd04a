/* taskmeter C driver, runtime id "c-thread": one POSIX thread per unit.
 * Implements worker protocol v1 (protocol/README.md): plan on stdin, NDJSON on stdout.
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
#include <time.h>
#include <unistd.h>

#define RUNTIME "c-thread"
#define MAX_PLAN (1u << 20)   /* bytes in the plan line */
#define MAX_DEPTH 64          /* JSON nesting; bounds the parser's recursion */

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

enum { FIXED, BY_UNIT, MODULO };
static struct { uint64_t units, duration, warmup, ns, m, iters; int kind; bool absolute, yield; } P;

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
    if (!pv->is_int || pv->neg || pv->ovf || pv->u != 1)
        refuse("unsupported protocol version %.*s (this worker speaks 1)", (int)(pv->n > 40 ? 40 : pv->n), pv->lex);
    const jv *s = get_typed(root, "", "experiment", J_STR, "a string");
    if (!is(s, "sleep")) refuse("unknown experiment \"%.*s\" (this worker runs \"sleep\")", QUOTE(s));
    s = get_typed(root, "", "runtime", J_STR, "a string");
    if (!is(s, RUNTIME)) refuse("runtime \"%.*s\" is not served by this driver (" RUNTIME ")", QUOTE(s));
    P.units = get_uint(root, "", "units", 1);
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
    else refuse("unknown schedule kind \"%.*s\"", QUOTE(s));
    if (P.kind == MODULO) P.m = get_uint(sc, "sleep.schedule.", "m", 1);
    P.ns = get_uint(sc, "sleep.schedule.", "ns", 0);
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
    if (P.absolute && P.ns == 0)
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
    uint64_t id, origin, busy_result;
    bool busy_ran, out_of_memory;
    sample *s;
    size_t n, cap;
} unit;

static uint64_t end_ns;
static atomic_bool stop_requested, interrupted, aborted;

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
    default: return (k % P.m + 1) * P.ns;
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

/* The work loop of the protocol README, line for line. */
static void *run_unit(void *arg) {
    unit *un = arg;
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
        uint64_t e = expected(un->id, k), intended;
        if (P.absolute) { intended = next; sleep_until(next); }
        else { intended = t1 + e; sleep_for(e); }
        uint64_t t2 = now_ns();
        if (un->n == un->cap) {   /* memory only, never I/O, while measuring */
            sample *s = realloc(un->s, 2 * un->cap * sizeof *s);
            if (!s) { un->out_of_memory = true; atomic_store(&aborted, true); break; }
            un->s = s;
            un->cap *= 2;
        }
        un->s[un->n++] = (sample){ e, t0, t1, intended, t2, 0 };
        k++;
        if (P.absolute) {   /* skipped periods are stored with the sample that overran */
            uint64_t m = 0;
            next += expected(un->id, k);
            while (t2 > next) { m++; k++; next += expected(un->id, k); }
            un->s[un->n - 1].missed = m;
        }
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

/* Room for the whole run (capped), touched now so that measuring neither allocates nor page-faults. */
static size_t initial_capacity(uint64_t u) {
    uint64_t shortest = P.kind == BY_UNIT ? u * P.ns : P.ns, cap = ((uint64_t)1 << 22) / P.units;
    if (shortest < 1000) shortest = 1000;
    uint64_t estimate = (P.warmup + P.duration) / shortest + 2;
    if (cap > (1u << 16)) cap = 1u << 16;
    if (cap < 64) cap = 64;
    return (size_t)(estimate < cap ? estimate : cap);
}

static void put_u64(uint64_t v) {
    char b[20];
    int i = sizeof b;
    do b[--i] = (char)('0' + v % 10); while (v /= 10);
    fwrite(b + i, 1, sizeof b - (size_t)i, stdout);
}

static void put_column(const unit *un, const char *name, size_t offset) {
    printf(",\"%s\":[", name);
    for (size_t i = 0; i < un->n; i++) {
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
    parser ps = { .p = line, .beg = line, .end = line + len };
    jv root = { 0 };
    bool ok = parse_value(&ps, &root);
    skip_ws(&ps);
    if (ok && ps.p != ps.end) ok = perr(&ps, "unexpected data after the plan");
    if (!ok) refuse("the plan is not valid JSON: %s", ps.err);
    load_plan(&root);
    free_kids(&root);
    free(line);

    unit *units = xcalloc((size_t)P.units, sizeof *units);
    for (uint64_t i = 0; i < P.units; i++) {
        units[i].id = i + 1;
        units[i].cap = initial_capacity(i + 1);
        units[i].s = xcalloc(units[i].cap, sizeof(sample));
        memset(units[i].s, 0xff, units[i].cap * sizeof(sample));
    }

    char version[64];
    snprintf(version, sizeof version, "glibc %s", gnu_get_libc_version());
    fputs("{\"type\":\"hello\",\"protocol\":1,\"runtime\":\"" RUNTIME "\",\"runtime_version\":", stdout);
    put_jstr(version, strlen(version));
    printf(",\"clock\":\"CLOCK_MONOTONIC\",\"pid\":%ld}\n", (long)getpid());
    fflush(stdout);

    pthread_t watcher;
    pthread_attr_t detached;
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&watcher, &detached, watch_stdin, NULL);
    pthread_attr_destroy(&detached);
    if (rc) fail(1, "cannot start the stdin watcher thread: %s", strerror(rc));

    uint64_t run_start = now_ns(), measure_start = run_start + P.warmup;
    end_ns = measure_start + P.duration;
    for (uint64_t i = 0; i < P.units; i++) {
        if ((rc = pthread_create(&units[i].thread, NULL, run_unit, &units[i]))) {
            atomic_store(&aborted, true);
            for (uint64_t j = 0; j < i; j++) pthread_join(units[j].thread, NULL);
            fail(1, "cannot start the thread of unit %" PRIu64 ": %s", i + 1, strerror(rc));
        }
    }
    for (uint64_t i = 0; i < P.units; i++) pthread_join(units[i].thread, NULL);

    uint64_t samples = 0, missed = 0, result = 0;
    bool have_result = false;
    for (uint64_t i = 0; i < P.units; i++) {
        if (units[i].out_of_memory)
            fail(1, "cannot store the samples of unit %" PRIu64 ": %s", i + 1, strerror(ENOMEM));
        if (units[i].busy_ran && !have_result) { result = units[i].busy_result; have_result = true; }
    }
    if (!have_result) result = busy(P.iters, false);   /* no unit got to run its busy phase */

    for (uint64_t i = 0; i < P.units; i++) {
        const unit *un = &units[i];
        printf("{\"type\":\"unit\",\"unit\":%" PRIu64 ",\"origin_ns\":%" PRIu64, un->id, un->origin);
        put_column(un, "expected_ns", offsetof(sample, expected));
        put_column(un, "start_ns", offsetof(sample, start));
        put_column(un, "busy_end_ns", offsetof(sample, busy_end));
        put_column(un, "intended_ns", offsetof(sample, intended));
        put_column(un, "wake_ns", offsetof(sample, wake));
        put_column(un, "missed", offsetof(sample, missed));
        fputs("}\n", stdout);
        samples += un->n;
        for (size_t j = 0; j < un->n; j++) missed += un->s[j].missed;
        free(un->s);
    }
    free(units);
    printf("{\"type\":\"done\",\"run_start_ns\":%" PRIu64 ",\"measure_start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64
           ",\"units\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"missed\":%" PRIu64
           ",\"interrupted\":%s,\"busy_result\":\"%" PRIu64 "\"}\n",
           run_start, measure_start, end_ns, P.units, samples, missed,
           atomic_load(&interrupted) ? "true" : "false", result);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "taskmeter-c: cannot write the results: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
