"""python-trio: a trio task per unit, all in one trio.run; trio.sleep (relative) and
trio.sleep_until (absolute deadlines); trio.lowlevel.checkpoint() to yield. Imported only for its
plans: trio is the one package outside the standard library it needs."""

import time

from tm_core import Runtime, async_round, need, task_unit

trio = need("trio", "python-trio")


# ---------- wait recipes ----------
# Other ways for a unit to wait until an absolute CLOCK_MONOTONIC deadline in ns (protocol: "Wait
# recipes"), each a function to copy into a program: time.monotonic_ns() is that clock.

async def relative_until(deadline):
    """trio.sleep for what is left until the deadline, read on time.monotonic_ns(): the relative
    sleep where the runtime sleeps until an absolute deadline (trio.sleep(s) is itself
    sleep_until(current_time() + s): the same timer, a deadline from another clock read)."""
    await trio.sleep(max(0, deadline - time.monotonic_ns()) / 1e9)


async def spin_yield_until(deadline):
    """trio.lowlevel.checkpoint() until the deadline: the other tasks run in between, and the
    loop's thread stays busy when none does."""
    while time.monotonic_ns() < deadline:
        await trio.lowlevel.checkpoint()


async def trio_round(t):
    """A trio task per task, started in a nursery (nursery.start_soon); trio has no handle to
    await one task, so a nursery's end awaits them all and the results come in list slots. In
    chain each task starts the next in the round's nursery with its result: the nursery's end
    awaits the end of every chain."""
    width, steps = t.plan.width, t.plan.steps

    async def start_and_await(n):
        results = [None] * n

        async def task(i):
            results[i] = t.work()
        async with trio.open_nursery() as nursery:
            for i in range(n):
                t.count_start()
                nursery.start_soon(task, i)
        for result in results:
            t.check(result)

    async def chains():
        async with trio.open_nursery() as nursery:
            async def link(k, handed):
                if k > 0:
                    t.check(handed)
                result = t.work()
                if k + 1 < steps:
                    t.count_start()
                    nursery.start_soon(link, k + 1, result)
                else:
                    t.check(result)
            for _ in range(width):
                t.count_start()
                nursery.start_soon(link, 0, None)
    await async_round(t, start_and_await, chains)


class TrioRuntime(Runtime):
    """python-trio."""
    recipes = {"relative": relative_until, "spin-yield": spin_yield_until}
    no_priority = "trio tasks have no priority (its scheduler runs each batch of runnable tasks in a shuffled order)"
    version = "trio %s" % trio.__version__
    offset = 0.0   # trio.current_time() - time.perf_counter(), read in trio.run

    @staticmethod
    def sleep_for(e, t1):
        return trio.sleep(e / 1e9)

    def sleep_until(self, deadline):
        # trio's clock is time.perf_counter() (CLOCK_MONOTONIC on Linux) plus a random offset.
        return trio.sleep_until(deadline / 1e9 + self.offset)

    pause = staticmethod(trio.lowlevel.checkpoint)

    def run_units(self, run, units):
        trio.run(self.run_tasks, run, units)

    async def run_tasks(self, run, units):
        """Starts the tasks in a nursery, lets each reach the gate, opens it; the nursery's end
        waits for them all."""
        before = time.perf_counter()   # read first: the offset errs high, a wake-up only later
        self.offset = trio.current_time() - before
        gate, failure = trio.Event(), None
        async with trio.open_nursery() as nursery:
            try:
                run.start_units(units, lambda unit: nursery.start_soon(task_unit, run, unit, gate, self))
                while run.arrived < len(units):
                    await trio.lowlevel.checkpoint()
                run.open(units)
            except BaseException as exc:   # raised after the nursery, which may wrap it in a group
                run.aborted, failure = True, exc
            finally:
                gate.set()
        if failure is not None:
            raise failure

    def run_rounds(self, rounds):
        """One trio.run for every round (the coordinator is its main task)."""
        async def each():
            for t in rounds:
                await trio_round(t)
        trio.run(each)


SERVED = {"python-trio": TrioRuntime}
