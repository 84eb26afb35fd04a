/* taskmeter_record.h: header-only record() client for `taskmeter bench` (wire format v1, see
 * clients/README.md). C11 + POSIX (Linux), GCC or Clang; build with -pthread.
 *
 * Each thread buffers its events and sends them as its own stream (stream id = a per-process
 * thread index, seq per thread), so recording takes no lock. Every call is a no-op when
 * TASKMETER_RECORD is unset. */
#ifndef TASKMETER_RECORD_H
#define TASKMETER_RECORD_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "taskmeter_record.h writes the little-endian wire format in host byte order"
#endif

#define TM_BATCH 2048                /* events per datagram: 32 + 2048 * 16 = 32800 bytes */
#define TM_MAX_AGE_NS 100000000ull   /* send when the oldest buffered event is older than this */
#define TM_VALUE_MAX ((1ull << 62) - 1)

/* One thread's stream. Header and events are contiguous so that a batch is a single send(). */
struct tm_buf {
    char magic[4];
    uint32_t flags, pid, stream, seq, dropped, count, reserved;
    uint64_t ev[TM_BATCH][2]; /* t, kind << 62 | value */
    int state;                /* 0: not opened in this thread, 1: recording, 2: disabled */
};
_Static_assert(offsetof(struct tm_buf, ev) == 32, "batch header is 32 bytes");

/* The state is weak rather than static so that every file including this header shares one
 * socket, one buffer per thread and one stream counter (static copies would reuse stream ids). */
#define TM_SHARED_ __attribute__((weak))
TM_SHARED_ __thread struct tm_buf tm_buf_;
TM_SHARED_ pthread_once_t tm_once_ = PTHREAD_ONCE_INIT;
TM_SHARED_ pthread_key_t tm_key_;
TM_SHARED_ int tm_fd_ = -1, tm_on_;
TM_SHARED_ uint64_t tm_until_;
TM_SHARED_ uint32_t tm_pid_, tm_next_stream_;

static inline uint64_t tm_now_(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sends the buffer as one batch. SO_SNDTIMEO bounds the wait to 10 ms; a batch not taken by
 * then (or with the collector gone) is dropped and counted in `dropped` of the next batch.
 * seq only advances on success, so the collector sees drops, not gaps. */
static inline void tm_send_(struct tm_buf *b, uint32_t flags) {
    int saved = errno; /* never disturb the caller's errno */
    ssize_t r;
    b->flags = flags;
    do r = send(tm_fd_, b, 32 + (size_t)b->count * 16, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    if (r < 0) b->dropped += b->count;
    else b->seq++, b->dropped = 0;
    b->count = 0;
    errno = saved;
}

/* Ends the thread's stream with a final batch (empty if nothing is buffered). A later call in
 * the same thread opens a new stream. */
static inline void tm_close_(struct tm_buf *b) {
    if (b->state != 1) return;
    if (b->count || b->seq || b->dropped) tm_send_(b, 1);
    b->state = 0;
}

static inline void tm_thread_exit_(void *b) { tm_close_((struct tm_buf *)b); }
static inline void tm_process_exit_(void) { tm_close_(&tm_buf_); } /* the thread calling exit() */
/* A forked child starts afresh: the parent's buffered events are the parent's to send. */
static inline void tm_forked_(void) { tm_buf_.state = 0, tm_buf_.dropped = 0, tm_pid_ = (uint32_t)getpid(); }

static inline void tm_init_(void) {
    int saved = errno;
    const char *path = getenv("TASKMETER_RECORD"), *until = getenv("TASKMETER_RECORD_UNTIL");
    if (until) tm_until_ = strtoull(until, NULL, 10);
    if (path && *path) {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        struct timeval timeout = {0, 10000};
        tm_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        setsockopt(tm_fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
        /* If this fails (no collector, path too long) every send fails and counts as dropped. */
        if (strlen(path) < sizeof addr.sun_path) {
            strcpy(addr.sun_path, path);
            connect(tm_fd_, (struct sockaddr *)&addr, sizeof addr);
        }
        tm_pid_ = (uint32_t)getpid();
        pthread_key_create(&tm_key_, tm_thread_exit_);
        pthread_atfork(NULL, NULL, tm_forked_);
        atexit(tm_process_exit_);
        tm_on_ = 1;
    }
    errno = saved;
}

/* The calling thread's buffer, opening its stream on first use; NULL when not recording. */
static inline struct tm_buf *tm_open_(void) {
    struct tm_buf *b = &tm_buf_;
    if (__builtin_expect(b->state == 1, 1)) return b;
    if (b->state == 2) return NULL;
    pthread_once(&tm_once_, tm_init_);
    if (!tm_on_) return b->state = 2, NULL;
    memcpy(b->magic, "TMR1", 4);
    b->pid = tm_pid_;
    b->stream = __atomic_fetch_add(&tm_next_stream_, 1, __ATOMIC_RELAXED);
    b->seq = b->count = 0;
    b->state = 1;
    pthread_setspecific(tm_key_, b); /* so the key's destructor closes the stream at thread exit */
    return b;
}

static inline void tm_event_(uint64_t kind, uint64_t value) {
    struct tm_buf *b = tm_open_();
    if (!b) return;
    uint64_t t = tm_now_();
    b->ev[b->count][0] = t;
    b->ev[b->count][1] = kind << 62 | value;
    if (++b->count == TM_BATCH || t - b->ev[0][0] > TM_MAX_AGE_NS) tm_send_(b, 0);
}

/* One unit of work completed, now. */
static inline void tm_record(void) { tm_event_(0, 1); }
/* n units completed, now (n = 0 is ignored: the wire format has no empty record). */
static inline void tm_record_n(uint64_t n) { if (n) tm_event_(0, n > TM_VALUE_MAX ? TM_VALUE_MAX : n); }
/* The unit `id` (0 <= id < 2^62) started / completed; a completion also counts as one unit. */
static inline void tm_start(uint64_t id) { tm_event_(1, id & TM_VALUE_MAX); }
static inline void tm_complete(uint64_t id) { tm_event_(2, id & TM_VALUE_MAX); }

/* Sends the calling thread's buffered events now (other threads' buffers are theirs to send).
 * The stream's final batch goes out at thread exit or at exit(). */
static inline void tm_flush(void) {
    struct tm_buf *b = &tm_buf_;
    if (b->state == 1 && (b->count || b->dropped)) tm_send_(b, 0);
}

/* True until the collector's measurement window ends (TASKMETER_RECORD_UNTIL, CLOCK_MONOTONIC
 * ns); always true without it. */
static inline int tm_running(void) {
    pthread_once(&tm_once_, tm_init_);
    return !tm_until_ || tm_now_() < tm_until_;
}

#endif
