/*
 * taskmeter Java driver, worker protocol v6 (protocol/README.md): runtime "java-thread" (one
 * platform thread per unit) and "java-virtual" (one virtual thread per unit). The flat plan
 * arrives on stdin; binary frames go to stdout, sample frames to the sample file (fd 3). JDK 17
 * or newer (java-virtual: JDK 21 or newer), standard library only.
 *
 * The protocol, the loop, the rings and the writer are shared with runtimes defined elsewhere:
 * an Engine says how a runtime's units start, wait and yield and how its tasks run, and
 * drivers/kotlin compiles this file beside its coroutines' Engine and calls serve().
 */

import java.io.*;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.*;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongConsumer;
import java.util.regex.*;

public final class TaskmeterDriver {
    private static final int PROTOCOL = 6;   // the worker protocol this driver speaks: the plan's, and H's
    private static final String THREAD = "java-thread", VIRTUAL = "java-virtual";
    private static final FileOutputStream OUT = new FileOutputStream(FileDescriptor.out);
    private static final AtomicLong COUNTER = new AtomicLong();          // atomic-sum: sequentially consistent
    private static final AtomicInteger RUNNING = new AtomicInteger();    // units started and not yet ended
    private static volatile boolean stop, interrupted;                   // stop: end of file on stdin
    private static volatile Throwable writeFailure;
    private static FileChannel samples;                                  // fd 3: set before the writer starts
    private static Thread writer;                                        // set before the first unit starts
    private static volatile boolean gateSent;                            // after G: no E frame, the writer runs

    /** An E frame (or, after G, a line on stderr), then this exit status. */
    private static final class Failure extends Exception {
        private static final long serialVersionUID = 1;
        final int status;

        Failure(int status, String message) {
            super(message, null, false, false);
            this.status = status;
        }
    }

    public static void main(String[] args) {
        serve(List.of(new Threads(THREAD), new Threads(VIRTUAL)));
    }

    /** Runs the plan on stdin with the engine it names, one of these, and exits. */
    public static void serve(List<? extends Engine> engines) {
        int status = 0;
        try {
            run(engines);
        } catch (Failure f) {
            status = f.status;
            report(f.getMessage());
        } catch (Throwable t) {
            status = 1;
            report("internal error: " + t);
        }
        System.exit(status);   // the stdin watcher and units still finishing must not keep the JVM alive
    }

    private static void report(String message) {
        try {
            if (!gateSent) {
                sendFrame('E', "{\"message\":" + q(message) + "}");
                return;
            }
        } catch (IOException e) {
            // stdout is gone: stderr is all that is left
        }
        System.err.println("taskmeter-java: " + message);
    }

    // ---------------------------------------------------------------- engines

    /**
     * A runtime this file hosts: how its units start, wait and are woken at the gate, and how
     * its tasks run. Everything else (the plan, the loop's steps, the rings, the writer, the
     * frames) is this file's, the same for every engine.
     */
    abstract static class Engine {
        final String id;

        protected Engine(String id) {
            this.id = id;
        }

        /** H.runtime_version. */
        protected String version() {
            return "Java " + System.getProperty("java.version") + " (" + System.getProperty("java.vendor", "unknown vendor") + ")";
        }

        /** Takes the plan's wait recipe for its units; false when the runtime has none of that name. */
        protected abstract boolean chooseWait(String wait);

        /** Before H: readies the runtime's machinery (a throw-away unit) and returns H.priority. */
        protected abstract String prime(Plan plan) throws Failure;

        /** What keeps the units below the kernel's limits, or null (units that are no threads). */
        protected ThreadLimit limit(Plan plan) {
            return null;
        }

        /** Runs the units' starter, or the granularity experiment's coordinator, and waits for it. */
        protected void coordinate(String name, Runnable body) throws InterruptedException {
            body.run();
        }

        /**
         * Starts unit u, which calls u.ready(), parks at the gate (Gate.park, or Gate.arrive and
         * its own wait until wake), runs the loop's steps and ends with u.ended(); throws when the
         * runtime cannot start it.
         */
        protected abstract void start(Unit u) throws Exception;

        /** Releases u from the gate (called once the gate is open, by the opener or a released unit). */
        protected abstract void wake(Unit u);

        /** The granularity experiment's tasks, of this runtime's kind. */
        protected abstract Tasks tasks(Map<String, String> plan);
    }

    /* Starts a thread of the factory's kind (Thread::new: platform) under the given name. */
    private static Thread start(ThreadFactory threads, String name, Runnable task) {
        Thread thread = threads.newThread(task);
        thread.setName(name);
        thread.start();
        return thread;
    }

    /** java-thread (a platform thread per unit) and java-virtual (a virtual thread per unit). */
    private static final class Threads extends Engine {
        private final boolean virtual;
        private ThreadFactory threads;
        private boolean priority;   // java-thread with two classes: each unit sets its own
        private LongConsumer recipe;   // null: the own sleep

        Threads(String id) {
            super(id);
            virtual = id.equals(VIRTUAL);
        }

        @Override
        protected boolean chooseWait(String wait) {
            recipe = (virtual ? Recipes.VIRTUAL : Recipes.THREAD).get(wait);
            return recipe != null || "sleep".equals(wait);
        }

        @Override
        protected String prime(Plan plan) throws Failure {
            threads = virtual ? virtualThreads() : Thread::new;
            String priority = primeThreads(threads, plan, virtual);
            this.priority = priority.startsWith("java");
            return priority;
        }

        @Override
        protected ThreadLimit limit(Plan plan) {
            return virtual ? null : new ThreadLimit(plan);   // virtual threads are no kernel threads
        }

        /*
         * Virtual threads started (or unparked) by a platform thread go to the pool's external
         * queue, which the carriers leave alone while their own queues have work: with the
         * schedule none, 8 of 10 units started by main never ran. Started from a virtual thread,
         * they go to a carrier's own queue.
         */
        @Override
        protected void coordinate(String name, Runnable body) throws InterruptedException {
            if (virtual) TaskmeterDriver.start(threads, name, body).join();
            else body.run();
        }

        @Override
        protected void start(Unit u) {
            u.handle = TaskmeterDriver.start(threads, "unit-" + u.id, () -> run(u));   // a thread the OS refuses: OutOfMemoryError
        }

        @Override
        protected void wake(Unit u) {
            LockSupport.unpark((Thread) u.handle);
        }

        @Override
        protected Tasks tasks(Map<String, String> plan) {
            return new ThreadTasks(threads, plan);
        }

        /** A unit's thread: its priority, its ring, the gate, then the loop with blocking waits. */
        private void run(Unit u) {
            Throwable failure = null;
            try {
                if (priority) Thread.currentThread().setPriority(u.cls == 0 ? Thread.MAX_PRIORITY : Thread.MIN_PRIORITY);
                u.ready();
                u.gate.park(u.index);
                final LongConsumer recipe = this.recipe;
                final boolean yield = u.plan.busyYield();
                for (u.enter(); u.begin(); u.end()) {
                    u.busied(busy(u.plan.busyIters(), yield));
                    if (!u.sleeps) {
                        Thread.yield();   // the schedule none: the same yield as busy_yield's
                    } else if (recipe != null) {   // a recipe waits until an absolute deadline
                        recipe.accept(u.intended);
                    } else {
                        // Java has no absolute-deadline sleep: sleep for what is left, if anything.
                        long ns = u.ownSleep();
                        if (ns >= 0) sleepFor(ns);
                    }
                }
            } catch (Throwable t) {
                failure = t;
            } finally {
                u.ended(failure);
            }
        }
    }

    /**
     * Thread.ofVirtual().factory(), looked up by reflection (once per run, java-virtual only) so
     * that this source compiles and runs on JDK 17 too, which has no virtual threads (JDK 19 and
     * 20 have them only as a preview: ofVirtual() throws there without --enable-preview).
     */
    private static ThreadFactory virtualThreads() throws Failure {
        try {
            Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
            return (ThreadFactory) Class.forName("java.lang.Thread$Builder").getMethod("factory").invoke(builder);
        } catch (ReflectiveOperationException e) {
            throw new Failure(2, VIRTUAL + " needs JDK 21 or newer; this is Java "
                + System.getProperty("java.version"));
        }
    }

    // ---------------------------------------------------------------- the plan

    enum Schedule { FIXED, BY_UNIT, MODULO, NONE }

    /**
     * The plan, already checked by the orchestrator: every integer below 2^53, so plain longs.
     * roomThreads and maxMapCount are the machine's room as the orchestrator started this worker,
     * -1 when unknown (null in the plan).
     */
    record Plan(boolean atomic, long units, int classes, long startLimit, long warmup,
                        long duration, boolean absolute, Schedule schedule, long sleepNs, long modulo, long busyIters,
                        boolean busyYield, int ring, long flush, long roomThreads, String roomThreadsWhy,
                        long maxMapCount) {
        static Plan of(Map<String, String> m) {
            return new Plan(m.get("experiment").equals("atomic-sum"),
                num(m, "units"), (int) num(m, "classes"), num(m, "start_limit_ns"), num(m, "warmup_ns"),
                num(m, "duration_ns"), m.get("mode").equals("absolute"),
                Schedule.valueOf(m.get("schedule").toUpperCase().replace('-', '_')), num(m, "sleep_ns"),
                num(m, "modulo"), num(m, "busy_iters"), m.get("busy_yield").equals("true"),
                Math.toIntExact(num(m, "ring")), num(m, "flush_ns"), orUnknown(m, "room_threads"),
                Objects.requireNonNull(m.get("room_threads_why"), "room_threads_why"), orUnknown(m, "max_map_count"));
        }

        private static long num(Map<String, String> m, String key) {
            return Long.parseLong(m.get(key));
        }

        private static long orUnknown(Map<String, String> m, String key) {
            return "null".equals(m.get(key)) ? -1 : num(m, key);
        }

        long expected(long u, long k) {
            return switch (schedule) {
                case BY_UNIT -> u * sleepNs;
                case MODULO -> (k % modulo + 1) * sleepNs;
                default -> sleepNs;
            };
        }
    }

    /* A flat JSON object of integers, booleans and plain strings (no escapes): key -> value text. */
    private static final Pattern PAIR = Pattern.compile("\"([^\"]*)\"\\s*:\\s*(\"[^\"]*\"|[^,}\\s]+)");

    private static Map<String, String> readPlan(FileInputStream in) throws IOException {
        // One byte at a time from the unbuffered descriptor: the stdin watcher reads the rest.
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        for (int c; (c = in.read()) >= 0 && c != '\n'; ) line.write(c);
        Map<String, String> plan = new HashMap<>();
        for (Matcher m = PAIR.matcher(line.toString(StandardCharsets.UTF_8)); m.find(); )
            plan.put(m.group(1), m.group(2).replaceAll("^\"|\"$", ""));
        return plan;
    }

    // ---------------------------------------------------------------- run

    private static void run(List<? extends Engine> engines) throws Exception {
        FileInputStream in = new FileInputStream(FileDescriptor.in);
        Map<String, String> map = readPlan(in);
        long planRead = System.nanoTime();   // start_limit_ns counts from here
        if (!String.valueOf(PROTOCOL).equals(map.get("protocol")))
            throw new Failure(2, "unsupported protocol " + map.get("protocol") + " (this worker speaks " + PROTOCOL + ")");
        String runtime = map.get("runtime");
        Engine engine = engines.stream().filter(e -> e.id.equals(runtime)).findFirst().orElseThrow(() -> new Failure(2,
            "runtime " + runtime + " is not served by this driver (" + String.join(", ", engines.stream().map(e -> e.id).toList()) + ")"));
        String wait = map.getOrDefault("wait", "sleep");   // "sleep": the runtime's own
        if (!engine.chooseWait(wait)) throw new Failure(2, "runtime " + runtime + " has no wait recipe " + wait);
        Plan plan;
        try {
            plan = Plan.of(map);
        } catch (RuntimeException e) {
            throw new Failure(2, "cannot read the plan: " + e);
        }

        String priority = engine.prime(plan);
        sendFrame('H', "{\"protocol\":" + PROTOCOL + ",\"runtime\":" + q(runtime) + ",\"runtime_version\":" + q(engine.version())
            + ",\"clock\":\"CLOCK_MONOTONIC\",\"pid\":" + ProcessHandle.current().pid()
            + ",\"priority\":" + q(priority) + ("sleep".equals(wait) ? "" : ",\"wait\":" + q(wait)) + "}");

        Thread watcher = new Thread(() -> {
            byte[] buf = new byte[256];
            try {
                while (in.read(buf) >= 0) { }   // anything after the plan is ignored
            } catch (IOException e) {
                // a read error stops the run like end of file
            }
            stop = true;
        }, "stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();
        if ("granularity".equals(map.get("experiment"))) {
            granularity(map, planRead, engine);
            return;
        }

        samples = openSampleFile();
        Writer w = new Writer(plan, new ArrayList<>(), ByteBuffer.allocateDirect(1 << 20).order(ByteOrder.LITTLE_ENDIAN));
        // Started now, while the OS still has a thread for it; it waits for the G frame.
        writer = new Thread(w, "writer");
        writer.start();
        w.named.await();   // its kernel name is set before G, when the orchestrator looks for it
        Gate gate = new Gate(engine);
        ThreadLimit limit = engine.limit(plan);
        List<Unit> units = w.units;
        String[] startError = {null};
        engine.coordinate("starter", () -> {
            gate.createStart = System.nanoTime();
            startError[0] = startUnits(engine, plan, planRead, gate, limit, units);
            if (!units.isEmpty()) gate.open(units, plan);
        });
        if (units.isEmpty()) throw new Failure(1, startError[0]);

        // A StringBuilder, not +: the first use of a string concatenation (invokedynamic) costs
        // 5-12 ms here, while the units already run.
        StringBuilder g = new StringBuilder("{\"create_start_ns\":").append(gate.createStart)
            .append(",\"run_start_ns\":").append(gate.runStart).append(",\"units\":").append(units.size());
        if (startError[0] != null) g.append(",\"start_error\":").append(q(startError[0]));
        sendFrame('G', g.append('}').toString());
        gateSent = true;
        LockSupport.unpark(writer);
        writer.join();   // it ends after every unit has ended (RUNNING is 0) and its final drain
        if (writeFailure != null) throw new Failure(1, "cannot write the samples: " + writeFailure);

        for (Unit u : units) {
            if (u.failure != null) throw new Failure(1, "unit " + u.id + " failed: " + u.failure);
            // Binary, 36 bytes: unit (u32), origin, iterations, measured iterations, lost (u64).
            frame('U', ByteBuffer.allocate(36).order(ByteOrder.LITTLE_ENDIAN).putInt(u.id).putLong(u.origin)
                .putLong(u.iterations).putLong(u.measured).putLong(u.lost).array());
        }
        Unit ran = units.stream().filter(u -> u.busyRan).findFirst().orElse(null);
        long result = ran != null ? ran.busyResult : busy(plan.busyIters(), false);   // no unit ran a busy phase
        sendFrame('D', "{\"interrupted\":" + interrupted + ",\"busy_result\":\"" + Long.toUnsignedString(result) + "\""
            + (plan.atomic() ? ",\"atomic_sum\":" + COUNTER.get() : "") + "}");
    }

    /*
     * Starts units 1, 2, ... in order, each parking at the gate, and adds them to units; returns
     * why the rest was not started, or null. Before unit id > 1: the start limit, a stop request
     * and (java-thread) the kernel's limits. Unit 1 that cannot be started leaves units empty.
     */
    private static String startUnits(Engine engine, Plan plan, long planRead, Gate gate, ThreadLimit limit,
                                     List<Unit> units) {
        Slabs slabs = new Slabs();
        for (long id = 1; id <= plan.units(); id++) {
            if (id > 1) {
                if (System.nanoTime() - planRead >= plan.startLimit())
                    return "start limit of " + plan.startLimit() + " ns reached after " + (id - 1) + " units";
                if (stop) {
                    interrupted = true;
                    return "stop requested (end of file on stdin) after " + (id - 1) + " units";
                }
                String refused = limit == null ? null : limit.refuses(id, gate);
                if (refused != null) return refused;
            }
            try {
                int ringLongs = plan.schedule() == Schedule.NONE ? 0 : Math.multiplyExact(4, plan.ring());
                Unit u = new Unit(plan, (int) id, units.size(), gate, slabs, ringLongs, plan.units() - id + 1);
                engine.start(u);
                units.add(u);   // read by the units only once the gate is open
                RUNNING.incrementAndGet();
            } catch (Throwable t) {
                return "could not start unit " + id + ": " + t;
            }
        }
        return null;
    }

    /**
     * Hands out the rings as slices of a few large arrays: G1 never copies arrays that large
     * (humongous), whereas 100k small arrays would be copied by its young collections while
     * measuring (pauses of several hundred ms when each unit had arrays of its own).
     */
    private static final class Slabs {
        private static final int SLAB = 1 << 21;   // longs: 16 MiB
        long[] slab = new long[0];
        int used;

        int take(int n, long unitsLeft) {
            if (slab.length - used < n) {
                slab = new long[(int) Math.min(Math.max(n, SLAB), n * Math.min(unitsLeft, SLAB))];
                used = 0;
            }
            used += n;
            return used - n;
        }
    }

    /**
     * The start gate: every unit parks here once its priority and ring are ready; when all the
     * units started have arrived (a semaphore), the starter reads run_start and opens the gate
     * (a volatile flag, with LockSupport.park). Releasing is a tree: the starter unparks unit 1,
     * and every released unit unparks two more before its loop starts, so the release takes
     * log2(N) wake-ups in a row. One thread unparking all of them (or a CountDownLatch, which
     * wakes its waiters as a chain) competes for the CPU with the units already running: with
     * 8,000 platform threads at 1 ms sleeps, the median unit left the gate 1.8 s after it opened
     * that way, and 0.5 s with the tree.
     */
    static final class Gate {
        final Engine engine;
        final Semaphore arrivals = new Semaphore(0);
        volatile boolean open;
        long createStart, runStart, measureStart, end;   // written before open is set
        List<Unit> units;                                // likewise

        Gate(Engine engine) {
            this.engine = engine;
        }

        /* Blocks until n units have arrived (the starter only; open takes the permits later). */
        void awaitArrivals(int n) {
            arrivals.acquireUninterruptibly(n);
            arrivals.release(n);
        }

        /* Called by each unit on its own thread; index: its place in the list of units started. */
        void park(int index) {
            arrive();
            while (!open) LockSupport.park(this);
            release(2 * index + 1);
            release(2 * index + 2);
        }

        /* A unit is ready; it then waits until its engine wakes it (park, or its own wait). */
        void arrive() {
            arrivals.release();
        }

        void open(List<Unit> started, Plan plan) {
            arrivals.acquireUninterruptibly(started.size());
            runStart = System.nanoTime();
            measureStart = runStart + plan.warmup();
            end = measureStart + plan.duration();
            units = started;
            open = true;
            release(0);
        }

        private void release(int index) {
            if (index < units.size()) engine.wake(units.get(index));
        }
    }

    /**
     * Keeps java-thread below the kernel's limits, which HotSpot does not survive: at
     * vm.max_map_count it aborts (hs_err: a new thread cannot map its stack guard pages), at the
     * thread limits it gets no thread for its own GC and compiler threads. Two bounds, from the
     * figures the orchestrator measured as it started this worker (the plan's room_threads,
     * 1/32 already left to other processes, and max_map_count): threads, the room less 16 + 2
     * per core for the JVM's own; memory maps, this process's own counted at checkpoints once the
     * units started so far are parked, with the cost of a unit measured and at most half of the
     * room left spent before the next checkpoint.
     */
    static final class ThreadLimit {
        private static final long SPARE_MAPS = 2048;
        private long maxUnits = Long.MAX_VALUE;
        private String threadReason;
        private final long mapLimit;
        private long baseMaps = -1, baseUnits, nextCheck = 2;

        ThreadLimit(Plan plan) {
            mapLimit = plan.maxMapCount();
            long room = plan.roomThreads();
            if (room < 0) return;   // unknown
            long own = 16 + 2L * Runtime.getRuntime().availableProcessors();
            maxUnits = Math.max(room - own, 1);
            threadReason = "java-thread stops at " + maxUnits + " units: at the kernel's thread limits the JVM gets no "
                + "thread for its own GC and compiler threads, so the driver stays below them: the plan leaves room for "
                + room + " threads, of which " + own + " are kept for the JVM's own threads; " + plan.roomThreadsWhy();
        }

        /* Why unit id (> 1) must not be started, or null. */
        String refuses(long id, Gate gate) {
            if (id > maxUnits) return threadReason;
            if (mapLimit < 0 || id < nextCheck) return null;
            long started = id - 1;
            gate.awaitArrivals((int) started);
            long inUse = lines("/proc/self/maps").size();
            double perUnit = 4;   // a first guess, before one unit has been measured
            if (baseMaps < 0) {
                baseMaps = inUse;
                baseUnits = started;
            } else if (started > baseUnits) {
                perUnit = Math.max(1, (double) (inUse - baseMaps) / (started - baseUnits));
            }
            long left = (long) (Math.max(0, mapLimit - inUse - SPARE_MAPS) / perUnit);
            if (left == 0)
                return String.format("java-thread stops before unit %d: %d memory maps in use, %.1f per unit measured, "
                    + "and vm.max_map_count is %d (HotSpot aborts when it cannot map a new thread's stack guard pages or "
                    + "grow its heap)", id, inUse, perUnit, mapLimit);
            nextCheck = id + Math.max(1, left / 2);
            return null;
        }
    }

    /* The lines of a file, or none. Not Files.readString: it reads only the first byte of a /proc/sys file. */
    private static List<String> lines(String path) {
        try {
            return Files.readAllLines(Path.of(path));
        } catch (IOException | RuntimeException e) {
            return List.of();
        }
    }

    /*
     * Start, sleep, yield and join one throw-away thread of the runtime before run_start, so the
     * first unit does not pay for loading the machinery (virtual threads: tens of ms in a fresh
     * JVM). With two classes, java-thread also probes what Thread.setPriority really does (nice
     * values only with -XX:ThreadPriorityPolicy=1, as root). Returns H.priority.
     */
    private static String primeThreads(ThreadFactory threads, Plan plan, boolean virtual) throws Failure {
        boolean probe = plan.classes() == 2 && !virtual;
        int[] nice = new int[3];   // before, after MAX_PRIORITY, after MIN_PRIORITY
        try {
            start(threads, "prime", () -> {
                busy(1, true);
                sleepFor(1);
                sleepFor(0);
                if (probe) {
                    nice[0] = niceOfThisThread();
                    Thread.currentThread().setPriority(Thread.MAX_PRIORITY);
                    nice[1] = niceOfThisThread();
                    Thread.currentThread().setPriority(Thread.MIN_PRIORITY);
                    nice[2] = niceOfThisThread();
                }
            }).join();
        } catch (Throwable t) {
            throw new Failure(1, "cannot start a thread: " + t);
        }
        if (plan.classes() == 1) return "none";
        if (virtual) return "none: virtual threads have no priority (Thread.setPriority does nothing on them)";
        String set = "java: Thread.setPriority " + Thread.MAX_PRIORITY + "/" + Thread.MIN_PRIORITY;
        if (Math.min(nice[0], Math.min(nice[1], nice[2])) == Integer.MIN_VALUE)
            return set + " (effect unknown: /proc/thread-self/stat not readable)";
        if (nice[1] == nice[0] && nice[2] == nice[0])
            return set + " ignored by HotSpot (nice unchanged at " + nice[0] + "; it needs -XX:ThreadPriorityPolicy=1 as root)";
        return set + " -> nice " + nice[1] + "/" + nice[2];
    }

    /* Field 19 of /proc/thread-self/stat (counted after the name, which may hold spaces), or MIN_VALUE. */
    private static int niceOfThisThread() {
        try {
            String stat = Files.readString(Path.of("/proc/thread-self/stat"));
            return Integer.parseInt(stat.substring(stat.lastIndexOf(')') + 2).split(" ")[19 - 3]);
        } catch (IOException | RuntimeException e) {
            return Integer.MIN_VALUE;
        }
    }

    // ---------------------------------------------------------------- the granularity experiment

    private static volatile long sink;   // keeps a timed busy() the JIT would otherwise drop

    /**
     * The granularity experiment's tasks (protocol: "The granularity experiment"): what every
     * engine's tasks share (the work, its check, the counts, the serial measurement); round()
     * runs one round the engine's way.
     */
    abstract static class Tasks {
        final String pattern;
        final int width, steps;
        final long[] results;
        final AtomicLong started = new AtomicLong(), completed = new AtomicLong(), wrong = new AtomicLong();
        // Volatile: the JIT may not hoist busy(iters), whose result depends on iters alone, out
        // of the serial loop (it did: 1 % efficiency at 20 us).
        volatile long iters;
        long expected;   // set before the tasks start, which publishes it

        protected Tasks(Map<String, String> m) {
            pattern = m.get("pattern");
            width = Integer.parseInt(m.get("width"));
            steps = Integer.parseInt(m.get("steps"));
            results = new long[width * steps];
        }

        /** One round of the plan's pattern, every task of it ended. */
        protected abstract void round() throws Exception;

        /** How many tasks can run busy work at the same time (P.cores). */
        protected int cores() {
            return Runtime.getRuntime().availableProcessors();
        }

        void check(long result) {
            if (result != expected) wrong.incrementAndGet();
        }

        /** A task's body: the busy work, counted once it has returned. */
        long work() {
            long result = busy(iters, false);
            completed.incrementAndGet();
            return result;
        }

        /** Serial: busy(iters) one call after another until calibrate has passed, the clock read
            only between batches, so it is not counted as work: {calls, ns}. */
        long[] serial(long calibrate) {
            long batch = Math.max(10000 / iters, 1), calls = 0, ns = 0, start = System.nanoTime();
            while (ns < calibrate) {
                for (long i = 0; i < batch; i++) check(busy(iters, false));
                calls += batch;
                ns = System.nanoTime() - start;
            }
            return new long[] {calls, ns};
        }
    }

    /**
     * A new thread per task (platform or virtual, as the units), joined, its result in a slot; a
     * chain's next thread is started by its predecessor with its result, and each chain's last
     * one counts a latch down.
     */
    private static final class ThreadTasks extends Tasks {
        final ThreadFactory factory;
        final Thread[] threads;
        volatile Throwable failure;   // a chain's task that could not start the next

        ThreadTasks(ThreadFactory factory, Map<String, String> m) {
            super(m);
            this.factory = factory;
            threads = new Thread[width * steps];
        }

        Thread start(Runnable body) {
            started.incrementAndGet();
            Thread thread = factory.newThread(body);   // unnamed: no setName per task
            thread.start();
            return thread;
        }

        void startAndJoin(int n) throws InterruptedException {
            for (int i = 0; i < n; i++) {
                int slot = i;
                threads[i] = start(() -> results[slot] = work());
            }
            for (int i = 0; i < n; i++) threads[i].join();
            for (int i = 0; i < n; i++) check(results[i]);
        }

        void link(int k, long handed, CountDownLatch ended) {
            if (k > 0) check(handed);
            long result = work();
            if (k + 1 == steps) {
                check(result);
                ended.countDown();
                return;
            }
            try {
                start(() -> link(k + 1, result, ended));
            } catch (Throwable e) {   // e.g. no native thread left: the round ends with the reason
                failure = e;
                ended.countDown();
            }
        }

        @Override
        protected void round() throws Exception {
            switch (pattern) {
                case "trivial" -> startAndJoin(width * steps);
                case "stencil" -> {
                    for (int s = 0; s < steps; s++) startAndJoin(width);
                }
                default -> {
                    CountDownLatch ended = new CountDownLatch(width);
                    for (int j = 0; j < width; j++) start(() -> link(0, 0, ended));
                    ended.await();
                    if (failure != null) throw new Failure(1, "cannot start a task's thread: " + failure);
                }
            }
        }
    }

    private static long timed(long n) {
        long start = System.nanoTime();
        sink = busy(n, false);
        return System.nanoTime() - start;
    }

    /** The grains, one P frame each; the coordinator runs on the calling thread. */
    private static void measureGrains(Map<String, String> m, Tasks t) throws Exception {
        long calibrate = Long.parseLong(m.get("calibrate_ns")), warmup = Long.parseLong(m.get("warmup_ns"));
        long duration = Long.parseLong(m.get("duration_ns"));
        int cores = t.cores();
        long n = 1024;
        while (timed(n) < calibrate / 4) n *= 2;
        // The JIT compiles busy() in the background while it is timed (the first rates here
        // were 12 times too slow): the shortest of three, again and again, for at least 200 ms
        // and until 20 times in a row found nothing 5 % faster (at most 2 s).
        long shortest = Long.MAX_VALUE, since = System.nanoTime();
        for (int unchanged = 0; unchanged < 20 || System.nanoTime() - since < 200_000_000L; unchanged++) {
            long best = Math.min(timed(n), Math.min(timed(n), timed(n)));
            if (best < shortest * 0.95) unchanged = -1;
            shortest = Math.min(shortest, best);
            if (System.nanoTime() - since > 2_000_000_000L) break;
        }
        double perIter = (double) Math.max(shortest, 1) / n;
        for (String text : m.get("grains_ns").split(",")) {
            long grain = Long.parseLong(text);
            t.iters = Math.max(Math.round(grain / perIter), 1);
            t.expected = busy(t.iters, false);
            long[] serial = t.serial(calibrate);
            long warmStart = System.nanoTime();
            do {
                t.round();
                if (stop) return;
            } while (System.nanoTime() - warmStart < warmup);
            long started = t.started.get(), completed = t.completed.get(), wrong = t.wrong.get();
            long rounds = 0, wall = 0, start = System.nanoTime();
            while (wall < duration) {
                t.round();
                rounds++;
                wall = System.nanoTime() - start;
                if (stop) return;
            }
            started = t.started.get() - started;
            completed = t.completed.get() - completed;
            wrong = t.wrong.get() - wrong;
            // The task alone again, after its rounds: one of the two may have been disturbed.
            long[] after = t.serial(calibrate);
            sendFrame('P', new StringBuilder("{\"grain_ns\":").append(grain).append(",\"iters\":").append(t.iters)
                .append(",\"busy_result\":\"").append(Long.toUnsignedString(t.expected)).append("\",\"serial_tasks\":").append(serial[0])
                .append(",\"serial_ns\":").append(serial[1]).append(",\"serial_after_tasks\":").append(after[0])
                .append(",\"serial_after_ns\":").append(after[1]).append(",\"rounds\":").append(rounds)
                .append(",\"tasks\":").append(started).append(",\"completed\":").append(completed)
                .append(",\"wrong\":").append(wrong).append(",\"wall_ns\":").append(wall)
                .append(",\"cores\":").append(cores).append('}').toString());
        }
    }

    /** G, the grains (java-virtual's coordinator a virtual thread, as its units' starter), D. */
    private static void granularity(Map<String, String> m, long planRead, Engine engine) throws Exception {
        sendFrame('G', "{\"create_start_ns\":" + planRead + ",\"run_start_ns\":" + System.nanoTime() + ",\"units\":1}");
        gateSent = true;
        Tasks t = engine.tasks(m);
        Throwable[] failed = {null};
        Runnable coordinator = () -> {
            try {
                measureGrains(m, t);
            } catch (Throwable e) {
                failed[0] = e;
            }
        };
        engine.coordinate("coordinator", coordinator);
        if (failed[0] instanceof Failure f) throw f;
        if (failed[0] != null) throw new Failure(1, "the granularity experiment failed: " + failed[0]);
        sendFrame('D', "{\"interrupted\":" + stop + ",\"busy_result\":\"0\"}");
    }

    // ---------------------------------------------------------------- frames

    private static final ByteArrayOutputStream PENDING = new ByteArrayOutputStream();

    /* A JSON frame, kept until sendFrame. */
    private static void frame(char kind, String json) throws IOException {
        frame(kind, json.getBytes(StandardCharsets.UTF_8));
    }

    /* A frame, kept until sendFrame (the U frames of 100k units go out in few writes). */
    private static void frame(char kind, byte[] payload) throws IOException {
        PENDING.write(ByteBuffer.allocate(5).order(ByteOrder.LITTLE_ENDIAN).put((byte) kind).putInt(payload.length).array());
        PENDING.write(payload);
        if (PENDING.size() > 1 << 20) sendFrame(kind, null);
    }

    private static void sendFrame(char kind, String json) throws IOException {
        if (json != null) frame(kind, json);
        PENDING.writeTo(OUT);
        PENDING.reset();
    }

    /* A JSON string: quotes, backslashes and control characters escaped. */
    private static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : String.valueOf(s).toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    /*
     * The sample file, fd 3: Java cannot write to a descriptor by its number, so the same file is
     * opened again, for appending. Only if fd 3 is open for appending, as taskmeter opens it: in a
     * JVM started without it, fd 3 is one of the JVM's own files (lib/modules, read-only), which
     * root could open for writing.
     */
    private static FileChannel openSampleFile() throws Failure {
        try {
            Matcher m = Pattern.compile("flags:\\s*([0-7]+)").matcher(Files.readString(Path.of("/proc/self/fdinfo/3")));
            long flags = m.find() ? Long.parseLong(m.group(1), 8) : 0;
            if ((flags & 02000) == 0 || (flags & 3) == 0)   // O_APPEND, and not O_RDONLY
                throw new IOException("flags " + Long.toOctalString(flags));
            return FileChannel.open(Path.of("/proc/self/fd/3"), StandardOpenOption.WRITE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new Failure(2, "fd 3, the sample file, is not open for appending (taskmeter opens it for every"
                + " worker it starts): " + e);
        }
    }

    /*
     * Appends frames (the buffer from 0 to its position) to the sample file in one write(2):
     * FileChannel.write of a direct buffer is one call (again only after EINTR, which wrote
     * nothing), so frames written at once by the writer and by units never interleave. A short
     * write is a failure, never continued: its rest would land after another thread's frames.
     */
    private static void append(ByteBuffer frames) throws IOException {
        frames.flip();
        try {
            int size = frames.remaining(), n = samples.write(frames);
            if (n != size) throw new IOException("the sample file took " + n + " of " + size + " bytes");
        } finally {
            frames.clear();
        }
    }

    /*
     * Puts an S or F frame of the unit's samples of positions first .. first + n - 1 (n <= ring)
     * into buf: one bulk copy, two when they wrap around the ring's end.
     */
    private static void putSamples(ByteBuffer buf, char kind, Unit u, long first, int n) {
        buf.put((byte) kind).putInt(24 + 32 * n).putInt(u.id).putInt(n).putLong(u.origin).putLong(first);
        int ring = u.plan.ring(), at = (int) (first % ring), before = Math.min(n, ring - at);
        buf.asLongBuffer().put(u.slab, u.base + 4 * at, 4 * before).put(u.slab, u.base, 4 * (n - before));
        buf.position(buf.position() + 32 * n);
    }

    /**
     * The one writer, on a platform thread of its own: every flush_ns (a timed park that the last
     * unit to end cuts short) it appends what each ring holds to the sample file as S frames,
     * through one little-endian buffer of 1 MiB; once every unit has ended, it drains once more
     * and stops.
     */
    private record Writer(Plan plan, List<Unit> units, ByteBuffer buf, CountDownLatch named) implements Runnable {
        Writer(Plan plan, List<Unit> units, ByteBuffer buf) {
            this(plan, units, buf, new CountDownLatch(1));
        }

        /** Names this thread tm-writer as the kernel sees it: the orchestrator finds it by that
            name and runs it above the units (protocol: "The writer"). */
        private static void nameThread() {
            try {
                Files.writeString(Path.of("/proc/thread-self/comm"), "tm-writer");
            } catch (IOException | RuntimeException e) {
                // not Linux: the orchestrator does not find it, and says so
            }
        }

        @Override
        public void run() {
            nameThread();
            named.countDown();
            while (!gateSent) LockSupport.park();
            try {
                while (true) {
                    long wake = System.nanoTime() + plan.flush();
                    for (long left; RUNNING.get() > 0 && (left = wake - System.nanoTime()) > 0; ) LockSupport.parkNanos(left);
                    boolean last = RUNNING.get() == 0;
                    for (Unit u : units) drain(u);
                    write();
                    if (last) return;
                }
            } catch (Throwable e) {   // e.g. the orchestrator is gone: stop the units too
                writeFailure = e;
                stop = true;
            }
        }

        /*
         * The samples from the unit's tail up to its head (acquire loads), as S frames of as many
         * as the buffer holds: each copied first, then kept only if tail still is where it was
         * read (compare-and-swap to the end of the copy). If not, the unit took those samples
         * itself meanwhile and may be overwriting their slots: the copy is thrown away.
         */
        private void drain(Unit u) throws IOException {
            long t = u.cursor.getAcquire(1), head = u.cursor.getAcquire(0);
            while (t < head) {
                int n = (int) Math.min(head - t, (buf.remaining() - 29) / 32);
                if (n <= 0) {   // the buffer is full of frames already taken: send them
                    write();
                    continue;
                }
                int before = buf.position();
                putSamples(buf, 'S', u, t, n);
                if (!u.cursor.compareAndSet(1, t, t + n)) {
                    buf.position(before);
                    return;
                }
                t += n;
            }
        }

        private void write() throws IOException {
            if (buf.position() > 0) append(buf);
        }
    }

    // ---------------------------------------------------------------- measurement

    /*
     * The protocol's busy work: long arithmetic wraps modulo 2^64, the unsigned / 2 is >>> 1. No
     * black_box is needed: each step depends on the last through a non-affine map (no closed form
     * for the JIT to find) and the result is reported, so the loop can be neither folded nor dropped.
     */
    static long busy(long iters, boolean yield) {
        long total = 0;
        for (long i = 0; i < iters; i++) {
            total = busyStep(total);
            if (yield) Thread.yield();
        }
        return total;
    }

    /* One step of the busy work, for an engine whose yield is its own (a coroutine's suspends). */
    static long busyStep(long total) {
        total = total + 1;
        return (total * 3) >>> 1;
    }

    /*
     * A relative sleep, never early: Thread.sleep(millis, nanos), since JDK 21 the same nanosecond
     * sleep as Thread.sleep(Duration); before (JDK-8305092) it rounds up to whole milliseconds.
     */
    private static void sleepFor(long nanos) {
        long until = System.nanoTime() + nanos;
        while (true) {
            try {
                Thread.sleep(nanos / 1_000_000, (int) (nanos % 1_000_000));
                return;
            } catch (InterruptedException e) {   // nothing interrupts a unit; if something did, sleep the rest
                if ((nanos = until - System.nanoTime()) <= 0) return;
            }
        }
    }

    /**
     * Wait recipes (protocol: "Wait recipes"): other ways for a unit to wait until an absolute
     * deadline of System.nanoTime() (CLOCK_MONOTONIC on Linux), each a method to copy into a
     * program. The plan's "wait" names one; none repeats the runtime's own sleep, Thread.sleep(millis,
     * nanos) (since JDK 21 the same call as Thread.sleep(Duration); on a virtual thread both are
     * LockSupport.parkNanos, so java-virtual has no park-nanos).
     */
    static final class Recipes {
        static final Map<String, LongConsumer> THREAD = Map.of("sleep-millis", Recipes::sleepMillisUntil,
            "park-nanos", Recipes::parkNanosUntil, "scheduled-executor", Recipes::scheduledUntil,
            "spin", Recipes::spinUntil, "hybrid", Recipes::hybridUntil);
        static final Map<String, LongConsumer> VIRTUAL = Map.of("sleep-millis", Recipes::sleepMillisUntil,
            "scheduled-executor", Recipes::scheduledUntil, "spin", Recipes::spinUntil, "hybrid", Recipes::hybridUntil);

        /* How long before the deadline hybridUntil stops parking: above a park's usual lateness
           (tens of µs for a platform thread, more for a virtual one, which its carrier must pick up). */
        static final long HYBRID_MARGIN_NS = 200_000;

        /* Thread.sleep(long millis), the way before JDK 21: whole ms, rounded up so it never wakes early. */
        static void sleepMillisUntil(long deadline) {
            for (long left; (left = deadline - System.nanoTime()) > 0; ) {
                try {
                    Thread.sleep((left + 999_999) / 1_000_000);
                } catch (InterruptedException e) {   // nothing interrupts a unit; if something did, wait the rest
                }
            }
        }

        /* LockSupport.parkNanos for what is left, again after an early return (parks may wake spuriously). */
        static void parkNanosUntil(long deadline) {
            for (long left; (left = deadline - System.nanoTime()) > 0; ) LockSupport.parkNanos(left);
        }

        /* One timer thread for the whole worker (made on first use), as a program shares one executor. */
        static final class Timer {
            static final ScheduledExecutorService EXECUTOR = Executors.newSingleThreadScheduledExecutor(task -> {
                Thread timer = new Thread(task, "tm-recipe-timer");
                timer.setDaemon(true);
                return timer;
            });
        }

        /* A no-op task scheduled on the shared executor for what is left, and a wait on its future. */
        static void scheduledUntil(long deadline) {
            for (long left; (left = deadline - System.nanoTime()) > 0; ) {
                try {
                    Timer.EXECUTOR.schedule(() -> { }, left, TimeUnit.NANOSECONDS).get();
                } catch (InterruptedException | ExecutionException e) {   // a no-op fails not; wait the rest
                }
            }
        }

        /* Reads the clock until the deadline (Thread.onSpinWait between reads): one core per
           waiting unit; a virtual thread also keeps its carrier from every other virtual thread. */
        static void spinUntil(long deadline) {
            while (System.nanoTime() - deadline < 0) Thread.onSpinWait();
        }

        /* parkNanosUntil HYBRID_MARGIN_NS before the deadline, then spinUntil. */
        static void hybridUntil(long deadline) {
            parkNanosUntil(deadline - HYBRID_MARGIN_NS);
            spinUntil(deadline);
        }
    }

    /**
     * One unit: its state and the work loop's steps, which its engine runs around its own wait
     * and yield, so that every engine runs the loop of the protocol README line for line:
     *
     *     u.ready(); (the gate); for (u.enter(); u.begin(); u.end()) { u.busied(busy); wait or yield }
     *
     * then u.ended(failure). It fills its ring (the writer drains it; the unit writes it itself
     * when it finds it full). No I/O and no allocation while timed but in the write of a full ring.
     */
    static final class Unit {
        final Plan plan;
        final int id, index, cls;   // index: in the list of units started (the gate's tree)
        final Gate gate;
        final long[] slab;          // the ring: 4 longs per sample from base
        final int base, ringLongs;
        final boolean sleeps, absolute;
        Object handle;              // what its engine started (java-*: its thread)
        // head (put by the unit), tail (moved by compareAndSet by the writer or the unit, whichever takes)
        final AtomicLongArray cursor = new AtomicLongArray(2);
        long origin, iterations, measured, lost, busyResult;
        boolean busyRan;
        Throwable failure;
        ByteBuffer own;   // the F frame of a full ring: made at the first one, direct (written without a copy)
        // The loop's state between its steps: period k, the next absolute deadline, the head put;
        // t0, t1 and the expected sleep e of the iteration running; intended: its deadline.
        private long k, next, head, t0, t1, e;
        long intended;

        Unit(Plan plan, int id, int index, Gate gate, Slabs slabs, int ringLongs, long unitsLeft) {
            this.plan = plan;
            this.id = id;
            this.index = index;
            this.cls = (id - 1) % plan.classes();
            this.gate = gate;
            this.ringLongs = ringLongs;
            this.base = slabs.take(ringLongs, unitsLeft);
            this.slab = slabs.slab;
            this.sleeps = plan.schedule() != Schedule.NONE;
            this.absolute = plan.absolute();
        }

        /* Before the gate, on the unit's own thread: every slot of the ring written now, so
           storing a sample never touches a page first. */
        void ready() {
            Arrays.fill(slab, base, base + ringLongs, -1L);
        }

        /* Out of the gate: the origin (published to the writer by the first head). */
        void enter() {
            origin = System.nanoTime();
            next = origin + plan.expected(id, 0);
        }

        /* t0; false when the loop ends (end reached, or a stop was requested). */
        boolean begin() {
            t0 = System.nanoTime();
            if (t0 >= gate.end) return false;
            if (stop) {
                interrupted = true;
                return false;
            }
            return true;
        }

        /* After the busy work (busy(busy_iters), result): t1, and this iteration's deadline. */
        void busied(long result) {
            t1 = t0;
            if (plan.busyIters() > 0) {
                busyResult = result;
                busyRan = true;
                t1 = System.nanoTime();
            }
            e = plan.expected(id, k);
            intended = absolute ? next : t1 + e;
        }

        /* The runtime's own relative sleep of this iteration in ns, or -1: none (absolute mode,
           the deadline has passed). */
        long ownSleep() {
            if (!absolute) return e;
            long left = next - System.nanoTime();
            return left > 0 ? left : -1;
        }

        /* After the wait (t2) or the yield: the periods, the counts and the sample. */
        void end() {
            long t2 = 0;
            if (sleeps) {
                t2 = System.nanoTime();
                k++;
                if (absolute) {   // skip the deadlines passed (the orchestrator counts them from intended)
                    next += plan.expected(id, k);
                    while (t2 > next) {
                        k++;
                        next += plan.expected(id, k);
                    }
                }
            }
            if (plan.atomic()) COUNTER.incrementAndGet();
            iterations++;
            if (t0 >= gate.measureStart) measured++;
            if (sleeps) {
                long t = cursor.getAcquire(1), h = head;
                if (h - t == plan.ring()) lost += writeOwnRing(t, h);   // never wait for the writer
                int at = base + (int) (h % plan.ring()) * 4;
                long[] r = slab;
                r[at] = t0;
                r[at + 1] = t1;
                r[at + 2] = intended;
                r[at + 3] = t2;
                cursor.setRelease(0, head = h + 1);
            }
        }

        /* Last, whether the loop ended or failed: a failure stops every unit. */
        void ended(Throwable failure) {
            if (failure != null) {
                this.failure = failure;
                stop = true;
            }
            if (RUNNING.decrementAndGet() == 0) LockSupport.unpark(writer);
        }

        /*
         * The ring is full (the writer fell behind): takes it (tail from t to head, unless the
         * writer took it meanwhile: then there is room) and appends it to the sample file as one F
         * frame. The slots stay the unit's until its next sample, so the copy is whole. Returns
         * the samples lost: those of a failed write.
         */
        private long writeOwnRing(long t, long head) {
            if (!cursor.compareAndSet(1, t, head)) return 0;
            if (own == null) own = ByteBuffer.allocateDirect(29 + 32 * plan.ring()).order(ByteOrder.LITTLE_ENDIAN);
            putSamples(own, 'F', this, t, (int) (head - t));
            try {
                append(own);
                return 0;
            } catch (IOException e) {
                return head - t;
            }
        }
    }
}
