"""python-asyncio: an asyncio task per unit, all in one event loop (asyncio's own, or uvloop's for
the uvloop recipe); asyncio.sleep; await asyncio.sleep(0) to yield."""

import asyncio
import time

from tm_core import Runtime, async_round, need, task_unit

# How long before the deadline the hybrid recipe stops sleeping and starts to spin: the selector's
# timeout is in whole milliseconds, rounded up, so asyncio.sleep wakes up to 1 ms late, plus the
# loop's turn.
ASYNCIO_HYBRID_MARGIN_NS = 1200000


# ---------- wait recipes ----------
# Other ways for a unit to wait until an absolute CLOCK_MONOTONIC deadline in ns (protocol: "Wait
# recipes"), each a function to copy into a program: time.monotonic_ns() is that clock.

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

    async def link(k, handed, end):
        if k > 0:
            t.check(handed)
        result = t.work()
        if k + 1 < steps:
            start(link(k + 1, result, end))
        else:
            t.check(result)
            end.set_result(None)

    async def chains():
        ends = [asyncio.get_running_loop().create_future() for _ in range(width)]
        for end in ends:
            start(link(0, None, end))
        for end in ends:
            await end
    await async_round(t, start_and_await, chains)


class AsyncioRuntime(Runtime):
    """python-asyncio. The uvloop recipe replaces the event loop, not the wait: asyncio.sleep on
    uvloop's loop (libuv's timers); uvloop is imported only for it."""
    recipes = {"call-at": call_at_until, "spin-yield": spin_yield_until, "hybrid": hybrid_async_until, "uvloop": None}
    no_priority = "asyncio tasks have no priority"
    version = "asyncio"

    def __init__(self, plan):
        super().__init__(plan)
        self.new_loop = asyncio.new_event_loop
        if plan.wait == "uvloop":   # before H: refused without the package
            uvloop = need("uvloop", "the uvloop recipe")
            self.new_loop = uvloop.new_event_loop
            self.version += "; uvloop %s" % getattr(uvloop, "__version__", "(version unknown)")

    @staticmethod
    def sleep_for(e, t1):
        return asyncio.sleep(e / 1e9)

    @staticmethod
    def sleep_until(deadline):
        return asyncio.sleep(max(0, deadline - time.monotonic_ns()) / 1e9)

    @staticmethod
    def pause():
        return asyncio.sleep(0)   # a bare yield: one turn of the event loop

    def run_units(self, run, units):
        """asyncio.run(run_tasks()) on a loop from new_loop (asyncio.run takes a loop_factory only
        since 3.12): the units' tasks have all ended when run_tasks returns or raises."""
        loop = self.new_loop()
        try:
            loop.run_until_complete(self.run_tasks(run, units))
        finally:
            loop.close()

    async def run_tasks(self, run, units):
        """Starts the tasks without yielding, lets each reach the gate (one loop turn), opens it and
        waits for them all (the list keeps them alive: the loop holds tasks weakly)."""
        gate, tasks = asyncio.Event(), []
        try:
            run.start_units(units, lambda unit: tasks.append(asyncio.ensure_future(task_unit(run, unit, gate, self))))
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

    def run_rounds(self, rounds):
        """One event loop, entered once per round (the coordinator is this main thread)."""
        loop = self.new_loop()
        for t in rounds:
            loop.run_until_complete(task_round(t))


SERVED = {"python-asyncio": AsyncioRuntime}
