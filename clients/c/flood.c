/* flood EVENTS [THREADS]: record() EVENTS times in total from THREADS threads, as fast as it
 * can; prints the rate to stderr. Each thread's stream is flushed (final) when it exits. */
#include <stdio.h>
#include "taskmeter_record.h"

static void *flood(void *arg) {
    for (uint64_t i = *(uint64_t *)arg; i; i--) tm_record();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: flood EVENTS [THREADS]\n");
        return 2;
    }
    uint64_t events = strtoull(argv[1], NULL, 10);
    long threads = argc > 2 ? strtol(argv[2], NULL, 10) : 1;
    if (threads < 1 || threads > 4096) {
        fprintf(stderr, "flood: THREADS must be 1..4096\n");
        return 2;
    }
    pthread_t tid[threads];
    uint64_t share[threads];
    uint64_t t0 = tm_now_();
    for (long i = 0; i < threads; i++) {
        share[i] = events / threads + ((uint64_t)i < events % threads);
        if (pthread_create(&tid[i], NULL, flood, &share[i])) {
            fprintf(stderr, "flood: pthread_create failed\n");
            return 1;
        }
    }
    for (long i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    tm_flush();
    double s = (tm_now_() - t0) / 1e9;
    fprintf(stderr, "flood: %llu events in %.3f s = %.0f events/s\n", (unsigned long long)events, s,
            events / s);
    return 0;
}
