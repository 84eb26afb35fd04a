#!/usr/bin/env python3
"""sleeper MS: while running(), a thread sleeps MS milliseconds then records one unit; the
program waits for it and loops. `sleeper 100` reports about 9.9 units/s."""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import taskmeter_record as tm  # noqa: E402  (found through the path above)


def unit(seconds):
    time.sleep(seconds)
    tm.record()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: sleeper.py MS")
    seconds = float(sys.argv[1]) / 1000
    while tm.running():
        t = threading.Thread(target=unit, args=(seconds,))
        t.start()
        t.join()
    tm.flush()


if __name__ == "__main__":
    main()
