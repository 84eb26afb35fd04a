/* live_thread_at_exit N M: a thread records N events (fewer than a batch, so it never sends
 * one) and blocks for ever while main says so on stderr and returns; then, from an exit handler
 * that runs after the client's, the thread records M more. The collector must receive N + M
 * events, every stream ended by a final batch. */
#include <semaphore.h>
#include <stdio.h>
#include "../taskmeter_record.h"

static sem_t recorded, go, done;
static long before_exit, after_exit;

static void *recorder(void *arg) {
    (void)arg;
    for (long i = 0; i < before_exit; i++) tm_record();
    sem_post(&recorded);
    while (sem_wait(&go)) {}
    for (long i = 0; i < after_exit; i++) tm_record();
    sem_post(&done);
    for (;;) pause(); /* still running when the process exits */
    return NULL;
}

/* Registered before the client's exit handler, so it runs after it. */
static void record_after_the_exit_flush(void) {
    sem_post(&go);
    while (sem_wait(&done)) {}
}

int main(int argc, char **argv) {
    before_exit = argc == 3 ? strtol(argv[1], NULL, 10) : -1;
    after_exit = argc == 3 ? strtol(argv[2], NULL, 10) : -1;
    if (before_exit < 0 || before_exit >= TM_BATCH || after_exit < 0) {
        fprintf(stderr, "usage: live_thread_at_exit N M (N < %d)\n", TM_BATCH);
        return 2;
    }
    sem_init(&recorded, 0, 0), sem_init(&go, 0, 0), sem_init(&done, 0, 0);
    atexit(record_after_the_exit_flush);
    tm_running(); /* starts the client, which registers its exit handler after ours */
    pthread_t thread;
    if (pthread_create(&thread, NULL, recorder, NULL)) return 1;
    while (sem_wait(&recorded)) {}
    fprintf(stderr, "live_thread_at_exit: %ld events recorded, exiting\n", before_exit);
    return 0;
}
