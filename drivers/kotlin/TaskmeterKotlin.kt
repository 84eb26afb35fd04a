/*
 * taskmeter Kotlin driver, worker protocol v6 (protocol/README.md): runtimes "kotlin" (a
 * coroutine per unit on Dispatchers.Default) and "kotlin-1" (a coroutine per unit on
 * runBlocking's event loop: one thread). The protocol, the loop's steps, the rings and the writer
 * are the Java driver's TaskmeterDriver.java, compiled beside this file; here is how a coroutine
 * starts, leaves the gate, waits and yields, and how the granularity experiment's tasks run.
 */

import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit
import kotlin.coroutines.resume
import kotlinx.coroutines.*

private typealias MeterUnit = TaskmeterDriver.Unit

fun main() = TaskmeterDriver.serve(listOf(Coroutines("kotlin", oneThread = false), Coroutines("kotlin-1", oneThread = true)))

/** A wait recipe: returns once System.nanoTime() (CLOCK_MONOTONIC) has passed the deadline. */
private typealias Recipe = suspend (deadline: Long) -> Unit

/**
 * Wait recipes (protocol: "Wait recipes"), each a function to copy into a program. None repeats
 * the runtime's own sleep, delay(ms) (delay(Duration) is the same: rounded up to whole ms since
 * kotlinx.coroutines 1.8, #3921).
 */
private object Recipes {
    val ALL: Map<String, Recipe> =
        mapOf("scheduled-executor" to ::scheduledUntil, "spin-yield" to ::spinYieldUntil, "hybrid" to ::hybridUntil)

    /* How long before the deadline hybridUntil stops delaying: above delay's usual lateness. */
    const val HYBRID_MARGIN_MS = 1L

    /* Suspends until a ScheduledExecutorService (the worker's one timer thread, shared with the
       Java driver's recipe) resumes the continuation at the deadline, in ns, not whole ms. */
    suspend fun scheduledUntil(deadline: Long) {
        while (true) {
            val left = deadline - System.nanoTime()
            if (left <= 0) return
            suspendCancellableCoroutine { c ->
                val timer = TaskmeterDriver.Recipes.Timer.EXECUTOR.schedule({ c.resume(Unit) }, left, TimeUnit.NANOSECONDS)
                c.invokeOnCancellation { timer.cancel(false) }
            }
        }
    }

    /* yield() until the deadline: the unit stays runnable, and the others still run between. */
    suspend fun spinYieldUntil(deadline: Long) {
        while (System.nanoTime() - deadline < 0) yield()
    }

    /* delay in whole ms to at least HYBRID_MARGIN_MS before the deadline, then spinYieldUntil. */
    suspend fun hybridUntil(deadline: Long) {
        delay((deadline - System.nanoTime()) / 1_000_000 - HYBRID_MARGIN_MS)   // <= 0: no delay
        spinYieldUntil(deadline)
    }
}

/** The protocol's busy work with the coroutine's yield() after every step (busy_yield). */
private suspend fun busyYielding(iters: Long): Long {
    var total = 0L
    for (i in 0 until iters) {
        total = TaskmeterDriver.busyStep(total)
        yield()
    }
    return total
}

/**
 * A coroutine per unit, launched in one scope: Dispatchers.Default's (kotlin), or that of a
 * runBlocking on a thread of its own (kotlin-1), whose event loop runs every unit and its timers.
 */
private class Coroutines(id: String, private val oneThread: Boolean) : TaskmeterDriver.Engine(id) {
    private lateinit var scope: CoroutineScope
    private var recipe: Recipe? = null
    // The gate: one deferred that the opener completes. Completing it resumes every waiting unit
    // at once, and a resume is a dispatch (a queue's push), not a thread's wake-up: no tree.
    private val opened = CompletableDeferred<Unit>()

    override fun version(): String =
        "Kotlin ${KotlinVersion.CURRENT}, kotlinx-coroutines ${Job::class.java.`package`.implementationVersion}, ${super.version()}"

    override fun chooseWait(wait: String): Boolean {
        recipe = Recipes.ALL[wait]
        return recipe != null || wait == "sleep"
    }

    override fun prime(plan: TaskmeterDriver.Plan): String {
        scope = if (oneThread) eventLoop() else CoroutineScope(Dispatchers.Default)
        // A throw-away coroutine loads the dispatcher, its threads and delay's timer before H.
        runBlocking { scope.launch { TaskmeterDriver.busy(1, false); delay(1); yield() }.join() }
        return if (plan.classes() == 1) "none" else "none: coroutines have no priority (a dispatcher runs them in its queues' order)"
    }

    /* A runBlocking on a thread of its own that runs until the worker exits; its scope. */
    private fun eventLoop(): CoroutineScope {
        val handed = CompletableFuture<CoroutineScope>()
        val thread = Thread({ runBlocking { handed.complete(this); awaitCancellation() } }, id)
        thread.isDaemon = true
        thread.start()
        return handed.get()
    }

    override fun start(u: MeterUnit) {
        u.handle = scope.launch { run(u) }
    }

    override fun wake(u: MeterUnit) {
        opened.complete(Unit)
    }

    override fun tasks(plan: Map<String, String>): TaskmeterDriver.Tasks = CoroutineTasks(plan)

    /** A unit: its ring, the gate, then the loop's steps around delay or the recipe. */
    private suspend fun run(u: MeterUnit) {
        var failure: Throwable? = null
        try {
            u.ready()
            u.gate.arrive()
            opened.await()
            val recipe = recipe
            val iters = u.plan.busyIters()
            val yieldInBusy = u.plan.busyYield()
            u.enter()
            while (u.begin()) {
                u.busied(if (yieldInBusy) busyYielding(iters) else TaskmeterDriver.busy(iters, false))
                if (!u.sleeps) {
                    yield()   // the schedule none: the same yield as busy_yield's
                } else if (recipe != null) {
                    recipe(u.intended)
                } else {
                    // delay takes whole ms: rounded up, so that it never wakes before the deadline.
                    val ns = u.ownSleep()
                    if (ns >= 0) delay((ns + 999_999) / 1_000_000)
                }
                u.end()
            }
        } catch (t: Throwable) {
            failure = t
        } finally {
            u.ended(failure)
        }
    }

    /**
     * A coroutine per task, launched in the units' scope: a round is one coroutine there, which
     * the measuring thread awaits (one wake-up a round); in it, trivial and stencil await each
     * task's Deferred, and chain's tasks launch the next one with their result, the round's
     * coroutineScope awaiting every chain.
     */
    private inner class CoroutineTasks(plan: Map<String, String>) : TaskmeterDriver.Tasks(plan) {
        override fun cores(): Int = if (oneThread) 1 else super.cores()

        override fun round() {
            runBlocking { scope.launch { coroutineScope { roundHere(this) } }.join() }
        }

        private suspend fun roundHere(round: CoroutineScope) {
            when (pattern) {
                "trivial" -> startAndAwait(round, width * steps)
                "stencil" -> repeat(steps) { startAndAwait(round, width) }
                else -> repeat(width) { start(round) { link(round, 0, 0) } }
            }
        }

        private fun start(round: CoroutineScope, body: suspend () -> Unit): Job {
            started.incrementAndGet()
            return round.launch { body() }
        }

        private suspend fun startAndAwait(round: CoroutineScope, n: Int) {
            val tasks = Array(n) {
                started.incrementAndGet()
                round.async { work() }
            }
            for (task in tasks) check(task.await())
        }

        private fun link(round: CoroutineScope, k: Int, handed: Long) {
            if (k > 0) check(handed)
            val result = work()
            if (k + 1 == steps) check(result)
            else start(round) { link(round, k + 1, result) }
        }
    }
}
