/* The c-thread receiver of `taskmeter run net` (net protocol 2, receivers/README.md). Each
 * accepted connection gets its handshake on its own pthread: the challenge, a 44-byte hello
 * judged against the plan's tokens, a stranger line when it fails. Once every sender has joined,
 * all get TMNET2OK together and the same thread serves its sender: it reads a message, times it
 * on CLOCK_MONOTONIC and echoes it. The reference is crates/taskmeter/src/experiments/net/native.rs.
 * Build: cc -O2 -Wall -Wextra -pthread -o OUT receivers/c-thread/receiver.c
 * (taskmeter adds -std=gnu11; plain -std=c11 works too, thanks to the feature macro below). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CHALLENGE_BYTES 48
#define HELLO_BYTES 44

/* What one sender's connection carried (its report), indexed by sender. */
struct connection {
    int fd;
    size_t size;
    uint64_t messages, first_ns, last_ns;
    char error[160];
};

/* What every handshake of the point shares. `lock` guards the counts and `joined`. */
static struct {
    unsigned char challenge[CHALLENGE_BYTES];
    unsigned char (*tokens)[32];
    char *joined;                   /* per sender index: has it joined? */
    long connections, joined_count; /* the point starts when they are equal */
    long pending, max_pending;      /* handshakes under way, and how many may be */
    long served;                    /* joined senders done: main waits for all */
    int handshake_ms;
    struct connection *all;
    pthread_mutex_t lock;
    pthread_cond_t all_joined, ended;
} gate = {.lock = PTHREAD_MUTEX_INITIALIZER, .all_joined = PTHREAD_COND_INITIALIZER, .ended = PTHREAD_COND_INITIALIZER};

/* stdout lines come from several threads: one at a time, each flushed whole. */
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A refused connection. Reasons are our own text and strerror's, peers are addresses: no
 * character needs escaping in JSON. */
static void stranger(const char *peer, const char *reason) {
    pthread_mutex_lock(&out);
    printf("{\"type\":\"stranger\",\"peer\":\"%s\",\"reason\":\"%s\"}\n", peer, reason);
    fflush(stdout);
    pthread_mutex_unlock(&out);
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

static int write_all(int fd, const void *data, size_t size) {
    const char *at = data;
    while (size > 0) {
        ssize_t n = write(fd, at, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        at += n, size -= (size_t)n;
    }
    return 0;
}

static void serve(struct connection *c) {
    /* The handshake's write deadline goes (a sender may pause); its read deadline was poll's.
     * Like the built-in receivers, an ack never waits for Nagle (messages can exceed one MSS). */
    struct timeval none = {0, 0};
    int one = 1;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char *buffer = malloc(c->size);
    if (!buffer) {
        snprintf(c->error, sizeof c->error, "out of memory");
        return;
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
}

static uint32_t get_u32(const unsigned char *at) {
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

static void put_u32(unsigned char *at, uint32_t n) {
    for (int i = 0; i < 4; i++) at[i] = (unsigned char)(n >> (8 * i));
}

/* Whether a hello's token is `expected`, in a time that does not depend on where they differ
 * (as every receiver compares: memcmp stops at the first difference, which would tell a stranger
 * by its timing how much of a token it has right). Every byte is read; the volatile accumulator
 * keeps the compiler from ending the loop early. */
static int same_token(const unsigned char *token, const unsigned char *expected) {
    volatile unsigned char differ = 0;
    for (int i = 0; i < 32; i++) differ |= token[i] ^ expected[i];
    return differ == 0;
}

/* Judges a whole hello, in the reference's order (magic, index, token in constant time, already
 * joined: a wrong token never learns whether its index has joined). NULL when the sender joins,
 * its index in *index; else the verdict to send, and why. */
static const char *judge(const unsigned char *hello, uint32_t *index, char *why, size_t room) {
    uint32_t i = get_u32(hello + 8);
    const char *verdict = NULL;
    if (memcmp(hello, "TMNET2H", 8) != 0) { /* 7 letters and their zero byte */
        snprintf(why, room, "not a taskmeter sender");
        return "TMNET2NO";
    }
    pthread_mutex_lock(&gate.lock);
    if (i >= (uint32_t)gate.connections) {
        snprintf(why, room, "sender %u is not of this point", i);
        verdict = "TMNET2DU";
    } else if (!same_token(hello + 12, gate.tokens[i])) {
        snprintf(why, room, "wrong token for sender %u", i);
        verdict = "TMNET2NO";
    } else if (gate.joined[i]) {
        snprintf(why, room, "sender %u had already joined", i);
        verdict = "TMNET2DU";
    } else {
        gate.joined[i] = 1;
        *index = i;
    }
    pthread_mutex_unlock(&gate.lock);
    return verdict;
}

/* The receiver's side of the handshake, within handshake_ms of the accept: 0 and the sender's
 * index, or -1 and why (after its verdict, when the hello was whole). */
static int handshake(int fd, uint32_t *index, char *why, size_t room) {
    uint64_t deadline = now_ns() + (uint64_t)gate.handshake_ms * 1000000u;
    struct timeval limit = {gate.handshake_ms / 1000, (gate.handshake_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    if (write_all(fd, gate.challenge, CHALLENGE_BYTES) < 0) {
        snprintf(why, room, "cannot send the challenge: %s", strerror(errno));
        return -1;
    }
    /* Exactly the hello, never more: what follows belongs to the point. A poll before each read
     * keeps a silent or slow peer to the deadline. */
    unsigned char hello[HELLO_BYTES];
    size_t got = 0;
    while (got < HELLO_BYTES) {
        uint64_t t = now_ns();
        if (t >= deadline) {
            snprintf(why, room, "no hello within %d ms (%zu of %d bytes)", gate.handshake_ms, got, HELLO_BYTES);
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, (int)((deadline - t + 999999) / 1000000));
        if (ready < 0 && errno != EINTR) {
            snprintf(why, room, "poll failed: %s", strerror(errno));
            return -1;
        }
        if (ready <= 0) continue; /* the deadline, or a signal: the loop's check decides */
        ssize_t n = read(fd, hello + got, HELLO_BYTES - got);
        if (n == 0) {
            snprintf(why, room, "closed after %zu of the %d bytes of a hello", got, HELLO_BYTES);
            return -1;
        }
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
            snprintf(why, room, "read failed: %s", strerror(errno));
            return -1;
        }
        if (n > 0) got += (size_t)n;
    }
    const char *verdict = judge(hello, index, why, room);
    if (verdict) {
        write_all(fd, verdict, 8);
        return -1;
    }
    return 0;
}

/* An accepted connection, handed to its thread. */
struct guest {
    int fd;
    char peer[64];
};

static void *greet(void *arg) {
    struct guest *g = arg;
    char why[160];
    uint32_t index = 0;
    int joined = handshake(g->fd, &index, why, sizeof why) == 0;
    pthread_mutex_lock(&gate.lock);
    gate.pending--;
    if (joined && ++gate.joined_count == gate.connections) {
        /* Every sender is here: wake main's accept (Linux fails it) and refuse later
         * connections, so that a sender of the next point is not caught by this one. */
        shutdown(3, SHUT_RDWR);
        pthread_cond_broadcast(&gate.all_joined);
    }
    while (joined && gate.joined_count < gate.connections) pthread_cond_wait(&gate.all_joined, &gate.lock);
    pthread_mutex_unlock(&gate.lock);
    if (!joined) {
        stranger(g->peer, why);
    } else {
        struct connection *c = &gate.all[index];
        c->fd = g->fd;
        if (write_all(g->fd, "TMNET2OK", 8) < 0) snprintf(c->error, sizeof c->error, "cannot start the sender: %s", strerror(errno));
        else serve(c);
    }
    close(g->fd);
    free(g);
    if (joined) {
        pthread_mutex_lock(&gate.lock);
        gate.served++;
        pthread_cond_signal(&gate.ended);
        pthread_mutex_unlock(&gate.lock);
    }
    return NULL;
}

static int all_joined(void) {
    pthread_mutex_lock(&gate.lock);
    int all = gate.joined_count == gate.connections;
    pthread_mutex_unlock(&gate.lock);
    return all;
}

/* "IP:PORT" as Rust prints a socket address ("[IPv6]:PORT"), or "unknown". */
static void peer_name(const struct sockaddr_storage *a, char *name, size_t room) {
    char ip[INET6_ADDRSTRLEN];
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
        if (inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof ip)) {
            snprintf(name, room, "%s:%u", ip, ntohs(v4->sin_port));
            return;
        }
    } else if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a;
        if (inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof ip)) {
            snprintf(name, room, "[%s]:%u", ip, ntohs(v6->sin6_port));
            return;
        }
    }
    snprintf(name, room, "unknown");
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

static const char *skip_space(const char *at) {
    while (*at == ' ' || *at == '\t' || *at == '\r' || *at == '\n') at++;
    return at;
}

/* Where the value of "key" starts in the plan line, or NULL. Keys are unique in a plan and its
 * strings are hexadecimal digits: no value can look like a key. */
static const char *value(const char *plan, const char *key) {
    const char *at = strstr(plan, key);
    if (!at) return NULL;
    at = skip_space(at + strlen(key));
    return *at == ':' ? skip_space(at + 1) : NULL;
}

/* The value of "key": N in the plan line, or -1. */
static long field(const char *plan, const char *key) {
    const char *at = value(plan, key);
    char *end;
    if (!at) return -1;
    long n = strtol(at, &end, 10);
    return end == at ? -1 : n;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A JSON string of 64 hexadecimal digits at `at`, as 32 bytes: what follows it, or NULL. */
static const char *unhex(const char *at, unsigned char *bytes) {
    if (!at || *at++ != '"') return NULL;
    for (int i = 0; i < 32; i++) {
        int high = hex_digit(at[2 * i]), low = high < 0 ? -1 : hex_digit(at[2 * i + 1]);
        if (low < 0) return NULL;
        bytes[i] = (unsigned char)(high << 4 | low);
    }
    return at[64] == '"' ? at + 65 : NULL;
}

/* The plan's "tokens": exactly `connections` of them, or -1. */
static int read_tokens(const char *plan) {
    const char *at = value(plan, "\"tokens\"");
    if (!at || *at++ != '[') return -1;
    for (long i = 0; i < gate.connections; i++) {
        at = skip_space(at);
        if (i > 0 && *at++ != ',') return -1;
        at = unhex(skip_space(at), gate.tokens[i]);
        if (!at) return -1;
    }
    return *skip_space(at) == ']' ? 0 : -1;
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
    /* The plan line holds every sender's token (~67 bytes each): read it whole, at any length. */
    char *plan = NULL;
    size_t capacity = 0;
    if (getline(&plan, &capacity, stdin) < 0) fail("no plan on stdin");
    long protocol = field(plan, "\"protocol\""), connections = field(plan, "\"connections\""), size = field(plan, "\"message_size\"");
    long handshake_ms = field(plan, "\"handshake_ms\""), max_pending = field(plan, "\"max_pending\"");
    /* connections and message_size travel as u32 in the challenge; poll takes an int of ms. */
    if (protocol != 2 || connections < 1 || connections > UINT32_MAX || size < 1 || size > UINT32_MAX || handshake_ms < 0 ||
        handshake_ms > INT_MAX || max_pending < 0)
        fail("a plan of protocol 2 with connections and message_size above 0, handshake_ms and max_pending was expected");
    gate.connections = connections;
    gate.handshake_ms = (int)handshake_ms;
    gate.max_pending = max_pending > 0 ? max_pending : 1; /* as the reference: one at least */
    gate.tokens = calloc((size_t)connections, sizeof *gate.tokens);
    gate.joined = calloc((size_t)connections, 1);
    gate.all = calloc((size_t)connections, sizeof *gate.all);
    if (!gate.tokens || !gate.joined || !gate.all) fail("out of memory");
    unsigned char nonce[32];
    if (!unhex(value(plan, "\"nonce\""), nonce) || read_tokens(plan) < 0) {
        char message[128];
        snprintf(message, sizeof message, "bad plan: a nonce and %ld tokens of 64 hexadecimal digits were expected", connections);
        fail(message);
    }
    free(plan);
    memcpy(gate.challenge, "TMNET2C", 8); /* 7 letters and their zero byte */
    memcpy(gate.challenge + 8, nonce, 32);
    put_u32(gate.challenge + 40, (uint32_t)connections);
    put_u32(gate.challenge + 44, (uint32_t)size);
    for (long i = 0; i < connections; i++) {
        gate.all[i].size = (size_t)size;
        gate.all[i].fd = -1;
    }

    int type = 0, listening = 0;
    socklen_t length = sizeof type, length2 = sizeof listening;
    if (getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &length) < 0 || type != SOCK_STREAM ||
        getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length2) < 0 || !listening)
        fail("fd 3 is not a listening TCP socket");
    pthread_t watcher;
    pthread_create(&watcher, NULL, watch_stdin, NULL);
    printf("{\"type\":\"hello\",\"receiver\":\"c-thread\",\"runtime_version\":\"%s\",\"pid\":%d}\n", RUNTIME_VERSION, (int)getpid());
    fflush(stdout);

    /* Detached: a stranger's thread is gone (and its stack freed) when its handshake is, however
     * long `net serve` waits; main counts the joined senders' threads (gate.served) instead. */
    pthread_attr_t detached;
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    while (!all_joined()) {
        struct sockaddr_storage address;
        socklen_t address_length = sizeof address;
        int fd = accept(3, (struct sockaddr *)&address, &address_length);
        if (fd < 0) {
            if (all_joined()) break; /* the last sender's shutdown(3) woke us */
            if (errno == EINTR) continue;
            char why[160];
            snprintf(why, sizeof why, "accept failed: %s", strerror(errno));
            stranger("unknown", why);
            /* Out of file descriptors fails every accept until a thread ends: do not spin. */
            nanosleep(&(struct timespec){0, 10000000}, NULL);
            continue;
        }
        struct guest *g = malloc(sizeof *g);
        if (!g) {
            close(fd);
            continue; /* no memory for a line either */
        }
        g->fd = fd;
        peer_name(&address, g->peer, sizeof g->peer);
        pthread_mutex_lock(&gate.lock);
        int admitted = gate.pending < gate.max_pending;
        if (admitted) gate.pending++;
        pthread_mutex_unlock(&gate.lock);
        if (!admitted) {
            close(fd);
            stranger(g->peer, "too many connections waiting for their handshake");
            free(g);
            continue;
        }
        pthread_t thread;
        if (pthread_create(&thread, &detached, greet, g) != 0) {
            pthread_mutex_lock(&gate.lock);
            gate.pending--;
            pthread_mutex_unlock(&gate.lock);
            close(fd);
            stranger(g->peer, "cannot start a thread for its handshake");
            free(g);
        }
    }
    close(3);
    pthread_mutex_lock(&gate.lock);
    while (gate.served < connections) pthread_cond_wait(&gate.ended, &gate.lock);
    pthread_mutex_unlock(&gate.lock);
    /* A handshake still under way (accepted just before the shutdown) is not waited for, as in the
     * reference; holding the print lock to the exit keeps its line from following "done". */
    pthread_mutex_lock(&out);
    uint64_t total = 0;
    for (long i = 0; i < connections; i++) {
        struct connection *c = &gate.all[i];
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
