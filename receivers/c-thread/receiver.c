/* The c-thread receiver of `taskmeter run net` (net protocol 1, receivers/README.md): one
 * pthread per connection, each reading a message, timing it on CLOCK_MONOTONIC and echoing it.
 * Build: cc -O2 -Wall -Wextra -pthread -o OUT receivers/c-thread/receiver.c
 * (taskmeter adds -std=gnu11; plain -std=c11 works too, thanks to the feature macro below). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct connection {
    int fd;
    size_t size;
    uint64_t messages, first_ns, last_ns;
    char error[160];
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 1: a whole message; 0: end of file before it; -1: an error (described in c->error). */
static int read_message(struct connection *c, char *buffer) {
    size_t filled = 0;
    while (filled < c->size) {
        ssize_t n = read(c->fd, buffer + filled, c->size - filled);
        if (n > 0) {
            filled += (size_t)n;
        } else if (n == 0) {
            if (filled == 0) return 0;
            snprintf(c->error, sizeof c->error, "end of file after %zu of %zu bytes of a message", filled, c->size);
            return -1;
        } else if (errno != EINTR) {
            snprintf(c->error, sizeof c->error, "read failed: %s", strerror(errno));
            return -1;
        }
    }
    return 1;
}

static int write_all(int fd, const char *data, size_t size) {
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        data += n, size -= (size_t)n;
    }
    return 0;
}

static void *serve(void *arg) {
    struct connection *c = arg;
    /* Like the built-in receivers: an ack never waits for Nagle (messages can exceed one MSS). */
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char *buffer = malloc(c->size);
    if (!buffer) {
        snprintf(c->error, sizeof c->error, "out of memory");
        return NULL;
    }
    for (;;) {
        int got = read_message(c, buffer);
        if (got <= 0) break;
        uint64_t t = now_ns();
        if (c->messages++ == 0) c->first_ns = t;
        c->last_ns = t;
        if (write_all(c->fd, buffer, c->size) < 0) {
            snprintf(c->error, sizeof c->error, "write failed: %s", strerror(errno));
            break;
        }
    }
    free(buffer);
    close(c->fd);
    return NULL;
}

/* EOF on stdin: taskmeter has gone or given up. */
static void *watch_stdin(void *arg) {
    (void)arg;
    char sink[256];
    while (read(0, sink, sizeof sink) > 0) {}
    _exit(0);
}

/* The messages are our own text and strerror's: no character needs escaping in JSON. */
static void fail(const char *message) {
    printf("{\"type\":\"error\",\"message\":\"%s\"}\n", message);
    exit(1);
}

/* The value of "key": N in the plan line, or -1. */
static long field(const char *plan, const char *key) {
    const char *at = strstr(plan, key);
    if (!at) return -1;
    at = strchr(at + strlen(key), ':');
    return at ? strtol(at + 1, NULL, 10) : -1;
}

/* __VERSION__ is "12.2.0" on gcc but already names the compiler on clang. */
#ifdef __clang__
#define RUNTIME_VERSION __VERSION__
#else
#define RUNTIME_VERSION "gcc " __VERSION__
#endif

int main(void) {
    /* A peer that leaves before its ack must cost its connection an error, not the process. */
    signal(SIGPIPE, SIG_IGN);
    char plan[512];
    if (!fgets(plan, sizeof plan, stdin)) fail("no plan on stdin");
    long protocol = field(plan, "\"protocol\""), connections = field(plan, "\"connections\""), size = field(plan, "\"message_size\"");
    if (protocol != 1 || connections < 1 || size < 1) fail("a plan of protocol 1 with connections and message_size above 0 was expected");
    int type = 0, listening = 0;
    socklen_t length = sizeof type, length2 = sizeof listening;
    if (getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &length) < 0 || type != SOCK_STREAM ||
        getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length2) < 0 || !listening)
        fail("fd 3 is not a listening TCP socket");
    pthread_t watcher;
    pthread_create(&watcher, NULL, watch_stdin, NULL);
    printf("{\"type\":\"hello\",\"receiver\":\"c-thread\",\"runtime_version\":\"%s\",\"pid\":%d}\n", RUNTIME_VERSION, (int)getpid());
    fflush(stdout);

    struct connection *all = calloc((size_t)connections, sizeof *all);
    pthread_t *threads = calloc((size_t)connections, sizeof *threads);
    if (!all || !threads) fail("out of memory");
    for (long i = 0; i < connections; i++) {
        all[i].size = (size_t)size;
        all[i].fd = accept(3, NULL, NULL);
        if (all[i].fd < 0) {
            snprintf(all[i].error, sizeof all[i].error, "accept failed: %s", strerror(errno));
            continue;
        }
        if (pthread_create(&threads[i], NULL, serve, &all[i]) != 0) {
            snprintf(all[i].error, sizeof all[i].error, "cannot start a thread");
            close(all[i].fd);
            all[i].fd = -1;
        }
    }
    close(3); /* every connection is here: a sender of the next point must not reach us */
    uint64_t total = 0;
    for (long i = 0; i < connections; i++) {
        if (all[i].fd >= 0) pthread_join(threads[i], NULL);
    }
    for (long i = 0; i < connections; i++) {
        struct connection *c = &all[i];
        total += c->messages;
        printf("{\"type\":\"connection\",\"index\":%ld,\"messages\":%llu,", i, (unsigned long long)c->messages);
        if (c->messages) printf("\"first_ns\":%llu,\"last_ns\":%llu,", (unsigned long long)c->first_ns, (unsigned long long)c->last_ns);
        else printf("\"first_ns\":null,\"last_ns\":null,");
        if (c->error[0]) printf("\"error\":\"%s\"}\n", c->error);
        else printf("\"error\":null}\n");
    }
    printf("{\"type\":\"done\",\"messages\":%llu}\n", (unsigned long long)total);
    return 0;
}
