#!/usr/bin/env python3
"""flood EVENTS [THREADS]: call record() EVENTS times in all from THREADS threads as fast as
possible, flush, and print the call rate to stderr."""

import sys
import threading
import time

import taskmeter_record as tm


def calls(n):
    record = tm.record
    for _ in range(n):
        record()


def main():
    if not 2 <= len(sys.argv) <= 3:
        sys.exit("usage: flood.py EVENTS [THREADS]")
    events = int(sys.argv[1])
    nthreads = int(sys.argv[2]) if len(sys.argv) == 3 else 1
    if events < 0 or nthreads < 1:
        sys.exit("flood.py: EVENTS must be >= 0 and THREADS >= 1")
    share, extra = divmod(events, nthreads)
    threads = [threading.Thread(target=calls, args=(share + (i < extra),)) for i in range(nthreads)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tm.flush()
    s = time.monotonic() - t0
    print(f"flood: {events} events in {s:.3f} s = {events / s:.0f} events/s", file=sys.stderr)


if __name__ == "__main__":
    main()
