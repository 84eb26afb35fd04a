"""python-gevent: a greenlet per unit on gevent's hub, in the main thread; gevent.sleep;
gevent.sleep(0) to yield. Imported only for its plans: gevent is the one package outside the
standard library it needs. Nothing is monkey-patched: the units call gevent's own API, and the
writer and the stdin watcher stay real threads, which run while the hub waits in epoll."""

import sys
import time

from tm_core import Runtime, need, spawn_round, sync_unit

gevent = need("gevent", "python-gevent")
import gevent.event  # noqa: E402  (after need: its message when gevent is missing)
import gevent.lock  # noqa: E402

# gevent's event loop: libev's C extension, gevent's default, set explicitly so that a GEVENT_LOOP
# in the environment does not change the runtime; the libuv recipe takes libuv's (gevent#1057).
LOOP, LOOP_OF = "libev-cext", {"libuv": "libuv"}


# ---------- wait recipes ----------
# Another way for a unit to wait until an absolute CLOCK_MONOTONIC deadline in ns (protocol: "Wait
# recipes"), a function to copy into a program: time.monotonic_ns() is that clock.

def spin_yield_until(deadline):
    """gevent.sleep(0) until the deadline: the other greenlets run in between (a callback of the
    loop, not a timer), and the hub's thread stays busy when none does."""
    while time.monotonic_ns() < deadline:
        gevent.sleep(0)


class GeventRuntime(Runtime):
    """python-gevent. The libuv recipe replaces the loop, not the wait: gevent.sleep on libuv."""
    recipes = {"spin-yield": spin_yield_until, "libuv": None}
    no_priority = ("greenlets have no priority (libev's watcher priorities order the callbacks of one loop "
                   "iteration, and gevent.sleep sets none)")

    def __init__(self, plan):
        super().__init__(plan)
        name = gevent.config.loop = LOOP_OF.get(plan.wait, LOOP)
        loop = gevent.get_hub().loop   # made now, before H: a loop that does not load refuses the plan
        # Its library's version (libev-4.33, libuv-1.51.0), and libev's backend (epoll).
        library = sys.modules[type(loop).__module__].get_version()
        backend = getattr(loop, "backend", "default")
        self.version = "gevent %s, %s loop (%s%s)" % (
            gevent.__version__, name, library, "" if backend == "default" else ", " + backend)
        self.gate = gevent.event.Event()

    @staticmethod
    def sleep_for(e, t1):
        gevent.sleep(e / 1e9)

    @staticmethod
    def sleep_until(deadline):
        gevent.sleep(max(0, deadline - time.monotonic_ns()) / 1e9)

    @staticmethod
    def pause():
        gevent.sleep(0)   # a callback of the loop: the other greenlets run first

    def pass_gate(self):
        self.gate.wait()

    def run_units(self, run, units):
        """Spawns the greenlets (they run once the main greenlet yields), lets each reach the
        gate, opens it and joins them."""
        greenlets = []
        try:
            run.start_units(units, lambda unit: greenlets.append(gevent.spawn(sync_unit, run, unit, self)))
            while run.arrived < len(greenlets):
                gevent.sleep(0)
            run.open(units)
        except BaseException:
            run.aborted = True   # the parked units leave at once
            raise
        finally:
            self.gate.set()
            gevent.joinall(greenlets)

    def run_rounds(self, rounds):
        """A greenlet per task (spawn_round), joined; nothing refuses a greenlet but memory."""
        for t in rounds:
            spawn_round(t, gevent.spawn, gevent.lock.Semaphore, ())


SERVED = {"python-gevent": GeventRuntime}
