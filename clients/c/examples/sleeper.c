/* sleeper MS: while running(), start a thread that sleeps MS milliseconds and then records one
 * unit, wait for it, loop. `sleeper 100` gives about 9.9 units/s. */
#include <stdio.h>
#include "../taskmeter_record.h"

static void *unit(void *arg) {
    long ms = *(long *)arg;
    struct timespec d = {ms / 1000, ms % 1000 * 1000000};
    while (nanosleep(&d, &d)) {}
    tm_record();
    return NULL; /* thread exit sends this thread's batch */
}

int main(int argc, char **argv) {
    long ms = argc == 2 ? strtol(argv[1], NULL, 10) : -1;
    if (ms < 0) {
        fprintf(stderr, "usage: sleeper MS\n");
        return 2;
    }
    while (tm_running()) {
        pthread_t t;
        if (pthread_create(&t, NULL, unit, &ms)) return 1;
        pthread_join(t, NULL);
    }
    tm_flush();
    return 0;
}
