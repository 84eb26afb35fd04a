/* Preloaded into a worker for --mlock: locks all its memory, present and future, before main
 * runs. The orchestrator cannot do it for the worker: execve(2) removes memory locks. Works for
 * every dynamically linked worker (Rust, C, Python, Node, Java); static binaries (Go) ignore
 * LD_PRELOAD, which the run records (the worker's VmLck is read back). */
#include <stdio.h>
#include <sys/mman.h>

__attribute__((constructor)) static void taskmeter_mlockall(void) {
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) perror("taskmeter --mlock: mlockall");
}
