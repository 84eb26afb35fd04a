"""taskmeter Python driver, the part every runtime shares: worker protocol 6 (protocol/README.md),
standard library, Python 3.8+. The plan, the frames, the rings and their writer, the busy work, the
start gate, the two work loops (a thread's or greenlet's, a task's), the granularity experiment's
rounds; each runtime's module (RUNTIMES) says how its units start, sleep and yield.
"""

import fcntl
import importlib
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

# The runtimes and the module of each: only the plan's runtime's module is imported, so a package
# one runtime needs (trio, gevent) is never imported by another's worker.
RUNTIMES = {"python-thread": "tm_threads", "python-abs": "tm_threads", "python-asyncio": "tm_asyncio",
            "python-trio": "tm_trio", "python-gevent": "tm_gevent"}
PROTOCOL = 6              # the worker protocol this driver speaks: the plan's, and H's
U64 = (1 << 64) - 1       # the busy work wraps around at 2^64
FIELDS = 4                # a sample: start, busy_end, intended, wake
SAMPLE_FD = 3             # the sample file, open for appending: S and F frames go there
WRITE_BYTES = 1 << 20     # frames are gathered into writes of about this much
now = time.monotonic_ns   # clock_gettime(CLOCK_MONOTONIC), an exact int
GATE_OPEN = False         # G is sent: a failure now goes to stderr, never into an E frame


class Failure(Exception):
    """The worker cannot go on: an E frame (before G) and exit status `status`."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


UNIT_END = struct.Struct("<IQQQQ")


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

    def put(self, t0, t1, intended, t2):
        head, size = self.head, self.size
        if head - self.tail == size:
            self.write_own(head)   # the unit never waits for the writer
        ring, i = self.ring, head % size * FIELDS
        ring[i], ring[i + 1], ring[i + 2], ring[i + 3] = t0, t1, intended, t2
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


async def busy_async(iters, pause):
    """busy(iters, pause) in a task: pause is the runtime's yield, awaited after every step."""
    total = 0
    for _ in range(iters):
        total = (total + 1) & U64
        total = ((total * 3) & U64) // 2
        await pause()
    return total


def schedule(plan, u):
    """(expected(k), skip(k, next, t2)) of unit u. skip is the missed-period rule: the (k, next)
    past the deadlines t2 passed, whole schedule cycles skipped at once, so that a long overrun
    does not spin holding the GIL."""
    ns, periods = plan.sleep_ns, plan.modulo   # modulo is 1 but in the modulo schedule
    if periods > 1:
        expected = lambda k: (k % periods + 1) * ns
    else:
        period = u * ns if plan.schedule == "by-unit" else ns
        expected = lambda k: period
    span = sum(expected(k) for k in range(periods))   # >= 1 us in absolute mode

    def skip(k, deadline, t2):
        cycles = (t2 - deadline - 1) // span   # whole cycles that all end before t2
        k, deadline = k + cycles * periods, deadline + cycles * span
        while t2 > deadline:
            k += 1
            deadline += expected(k)
        return k, deadline
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
        # atomic-sum: Python has no atomic int. Threads add under a lock (the GIL may switch
        # between the read and the write); greenlets take it too, never contended (they switch
        # only where they wait); tasks share one thread and need none.
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



def spawn_round(t, spawn, semaphore, refused):
    """A round whose tasks are threads or greenlets: spawn(target, *args) starts one and returns
    something to join(); semaphore() is of their kind. Awaited by join in trivial and stencil;
    a chain's next task is started by its predecessor with its result, and each chain's last one
    releases the semaphore, which the round acquires once per chain. refused: what spawn raises
    when it cannot start a task (the OS refused a thread): the round ends."""
    width, steps = t.plan.width, t.plan.steps

    def start(target, *args):
        t.count_start()
        return spawn(target, *args)

    def start_and_join(n):
        results = [None] * n

        def task(i):
            results[i] = t.work()
        for task_ in [start(task, i) for i in range(n)]:
            task_.join()
        for result in results:
            t.check(result)

    if t.plan.pattern == "trivial":
        start_and_join(width * steps)
    elif t.plan.pattern == "stencil":
        for _ in range(steps):
            start_and_join(width)
    else:
        ended, errors = semaphore(0), []

        def link(k, handed):
            if k > 0:
                t.check(handed)
            result = t.work()
            if k + 1 < steps:
                try:
                    start(link, k + 1, result)
                except refused as exc:
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
            raise Failure("cannot start a task: %s" % errors[0])


async def async_round(t, start_and_await, chains):
    """A round in a task runtime (asyncio, trio), by the plan's pattern: start_and_await(n) starts
    n tasks and awaits them all; chains() runs the W chains of S tasks and awaits their ends."""
    width, steps = t.plan.width, t.plan.steps
    if t.plan.pattern == "trivial":
        await start_and_await(width * steps)
    elif t.plan.pattern == "stencil":
        for _ in range(steps):
            await start_and_await(width)
    else:
        await chains()


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


def need(package, who):
    """Imports a package outside the standard library, or refuses the plan (E, exit status 2) with
    the line that installs it: taskmeter skips such a runtime or recipe before it gets here
    (driver.toml's needs), so this is a worker started by hand or a package broken since."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        if getattr(exc, "name", None) == package:
            raise Failure("%s needs the %s package (pip install %s)" % (who, package, package), 2)
        raise Failure("%s cannot import %s: %s" % (who, package, str(exc).replace("\n", " ")), 2)


class Runtime:
    """One runtime of this driver (a module's SERVED maps its ids to these), made for the plan
    before H. The work loops call setup (on the unit's thread, greenlet or task), pause (the
    yield) and, in sync_unit, pass_gate."""
    recipes = {}             # the wait recipes: name -> until(deadline), None where the recipe changes the loop
    version = ""             # what H.runtime_version adds to the interpreter's
    no_priority = None       # H.priority under classes 2 where the runtime has no mechanism: why

    def __init__(self, plan):
        self.plan = plan

    def priority(self):
        """H.priority."""
        return "none" if self.plan.classes == 1 else "none: " + self.no_priority

    def setup(self, unit):
        """(sleep_for(e, t1), sleep_until(deadline)) of a unit, the runtime's own sleep or the plan's
        wait recipe (until(deadline), that waits until t1 + e in relative mode)."""
        until = self.plan.wait and self.recipes[self.plan.wait]
        if until:
            return (lambda e, t1: until(t1 + e)), until
        return self.sleep_for, self.sleep_until

    def run_units(self, run, units):
        """Starts the plan's units (Run.start_units), opens the gate (Run.open) once each is parked,
        and returns when every unit has ended."""
        raise NotImplementedError

    def run_rounds(self, rounds):
        """The granularity experiment: a round of tasks each time `rounds` (grains()) yields."""
        raise NotImplementedError


def sync_unit(run, unit, rt):
    """The work loop of the protocol README, in a thread or a greenlet."""
    plan, stop, lock = run.plan, run.stop, run.lock
    iters, absolute, none, atomic = plan.busy_iters, plan.absolute, plan.none, plan.atomic
    pause = rt.pause   # the yield (busy_yield and the schedule none)
    busy_pause = pause if plan.busy_yield else None
    n = n_meas = 0
    try:
        sleep_for, sleep_until = rt.setup(unit)
        expected, skip = run.shared or schedule(plan, unit.id)
        unit.ring = array("Q", [U64]) * (plan.ring * FIELDS)   # every byte written: no fault later
    except BaseException as exc:
        run.fail("unit %d" % unit.id, exc)
        return
    finally:
        run.arrive()   # even after a failure, so that the gate opens
    rt.pass_gate()
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
                e = expected(k)
                if absolute:
                    intended = deadline
                    sleep_until(deadline)
                else:
                    intended = t1 + e
                    sleep_for(e, t1)
                t2 = now()
                k += 1
                if absolute:
                    deadline += expected(k)
                    if t2 > deadline:
                        k, deadline = skip(k, deadline, t2)
            if atomic:
                with lock:
                    run.counter += 1
            n += 1
            if t0 >= measure_start:
                n_meas += 1
            if not none:
                put(t0, t1, intended, t2)
    except BaseException as exc:   # reported by the main thread, never as a traceback
        run.fail("unit %d" % unit.id, exc)
    unit.n, unit.n_meas = n, n_meas


async def task_unit(run, unit, gate, rt):
    """The work loop of the protocol README, in a task (asyncio, trio); the busy work blocks the
    loop. gate: an Event of the runtime, set when the gate opens."""
    plan, stop, pause = run.plan, run.stop, rt.pause
    iters, yield_, absolute, none, atomic = plan.busy_iters, plan.busy_yield, plan.absolute, plan.none, plan.atomic
    n = n_meas = 0
    try:
        sleep_for, sleep_until = rt.setup(unit)
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
                unit.busy_result = await busy_async(iters, pause) if yield_ else busy(iters)
                t1 = now()
            else:
                t1 = t0
            if none:
                await pause()   # the yield: one turn of the event loop
            else:
                e = expected(k)
                if absolute:
                    intended = deadline
                    await sleep_until(deadline)
                else:
                    intended = t1 + e
                    await sleep_for(e, t1)
                t2 = now()
                k += 1
                if absolute:
                    deadline += expected(k)
                    if t2 > deadline:
                        k, deadline = skip(k, deadline, t2)
            if atomic:
                run.counter += 1   # one thread: no other task runs between the read and the write
            n += 1
            if t0 >= measure_start:
                n_meas += 1
            if not none:
                put(t0, t1, intended, t2)
    except Exception as exc:   # a cancellation (a BaseException) is left alone
        run.fail("unit %d" % unit.id, exc)
    unit.n, unit.n_meas = n, n_meas


def grains(plan, read_at, stop):
    """The granularity experiment: G, then per grain of the plan the serial measurements, the
    warm-up and the measured rounds, and a P frame; then D. A generator that yields its Tasks
    each time a round is to run: the runtime runs it its own way (Runtime.run_rounds)."""
    global GATE_OPEN
    t = Tasks(plan)
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
            yield t
            interrupted = stop.is_set()
            if interrupted or now() - warm_start >= plan.warmup_ns:
                break
        if interrupted:
            break
        before, rounds, start, wall = t.counts(), 0, now(), 0
        while wall < plan.duration_ns and not interrupted:
            yield t
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


def execute(plan, read_at, rt):
    version = "%s %s" % (platform.python_implementation(), platform.python_version())
    hello = {"protocol": PROTOCOL, "runtime": plan.runtime, "runtime_version": ", ".join(filter(None, [version, rt.version])),
             "clock": "CLOCK_MONOTONIC", "pid": os.getpid(), "priority": rt.priority()}
    if plan.wait:
        hello["wait"] = plan.wait
    write([frame(b"H", hello)])
    run, units = Run(plan, read_at), []   # units: those started, in order
    # Daemons: a stdin that stays open never keeps the process alive.
    threading.Thread(target=watch_stdin, args=(run.stop,), daemon=True).start()
    if plan.experiment == "granularity":
        return rt.run_rounds(grains(plan, read_at, run.stop))
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
        rt.run_units(run, units)
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
    # U frames are binary: unit (u32), origin, iterations, measured iterations, lost (u64).
    write([frame(b"U", UNIT_END.pack(u.id, u.origin, u.n, u.n_meas, u.lost)) for u in units] + [frame(b"D", done)])


def main():
    try:
        line = sys.stdin.buffer.readline()
        read_at = now()   # start_limit_ns counts from here
        if sys.byteorder != "little":   # S and F frames are the rings' bytes as they are
            raise Failure("sample frames are little-endian and this machine is not", 2)
        plan = json.loads(line)   # a flat object the orchestrator has checked
        if plan.get("protocol") != PROTOCOL:
            raise Failure("unsupported protocol version %r (this worker speaks %d)" % (plan.get("protocol"), PROTOCOL), 2)
        if plan.get("runtime") not in RUNTIMES:
            raise Failure("runtime %r is not served by this driver (%s)" % (plan.get("runtime"), ", ".join(RUNTIMES)), 2)
        # Its module, and the package it needs (python-trio: trio), or E.
        served = importlib.import_module(RUNTIMES[plan["runtime"]]).SERVED[plan["runtime"]]
        wait = plan.pop("wait", "sleep")
        if wait != "sleep" and wait not in served.recipes:
            raise Failure("runtime %s has no wait recipe %r" % (plan["runtime"], wait), 2)
        plan = SimpleNamespace(absolute=plan["mode"] == "absolute", none=plan["schedule"] == "none",
                               atomic=plan["experiment"] == "atomic-sum", wait=None if wait == "sleep" else wait, **plan)
        execute(plan, read_at, served(plan))   # made before H: it may still refuse the plan
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

