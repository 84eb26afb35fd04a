/* taskmeter_record.h: header-only record() client for `taskmeter bench` (wire format v1, see
 * clients/README.md). C11 + POSIX (Linux), GCC or Clang; build with -pthread.
 *
 * Each thread buffers its events and sends them as its own stream (stream id = a per-process
 * thread index, seq per thread). Buffers are listed so that at exit() every live thread's
 * events go out; a per-buffer flag, which only the exit handler ever contends, keeps it from
 * reading a buffer while its thread writes. Every call is a no-op when TASKMETER_RECORD is
 * unset. */
#ifndef TASKMETER_RECORD_H
#define TASKMETER_RECORD_H

#define TASKMETER_RECORD_VERSION "0.1.0" /* the client's version (the Makefile's .pc takes it) */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
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
#define TM_FINAL_PATIENCE_NS 1000000000ull /* how long a final batch waits for a full queue */
#define TM_VALUE_MAX ((1ull << 62) - 1)

/* One thread's stream. Header and events are contiguous so that a batch is a single send(). */
struct tm_buf {
    char magic[4];
    uint32_t flags, pid, stream, seq, dropped, count, reserved;
    uint64_t ev[TM_BATCH][2]; /* t, kind << 62 | value */
    int state; /* 0: not opened in this thread, 1: recording, 2: disabled, 3: ended at exit */
    int busy;  /* held by its thread while it records or sends, by the exit handler to end it */
    struct tm_buf *prev, *next; /* the list of open buffers, for the exit handler */
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
TM_SHARED_ pthread_mutex_t tm_list_lock_ = PTHREAD_MUTEX_INITIALIZER;
TM_SHARED_ struct tm_buf *tm_list_; /* the buffers opened before exit, of live threads */
TM_SHARED_ int tm_exited_;          /* the exit handler has ended every listed stream */

static inline uint64_t tm_now_(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void tm_lock_(struct tm_buf *b) {
    while (__atomic_exchange_n(&b->busy, 1, __ATOMIC_ACQUIRE)) sched_yield();
}
static inline void tm_unlock_(struct tm_buf *b) { __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE); }

/* One datagram: the header and `count` events. SO_SNDTIMEO bounds one try to 10 ms; until
 * `deadline` a try that timed out on a full queue is repeated (never when the collector is
 * gone: ECONNREFUSED, ENOENT). */
static inline int tm_write_(struct tm_buf *b, uint64_t deadline) {
    for (;;) {
        if (send(tm_fd_, b, 32 + (size_t)b->count * 16, MSG_NOSIGNAL) >= 0) return 1;
        if (errno == EINTR) continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || tm_now_() >= deadline) return 0;
    }
}

/* Sends the buffer as one batch. A batch that could not go is counted in `dropped` of the next
 * one; seq only advances on success, so the collector sees drops, not gaps. A final batch has no
 * next one: it waits for a full queue until `deadline`, then a header-only final batch carries
 * its count. */
static inline void tm_send_(struct tm_buf *b, uint32_t flags, uint64_t deadline) {
    int saved = errno; /* never disturb the caller's errno */
    b->flags = flags;
    int sent = tm_write_(b, deadline);
    if (!sent && flags) {
        b->dropped += b->count, b->count = 0;
        sent = tm_write_(b, deadline);
    }
    if (sent) b->seq++, b->dropped = 0;
    else b->dropped += b->count;
    b->count = 0;
    errno = saved;
}

/* Ends the stream with a final batch (empty if nothing is buffered). Called with b->busy held. */
static inline void tm_end_(struct tm_buf *b, uint64_t deadline) {
    if (b->count || b->seq || b->dropped) tm_send_(b, 1, deadline);
}

/* At thread exit (a pthread key destructor): the final batch, and off the list before the
 * buffer is freed. A later call in the same thread (another key's destructor) opens a new
 * stream. */
static inline void tm_thread_exit_(void *p) {
    struct tm_buf *b = (struct tm_buf *)p;
    tm_lock_(b);
    if (b->state == 1) tm_end_(b, tm_now_() + TM_FINAL_PATIENCE_NS), b->state = 0;
    tm_unlock_(b);
    pthread_mutex_lock(&tm_list_lock_);
    if (b->prev || tm_list_ == b) {
        if (b->prev) b->prev->next = b->next;
        else tm_list_ = b->next;
        if (b->next) b->next->prev = b->prev;
        b->prev = b->next = NULL;
    }
    pthread_mutex_unlock(&tm_list_lock_);
}

/* At exit(): every listed thread's final batch, all within one patience. A thread that records
 * afterwards sends each event at once (state 3). */
static inline void tm_process_exit_(void) {
    uint64_t deadline = tm_now_() + TM_FINAL_PATIENCE_NS;
    pthread_mutex_lock(&tm_list_lock_);
    tm_exited_ = 1;
    for (struct tm_buf *b = tm_list_; b; b = b->next) {
        tm_lock_(b);
        if (b->state == 1) { /* else its thread has just ended it */
            tm_end_(b, deadline);
            __atomic_store_n(&b->state, 3, __ATOMIC_RELAXED);
        }
        tm_unlock_(b);
    }
    pthread_mutex_unlock(&tm_list_lock_);
}

/* A forked child starts afresh: the parent's buffered events, and its threads, are the parent's.
 * Only the forking thread runs in the child, so nothing holds the list or a buffer. */
static inline void tm_forked_(void) {
    pthread_mutex_init(&tm_list_lock_, NULL);
    tm_list_ = NULL;
    tm_buf_.state = 0, tm_buf_.dropped = 0, tm_buf_.busy = 0, tm_pid_ = (uint32_t)getpid();
}

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

static inline uint32_t tm_new_stream_(void) {
    return __atomic_fetch_add(&tm_next_stream_, 1, __ATOMIC_RELAXED);
}

/* The calling thread's buffer, opening its stream on first use; NULL when not recording. */
static inline struct tm_buf *tm_open_(void) {
    struct tm_buf *b = &tm_buf_;
    int state = __atomic_load_n(&b->state, __ATOMIC_RELAXED); /* the exit handler may set 3 */
    if (__builtin_expect(state == 1, 1) || state == 3) return b;
    if (state == 2) return NULL;
    pthread_once(&tm_once_, tm_init_);
    if (!tm_on_) return b->state = 2, NULL;
    memcpy(b->magic, "TMR1", 4);
    b->pid = tm_pid_;
    b->stream = tm_new_stream_();
    b->seq = b->count = 0;
    pthread_mutex_lock(&tm_list_lock_);
    if (tm_exited_) {
        b->state = 3; /* opened after the exit handler: no one would end its stream */
    } else {
        b->state = 1, b->prev = NULL, b->next = tm_list_;
        if (tm_list_) tm_list_->prev = b;
        tm_list_ = b;
    }
    pthread_mutex_unlock(&tm_list_lock_);
    pthread_setspecific(tm_key_, b); /* so the key's destructor closes the stream at thread exit */
    return b;
}

static inline void tm_event_(uint64_t kind, uint64_t value) {
    struct tm_buf *b = tm_open_();
    if (!b) return;
    uint64_t t = tm_now_();
    tm_lock_(b);
    b->ev[b->count][0] = t;
    b->ev[b->count][1] = kind << 62 | value;
    if (__builtin_expect(b->state == 3, 0)) {
        /* The stream was ended at exit and nothing will send later: the event goes now, as the
         * final batch of a new stream. */
        b->count = 1, b->stream = tm_new_stream_(), b->seq = 0;
        tm_send_(b, 1, tm_now_() + TM_FINAL_PATIENCE_NS);
    } else if (++b->count == TM_BATCH || t - b->ev[0][0] > TM_MAX_AGE_NS) {
        tm_send_(b, 0, 0);
    }
    tm_unlock_(b);
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
    if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) != 1) return;
    tm_lock_(b);
    if (b->state == 1 && (b->count || b->dropped)) tm_send_(b, 0, 0);
    tm_unlock_(b);
}

/* True until the collector's measurement window ends (TASKMETER_RECORD_UNTIL, CLOCK_MONOTONIC
 * ns); always true without it. */
static inline int tm_running(void) {
    pthread_once(&tm_once_, tm_init_);
    return !tm_until_ || tm_now_() < tm_until_;
}

#endif
