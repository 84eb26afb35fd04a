#!/usr/bin/env python3
"""taskmeter Python driver: runtime ids python-thread, python-asyncio and python-abs.

Implements worker protocol v1 (protocol/README.md): the plan is one JSON line on stdin, the
results are NDJSON on stdout (hello, one unit line per unit, done; or an error line). Standard
library only, Python 3.8 or newer. Run as `python3 taskmeter_driver.py`.

- python-thread:  one threading.Thread per unit; time.sleep; time.sleep(0) to yield.
- python-asyncio: one asyncio task per unit in one event loop; asyncio.sleep;
                  `await asyncio.sleep(0)` to yield.
- python-abs:     one threading.Thread per unit; every sleep is
                  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) through ctypes.
"""

import asyncio
import ctypes
import ctypes.util
import errno
import functools
import json
import os
import platform
import sys
import threading
import time
from array import array

RUNTIMES = ("python-thread", "python-asyncio", "python-abs")
U64 = (1 << 64) - 1          # busy-work arithmetic is on unsigned 64-bit with wrap-around
LIMIT = 1 << 63              # run length and longest sleep must stay below this
MAX_PLAN = 1 << 20           # bytes in the plan line
CHUNK_NS = 86400 * 10**9     # time.sleep gets at most a day at a time (its float limit is ~292 years)
FIELDS = 6                   # expected, start, busy_end, intended, wake, missed
CLOCK_MONOTONIC = 1          # <linux/time.h>
TIMER_ABSTIME = 1

now = time.monotonic_ns      # clock_gettime(CLOCK_MONOTONIC) on Linux


class Refusal(Exception):
    """A plan this worker will not run: an error line, exit status 2."""


class Failure(Exception):
    """A failure while running a valid plan: an error line, exit status 1."""


# ---------- plan ----------

class _Object(dict):
    """A JSON object; `repeated` holds the names given more than once (refused when looked up)."""
    __slots__ = ("repeated",)


def _object(pairs):
    obj = _Object()
    obj.repeated = set()
    for key, value in pairs:
        if key in obj:
            obj.repeated.add(key)
        obj[key] = value
    return obj


class _Number:
    """A number that is not a plain integer (a fraction, an exponent, or too many digits)."""
    __slots__ = ("text", "integer")

    def __init__(self, text, integer):
        self.text, self.integer = text, integer


def _parse_int(text):
    # int() refuses more than 4300 digits (CPython 3.11); no field needs more than 20.
    return int(text) if len(text) <= 40 else _Number(text, True)


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)


def _field(obj, path, name):
    if name in obj.repeated:
        raise Refusal("duplicate field %s%s" % (path, name))
    if name not in obj:
        raise Refusal("missing field %s%s" % (path, name))
    return obj[name]


def _typed(obj, path, name, kind, what):
    value = _field(obj, path, name)
    if type(value) is not kind:   # not isinstance: True is an int, and the plan's false is no 0
        raise Refusal("%s%s must be %s" % (path, name, what))
    return value


def _uint(obj, path, name, minimum):
    value = _field(obj, path, name)
    if isinstance(value, _Number):
        if not value.integer:
            raise Refusal("%s%s must be an integer (got %s)" % (path, name, value.text[:40]))
        if value.text.startswith("-"):
            raise Refusal("%s%s must be >= %d" % (path, name, minimum))
        raise Refusal("%s%s is out of range" % (path, name))
    if type(value) is not int:
        raise Refusal("%s%s must be an integer" % (path, name))
    if value < minimum:
        raise Refusal("%s%s must be >= %d" % (path, name, minimum))
    if value > U64:
        raise Refusal("%s%s is out of range" % (path, name))
    return value


class Plan:
    """The checked plan; expected(u, k) follows the schedule table of the protocol."""

    def __init__(self, root):
        if type(root) is not _Object:
            raise Refusal("the plan must be a JSON object")
        version = _field(root, "", "protocol")
        if isinstance(version, _Number) or (type(version) is int and version != 1):
            text = version.text if isinstance(version, _Number) else str(version)
            raise Refusal("unsupported protocol version %s (this worker speaks 1)" % text[:40])
        if type(version) is not int:
            raise Refusal("protocol must be an integer")
        experiment = _typed(root, "", "experiment", str, "a string")
        if experiment != "sleep":
            raise Refusal('unknown experiment "%s" (this worker runs "sleep")' % experiment[:64])
        self.runtime = _typed(root, "", "runtime", str, "a string")
        if self.runtime not in RUNTIMES:
            raise Refusal('runtime "%s" is not served by this driver (%s)'
                          % (self.runtime[:64], ", ".join(RUNTIMES)))
        self.units = _uint(root, "", "units", 1)
        self.duration = _uint(root, "", "duration_ns", 1)
        self.warmup = _uint(root, "", "warmup_ns", 0)
        sleep = _typed(root, "", "sleep", _Object, "an object")
        mode = _typed(sleep, "sleep.", "mode", str, "a string")
        if mode not in ("relative", "absolute"):
            raise Refusal('unknown sleep mode "%s"' % mode[:64])
        self.absolute = mode == "absolute"
        schedule = _typed(sleep, "sleep.", "schedule", _Object, "an object")
        self.kind = _typed(schedule, "sleep.schedule.", "kind", str, "a string")
        if self.kind not in ("fixed", "by-unit", "modulo"):
            raise Refusal('unknown schedule kind "%s"' % self.kind[:64])
        self.m = _uint(schedule, "sleep.schedule.", "m", 1) if self.kind == "modulo" else 1
        self.ns = _uint(schedule, "sleep.schedule.", "ns", 0)
        busy_plan = _typed(root, "", "busy", _Object, "an object")
        self.iters = _uint(busy_plan, "busy.", "iters", 0)
        self.yield_ = _typed(busy_plan, "busy.", "yield", bool, "true or false")

        # Timestamps (uptime) are far below 2^63 ns, so with these bounds no deadline reaches 2^64.
        if self.warmup + self.duration >= LIMIT:
            raise Refusal("warmup_ns + duration_ns must be below 2^63")
        longest = self.ns * (self.units if self.kind == "by-unit" else self.m)
        if longest >= LIMIT:
            raise Refusal("the longest sleep of the schedule must be below 2^63 ns")
        # With a zero period the absolute deadline never moves and the missed-period rule never ends.
        if self.absolute and self.ns == 0:
            raise Refusal("sleep.schedule.ns must be >= 1 in absolute mode (a zero period never advances)")

    def expected(self, u):
        """expected(u, k) as a function of k."""
        ns = self.ns
        if self.kind == "modulo":
            m = self.m
            return lambda k: (k % m + 1) * ns
        period = u * ns if self.kind == "by-unit" else ns
        return lambda k: period

    def skipper(self, u):
        """The missed-period rule, `while t2 > next: m += 1; k += 1; next += expected(u, k)`,
        with whole schedule cycles skipped at once; the result is that of the loop."""
        expected = self.expected(u)
        periods = self.m if self.kind == "modulo" else 1
        span = sum(expected(k) for k in range(periods))   # >= 1: absolute mode needs ns >= 1

        def skip(k, deadline, t2):
            cycles = (t2 - deadline - 1) // span          # whole cycles that all end before t2
            m = cycles * periods
            k += m
            deadline += cycles * span
            while t2 > deadline:
                m += 1
                k += 1
                deadline += expected(k)
            return m, k, deadline
        return skip


def read_plan():
    stdin = sys.stdin
    if stdin is None:
        raise Failure("cannot read the plan: stdin is closed")
    try:
        # Buffered, but the stop watcher reads the file descriptor itself, so the end of file
        # that follows the plan still reaches it.
        line = stdin.buffer.readline(MAX_PLAN + 1)
    except OSError as exc:
        raise Failure("cannot read the plan: %s" % exc)
    if len(line) > MAX_PLAN and not line.endswith(b"\n"):
        raise Refusal("the plan line is longer than %d bytes" % MAX_PLAN)
    try:
        root = json.loads(line.decode("utf-8"), object_pairs_hook=_object, parse_int=_parse_int,
                          parse_float=lambda text: _Number(text, False), parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:   # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise Refusal("the plan is not valid JSON: %s" % exc)
    return Plan(root)


# ---------- measurement ----------

def busy(iters, pause=None):
    """The protocol's busy work; pause() is the yield, called after every step."""
    total = 0
    if pause is None:
        for _ in range(iters):
            total = (total + 1) & U64
            total = ((total * 3) & U64) // 2
    else:
        for _ in range(iters):
            total = (total + 1) & U64
            total = ((total * 3) & U64) // 2
            pause()
    return total


async def busy_async(iters):
    """busy(iters, yield=True) inside a task: the yield is `await asyncio.sleep(0)`."""
    total = 0
    for _ in range(iters):
        total = (total + 1) & U64
        total = ((total * 3) & U64) // 2
        await asyncio.sleep(0)
    return total


class Unit:
    __slots__ = ("id", "origin", "samples", "busy_result", "error")

    def __init__(self, uid):
        self.id = uid
        self.origin = 0
        self.samples = array("Q")   # FIELDS numbers per sample, flat: no objects for the GC to walk
        self.busy_result = None
        self.error = None


class Run:
    """What the units share: the end of the run and the stop flags."""

    def __init__(self, plan):
        self.plan = plan
        self.stop = threading.Event()   # set by the stdin watcher at end of file
        self.interrupted = False        # a unit stopped early because of it
        self.aborted = False            # a unit failed: the others stop too
        self.run_start = self.measure_start = self.end = 0

    def start_clock(self):
        self.run_start = now()
        self.measure_start = self.run_start + self.plan.warmup
        self.end = self.measure_start + self.plan.duration


def watch_stdin(stop):
    """End of file (or an error) on stdin after the plan means: stop early."""
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    stop.set()


def sleep_ns(ns):
    """time.sleep of ns nanoseconds (the OS sleep; since 3.11 clock_nanosleep on Linux)."""
    while ns > CHUNK_NS:   # only for absurd plans: keeps the float argument in range
        time.sleep(CHUNK_NS / 1e9)
        ns -= CHUNK_NS
    time.sleep(ns / 1e9)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def load_clock_nanosleep():
    """clock_nanosleep from the C library, through ctypes (the call releases the GIL)."""
    for name in (None, ctypes.util.find_library("c")):
        try:
            function = ctypes.CDLL(name).clock_nanosleep
            break
        except (OSError, AttributeError, TypeError):
            continue
    else:
        raise Failure("cannot find clock_nanosleep in the C library")
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Timespec), ctypes.POINTER(_Timespec)]
    function.restype = ctypes.c_int
    return function


def abs_sleeper(clock_nanosleep):
    """sleep_until(deadline) for one unit (with its own timespec)."""
    request = _Timespec()
    pointer = ctypes.byref(request)

    def sleep_until(deadline):
        request.tv_sec, request.tv_nsec = divmod(deadline, 1000000000)
        while True:
            rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, pointer, None)
            if rc == 0:
                return
            if rc != errno.EINTR:   # the error number is returned, not put in errno
                raise OSError(rc, "clock_nanosleep: " + os.strerror(rc))
    return sleep_until


def thread_unit(run, unit, sleep_for, sleep_until):
    """The work loop of the protocol README, in a thread. sleep_for(e, t1) is the relative sleep."""
    plan, stop = run.plan, run.stop
    end, iters, absolute = run.end, plan.iters, plan.absolute
    pause = functools.partial(time.sleep, 0) if plan.yield_ else None
    expected = plan.expected(unit.id)
    skip = plan.skipper(unit.id) if absolute else None
    record = unit.samples.extend
    try:
        origin = unit.origin = now()
        k = 0
        deadline = origin + expected(0)   # `next`, absolute mode only
        while True:
            t0 = now()
            if t0 >= end or run.aborted:
                break
            if stop.is_set():
                run.interrupted = True
                break
            if iters:
                unit.busy_result = busy(iters, pause)
                t1 = now()
            else:
                t1 = t0
            e = expected(k)
            if absolute:
                intended = deadline
                sleep_until(deadline)
            else:
                intended = t1 + e
                sleep_for(e, t1)
            t2 = now()
            k += 1
            m = 0
            if absolute:
                deadline += expected(k)
                if t2 > deadline:
                    m, k, deadline = skip(k, deadline, t2)
            record((e, t0, t1, intended, t2, m))
    except BaseException as exc:   # reported by the main thread, never as a traceback
        unit.error = "%s: %s" % (type(exc).__name__, exc)
        run.aborted = True


def run_threads(run, units, runtime, clock_nanosleep):
    if runtime == "python-abs":
        sleepers = [abs_sleeper(clock_nanosleep) for _ in units]
        pairs = [(lambda e, t1, until=until: until(t1 + e), until) for until in sleepers]
    else:
        def sleep_for(e, t1):
            sleep_ns(e)

        def sleep_until(deadline):
            sleep_ns(max(0, deadline - now()))
        pairs = [(sleep_for, sleep_until)] * len(units)
    threads = []
    run.start_clock()
    for unit, (sleep_for, sleep_until) in zip(units, pairs):
        thread = threading.Thread(target=thread_unit, args=(run, unit, sleep_for, sleep_until),
                                  name="unit-%d" % unit.id)
        try:
            thread.start()
        except RuntimeError as exc:
            run.aborted = True
            for started in threads:
                started.join()
            raise Failure("cannot start the thread of unit %d: %s" % (unit.id, exc))
        threads.append(thread)
    for thread in threads:
        thread.join()


async def asyncio_unit(run, unit):
    """The work loop of the protocol README, in a task; the busy work blocks the loop."""
    plan, stop, sleep = run.plan, run.stop, asyncio.sleep
    end, iters, absolute, yield_ = run.end, plan.iters, plan.absolute, plan.yield_
    expected = plan.expected(unit.id)
    skip = plan.skipper(unit.id) if absolute else None
    record = unit.samples.extend
    try:
        origin = unit.origin = now()
        k = 0
        deadline = origin + expected(0)
        while True:
            t0 = now()
            if t0 >= end or run.aborted:
                break
            if stop.is_set():
                run.interrupted = True
                break
            if iters:
                unit.busy_result = await busy_async(iters) if yield_ else busy(iters)
                t1 = now()
            else:
                t1 = t0
            e = expected(k)
            if absolute:
                intended = deadline
                await sleep(max(0, deadline - now()) / 1e9)
            else:
                intended = t1 + e
                await sleep(e / 1e9)
            t2 = now()
            k += 1
            m = 0
            if absolute:
                deadline += expected(k)
                if t2 > deadline:
                    m, k, deadline = skip(k, deadline, t2)
            record((e, t0, t1, intended, t2, m))
    except Exception as exc:   # CancelledError (a BaseException since 3.8) is left alone
        unit.error = "%s: %s" % (type(exc).__name__, exc)
        run.aborted = True


async def run_tasks(run, units):
    run.start_clock()
    await asyncio.gather(*[asyncio_unit(run, unit) for unit in units])


# ---------- output ----------

def write(data):
    out = sys.stdout.buffer
    out.write(data.encode("utf-8"))
    out.flush()


def emit_error(message):
    text = message.encode("utf-8", "replace").decode("utf-8") or "error"   # no lone surrogates
    write(json.dumps({"type": "error", "message": text}, separators=(",", ":")) + "\n")


def runtime_version(runtime):
    version = "%s %s" % (platform.python_implementation(), platform.python_version())
    if runtime == "python-abs":
        try:
            libc = os.confstr("CS_GNU_LIBC_VERSION")
        except (ValueError, OSError, AttributeError):
            libc = None
        return "%s, ctypes clock_nanosleep%s" % (version, ", " + libc if libc else "")
    if runtime == "python-asyncio":
        return "%s, asyncio" % version
    return version


UNIT_LINE = ('{"type":"unit","unit":%d,"origin_ns":%d,"expected_ns":[%s],"start_ns":[%s],'
             '"busy_end_ns":[%s],"intended_ns":[%s],"wake_ns":[%s],"missed":[%s]}\n')


def results(run, units):
    parts = []
    samples = missed = 0
    for unit in units:
        flat = unit.samples
        columns = tuple(",".join(map(str, flat[i::FIELDS])) for i in range(FIELDS))
        parts.append(UNIT_LINE % ((unit.id, unit.origin) + columns))
        samples += len(flat) // FIELDS
        missed += sum(flat[FIELDS - 1::FIELDS])
        unit.samples = None
    result = next((u.busy_result for u in units if u.busy_result is not None), None)
    if result is None:   # no unit got to run its busy phase
        result = busy(run.plan.iters)
    done = {"type": "done", "run_start_ns": run.run_start, "measure_start_ns": run.measure_start,
            "end_ns": run.end, "units": len(units), "samples": samples, "missed": missed,
            "interrupted": run.interrupted, "busy_result": str(result)}
    parts.append(json.dumps(done, separators=(",", ":")) + "\n")
    return "".join(parts)


def execute(plan):
    clock_nanosleep = load_clock_nanosleep() if plan.runtime == "python-abs" else None
    run = Run(plan)
    units = [Unit(uid) for uid in range(1, plan.units + 1)]
    hello = {"type": "hello", "protocol": 1, "runtime": plan.runtime,
             "runtime_version": runtime_version(plan.runtime), "clock": "CLOCK_MONOTONIC",
             "pid": os.getpid()}
    write(json.dumps(hello, separators=(",", ":")) + "\n")

    # A daemon thread: it never keeps the process alive, even when stdin stays open.
    threading.Thread(target=watch_stdin, args=(run.stop,), name="stdin-watcher", daemon=True).start()
    if plan.runtime == "python-asyncio":
        asyncio.run(run_tasks(run, units))
    else:
        run_threads(run, units, plan.runtime, clock_nanosleep)

    for unit in units:
        if unit.error is not None:
            raise Failure("unit %d failed: %s" % (unit.id, unit.error))
    write(results(run, units))   # one buffered write, after every unit has finished
    return 0


def main():
    try:
        return execute(read_plan())
    except Refusal as exc:
        status, message = 2, str(exc)
    except Failure as exc:
        status, message = 1, str(exc)
    except (Exception, KeyboardInterrupt) as exc:
        status, message = 1, "internal error: %s: %s" % (type(exc).__name__, exc)
    try:
        emit_error(message)
    except Exception:   # stdout is gone: tell stderr, and leave without flushing stdout again
        try:
            sys.stderr.write("taskmeter_driver.py: %s\n" % message)
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
