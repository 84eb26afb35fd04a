#!/usr/bin/env python3
"""taskmeter Python driver: runtime ids python-thread, python-asyncio and python-abs.

Implements worker protocol version 2 (protocol/README.md): the plan is one JSON line on stdin, the
results are NDJSON on stdout (hello, one unit line per unit, done; or an error line). Standard
library only, Python 3.8 or newer. Run as `python3 taskmeter_driver.py`.

- python-thread:  one threading.Thread per unit; time.sleep; os.sched_yield() to yield.
- python-asyncio: one asyncio task per unit in one event loop; asyncio.sleep;
                  `await asyncio.sleep(0)` to yield.
- python-abs:     one threading.Thread per unit; every sleep is
                  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) through ctypes;
                  os.sched_yield() to yield.
Every unit applies its priority class, reserves its samples and parks at a start gate; the gate
opens (run_start) once every unit created is parked.
"""

import asyncio
import ctypes
import ctypes.util
import errno
import functools
import json
import operator
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
RESERVE_BUDGET = 1 << 22     # samples reserved by all units together, at most (protocol: "Storage")
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
    """The checked plan; expected(u) follows the schedule table of the protocol."""

    def __init__(self, root):
        if type(root) is not _Object:
            raise Refusal("the plan must be a JSON object")
        version = _field(root, "", "protocol")
        if isinstance(version, _Number) or (type(version) is int and version != 2):
            text = version.text if isinstance(version, _Number) else str(version)
            raise Refusal("unsupported protocol version %s (this worker speaks 2)" % text[:40])
        if type(version) is not int:
            raise Refusal("protocol must be an integer")
        experiment = _typed(root, "", "experiment", str, "a string")
        if experiment not in ("sleep", "atomic-sum"):
            raise Refusal('unknown experiment "%s" (this worker runs "sleep" and "atomic-sum")'
                          % experiment[:64])
        self.atomic = experiment == "atomic-sum"
        self.runtime = _typed(root, "", "runtime", str, "a string")
        if self.runtime not in RUNTIMES:
            raise Refusal('runtime "%s" is not served by this driver (%s)'
                          % (self.runtime[:64], ", ".join(RUNTIMES)))
        self.units = _uint(root, "", "units", 1)
        self.classes = _uint(root, "", "priority_classes", 1)
        if self.classes > 2:
            raise Refusal("priority_classes must be 1 or 2 (got %d)" % self.classes)
        self.start_limit = _uint(root, "", "start_limit_ns", 1)
        self.duration = _uint(root, "", "duration_ns", 1)
        self.warmup = _uint(root, "", "warmup_ns", 0)
        sleep = _typed(root, "", "sleep", _Object, "an object")
        mode = _typed(sleep, "sleep.", "mode", str, "a string")
        if mode not in ("relative", "absolute"):
            raise Refusal('unknown sleep mode "%s"' % mode[:64])
        self.absolute = mode == "absolute"
        schedule = _typed(sleep, "sleep.", "schedule", _Object, "an object")
        self.kind = _typed(schedule, "sleep.schedule.", "kind", str, "a string")
        if self.kind not in ("fixed", "by-unit", "modulo", "none"):
            raise Refusal('unknown schedule kind "%s"' % self.kind[:64])
        self.none = self.kind == "none"   # no sleep: one yield per iteration, no samples
        self.m = _uint(schedule, "sleep.schedule.", "m", 1) if self.kind == "modulo" else 1
        self.ns = 0 if self.none else _uint(schedule, "sleep.schedule.", "ns", 0)
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
        if self.absolute and self.ns == 0 and not self.none:
            raise Refusal("sleep.schedule.ns must be >= 1 in absolute mode (a zero period never advances)")
        self._shared = None   # (expected, skip) of every unit, unless the schedule is by-unit

    def reserve(self, u):
        """Samples unit u reserves before the gate, the same in every worker (protocol: "Storage")."""
        if self.none:
            return 0
        total = self.warmup + self.duration
        if self.kind == "modulo":   # a cycle of m periods sleeps m(m+1)/2 x ns
            m = self.m
            estimate = total * m // (max(self.ns, 1000) * (m * (m + 1) // 2)) + m + 16
        else:
            period = u * self.ns if self.kind == "by-unit" else self.ns
            estimate = total // max(period, 1000) + 16
        return max(16, min(estimate, RESERVE_BUDGET // self.units))

    def schedule(self, u):
        """(expected, skip) for unit u: expected(k) is expected(u, k); skip(k, next, t2) is the
        missed-period rule `while t2 > next: m += 1; k += 1; next += expected(u, k)`, with whole
        schedule cycles skipped at once (the result is that of the loop). Only by-unit depends on
        u; the other schedules share one pair, so 100,000 units do not make 100,000 closures."""
        if self._shared is not None:
            return self._shared
        ns = self.ns
        if self.kind == "modulo":
            m = self.m
            expected = lambda k: (k % m + 1) * ns
        else:
            period = u * ns if self.kind == "by-unit" else ns
            expected = lambda k: period
        periods = self.m if self.kind == "modulo" else 1
        span = sum(expected(k) for k in range(periods))   # >= 1 in absolute mode (ns >= 1)

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
        if self.kind != "by-unit":
            self._shared = (expected, skip)
        return expected, skip


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
    read_at = now()   # start_limit_ns counts from here
    if len(line) > MAX_PLAN and not line.endswith(b"\n"):
        raise Refusal("the plan line is longer than %d bytes" % MAX_PLAN)
    try:
        root = json.loads(line.decode("utf-8"), object_pairs_hook=_object, parse_int=_parse_int,
                          parse_float=lambda text: _Number(text, False), parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:   # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise Refusal("the plan is not valid JSON: %s" % exc)
    plan = Plan(root)
    plan.read_at = read_at
    return plan


# ---------- priority classes ----------

POLICIES = {getattr(os, name): name for name in
            ("SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE", "SCHED_FIFO", "SCHED_RR") if hasattr(os, name)}


def proc_stat():
    """Fields 3.. of /proc/thread-self/stat (after the command name, which may hold spaces)."""
    with open("/proc/thread-self/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()


class Priority:
    """The protocol's priority classes for this worker: `text` is hello.priority; check(unit)
    runs on the unit's own thread before its origin, lowers class 1 and reads the result back."""

    def __init__(self, plan):
        self.check = None
        if plan.classes == 1:
            self.text = "none"
            return
        if plan.runtime == "python-asyncio":
            self.text = "none: asyncio tasks have no priority"
            return
        self.check = self._check
        self.policy = os.sched_getscheduler(0)   # may carry SCHED_RESET_ON_FORK: kept when set again
        self.base = self.policy & ~getattr(os, "SCHED_RESET_ON_FORK", 0)
        name = POLICIES.get(self.base, "policy %d" % self.base)
        self.realtime = self.base in (getattr(os, "SCHED_FIFO", -1), getattr(os, "SCHED_RR", -1))
        if self.realtime:
            high = os.sched_getparam(0).sched_priority
            self.values = (high, max(1, high - 1))
            self.text = ("rt-priority: high %d, low %d (%s; each low unit calls os.sched_setscheduler("
                         "its native thread id, %s, %d); every unit reads its policy and priority back, "
                         "units 1 and 2 also from /proc/thread-self/stat)" % (high, self.values[1], name, name,
                                                                              self.values[1]))
        else:
            high = os.getpriority(os.PRIO_PROCESS, 0)   # the main thread's nice, inherited by the units
            self.values = (high, min(19, high + 10))
            self.text = ("nice: high %d, low %d (%s; each low unit calls os.setpriority(PRIO_PROCESS, "
                         "its native thread id, %d); every unit reads its nice back, units 1 and 2 also "
                         "from /proc/thread-self/stat)" % (high, self.values[1], name, self.values[1]))

    def _check(self, unit):
        tid = threading.get_native_id()
        want = self.values[unit.cls]
        if self.realtime:
            if unit.cls:
                os.sched_setscheduler(tid, self.policy, os.sched_param(want))
            got = (os.sched_getscheduler(tid) & ~getattr(os, "SCHED_RESET_ON_FORK", 0),
                   os.sched_getparam(tid).sched_priority)
            stat = proc_stat() if unit.id <= 2 else None
            seen = (int(stat[38]), int(stat[37])) if stat else got   # fields 41 policy, 40 rt_priority
            want = (self.base, want)
        else:
            if unit.cls:
                os.setpriority(os.PRIO_PROCESS, tid, want)
            got = os.getpriority(os.PRIO_PROCESS, tid)
            stat = proc_stat() if unit.id <= 2 else None
            seen = int(stat[16]) if stat else got                      # field 19, nice
        if got != want or seen != want:
            raise RuntimeError("priority class %d of thread %d: wanted %s, read back %s (/proc: %s)"
                               % (unit.cls, tid, want, got, seen))


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
    __slots__ = ("id", "cls", "origin", "samples", "used", "grown", "iterations", "measured",
                 "busy_result", "error")

    def __init__(self, uid, cls):
        self.id = uid
        self.cls = cls
        self.origin = self.iterations = self.measured = 0
        self.samples = array("Q")   # FIELDS numbers per sample, flat: nothing for the GC to walk
        self.used = 0               # numbers stored in samples; the rest is reserve
        self.grown = 0              # times samples grew beyond the reserve
        self.busy_result = None
        self.error = None

    def reserve(self, count):
        """Before the gate: count samples, every byte written (not zero), so storing a sample
        while measuring neither allocates nor faults a page in."""
        self.samples = array("Q", [U64]) * (count * FIELDS)

    def record(self, e, t0, t1, intended, t2, m):
        flat, i = self.samples, self.used
        if i == len(flat):   # the reserve is full: double it, as a list would, and count it
            flat.extend(flat)   # never empty: a sleeping unit reserves at least 16 samples
            self.grown += 1
        flat[i], flat[i + 1], flat[i + 2], flat[i + 3], flat[i + 4], flat[i + 5] = e, t0, t1, intended, t2, m
        self.used = i + FIELDS


class Run:
    """What the units share: the clock of the run, the stop flags and the atomic-sum counter."""

    def __init__(self, plan, priority):
        self.plan = plan
        self.priority = priority
        self.stop = threading.Event()   # set by the stdin watcher at end of file
        self.interrupted = False        # a unit stopped early because of it
        self.aborted = False            # a unit failed: the others stop too
        self.create_start = self.run_start = self.measure_start = self.end = 0
        self.arrived = 0                # units parked at the start gate (or failed before it)
        self.arrivals = threading.Condition()
        self.gate = threading.Lock()    # the start gate of the thread units, held until it opens
        self.start_error = None         # why units after done.units were not started
        # atomic-sum: Python has no atomic integer. An int under one lock makes each increment
        # atomic for threads (the GIL alone already serialises them); asyncio's tasks share one
        # thread, so they use the int without the lock.
        self.counter = 0
        self.lock = threading.Lock()

    def open(self):
        """Every unit created is parked: the run starts now."""
        self.run_start = now()
        self.measure_start = self.run_start + self.plan.warmup
        self.end = self.measure_start + self.plan.duration

    def arrive(self):
        """A thread unit is ready (or failed before it could be)."""
        with self.arrivals:
            self.arrived += 1
            self.arrivals.notify()

    def wait_arrivals(self, count):
        with self.arrivals:
            self.arrivals.wait_for(lambda: self.arrived >= count)

    def open_gate(self, created):
        """Waits until the `created` thread units are parked, then opens the gate."""
        self.wait_arrivals(created)
        self.open()
        self.gate.release()

    def pass_gate(self):
        """Parks a thread unit until the gate opens. The gate is a turnstile: each unit takes the
        lock and hands it on, so the units leave one at a time, as the GIL runs them anyway. A
        gate that wakes every unit at once (threading.Event, or a lock per unit) puts them all in
        the GIL's queue, where each waiting thread wakes every switch interval (5 ms): 20,000 of
        them livelocked the 2 CPUs here, and taskmeter killed the worker while its threads were
        still ending, about 80 a second."""
        self.gate.acquire()
        self.gate.release()

    def may_start(self, uid):
        """Before unit uid > 1: False (with start_error set) when the start limit has passed or
        stdin was closed."""
        after = "%d unit%s" % (uid - 1, "" if uid == 2 else "s")
        if now() - self.plan.read_at >= self.plan.start_limit:
            self.start_error = "start limit of %s reached after %s" % (
                duration_text(self.plan.start_limit), after)
            return False
        if self.stop.is_set():   # the units see it too, and report interrupted
            self.start_error = "stop requested (stdin closed) after %s" % after
            return False
        return not self.aborted   # a unit failed: the run ends with an error line anyway


class MapBudget:
    """Keeps a start of threads below vm.max_map_count. Each unit thread maps its stack and guard
    page, and the memory of many threads takes more (2.9 maps a unit at 21,000 units here), so
    this limit comes before kernel.pid_max. A new thread that cannot map what its first Python
    frame needs dies before it signals that it started, and Thread.start() waits for ever. So at
    checkpoints, once the units started so far are parked, it counts the maps in use, measures
    what one unit costs, and spends at most half the room left before it counts again."""
    SPARE = 1024   # maps kept for what the worker maps after the start

    def __init__(self):
        try:
            with open("/proc/sys/vm/max_map_count", "rb") as f:
                self.limit = int(f.read())
        except (OSError, ValueError):
            self.limit = None
        self.first = None   # (maps in use, units) at the first checkpoint
        self.next_check = 2

    def refuses(self, uid, run):
        """Why unit uid must not be started, or None."""
        if self.limit is None or uid < self.next_check:
            return None
        run.wait_arrivals(uid - 1)
        try:
            with open("/proc/self/maps", "rb") as f:
                in_use = f.read().count(b"\n")
        except OSError:
            return None
        if self.first is None:
            self.first, per_unit = (in_use, uid - 1), 4.0   # a guess until one is measured
        else:
            per_unit = max(1.0, (in_use - self.first[0]) / max(1, uid - 1 - self.first[1]))
        room = int((self.limit - self.SPARE - in_use) / per_unit)
        if room < 1:
            return ("stopped before unit %d: %d memory maps in use, %.1f per unit, vm.max_map_count %d"
                    % (uid, in_use, per_unit, self.limit))
        self.next_check = uid + max(1, room // 2)
        return None


def duration_text(ns):
    for div, unit in ((10**9, "s"), (10**6, "ms"), (10**3, "us")):
        if ns % div == 0:
            return "%d %s" % (ns // div, unit)
    return "%d ns" % ns


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


def sleepers_for(runtime):
    """A function, called on each unit's thread, that returns its (sleep_for(e, t1), sleep_until)."""
    if runtime == "python-abs":
        clock_nanosleep = load_clock_nanosleep()

        def abs_pair():
            until = abs_sleeper(clock_nanosleep)
            return (lambda e, t1: until(t1 + e)), until
        return abs_pair
    pair = (lambda e, t1: sleep_ns(e)), (lambda deadline: sleep_ns(max(0, deadline - now())))
    return lambda: pair


def thread_unit(run, unit, sleepers):
    """The work loop of the protocol README, in a thread."""
    plan, stop, lock = run.plan, run.stop, run.lock
    iters, absolute, none, atomic = plan.iters, plan.absolute, plan.none, plan.atomic
    # The yield, of busy.yield and of the schedule none: sched_yield releases the GIL; a
    # time.sleep(0) would be a timed sleep that waits out the timer slack.
    pause = os.sched_yield
    busy_pause = pause if plan.yield_ else None
    n = n_meas = 0
    try:
        try:
            if run.priority.check is not None:
                run.priority.check(unit)
            sleep_for, sleep_until = sleepers()
            expected, skip = plan.schedule(unit.id)
            unit.reserve(plan.reserve(unit.id))
        finally:
            run.arrive()   # even after a failure, so that the gate opens
        run.pass_gate()
        end, measure_start, record = run.end, run.measure_start, unit.record
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
                unit.busy_result = busy(iters, busy_pause)
                t1 = now()
            else:
                t1 = t0
            if none:
                pause()
            else:
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
            if atomic:
                with lock:
                    run.counter += 1
            n += 1
            if t0 >= measure_start:
                n_meas += 1
            if not none:
                record(e, t0, t1, intended, t2, m)
    except BaseException as exc:   # reported by the main thread, never as a traceback
        unit.error = "%s: %s" % (type(exc).__name__, exc)
        run.aborted = True
    unit.iterations, unit.measured = n, n_meas


def run_threads(run, units, sleepers):
    """Create the units in order, each parking at the gate; open it when all are parked; wait
    for them all."""
    plan = run.plan
    threads = []
    maps = MapBudget()
    run.gate.acquire()
    run.create_start = now()
    try:
        for uid in range(1, plan.units + 1):
            if uid > 1 and not run.may_start(uid):
                break
            reason = maps.refuses(uid, run)
            if reason is not None:
                run.start_error = reason
                break
            try:
                unit = Unit(uid, (uid - 1) % plan.classes)
                # A daemon: CPython 3.11 scans every live non-daemon thread when it starts one
                # (threading._maintain_shutdown_locks), which made starting n threads O(n^2).
                # The units are joined below all the same.
                thread = threading.Thread(target=thread_unit, args=(run, unit, sleepers),
                                          name="unit-%d" % uid, daemon=True)
                thread.start()
            except (RuntimeError, MemoryError) as exc:   # "can't start new thread": EAGAIN, ENOMEM
                reason = "threading.Thread.start for unit %d: %s: %s" % (uid, type(exc).__name__, exc)
                if uid == 1:
                    raise Failure(reason)
                run.start_error = reason
                break
            threads.append(thread)
            units.append(unit)
    except BaseException:
        run.aborted = True   # the parked units leave at once; main() reports the error
        raise
    finally:
        run.open_gate(len(threads))   # never leave a thread parked
        for thread in threads:
            thread.join()


async def asyncio_unit(run, unit, gate):
    """The work loop of the protocol README, in a task; the busy work blocks the loop."""
    plan, stop, sleep = run.plan, run.stop, asyncio.sleep
    iters, yield_ = plan.iters, plan.yield_
    absolute, none, atomic = plan.absolute, plan.none, plan.atomic
    n = n_meas = 0
    try:
        try:
            expected, skip = plan.schedule(unit.id)
            unit.reserve(plan.reserve(unit.id))
        finally:
            run.arrived += 1   # even after a failure, so that the gate opens
        await gate.wait()
        end, measure_start, record = run.end, run.measure_start, unit.record
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
            if none:
                await sleep(0)   # the yield: one turn of the event loop
            else:
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
            if atomic:
                run.counter += 1   # one thread: no other task runs between the read and the write
            n += 1
            if t0 >= measure_start:
                n_meas += 1
            if not none:
                record(e, t0, t1, intended, t2, m)
    except Exception as exc:   # CancelledError (a BaseException since 3.8) is left alone
        unit.error = "%s: %s" % (type(exc).__name__, exc)
        run.aborted = True
    unit.iterations, unit.measured = n, n_meas


async def run_tasks(run, units):
    """Create the units' tasks in order without yielding; let each run to the gate (one turn of
    the loop), open it, then wait for them all. The list keeps the tasks alive: the loop holds
    them only weakly."""
    plan = run.plan
    loop = asyncio.get_running_loop()
    gate = asyncio.Event()
    tasks = []
    run.create_start = now()
    for uid in range(1, plan.units + 1):
        if uid > 1 and not run.may_start(uid):
            break
        try:
            unit = Unit(uid, (uid - 1) % plan.classes)
            tasks.append(loop.create_task(asyncio_unit(run, unit, gate)))
        except MemoryError as exc:
            reason = "asyncio task for unit %d: MemoryError: %s" % (uid, exc)
            if uid == 1:
                raise Failure(reason)
            run.start_error = reason
            break
        units.append(unit)
    while run.arrived < len(tasks):
        await asyncio.sleep(0)
    run.open()
    gate.set()
    for task in tasks:
        await task


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


UNIT_HEAD = '{"type":"unit","unit":%d,"class":%d,"origin_ns":%d,"iterations":%d,"measured_iterations":%d,'
COLUMNS = ("expected_ns", "start_ns", "busy_end_ns", "intended_ns", "wake_ns", "missed")
UNIT_LINE = UNIT_HEAD + ",".join('"%s":[%%s]' % name for name in COLUMNS) + "}\n"
CHUNK = 1 << 20       # characters of output gathered per write
SHORT = 256           # units with at most this many samples use a format made for their count
NO_SAMPLES = ("",) * FIELDS


@functools.lru_cache(maxsize=None)
def short_line(n):
    """For a unit of 1..SHORT samples: its line as one %-format with a %d per number, and an
    itemgetter that reads the flat samples column by column in one call. At 100,000 units of a
    few samples each this is two to three times as fast as joining six columns of str()s."""
    line = UNIT_HEAD + ",".join('"%s":[%s]' % (name, ",".join(["%d"] * n)) for name in COLUMNS) + "}\n"
    return line, operator.itemgetter(*[k * FIELDS + i for i in range(FIELDS) for k in range(n)])


def write_results(run, units):
    """The unit lines and done, written in chunks of about 1 MiB: the output of 100,000 units is
    never held twice in memory, and each unit's samples are freed once written."""
    out = sys.stdout.buffer
    parts, size = [], 0
    samples = missed = iterations = grown = 0
    result = None
    for unit in units:
        flat = unit.samples
        n = unit.used // FIELDS
        head = (unit.id, unit.cls, unit.origin, unit.iterations, unit.measured)
        if n == 0:
            line = UNIT_LINE % (head + NO_SAMPLES)
        elif n <= SHORT:
            line, columns = short_line(n)
            values = columns(flat)
            missed += sum(values[-n:])   # the last column
            line %= head + values
        else:
            columns = [flat[i:n * FIELDS:FIELDS] for i in range(FIELDS)]
            missed += sum(columns[-1])
            line = UNIT_LINE % (head + tuple([",".join(map(str, column)) for column in columns]))
        parts.append(line)
        size += len(line)
        if size >= CHUNK:
            out.write("".join(parts).encode("ascii"))
            parts, size = [], 0
        unit.samples = None
        samples += n
        iterations += unit.iterations
        grown += unit.grown
        if result is None:
            result = unit.busy_result
    if result is None:   # no unit got to run its busy phase
        result = busy(run.plan.iters)
    done = {"type": "done", "create_start_ns": run.create_start, "run_start_ns": run.run_start,
            "measure_start_ns": run.measure_start, "end_ns": run.end, "units": len(units),
            "samples": samples, "missed": missed, "storage_grown": grown,
            "interrupted": run.interrupted, "busy_result": str(result)}
    if run.start_error is not None:
        done["start_error"] = run.start_error
    if run.plan.atomic:
        if run.counter != iterations:   # cannot happen: the check of this driver's own counter
            raise Failure("atomic_sum %d differs from the sum of iterations %d" % (run.counter, iterations))
        done["atomic_sum"] = run.counter
    parts.append(json.dumps(done, separators=(",", ":")) + "\n")
    out.write("".join(parts).encode("ascii"))
    out.flush()


def execute(plan):
    priority = Priority(plan)
    run = Run(plan, priority)
    asyncio_ = plan.runtime == "python-asyncio"
    sleepers = None if asyncio_ else sleepers_for(plan.runtime)   # fails before hello without libc
    hello = {"type": "hello", "protocol": 2, "runtime": plan.runtime,
             "runtime_version": runtime_version(plan.runtime), "clock": "CLOCK_MONOTONIC",
             "pid": os.getpid(), "priority": priority.text}
    write(json.dumps(hello, separators=(",", ":")) + "\n")

    # A daemon thread: it never keeps the process alive, even when stdin stays open.
    threading.Thread(target=watch_stdin, args=(run.stop,), name="stdin-watcher", daemon=True).start()
    units = []   # the units started, in order
    if asyncio_:
        asyncio.run(run_tasks(run, units))
    else:
        run_threads(run, units, sleepers)

    for unit in units:
        if unit.error is not None:
            raise Failure("unit %d failed: %s" % (unit.id, unit.error))
    write_results(run, units)   # after every unit has finished
    return 0


def main():
    try:
        return execute(read_plan())
    except Refusal as exc:
        status, message = 2, str(exc)
    except Failure as exc:
        status, message = 1, str(exc)
    except MemoryError:   # a constant message: formatting one needs memory, and the traceback
        status, message = 1, "out of memory (MemoryError)"   # still holds the units until here
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
