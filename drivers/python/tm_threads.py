"""python-thread and python-abs: a threading.Thread per unit, sleeping in time.sleep or in the C
library's clock_nanosleep(TIMER_ABSTIME) through ctypes; os.sched_yield() to yield."""

import ctypes
import errno
import os
import platform
import threading
import time

from tm_core import Failure, Runtime, now, spawn_round, sync_unit


def priority_of(plan):
    """(H.priority, apply(cls)): on the unit's thread, lower class 1, then read it back."""
    if plan.classes == 1:
        return "none", None
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

# How long before the deadline a hybrid stops sleeping and starts to spin: time.sleep
# (clock_nanosleep since 3.11) wakes tens of µs late, and the interpreter adds tens more.
THREAD_HYBRID_MARGIN_NS = 200000


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


class ThreadRuntime(Runtime):
    """python-thread: time.sleep, since 3.11 clock_nanosleep on a deadline."""
    recipes = {"spin": spin_until, "hybrid": hybrid_until}

    def __init__(self, plan):
        super().__init__(plan)
        self.text, self.apply_priority = priority_of(plan)
        # The gate, held by the main thread until it opens.
        self.gate = threading.Lock()

    def priority(self):
        return self.text

    @staticmethod
    def sleep_for(e, t1):
        time.sleep(e / 1e9)

    @staticmethod
    def sleep_until(deadline):
        time.sleep(max(0, deadline - now()) / 1e9)

    # The yield: sched_yield releases the GIL; time.sleep(0) would be a timed sleep that waits out
    # the timer slack.
    pause = staticmethod(os.sched_yield)

    def setup(self, unit):
        """On the unit's thread: its priority class first."""
        if self.apply_priority is not None:
            self.apply_priority((unit.id - 1) % 2)
        return super().setup(unit)

    def pass_gate(self):
        # A turnstile: each unit takes the lock and hands it on, so the units leave one at a time,
        # as the GIL runs them anyway. Waking all at once (an Event) put 20,000 threads in the
        # GIL's queue, each waking every 5 ms switch interval: a livelock of this 2-CPU machine.
        self.gate.acquire()
        self.gate.release()

    def run_units(self, run, units):
        """Starts the units, each parking at the gate; opens it when all are parked; joins them."""
        threads = []

        def start(unit):
            # A daemon: CPython 3.11 scans every live non-daemon thread when it starts one, which
            # made starting n threads O(n^2). The units are joined all the same.
            thread = threading.Thread(target=sync_unit, args=(run, unit, self), daemon=True)
            thread.start()
            threads.append(thread)
        self.gate.acquire()
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
            self.gate.release()
            for thread in threads:
                thread.join()

    def run_rounds(self, rounds):
        """A new threading.Thread per task (spawn_round), joined."""
        def spawn(target, *args):
            thread = threading.Thread(target=target, args=args)
            thread.start()
            return thread
        for t in rounds:
            spawn_round(t, spawn, threading.Semaphore, RuntimeError)


class AbsRuntime(ThreadRuntime):
    """python-abs: python-thread but for its sleep. No recipes: a recipe replaces the sleep, so
    python-abs/spin would be python-thread/spin again."""
    recipes = {}

    def __init__(self, plan):
        super().__init__(plan)
        try:
            self.clock_nanosleep = ctypes.CDLL(None).clock_nanosleep   # the C library's; releases the GIL
        except (OSError, AttributeError) as exc:   # before H
            raise Failure("cannot find clock_nanosleep in the C library: %s" % exc)
        self.clock_nanosleep.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self.version = "ctypes clock_nanosleep, %s %s" % platform.libc_ver()

    def setup(self, unit):
        super().setup(unit)   # the priority class
        clock_nanosleep, request = self.clock_nanosleep, (ctypes.c_long * 2)()   # the unit's own struct timespec
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


SERVED = {"python-thread": ThreadRuntime, "python-abs": AbsRuntime}
