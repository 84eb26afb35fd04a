/* The contract of clients/README.md: exactly these events, then flush and exit 0. */
#include "taskmeter_record.h"

int main(void) {
    tm_record();
    tm_record();
    tm_record();
    tm_record_n(5);
    tm_start(1);
    tm_start(2);
    tm_complete(2);
    tm_complete(1);
    tm_complete(99); /* never started */
    tm_complete(1);  /* completed twice */
    tm_start(3);     /* never completed */
    tm_flush();
    return 0; /* atexit sends the stream's final batch */
}
