#!/usr/bin/env python3
"""taskmeter Python driver: worker protocol 4 (protocol/README.md), standard library, Python 3.8+
(but python-asyncio's optional uvloop recipe, which imports uvloop when a plan asks for it).

python-thread   a threading.Thread per unit; time.sleep; os.sched_yield() to yield
python-asyncio  an asyncio task per unit in one loop; asyncio.sleep; asyncio.sleep(0) to yield
python-abs      a threading.Thread per unit; clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) via ctypes
"""

import asyncio
import ctypes
import errno
import fcntl
import itertools
import json
import os
import platform
import struct
import sys
import threading
import time
from array import array
from types import SimpleNamespace

RUNTIMES = ("python-thread", "python-asyncio", "python-abs")
U64 = (1 << 64) - 1       # the busy work wraps around at 2^64
FIELDS = 6                # a sample: period, start, busy_end, intended, wake, missed
SAMPLE_FD = 3             # the sample file, open for appending: S and F frames go there
WRITE_BYTES = 1 << 20     # frames are gathered into writes of about this much
now = time.monotonic_ns   # clock_gettime(CLOCK_MONOTONIC), an exact int
GATE_OPEN = False         # G is sent: a failure now goes to stderr, never into an E frame


class Failure(Exception):
    """The worker cannot go on: an E frame (before G) and exit status `status`."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def frame(kind, payload):
    if not isinstance(payload, bytes):
        payload = json.dumps(payload, separators=(",", ":")).encode()
    return kind + struct.pack("<I", len(payload)) + payload


def write(frames):
    """Writes frames to stdout, gathered into writes of about WRITE_BYTES (b"" at the end: write the rest)."""
    out = bytearray()
    for data in itertools.chain(frames, [b""]):
        out += data
        while len(out) >= WRITE_BYTES or (out and not data):
            del out[:os.write(1, out)]   # a pipe may take a large write in pieces


def write_samples(data):
    """Whole frames to the sample file in ONE write(2): with O_APPEND the writer's and the units'
    frames never interleave, so a short write is a failure, never continued."""
    written = os.write(SAMPLE_FD, data)
    if written != len(data):
        raise OSError("the sample file took %d of %d bytes" % (written, len(data)))


def send_samples(units):
    """One S frame per unit with new samples, in writes of about WRITE_BYTES."""
    out = bytearray()
    for unit in units:
        out += unit.take()
        if len(out) >= WRITE_BYTES:
            write_samples(out)
            del out[:]
    if out:
        write_samples(out)


def name_writer_thread(thread):
    """Names the started thread tm-writer as the kernel sees it (protocol: "The writer"), so that
    the orchestrator finds it and runs it above the units."""
    try:
        with open("/proc/self/task/%d/comm" % thread.native_id, "w") as f:
            f.write("tm-writer")
    except OSError:
        pass   # not Linux, or no /proc: the orchestrator will not find it, and says so


def writer(run, units):
    """Started before the units (a thread limit may leave no thread for it later), it waits for
    G, then every flush_ns, and at once when every unit has ended, appends what the rings hold
    to the sample file."""
    run.opened.wait()
    try:
        while GATE_OPEN and not run.ended.wait(run.plan.flush_ns / 1e9):
            send_samples(units)
        if GATE_OPEN:
            send_samples(units)   # the final drain
    except BaseException as exc:
        run.fail("writer", exc)


class Unit:
    """A unit and its ring: the unit puts samples; the writer takes them, and so does the unit
    itself when it finds the ring full. head and tail are positions (plain ints, never wrapped):
    under the GIL the slot's stores come before the store of head (the protocol's release)."""
    __slots__ = ("id", "ring", "size", "head", "tail", "tail_lock", "lost", "origin", "n", "n_meas", "busy_result")

    def __init__(self, uid, size):
        self.id, self.size, self.ring, self.busy_result = uid, size, None, None
        self.head = self.tail = self.lost = self.origin = self.n = self.n_meas = 0
        # Python has no compare-and-swap: this lock makes swap_tail one, held for nothing else.
        self.tail_lock = threading.Lock()

    def put(self, p, t0, t1, intended, t2, m):
        head, size = self.head, self.size
        if head - self.tail == size:
            self.write_own(head)   # the unit never waits for the writer
        ring, i = self.ring, head % size * FIELDS
        ring[i], ring[i + 1], ring[i + 2], ring[i + 3], ring[i + 4], ring[i + 5] = p, t0, t1, intended, t2, m
        self.head = head + 1

    def write_own(self, head):
        """The ring is full: write it as one F frame, unless the writer took it meanwhile (then
        there is room). The slots stay the unit's until its next put, so the copy is whole; a
        failed write loses those samples, counted."""
        tail = self.tail
        if self.swap_tail(tail, head):
            try:
                write_samples(self.frame_of(b"F", tail, head))
            except OSError:
                self.lost += head - tail

    def take(self):
        """The writer's S frame of what the ring holds (b"" when nothing, or when the unit took
        the samples itself while they were copied: the copy may hold overwritten slots)."""
        tail = self.tail
        head = self.head   # after tail: head - tail is never negative
        if head == tail:
            return b""
        data = self.frame_of(b"S", tail, head)
        return data if self.swap_tail(tail, head) else b""

    def swap_tail(self, tail, head):
        """Compare-and-swap: moves tail from `tail` to head if no other consumer moved it."""
        with self.tail_lock:
            if self.tail != tail:
                return False
            self.tail = head
            return True

    def frame_of(self, kind, tail, head):
        """The frame of positions tail..head; a ring that wraps is copied into one frame."""
        ring, a, b = self.ring, tail % self.size * FIELDS, head % self.size * FIELDS
        data = ring[a:b].tobytes() if a < b else ring[a:].tobytes() + ring[:b].tobytes()
        return frame(kind, struct.pack("<IIQQ", self.id, head - tail, self.origin, tail) + data)


def busy(iters, pause=None):
    """The protocol's busy work; pause() is the yield after every step (two loops: no test per step)."""
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
    total = 0
    for _ in range(iters):
        total = (total + 1) & U64
        total = ((total * 3) & U64) // 2
        await asyncio.sleep(0)
    return total


def schedule(plan, u):
    """(expected(k), skip(k, next, t2)) of unit u. skip is the missed-period rule with whole
    schedule cycles skipped at once, so that a long overrun does not spin holding the GIL."""
    ns, periods = plan.sleep_ns, plan.modulo   # modulo is 1 but in the modulo schedule
    if periods > 1:
        expected = lambda k: (k % periods + 1) * ns
    else:
        period = u * ns if plan.schedule == "by-unit" else ns
        expected = lambda k: period
    span = sum(expected(k) for k in range(periods))   # >= 1 us in absolute mode

    def skip(k, deadline, t2):
        cycles = (t2 - deadline - 1) // span   # whole cycles that all end before t2
        m, k, deadline = cycles * periods, k + cycles * periods, deadline + cycles * span
        while t2 > deadline:
            m, k = m + 1, k + 1
            deadline += expected(k)
        return m, k, deadline
    return expected, skip


class Run:
    """What the units share: the plan, the clock of the run, the flags, the gate, the counter."""

    def __init__(self, plan, read_at):
        self.plan, self.read_at = plan, read_at
        # Only by-unit depends on the unit: the units of another schedule share one pair.
        self.shared = None if plan.schedule == "by-unit" else schedule(plan, 1)
        self.stop = threading.Event()    # end of file on stdin
        self.opened = threading.Event()  # G is sent (or the run failed before): the writer goes
        self.ended = threading.Event()   # every unit has ended: the writer drains and stops
        self.interrupted = self.aborted = False
        self.error = self.start_error = None
        self.create_start = self.run_start = self.measure_start = self.end = self.arrived = 0
        self.arrivals = threading.Condition()   # counts the units parked at the gate
        self.gate = threading.Lock()            # the thread units' gate, held until it opens
        # atomic-sum: Python has no atomic int. Threads add under a lock (the GIL may switch
        # between the read and the write); asyncio's tasks share one thread and need none.
        self.counter, self.lock = 0, threading.Lock()

    def fail(self, who, exc):
        self.error = self.error or "%s: %s: %s" % (who, type(exc).__name__, exc)
        self.aborted = True   # the other units stop too

    def arrive(self):
        with self.arrivals:
            self.arrived += 1
            self.arrivals.notify()

    def wait_arrivals(self, count):
        with self.arrivals:
            self.arrivals.wait_for(lambda: self.arrived >= count)

    def start_units(self, units, start, refuses=lambda uid: None, refused_note=""):
        """Starts units 1, 2, ... until one must not or cannot start (unit 1 always starts, or E);
        refused_note follows the error of a start that fails."""
        plan, self.create_start = self.plan, now()
        for uid in range(1, plan.units + 1):
            after = "%d unit%s" % (uid - 1, "" if uid == 2 else "s")
            if uid > 1 and now() - self.read_at >= plan.start_limit_ns:
                self.start_error = "start limit of %g s reached after %s" % (plan.start_limit_ns / 1e9, after)
            elif uid > 1 and self.stop.is_set():
                self.start_error = "stop requested (stdin closed) after %s" % after
            else:
                self.start_error = self.error or refuses(uid)   # self.error: a unit failed, E follows
            if self.start_error is not None:
                return
            unit = Unit(uid, plan.ring)
            try:
                start(unit)
            except (RuntimeError, MemoryError) as exc:   # "can't start new thread": EAGAIN, ENOMEM
                self.start_error = "starting unit %d: %s: %s%s" % (uid, type(exc).__name__, exc, refused_note)
                if uid == 1:
                    raise Failure(self.start_error)
                return
            units.append(unit)

    def open(self, units):
        """Every unit started is parked: read run_start, send G, let the writer go."""
        global GATE_OPEN
        if self.error is not None:
            raise Failure(self.error)
        self.run_start = now()
        self.measure_start = self.run_start + self.plan.warmup_ns
        self.end = self.measure_start + self.plan.duration_ns
        gate = {"create_start_ns": self.create_start, "run_start_ns": self.run_start, "units": len(units)}
        if len(units) < self.plan.units:
            gate["start_error"] = self.start_error
        GATE_OPEN = True
        write([frame(b"G", gate)])
        self.opened.set()


def priority_of(plan):
    """(H.priority, apply(cls)): on the unit's thread, lower class 1, then read it back."""
    if plan.classes == 1 or plan.runtime == "python-asyncio":
        return ("none" if plan.classes == 1 else "none: asyncio tasks have no priority"), None
    reset = getattr(os, "SCHED_RESET_ON_FORK", 0)   # a flag of the policy, kept when set again
    policy = os.sched_getscheduler(0)
    base = policy & ~reset
    name = next((n for n in ("SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE", "SCHED_FIFO", "SCHED_RR")
                 if getattr(os, n) == base), "policy %d" % base)
    if name in ("SCHED_FIFO", "SCHED_RR"):
        high = os.sched_getparam(0).sched_priority
        values, word, call = (high, max(1, high - 1)), "rt-priority", "os.sched_setscheduler"
        set_ = lambda tid, v: os.sched_setscheduler(tid, policy, os.sched_param(v))
        get = lambda tid: os.sched_getparam(tid).sched_priority
    else:
        high = os.getpriority(os.PRIO_PROCESS, 0)   # inherited by every thread
        values, word, call = (high, min(19, high + 10)), "nice", "os.setpriority"
        set_ = lambda tid, v: os.setpriority(os.PRIO_PROCESS, tid, v)   # on Linux: that thread only
        get = lambda tid: os.getpriority(os.PRIO_PROCESS, tid)

    def apply(cls):
        tid, want = threading.get_native_id(), (base, values[cls])
        if cls:
            set_(tid, want[1])
        got = (os.sched_getscheduler(tid) & ~reset, get(tid))
        if got != want:
            raise RuntimeError("priority class %d of thread %d: wanted %s, read back %s" % (cls, tid, want, got))
    return ("%s: high %d, low %d (%s; %s on each low unit's thread, read back by every unit)"
            % (word, values[0], values[1], name, call)), apply


# ---------- wait recipes ----------
# Other ways for a unit to wait until an absolute CLOCK_MONOTONIC deadline in ns (protocol: "Wait
# recipes"), each a function to copy into a program: time.monotonic_ns() is that clock. The
# plan's "wait" names one. Python has no clock_nanosleep binding (time.clock_nanosleep does not
# exist; python-abs calls the C library's through ctypes), so there is no such recipe.

# How long before the deadline a hybrid stops sleeping and starts to spin. A thread: time.sleep
# (clock_nanosleep since 3.11) wakes tens of µs late, and the interpreter adds tens more. A task:
# the selector's timeout is in whole milliseconds, rounded up, so asyncio.sleep wakes up to
# 1 ms late, plus the loop's turn.
THREAD_HYBRID_MARGIN_NS = 200000
ASYNCIO_HYBRID_MARGIN_NS = 1200000


def spin_until(deadline):
    """Reads the clock until the deadline: the most precise wait, one core per waiting unit. It
    holds the GIL, which other threads take only at the switch interval (5 ms)."""
    while time.monotonic_ns() < deadline:
        pass


def hybrid_until(deadline):
    """time.sleep until THREAD_HYBRID_MARGIN_NS before the deadline, then spin_until."""
    left = deadline - THREAD_HYBRID_MARGIN_NS - time.monotonic_ns()
    if left > 0:
        time.sleep(left / 1e9)
    spin_until(deadline)


async def call_at_until(deadline):
    """A future resolved by loop.call_at at the deadline: loop.time() is time.monotonic(), so the
    deadline needs no conversion but to seconds (asyncio.sleep is call_later: relative). The
    loop may run a callback up to its clock resolution early, and a float has no whole ns: it
    waits again for what is left."""
    loop = asyncio.get_running_loop()
    while time.monotonic_ns() < deadline:
        woken = loop.create_future()
        handle = loop.call_at(deadline / 1e9, woken.set_result, None)
        try:
            await woken
        finally:
            handle.cancel()   # a cancelled wait leaves no callback behind


async def spin_yield_until(deadline):
    """Yields to the event loop (asyncio.sleep(0), a bare yield) until the deadline: the other
    tasks run in between, and the loop's thread stays busy when none does."""
    while time.monotonic_ns() < deadline:
        await asyncio.sleep(0)


async def hybrid_async_until(deadline):
    """asyncio.sleep until ASYNCIO_HYBRID_MARGIN_NS before the deadline, then spin_yield_until."""
    left = deadline - ASYNCIO_HYBRID_MARGIN_NS - time.monotonic_ns()
    if left > 0:
        await asyncio.sleep(left / 1e9)
    await spin_yield_until(deadline)


def uvloop_loop():
    """The uvloop recipe replaces the event loop, not the wait: asyncio.sleep until the deadline,
    as in python-asyncio, on uvloop's loop (libuv's timers). (new_event_loop, its version). The
    one import outside the standard library, made only when a plan asks for this recipe."""
    try:
        import uvloop
    except ImportError as exc:
        if getattr(exc, "name", None) == "uvloop":
            raise Failure("the uvloop recipe needs the uvloop package (pip install uvloop)", 2)
        raise Failure("the uvloop recipe cannot import uvloop: %s" % str(exc).replace("\n", " "), 2)
    return uvloop.new_event_loop, "uvloop %s" % getattr(uvloop, "__version__", "(version unknown)")


# The recipes that change the event loop (python-asyncio): a function that returns
# (new_event_loop, what H.runtime_version adds). Their RECIPES entry is None: the runtime's own sleep.
LOOPS = {"uvloop": uvloop_loop}

# python-abs has none: a recipe replaces the sleep, the only way it differs from python-thread.
RECIPES = {"python-thread": {"spin": spin_until, "hybrid": hybrid_until}, "python-abs": {},
           "python-asyncio": {"call-at": call_at_until, "spin-yield": spin_yield_until, "hybrid": hybrid_async_until,
                              "uvloop": None}}


def event_loop_of(plan):
    """(new_event_loop, version) of python-asyncio's units: asyncio's own loop (version None) or
    the loop of a LOOPS recipe. Everything else runs the same on either."""
    if plan.wait in LOOPS:
        return LOOPS[plan.wait]()
    return asyncio.new_event_loop, None


def run_loop(new_loop, coroutine):
    """asyncio.run(coroutine) on a loop from new_loop (asyncio.run takes a loop_factory only since
    3.12): the units' tasks have all ended when run_tasks returns or raises."""
    loop = new_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


def sleepers_for(runtime, wait=None):
    """A function, called on each unit's thread, that returns its (sleep_for(e, t1), sleep_until);
    with a recipe, both wait with it until the absolute deadline (relative: t1 + e)."""
    if wait is not None:
        until = RECIPES[runtime][wait]
        pair = (lambda e, t1: until(t1 + e)), until
        return lambda: pair
    if runtime == "python-thread":   # time.sleep: since 3.11 clock_nanosleep on a deadline
        pair = (lambda e, t1: time.sleep(e / 1e9)), (lambda deadline: time.sleep(max(0, deadline - now()) / 1e9))
        return lambda: pair
    try:
        clock_nanosleep = ctypes.CDLL(None).clock_nanosleep   # the C library's; releases the GIL
    except (OSError, AttributeError) as exc:
        raise Failure("cannot find clock_nanosleep in the C library: %s" % exc)
    clock_nanosleep.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]

    def abs_pair():
        request = (ctypes.c_long * 2)()   # the unit's own struct timespec
        pointer = ctypes.byref(request)

        def until(deadline):
            request[0], request[1] = divmod(deadline, 1000000000)
            while True:   # CLOCK_MONOTONIC (1), TIMER_ABSTIME (1); the error number is returned
                rc = clock_nanosleep(1, 1, pointer, None)
                if rc == 0:
                    return
                if rc != errno.EINTR:
                    raise OSError(rc, "clock_nanosleep: " + os.strerror(rc))
        return (lambda e, t1: until(t1 + e)), until
    return abs_pair


def thread_unit(run, unit, apply_priority, sleepers):
    """The work loop of the protocol README, in a thread."""
    plan, stop, lock = run.plan, run.stop, run.lock
    iters, absolute, none, atomic = plan.busy_iters, plan.absolute, plan.none, plan.atomic
    # The yield (busy_yield and the schedule none): sched_yield releases the GIL; time.sleep(0)
    # would be a timed sleep that waits out the timer slack.
    pause = os.sched_yield
    busy_pause = pause if plan.busy_yield else None
    n = n_meas = 0
    try:
        if apply_priority is not None:
            apply_priority((unit.id - 1) % 2)
        sleep_for, sleep_until = sleepers()
        expected, skip = run.shared or schedule(plan, unit.id)
        unit.ring = array("Q", [U64]) * (plan.ring * FIELDS)   # every byte written: no fault later
    except BaseException as exc:
        run.fail("unit %d" % unit.id, exc)
        return
    finally:
        run.arrive()   # even after a failure, so that the gate opens
    # The gate is a turnstile: each unit takes the lock and hands it on, so the units leave one at
    # a time, as the GIL runs them anyway. Waking all at once (an Event) put 20,000 threads in the
    # GIL's queue, each waking every 5 ms switch interval: a livelock of this 2-CPU machine.
    run.gate.acquire()
    run.gate.release()
    try:
        end, measure_start, put = run.end, run.measure_start, unit.put
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
                p = k
                e = expected(p)
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
                put(p, t0, t1, intended, t2, m)
    except BaseException as exc:   # reported by the main thread, never as a traceback
        run.fail("unit %d" % unit.id, exc)
    unit.n, unit.n_meas = n, n_meas


def map_budget(run):
    """refuses(uid) that keeps the threads below vm.max_map_count (the plan's max_map_count, read
    by the orchestrator), which comes before pid_max (a thread maps its stack, guard page and more)
    and whose breach makes Thread.start() hang. At checkpoints it counts this process's maps,
    measures a unit's cost, and spends half the room left. No check when the limit is unknown."""
    def maps():
        with open("/proc/self/maps", "rb") as f:
            return f.read().count(b"\n")
    limit = run.plan.max_map_count
    if limit is None:
        return lambda uid: None
    try:
        before, checkpoint = maps(), [2]
    except OSError:   # no /proc/self/maps to count
        return lambda uid: None

    def refuses(uid):
        if uid < checkpoint[0]:
            return None
        run.wait_arrivals(uid - 1)
        in_use = maps()
        per_unit = max(1.0, (in_use - before) / (uid - 1))
        room = int((limit - 1024 - in_use) / per_unit)
        if room < 1:
            return ("stopped before unit %d: %d memory maps in use, %.1f per unit, vm.max_map_count %d"
                    % (uid, in_use, per_unit, limit))
        checkpoint[0] = uid + max(1, room // 2)
        return None
    return refuses


def thread_room(run):
    """refuses(uid) that keeps the units, a thread each, within the plan's room_threads, less the
    threads this worker already has (main, stdin watcher, writer: counted, as the room was
    measured before the worker existed). No check when the room is unknown."""
    room = run.plan.room_threads
    if room is None:
        return lambda uid: None
    try:
        with open("/proc/self/status") as f:
            own = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    except (OSError, StopIteration):
        own = threading.active_count()
    cap = max(0, room - own)
    why = ("%s stops at %d units, the machine's room: the plan leaves room for %d threads, of which %d are the "
           "worker's own; %s" % (run.plan.runtime, cap, room, own, run.plan.room_threads_why))
    return lambda uid: why if uid > max(cap, 1) else None   # unit 1 always starts


def run_threads(run, units, apply_priority, sleepers):
    """Starts the units, each parking at the gate; opens it when all are parked; joins them."""
    threads = []

    def start(unit):
        # A daemon: CPython 3.11 scans every live non-daemon thread when it starts one, which
        # made starting n threads O(n^2). The units are joined all the same.
        thread = threading.Thread(target=thread_unit, args=(run, unit, apply_priority, sleepers), daemon=True)
        thread.start()
        threads.append(thread)
    run.gate.acquire()
    try:
        within_room, within_maps = thread_room(run), map_budget(run)
        # A thread refused within the room: other processes took some since it was measured.
        note = "" if run.plan.room_threads is None else (
            " (the machine's room as this worker started: %s)" % run.plan.room_threads_why)
        run.start_units(units, start, lambda uid: within_room(uid) or within_maps(uid), note)
        run.wait_arrivals(len(threads))
        run.open(units)
    except BaseException:
        run.aborted = True   # the parked units leave at once
        raise
    finally:
        run.gate.release()
        for thread in threads:
            thread.join()


async def asyncio_unit(run, unit, gate):
    """The work loop of the protocol README, in a task; the busy work blocks the loop."""
    plan, stop, sleep = run.plan, run.stop, asyncio.sleep
    wait = plan.wait and RECIPES[plan.runtime][plan.wait]   # None: the runtime's own sleep (or a LOOPS recipe)
    iters, yield_, absolute, none, atomic = plan.busy_iters, plan.busy_yield, plan.absolute, plan.none, plan.atomic
    n = n_meas = 0
    try:
        expected, skip = run.shared or schedule(plan, unit.id)
        unit.ring = array("Q", [U64]) * (plan.ring * FIELDS)   # every byte written: no fault later
    except Exception as exc:
        run.fail("unit %d" % unit.id, exc)
        return
    finally:
        run.arrived += 1   # one thread: no lock
    await gate.wait()
    try:
        end, measure_start, put = run.end, run.measure_start, unit.put
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
                p = k
                e = expected(p)
                if wait:   # a recipe waits until an absolute deadline
                    intended = deadline if absolute else t1 + e
                    await wait(intended)
                elif absolute:
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
                put(p, t0, t1, intended, t2, m)
    except Exception as exc:   # CancelledError (a BaseException since 3.8) is left alone
        run.fail("unit %d" % unit.id, exc)
    unit.n, unit.n_meas = n, n_meas


async def run_tasks(run, units):
    """Starts the tasks without yielding, lets each reach the gate (one loop turn), opens it and
    waits for them all (the list keeps them alive: the loop holds tasks weakly)."""
    gate, tasks = asyncio.Event(), []
    try:
        run.start_units(units, lambda unit: tasks.append(asyncio.ensure_future(asyncio_unit(run, unit, gate))))
        while run.arrived < len(tasks):
            await asyncio.sleep(0)
        run.open(units)
    except BaseException:
        run.aborted = True
        raise
    finally:
        gate.set()
        for task in tasks:
            await task


def watch_stdin(stop):
    """End of file (or an error) on stdin after the plan: stop early."""
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    stop.set()


class Tasks:
    """The granularity experiment's tasks (protocol: "The granularity experiment"), counted. A
    thread may lose the GIL inside `+=`, so the counts change under a lock (in asyncio too: one
    code path, uncontended there)."""

    def __init__(self, plan):
        self.plan, self.iters, self.expected = plan, 1, 0
        self.started = self.completed = self.wrong = 0
        self.lock = threading.Lock()

    def counts(self):
        return self.started, self.completed, self.wrong

    def count_start(self):
        with self.lock:
            self.started += 1

    def check(self, result):
        if result != self.expected:
            with self.lock:
                self.wrong += 1

    def work(self):
        """A task's body: the busy work, counted once it has returned."""
        result = busy(self.iters)
        with self.lock:
            self.completed += 1
        return result

    def serial(self):
        """busy(iters) one call after another until calibrate_ns has passed, the clock read only
        between batches, so it is not counted as work: the calls and their time."""
        batch, calls, start, elapsed = max(10000 // self.iters, 1), 0, now(), 0
        while elapsed < self.plan.calibrate_ns:
            for _ in range(batch):
                self.check(busy(self.iters))
            calls += batch
            elapsed = now() - start
        return calls, elapsed


def thread_round(t):
    """A new threading.Thread per task, joined; a chain's next thread is started by its
    predecessor with its result, and each chain's last one releases a semaphore."""
    width, steps = t.plan.width, t.plan.steps

    def start(target, *args):
        t.count_start()
        thread = threading.Thread(target=target, args=args)
        thread.start()
        return thread

    def start_and_join(n):
        results = [None] * n

        def task(i):
            results[i] = t.work()
        for thread in [start(task, i) for i in range(n)]:
            thread.join()
        for result in results:
            t.check(result)

    if t.plan.pattern == "trivial":
        start_and_join(width * steps)
    elif t.plan.pattern == "stencil":
        for _ in range(steps):
            start_and_join(width)
    else:
        ended, errors = threading.Semaphore(0), []

        def link(k, handed):
            if k > 0:
                t.check(handed)
            result = t.work()
            if k + 1 < steps:
                try:
                    start(link, k + 1, result)
                except RuntimeError as exc:   # the OS refused a thread: the round ends
                    errors.append(exc)
                    ended.release()
            else:
                t.check(result)
                ended.release()
        for _ in range(width):
            start(link, 0, None)
        for _ in range(width):
            ended.acquire()
        if errors:
            raise Failure("cannot start a task's thread: %s" % errors[0])


async def task_round(t):
    """An asyncio task per task; a chain's next task is created by its predecessor with its
    result, and each chain's last one resolves a future. A created task is scheduled at once,
    so the loop holds it until it has run (none of them awaits)."""
    width, steps = t.plan.width, t.plan.steps

    async def task():
        return t.work()

    def start(coroutine):
        t.count_start()
        return asyncio.create_task(coroutine)

    async def start_and_await(n):
        for started in [start(task()) for _ in range(n)]:
            t.check(await started)

    if t.plan.pattern == "trivial":
        await start_and_await(width * steps)
    elif t.plan.pattern == "stencil":
        for _ in range(steps):
            await start_and_await(width)
    else:
        async def link(k, handed, end):
            if k > 0:
                t.check(handed)
            result = t.work()
            if k + 1 < steps:
                start(link(k + 1, result, end))
            else:
                t.check(result)
                end.set_result(None)
        ends = [asyncio.get_running_loop().create_future() for _ in range(width)]
        for end in ends:
            start(link(0, None, end))
        for end in ends:
            await end


def ns_per_iter(calibrate):
    """The shortest of three calls of busy(n), for the first n (1024, doubling) whose call takes
    a quarter of calibrate_ns."""
    def timed(n):
        start = now()
        busy(n)
        return now() - start
    n = 1024
    while timed(n) < calibrate // 4:
        n *= 2
    return max(min(timed(n), timed(n), timed(n)), 1) / n


def granularity(plan, read_at, stop, new_loop):
    """Every grain of the plan, one P frame each; the round runs in a thread per task, or in
    one asyncio loop entered once per round (the coordinator is this main thread)."""
    global GATE_OPEN
    t = Tasks(plan)
    if plan.runtime == "python-asyncio":
        loop = new_loop()
        run_round = lambda: loop.run_until_complete(task_round(t))   # noqa: E731
    else:   # python-thread and python-abs: they differ only in how they sleep
        run_round = lambda: thread_round(t)   # noqa: E731
    write([frame(b"G", {"create_start_ns": read_at, "run_start_ns": now(), "units": 1})])
    GATE_OPEN = True
    per_iter = ns_per_iter(plan.calibrate_ns)
    interrupted = False
    for grain in map(int, plan.grains_ns.split(",")):
        t.iters = max(round(grain / per_iter), 1)
        t.expected = busy(t.iters)
        calls, serial = t.serial()
        warm_start = now()
        while True:
            run_round()
            interrupted = stop.is_set()
            if interrupted or now() - warm_start >= plan.warmup_ns:
                break
        if interrupted:
            break
        before, rounds, start, wall = t.counts(), 0, now(), 0
        while wall < plan.duration_ns and not interrupted:
            run_round()
            rounds += 1
            wall = now() - start
            interrupted = stop.is_set()
        if interrupted:
            break
        started, completed, wrong = (after - was for after, was in zip(t.counts(), before))
        # The task alone again, after its rounds: one of the two may have been disturbed.
        calls_after, serial_after = t.serial()
        write([frame(b"P", {"grain_ns": grain, "iters": t.iters, "busy_result": str(t.expected), "serial_tasks": calls,
                            "serial_ns": serial, "serial_after_tasks": calls_after, "serial_after_ns": serial_after,
                            "rounds": rounds, "tasks": started, "completed": completed, "wrong": wrong, "wall_ns": wall,
                            "cores": 1})])
    write([frame(b"D", {"interrupted": interrupted, "busy_result": "0"})])


def execute(plan, read_at):
    priority, apply_priority = priority_of(plan)
    asyncio_ = plan.runtime == "python-asyncio"
    sleepers = None if asyncio_ else sleepers_for(plan.runtime, plan.wait)   # fails before H without libc
    new_loop, loop_version = event_loop_of(plan) if asyncio_ else (None, None)   # fails before H without uvloop
    version = "%s %s" % (platform.python_implementation(), platform.python_version())
    version += {"python-asyncio": ", asyncio", "python-abs": ", ctypes clock_nanosleep, %s %s" % platform.libc_ver()}.get(plan.runtime, "")
    version = version.rstrip(", ") + ("; " + loop_version if loop_version else "")
    hello = {"protocol": 4, "runtime": plan.runtime, "runtime_version": version,
             "clock": "CLOCK_MONOTONIC", "pid": os.getpid(), "priority": priority}
    if plan.wait:
        hello["wait"] = plan.wait
    write([frame(b"H", hello)])
    run, units = Run(plan, read_at), []   # units: those started, in order
    # Daemons: a stdin that stays open never keeps the process alive.
    threading.Thread(target=watch_stdin, args=(run.stop,), daemon=True).start()
    if plan.experiment == "granularity":
        return granularity(plan, read_at, run.stop, new_loop)
    # Started by hand, fd 3 may be an unrelated file: write only to one open for appending.
    try:
        flags = fcntl.fcntl(SAMPLE_FD, fcntl.F_GETFL)
    except OSError:
        flags = 0
    if not flags & os.O_APPEND or flags & os.O_ACCMODE == os.O_RDONLY:
        raise Failure("fd 3, the sample file, is not open for appending (taskmeter opens it for every worker it starts)", 2)
    writer_thread = threading.Thread(target=writer, args=(run, units), daemon=True)
    writer_thread.start()
    name_writer_thread(writer_thread)   # before any unit: named when G is read
    try:
        if asyncio_:
            run_loop(new_loop, run_tasks(run, units))
        else:
            run_threads(run, units, apply_priority, sleepers)
    finally:
        run.ended.set()   # the writer drains once more and stops
        run.opened.set()
        writer_thread.join()
    if run.error is not None:
        raise Failure(run.error)   # after G: on stderr
    result = next((u.busy_result for u in units if u.busy_result is not None), None)
    done = {"interrupted": run.interrupted, "busy_result": str(busy(plan.busy_iters) if result is None else result)}
    if plan.atomic:
        done["atomic_sum"] = run.counter
    write([frame(b"U", {"unit": u.id, "origin_ns": u.origin, "iterations": u.n, "measured_iterations": u.n_meas,
                        "lost": u.lost}) for u in units] + [frame(b"D", done)])


def main():
    try:
        line = sys.stdin.buffer.readline()
        read_at = now()   # start_limit_ns counts from here
        if sys.byteorder != "little":   # S and F frames are the rings' bytes as they are
            raise Failure("sample frames are little-endian and this machine is not", 2)
        plan = json.loads(line)   # a flat object the orchestrator has checked
        if plan.get("protocol") != 4:
            raise Failure("unsupported protocol version %r (this worker speaks 4)" % plan.get("protocol"), 2)
        if plan.get("runtime") not in RUNTIMES:
            raise Failure("runtime %r is not served by this driver (%s)" % (plan.get("runtime"), ", ".join(RUNTIMES)), 2)
        wait = plan.pop("wait", "sleep")
        if wait != "sleep" and wait not in RECIPES[plan["runtime"]]:
            raise Failure("runtime %s has no wait recipe %r" % (plan["runtime"], wait), 2)
        execute(SimpleNamespace(absolute=plan["mode"] == "absolute", none=plan["schedule"] == "none",
                                atomic=plan["experiment"] == "atomic-sum", wait=None if wait == "sleep" else wait,
                                **plan), read_at)
        return 0
    except Failure as exc:
        status, message = exc.status, str(exc)
    except MemoryError:   # formatting a message needs memory
        status, message = 1, "out of memory (MemoryError)"
    except (Exception, KeyboardInterrupt) as exc:
        status, message = 1, "internal error: %s: %s" % (type(exc).__name__, exc)
    try:
        if GATE_OPEN:   # E only before G
            raise OSError
        write([frame(b"E", {"message": message.encode("utf-8", "replace").decode()})])   # no lone surrogates
    except Exception:
        sys.stderr.write("taskmeter_driver.py: %s\n" % message)
    return status


if __name__ == "__main__":
    sys.exit(main())
