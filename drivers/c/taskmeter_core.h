/* The protocol part of the C driver (worker protocol v6, protocol/README.md), shared by every
 * driver built on it: c-thread (taskmeter_c.c) and the C++ driver (drivers/cpp), which names
 * "../c/taskmeter_core.c" among its sources. It reads the plan, keeps the clock, the busy work,
 * the frames on stdout, the units' rings and their writer, the stdin watcher, the arrivals at
 * the start gate and the granularity experiment's grain steps; each runtime adds how a unit
 * runs, sleeps and yields, and how it is started and released. C11 (GNU) or C++20. */
#ifndef TASKMETER_CORE_H
#define TASKMETER_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
#include <atomic>
/* The same object as C's _Atomic uint64_t (GCC lays both out as one aligned uint64_t). */
typedef std::atomic<uint64_t> tm_atomic_u64;
typedef std::atomic<bool> tm_atomic_bool;
extern "C" {
#else
#include <stdatomic.h>
typedef _Atomic uint64_t tm_atomic_u64;
typedef atomic_bool tm_atomic_bool;
#endif

#define TM_PROTOCOL 6    /* the worker protocol this driver speaks: the plan's, and H's */
#define TM_SAMPLE_FD 3   /* the sample file, opened for appending by taskmeter */

enum { TM_FIXED, TM_BY_UNIT, TM_MODULO, TM_NONE };
typedef struct {
    uint64_t units, classes, start_limit, warmup, duration, sleep, modulo, iters, ring, flush;
    int schedule;
    bool atomic_sum, absolute, yield;
    bool room_known;            /* room_threads is a number, not null */
    uint64_t room;              /* room_threads */
    int room_why_len;           /* room_threads_why, without its quotes */
    const char *room_why;
} tm_plan;
extern tm_plan P;
extern const char *tm_runtime;   /* the plan's runtime, one of those the driver serves */

typedef struct {
    uint64_t id, origin, n, n_meas, lost, busy_result;   /* n, n_meas: the loop's counts */
    int klass;
    uint64_t *ring;              /* P.ring samples of four u64, written before the gate */
    tm_atomic_u64 head, tail;    /* the unit publishes head; tail moves by compare-and-swap,
                                    by the writer or by the unit when its ring is full */
} tm_unit;

extern tm_unit *tm_units;
extern uint64_t tm_started, tm_measure_start_ns, tm_end_ns;   /* fixed before the gate opens */
extern uint64_t tm_create_start, tm_run_start;
extern tm_atomic_bool tm_stop_requested;   /* end of file on stdin after the plan */
extern tm_atomic_bool tm_interrupted;      /* a unit stopped before end because of it */
extern tm_atomic_u64 tm_counter;           /* atomic-sum: shared by every unit */
extern char tm_start_error[700];   /* with room_threads_why (at most 500 bytes); G stays below 1024 */

/* Reads and checks the plan (one of the `served` runtimes, NULL-terminated), then its wait
   recipe: the index of the plan's "wait" in `recipes` (NULL-terminated), -1 for the runtime's
   own sleep. Refuses (E, exit 2) what the driver does not serve. */
void tm_read_plan(const char *const *served);
int tm_read_recipe(const char *const *recipes);
const char *tm_value(const char *key);
uint64_t tm_num(const char *key);
bool tm_is(const char *key, const char *word);

uint64_t tm_now_ns(void);
struct timespec tm_timespec(uint64_t ns);
uint64_t tm_expected(uint64_t u, uint64_t k);

/* One step of the protocol's busy work; the barriers make the compiler keep every step. */
static inline uint64_t tm_busy_step(uint64_t total) {
    total = total + 1;
    __asm__ volatile("" : "+r"(total));
    total = (total * 3) / 2;
    __asm__ volatile("" : "+r"(total));
    return total;
}
/* busy(iters, yield) with sched_yield() as the yield. */
uint64_t tm_busy(uint64_t iters, bool yield);

/* Frames on stdout. */
void tm_json(char kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tm_flush_out(void);
/* E frame, then exit: 2 for a plan this worker refuses, 1 for a failure. Only before G. */
__attribute__((noreturn)) void tm_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* H, with the runtime's version and its priority mechanism (and the recipe's name, or NULL). */
void tm_hello(const char *version, const char *priority, const char *recipe);
/* Refuses (E, exit 2) an fd 3 that is not open for appending. */
void tm_check_sample_file(void);

/* Allocates the unit table (at most 2^22 entries: no process can have more threads) and starts
   the writer and the stdin watcher; returns the table's size. */
uint64_t tm_prepare_units(void);
/* Whether the worker may start unit tm_started + 1, with its ring allocated: false after
   writing the reason into tm_start_error (the start limit, the table, a stop request, a ring
   that cannot be allocated). Unit 1 is always tried. */
bool tm_may_start(uint64_t plan_read, uint64_t table);
/* A unit writes every byte of its ring (no page fault in the loop) before it arrives. */
void tm_fill_ring(tm_unit *un);
/* A unit is ready: it arrives at the gate (the runtime then parks it its own way). */
void tm_arrive(void);
/* The main thread waits for every unit started, then fixes run_start and the window. */
void tm_wait_arrivals(void);
/* The gate is open: the writer sends G and starts. */
void tm_gate_opened(void);
/* Every unit has ended: the writer drains once more and stops, then U frames and D. */
void tm_finish(void);

/* The sample of one iteration (start, busy_end, intended, wake) into the unit's ring (protocol:
   "Storage: the ring"). */
void tm_put_sample(tm_unit *un, uint64_t t0, uint64_t t1, uint64_t intended, uint64_t t2);

/* ---- The granularity experiment: the steps every driver takes per grain; the driver runs
   the rounds its runtime's way (protocol: "The granularity experiment"). ---- */
enum { TM_TRIVIAL, TM_CHAIN, TM_STENCIL };
typedef struct { int pattern; uint64_t width, steps, iters, expected, calibrate; } tm_grain_plan;
extern tm_grain_plan G;
extern tm_atomic_u64 tm_tasks_started, tm_tasks_completed, tm_tasks_wrong;
/* A task's result, compared with the grain's: a wrong one is counted. */
void tm_check(uint64_t result);
/* A task's body: the busy work, counted once it has returned. */
uint64_t tm_task_work(void);
/* One grain's measurement as it goes. */
typedef struct { const char *next; uint64_t grain, calls, serial_ns, before[3], start; double per_iter; } tm_grain;
/* Reads the pattern, starts the stdin watcher, sends G and measures the rate. */
void tm_grain_begin(tm_grain *g, uint64_t plan_read);
/* The next grain, its iters and expected result, and its serial measurement; false after the last. */
bool tm_grain_next(tm_grain *g);
/* The measured rounds begin now. */
void tm_grain_measure(tm_grain *g);
/* The measured rounds have ended: the serial measurement again, then P. */
void tm_grain_send(tm_grain *g, uint64_t rounds, uint64_t wall, uint64_t cores);
/* D, after the last grain or a stop request. */
void tm_grain_end(bool stopped);
#ifdef __cplusplus
}
#endif
#endif
