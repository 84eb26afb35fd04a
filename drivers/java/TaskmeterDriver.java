/*
 * taskmeter Java driver, runtime ids "java-thread" (one platform thread per unit) and
 * "java-virtual" (one virtual thread per unit). Implements worker protocol v2
 * (protocol/README.md): the plan as one JSON line on stdin, NDJSON on stdout.
 * Build and run: javac -d classes TaskmeterDriver.java && java -cp classes TaskmeterDriver
 * Standard library only (JDK 21 or newer, for virtual threads).
 */

import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Collectors;
import javax.management.ObjectName;

public final class TaskmeterDriver {
    private static final String THREAD = "java-thread";
    private static final String VIRTUAL = "java-virtual";
    private static final int MAX_PLAN = 1 << 20;           // bytes in the plan line
    private static final int MAX_DEPTH = 64;               // JSON nesting; bounds the parser's recursion
    private static final int MAX_ARRAY = Integer.MAX_VALUE - 8;
    /* The protocol's budget of samples reserved before the gate, all units together: 4 Mi samples of 48 bytes. */
    private static final long RESERVE_BUDGET = 4L << 20;
    private static final int NICE_UNREAD = Integer.MIN_VALUE;

    /* Set by the stdin watcher, the units and the main thread; read by every unit once per iteration. */
    private static volatile boolean stopRequested;
    private static volatile boolean interrupted;
    private static volatile boolean aborted;

    /* The counter of "atomic-sum", shared by every unit (AtomicLong: sequentially consistent). */
    private static final AtomicLong COUNTER = new AtomicLong();

    private TaskmeterDriver() {}

    public static void main(String[] args) {
        Out out = new Out();
        int status;
        try {
            status = run(out);
        } catch (Failure f) {
            status = f.status;
            out.error(f.getMessage());
        } catch (IOException e) {
            status = 1;
            System.err.println("taskmeter-java: cannot write the results: " + e.getMessage());
        } catch (OutOfMemoryError e) {
            status = 1;
            out.error("out of memory: " + e.getMessage());
        } catch (Throwable t) {
            status = 1;
            out.error("internal error: " + t);
        }
        System.exit(status);   // the stdin watcher must not keep the JVM alive
    }

    /** An error line, then this exit status: 2 for a refused plan, 1 for a failure. */
    private static final class Failure extends Exception {
        private static final long serialVersionUID = 1L;
        final int status;

        Failure(int status, String message) {
            super(message, null, false, false);
            this.status = status;
        }
    }

    private static Failure refusal(String message) {
        return new Failure(2, message);
    }

    // ---------------------------------------------------------------- run

    private static int run(Out out) throws Failure, IOException {
        FileInputStream in = new FileInputStream(FileDescriptor.in);   // unbuffered, unlike System.in
        byte[] line = readPlan(in);
        long planRead = System.nanoTime();   // start_limit_ns counts from here
        Plan plan = Plan.load(JsonParser.parse(line));

        logToStderr();
        Thread.Builder builder = plan.virtual() ? Thread.ofVirtual() : Thread.ofPlatform();
        Priority priority = prime(builder, plan);

        out.ascii("{\"type\":\"hello\",\"protocol\":2,\"runtime\":").string(plan.runtime())
            .ascii(",\"runtime_version\":").string(runtimeVersion())
            .ascii(",\"clock\":\"CLOCK_MONOTONIC\",\"pid\":").u64(ProcessHandle.current().pid())
            .ascii(",\"priority\":").string(priority.describe()).ascii("}\n");
        out.flush();

        // End of file (or an error) on stdin after the plan means: stop early.
        Thread.ofPlatform().daemon(true).name("stdin-watcher").start(() -> {
            byte[] buf = new byte[256];
            try {
                while (in.read(buf) >= 0) {
                    // anything after the plan is ignored
                }
            } catch (IOException e) {
                // a read error stops the run like end of file
            }
            stopRequested = true;
        });

        Reserve reserve = Reserve.of(plan);
        Gate gate = new Gate(plan);
        ThreadLimit limit = plan.virtual() ? null : new ThreadLimit();   // virtual threads are no kernel threads
        List<Unit> units = new ArrayList<>();
        String[] startError = {null};
        Runnable starter = () -> {
            gate.createStart = System.nanoTime();
            try {
                startError[0] = startUnits(builder, plan, planRead, priority.apply(), reserve, gate, limit, units);
            } catch (Throwable t) {   // not expected: startUnit catches what starting a unit throws
                startError[0] = "starting unit " + (units.size() + 1) + " failed: " + t;
            }
            if (!units.isEmpty()) gate.open(units);
        };
        // Virtual threads started (or unparked) by a platform thread go to the pool's external
        // submission queue, which its carriers leave alone while their own queues have work: with
        // the schedule none (units that only yield) 8 of 10 units started by main never ran. From
        // a virtual thread, they go to a carrier's own queue, in turn with the units already there.
        if (plan.virtual()) joinUninterruptibly(Thread.ofVirtual().name("starter").start(starter));
        else starter.run();
        if (units.isEmpty()) throw new Failure(1, startError[0]);   // unit 1 could not be started
        for (Unit u : units) joinUninterruptibly(u.thread);

        long result = 0;
        boolean haveResult = false;
        int otherNice = 0;
        Unit firstOther = null;
        for (Unit u : units) {
            if (u.failure != null) {
                String what = u.failure instanceof OutOfMemoryError ? "cannot store the samples of unit " : "unit failed: ";
                throw new Failure(1, what + u.id + ": " + u.failure);
            }
            if (u.busyRan && !haveResult) {
                result = u.busyResult;
                haveResult = true;
            }
            if (priority.apply() && u.nice != priority.niceOf(u.cls)) {
                otherNice++;
                if (firstOther == null) firstOther = u;
            }
        }
        if (!haveResult) result = busy(plan.iters(), false);   // no unit got to run its busy phase
        if (firstOther != null) {
            System.err.println("taskmeter-java: " + otherNice + " units did not get the nice value the probe saw, e.g. unit "
                + firstOther.id + " (class " + firstOther.cls + "): nice " + niceText(firstOther.nice) + ", probe "
                + niceText(priority.niceOf(firstOther.cls)));
        }

        long samples = 0, missed = 0, grown = 0;
        for (int i = 0; i < units.size(); i++) {
            Unit u = units.set(i, null);   // each unit's own arrays can be collected once written
            int from = u.base, to = u.pos;
            out.ascii("{\"type\":\"unit\",\"unit\":").u64(u.id).ascii(",\"class\":").u64(u.cls)
                .ascii(",\"origin_ns\":").u64(u.origin).ascii(",\"iterations\":").u64(u.iterations)
                .ascii(",\"measured_iterations\":").u64(u.measured);
            out.column("expected_ns", u.expected, from, to).column("start_ns", u.start, from, to)
                .column("busy_end_ns", u.busyEnd, from, to).column("intended_ns", u.intended, from, to)
                .column("wake_ns", u.wake, from, to).column("missed", u.missed, from, to).ascii("}\n");
            samples += to - from;
            grown += u.grown;
            for (int j = from; j < to; j++) missed += u.missed[j];
        }
        out.ascii("{\"type\":\"done\",\"create_start_ns\":").u64(gate.createStart)
            .ascii(",\"run_start_ns\":").u64(gate.runStart)
            .ascii(",\"measure_start_ns\":").u64(gate.measureStart).ascii(",\"end_ns\":").u64(gate.end)
            .ascii(",\"units\":").u64(units.size()).ascii(",\"samples\":").u64(samples)
            .ascii(",\"missed\":").u64(missed).ascii(",\"storage_grown\":").u64(grown)
            .ascii(",\"interrupted\":").ascii(interrupted ? "true" : "false")
            .ascii(",\"busy_result\":\"").u64(result).ascii("\"");
        if (startError[0] != null) out.ascii(",\"start_error\":").string(startError[0]);
        if (plan.atomic()) out.ascii(",\"atomic_sum\":").u64(COUNTER.get());
        out.ascii("}\n").flush();
        return 0;
    }

    /*
     * Starts units 1, 2, ... in order, each parking at the gate, and adds them to units; the
     * reason why the rest was not started, or null. Before unit u > 1 it checks the start limit,
     * counted from when the plan was read, and the kernel's limits (java-thread). Unit 1 that
     * cannot be started leaves units empty.
     */
    private static String startUnits(Thread.Builder builder, Plan plan, long planRead, boolean applyPriority,
                                     Reserve reserve, Gate gate, ThreadLimit limit, List<Unit> units) {
        // Ids are unsigned, and the loop ends long before 2^63.
        for (long id = 1; Long.compareUnsigned(id, plan.units()) <= 0; id++) {
            if (id > 1 && Long.compareUnsigned(System.nanoTime() - planRead, plan.startLimit()) >= 0)
                return "start limit of " + durationSpec(plan.startLimit()) + " reached after " + (id - 1) + " units";
            String refused = id > 1 && limit != null ? limit.refuses(id, gate) : null;
            if (refused != null) return refused;
            String failed = startUnit(builder, plan, id, applyPriority, reserve, gate, units);
            if (failed != null) return failed;
        }
        return null;
    }

    /**
     * The start gate (protocol: "The work loop, exactly"): every unit parks here once its
     * priority and storage are ready; when all the units started have arrived (a semaphore the
     * starter waits on), the starter reads run_start, fixes the window and opens the gate (a
     * volatile flag, with LockSupport.park). Releasing is a tree: the starter unparks unit 1, and
     * every released unit unparks two more before its loop starts, so the release takes log2(N)
     * wake-ups in a row. One thread unparking all of them (or a CountDownLatch, which wakes its
     * waiters as a chain) competes for the CPU with the units already running: with 8,000
     * platform threads at 1 ms sleeps, the median unit left the gate 1.8 s after it opened
     * that way, and 0.5 s with the tree.
     */
    private static final class Gate {
        final long warmup, duration;
        final Semaphore arrivals = new Semaphore(0);
        volatile boolean open;
        long createStart, runStart, measureStart, end;   // written before open is set
        List<Unit> units;                                // likewise

        Gate(Plan plan) {
            warmup = plan.warmup();
            duration = plan.duration();
        }

        /* Blocks until n units have arrived (the starter only; open takes the permits later). */
        void awaitArrivals(int n) {
            arrivals.acquireUninterruptibly(n);
            arrivals.release(n);
        }

        /* Called by each unit on its own thread; index: its place in the list of units started. */
        void park(int index) {
            arrivals.release();
            while (!open) LockSupport.park(this);
            release(2 * index + 1);
            release(2 * index + 2);
        }

        void open(List<Unit> started) {
            arrivals.acquireUninterruptibly(started.size());
            runStart = System.nanoTime();
            measureStart = runStart + warmup;
            end = measureStart + duration;   // below 2^64: compared unsigned
            units = started;
            open = true;
            release(0);
        }

        private void release(int index) {
            if (index < units.size()) LockSupport.unpark(units.get(index).thread);
        }
    }

    /**
     * Keeps java-thread below the kernel's limits, because HotSpot does not survive all of them.
     * A thread the kernel refuses is only an OutOfMemoryError from Thread.start, but at
     * vm.max_map_count the JVM aborts (hs_err: "mmap failed ... committing reserved memory",
     * when a new thread maps its stack guard pages or the heap grows; reproduced here with
     * 50,000 maps taken before the JVM started), and at the thread limits the JVM gets no thread
     * for its own GC workers and compiler threads. Two bounds:
     * - threads, computed once, as the Go driver's go-locked does: the smallest room among
     *   kernel.threads-max and kernel.pid_max (less the 300 pids the kernel never reuses) minus
     *   the threads on the machine, RLIMIT_NPROC minus the user's threads (not for root), and
     *   pids.max - pids.current of each cgroup up to the root; of it, 16 + 2 per core are kept
     *   for the JVM's own threads and 1/32 for other processes;
     * - memory maps, counted in /proc/self/maps at checkpoints once the units started so far are
     *   parked (their stacks exist): the cost of a unit is measured (2 maps here), SPARE_MAPS are
     *   kept for the JVM (heap, code cache, metaspace), and between checkpoints at most half of
     *   the room left is spent, so an underestimate cannot overshoot.
     */
    private static final class ThreadLimit {
        private static final long SPARE_MAPS = 2048;
        private static final double FIRST_GUESS_MAPS = 4;   // before one unit has been measured
        private final long maxUnits;   // from the thread limits
        private final String threadReason;
        private final long mapLimit;   // vm.max_map_count, or -1
        private long baseMaps = -1, baseUnits, nextCheck = 2;

        ThreadLimit() {
            long room = Long.MAX_VALUE;
            String what = null;
            long tasks = tasksOnMachine();
            String[][] machine = {{"/proc/sys/kernel/threads-max", "kernel.threads-max", "0"},
                                  {"/proc/sys/kernel/pid_max", "kernel.pid_max", "300"}};
            for (String[] m : machine) {
                long n = readLong(m[0]);
                if (n < 0 || tasks < 0) continue;
                long free = n - Long.parseLong(m[2]) - tasks;
                if (free < room) {
                    room = free;
                    what = m[1] + " " + n + (m[2].equals("0") ? "" : " (less " + m[2] + " reserved pids)") + " with "
                        + tasks + " threads on the machine";
                }
            }
            long uid = statusField("/proc/self/status", "Uid:"), nproc = maxProcesses();
            if (uid > 0 && nproc >= 0) {   // RLIMIT_NPROC counts the user's threads; root is exempt
                long mine = threadsOfUser(uid);
                if (nproc - mine < room) {
                    room = nproc - mine;
                    what = "RLIMIT_NPROC (ulimit -u) " + nproc + " with " + mine + " threads of uid " + uid;
                }
            }
            for (Path dir : cgroupDirs("pids")) {
                long max = readLong(dir.resolve("pids.max").toString()), current = readLong(dir.resolve("pids.current").toString());
                if (max >= 0 && current >= 0 && max - current < room) {
                    room = max - current;
                    what = dir + "/pids.max " + max + " with " + current + " in use";
                }
            }
            long own = 16 + 2L * Runtime.getRuntime().availableProcessors(), others = Math.max(room / 32, 0);
            maxUnits = what == null ? Long.MAX_VALUE : Math.max(room - own - others, 1);
            threadReason = what == null ? null : "java-thread stops at " + maxUnits + " units: at the kernel's thread limits "
                + "the JVM gets no thread for its own GC and compiler threads, so the driver stays below them; the first is "
                + what + ", which leaves " + room + " threads, of which " + own + " are kept for the JVM's own threads and "
                + others + " (1/32) for other processes";
            mapLimit = readLong("/proc/sys/vm/max_map_count");
        }

        /* Why unit id (> 1) must not be started, or null. */
        String refuses(long id, Gate gate) {
            if (id > maxUnits) return threadReason;
            if (mapLimit < 0 || id < nextCheck) return null;
            long started = id - 1;
            gate.awaitArrivals((int) started);
            long inUse = countLines("/proc/self/maps");
            if (inUse < 0) return null;
            double perUnit = FIRST_GUESS_MAPS;
            if (baseMaps < 0) {
                baseMaps = inUse;
                baseUnits = started;
            } else if (started > baseUnits) {
                perUnit = Math.max(1, (double) (inUse - baseMaps) / (started - baseUnits));
            }
            long room = (long) (Math.max(0, mapLimit - inUse - SPARE_MAPS) / perUnit);
            if (room == 0)
                return String.format("java-thread stops before unit %d: %d memory maps in use, %.1f per unit measured, "
                    + "and vm.max_map_count is %d (HotSpot aborts when it cannot map a new thread's stack guard pages or "
                    + "grow its heap)", id, inUse, perUnit, mapLimit);
            nextCheck = id + Math.max(1, room / 2);
            return null;
        }

        /* The kernel's nr_threads: /proc/loadavg shows it after the '/'. */
        private static long tasksOnMachine() {
            try {
                String[] fields = Files.readAllLines(Path.of("/proc/loadavg")).get(0).trim().split("\\s+");
                return Long.parseLong(fields[3].substring(fields[3].indexOf('/') + 1));
            } catch (IOException | RuntimeException e) {
                return -1;
            }
        }

        /* The soft "Max processes" of /proc/self/limits, or -1 (unlimited, unreadable). */
        private static long maxProcesses() {
            try {
                for (String line : Files.readAllLines(Path.of("/proc/self/limits")))
                    if (line.startsWith("Max processes")) return Long.parseLong(line.substring(26).trim().split("\\s+")[0]);
            } catch (IOException | RuntimeException e) {
                // unlimited, or not readable
            }
            return -1;
        }

        private static long threadsOfUser(long uid) {
            long n = 0;
            try (var procs = Files.newDirectoryStream(Path.of("/proc"), "[0-9]*")) {
                for (Path p : procs)
                    if (statusField(p + "/status", "Uid:") == uid) n += Math.max(0, statusField(p + "/status", "Threads:"));
            } catch (IOException | RuntimeException e) {
                // count what was read
            }
            return n;
        }

        /* This process's cgroup directories for a controller (v2, or its v1 hierarchy), up to the root. */
        private static List<Path> cgroupDirs(String controller) {
            List<Path> dirs = new ArrayList<>();
            try {
                for (String line : Files.readAllLines(Path.of("/proc/self/cgroup"))) {
                    String[] parts = line.split(":", 3);
                    if (parts.length != 3) continue;
                    List<Path> roots = new ArrayList<>();
                    if (parts[0].equals("0") && parts[1].isEmpty()) {
                        roots.add(Path.of("/sys/fs/cgroup"));
                        roots.add(Path.of("/sys/fs/cgroup/unified"));
                    } else if (Arrays.asList(parts[1].split(",")).contains(controller)) {
                        roots.add(Path.of("/sys/fs/cgroup", parts[1]));
                    }
                    for (Path root : roots)
                        for (Path dir = Path.of(root + parts[2]).normalize(); dir != null && dir.startsWith(root); dir = dir.getParent())
                            dirs.add(dir);
                }
            } catch (IOException | RuntimeException e) {
                // no cgroup limits found
            }
            return dirs;
        }

        /* A file holding one integer ("max" and the like give -1). Not Files.readString: it reads
           only the first byte of a /proc/sys file (whose size is 0). */
        private static long readLong(String path) {
            try {
                return Long.parseLong(Files.readAllLines(Path.of(path)).get(0).trim());
            } catch (IOException | RuntimeException e) {
                return -1;
            }
        }

        /* The first number of a "Name: value ..." line, or -1. */
        private static long statusField(String path, String name) {
            try {
                for (String line : Files.readAllLines(Path.of(path)))
                    if (line.startsWith(name)) return Long.parseLong(line.substring(name.length()).trim().split("\\s+")[0]);
            } catch (IOException | RuntimeException e) {
                // gone, or not readable
            }
            return -1;
        }

        private static long countLines(String path) {
            try (InputStream in = Files.newInputStream(Path.of(path))) {
                byte[] buf = new byte[1 << 16];
                long n = 0;
                for (int r; (r = in.read(buf)) > 0; )
                    for (int i = 0; i < r; i++) if (buf[i] == '\n') n++;
                return n;
            } catch (IOException e) {
                return -1;
            }
        }
    }

    /*
     * Adds the unit and starts its thread; on failure, the reason (the unit is not added). The
     * unit's sample storage is taken here, before its thread exists. A platform thread
     * the OS refuses (pthread_create EAGAIN: kernel.pid_max, threads-max, ulimit -u) is an
     * OutOfMemoryError "unable to create native thread"; heap exhaustion is one too.
     */
    private static String startUnit(Thread.Builder builder, Plan plan, long id, boolean applyPriority,
                                    Reserve reserve, Gate gate, List<Unit> units) {
        Unit unit;
        try {
            unit = new Unit(plan, id, applyPriority, gate);
            unit.allocate(reserve);
            unit.index = units.size();
            units.add(unit);
        } catch (OutOfMemoryError e) {
            return "could not allocate the samples of unit " + id + ": " + e;
        }
        try {
            unit.thread = builder.name("unit-" + unit.id).start(unit);
            return null;
        } catch (Throwable t) {
            units.remove(units.size() - 1);
            return "could not start the thread of unit " + unit.id + ": " + t;
        }
    }

    /*
     * HotSpot's unified logging writes its warnings to stdout, which belongs to the protocol. The
     * one that matters is printed when the OS refuses a thread ("[warning][os,thread] Failed to
     * start thread ... pthread_create failed (EAGAIN)"), i.e. on every partial start of
     * java-thread. The JVM's options are the orchestrator's, so the driver moves the log itself,
     * with the VM.log diagnostic command: the same as -Xlog:all=warning:stderr -Xlog:all=off:stdout.
     * It costs about 0.2 s of JVM start-up (the platform MBean server), before run_start.
     */
    private static void logToStderr() {
        try {
            var server = ManagementFactory.getPlatformMBeanServer();
            var name = new ObjectName("com.sun.management:type=DiagnosticCommand");
            String[] signature = {String[].class.getName()};
            server.invoke(name, "vmLog", new Object[] {new String[] {"output=stderr", "what=all=warning", "decorators=uptime,level,tags"}}, signature);
            server.invoke(name, "vmLog", new Object[] {new String[] {"output=stdout", "what=all=off"}}, signature);
        } catch (Exception | LinkageError e) {
            System.err.println("taskmeter-java: cannot move the JVM's log from stdout to stderr: " + e);
        }
    }

    /** As the orchestrator writes durations: "10s", "250ms", "7ns". */
    private static String durationSpec(long ns) {
        if (ns != 0 && Long.remainderUnsigned(ns, 1_000_000_000) == 0) return Long.divideUnsigned(ns, 1_000_000_000) + "s";
        if (ns != 0 && Long.remainderUnsigned(ns, 1_000_000) == 0) return Long.divideUnsigned(ns, 1_000_000) + "ms";
        if (ns != 0 && Long.remainderUnsigned(ns, 1_000) == 0) return Long.divideUnsigned(ns, 1_000) + "us";
        return Long.toUnsignedString(ns) + "ns";
    }

    /*
     * Start, sleep, yield and join one throw-away thread of the runtime before run_start, so the
     * first unit does not pay for loading and starting the machinery (for virtual threads: the
     * scheduler's ForkJoinPool, its delayed-task scheduler, continuations), which takes tens of
     * milliseconds in a fresh JVM. Nothing of it is measured. For java-thread with two classes the
     * same thread also probes what Thread.setPriority really does, for hello.priority.
     */
    private static Priority prime(Thread.Builder builder, Plan plan) throws Failure {
        boolean apply = plan.classes() == 2 && !plan.virtual();
        int[] nice = {NICE_UNREAD, NICE_UNREAD, NICE_UNREAD};   // before, after MAX, after MIN
        try {
            joinUninterruptibly(builder.name("prime").start(() -> {
                busy(1, true);
                sleepFor(1);
                sleepFor(0);
                if (apply) {
                    nice[0] = niceOfThisThread();
                    Thread.currentThread().setPriority(Thread.MAX_PRIORITY);
                    nice[1] = niceOfThisThread();
                    Thread.currentThread().setPriority(Thread.MIN_PRIORITY);
                    nice[2] = niceOfThisThread();
                }
            }));
        } catch (Throwable t) {
            throw new Failure(1, "cannot start a thread: " + t);
        }
        return new Priority(plan.classes() == 2, plan.virtual(), apply, nice[0], nice[1], nice[2]);
    }

    /**
     * The priority classes. java-thread: Thread.setPriority(MAX_PRIORITY) for class 0,
     * MIN_PRIORITY for class 1, which HotSpot on Linux turns into nice values only with
     * -XX:ThreadPriorityPolicy=1 (as root; the orchestrator passes it then); the nice values are
     * what the probe thread read back. java-virtual: virtual threads have no priority.
     */
    private record Priority(boolean twoClasses, boolean virtual, boolean apply, int before, int high, int low) {
        int niceOf(int cls) {
            return cls == 0 ? high : low;
        }

        String describe() {
            if (!twoClasses) return "none";
            if (virtual) return "none: virtual threads have no priority (Thread.setPriority does nothing on them)";
            String set = "java: Thread.setPriority " + Thread.MAX_PRIORITY + "/" + Thread.MIN_PRIORITY;
            if (before == NICE_UNREAD || high == NICE_UNREAD || low == NICE_UNREAD)
                return set + " (effect unknown: /proc/thread-self/stat not readable)";
            if (high == before && low == before)
                return set + " ignored by HotSpot (nice unchanged at " + before + "; it needs -XX:ThreadPriorityPolicy=1 as root)";
            return set + " -> nice " + high + "/" + low;
        }
    }

    /** The calling thread's nice value: field 19 of /proc/thread-self/stat, or NICE_UNREAD. */
    private static int niceOfThisThread() {
        try {
            String stat = new String(Files.readAllBytes(Path.of("/proc/thread-self/stat")), StandardCharsets.US_ASCII);
            // Field 2, the name, is in parentheses and may hold spaces: count from the last ')'.
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
            return Integer.parseInt(fields[19 - 3]);
        } catch (IOException | RuntimeException e) {
            return NICE_UNREAD;
        }
    }

    private static String niceText(int nice) {
        return nice == NICE_UNREAD ? "unreadable" : Integer.toString(nice);
    }

    /** "Java 25.0.3 (Eclipse Adoptium)" */
    private static String runtimeVersion() {
        String numbers = Runtime.version().version().stream().map(String::valueOf).collect(Collectors.joining("."));
        return "Java " + numbers + " (" + System.getProperty("java.vendor", "unknown vendor") + ")";
    }

    private static void joinUninterruptibly(Thread t) {
        boolean wasInterrupted = false;
        while (true) {
            try {
                t.join();
                break;
            } catch (InterruptedException e) {
                wasInterrupted = true;
            }
        }
        if (wasInterrupted) Thread.currentThread().interrupt();
    }

    /*
     * The plan line, read one byte at a time from the unbuffered file descriptor: a buffered
     * stream (System.in is one) could read past the '\n', and the watcher reads the rest.
     */
    private static byte[] readPlan(InputStream in) throws Failure {
        byte[] buf = new byte[512];
        int n = 0;
        while (true) {
            int c;
            try {
                c = in.read();
            } catch (IOException e) {
                throw new Failure(1, "cannot read the plan: " + e.getMessage());
            }
            if (c < 0 || c == '\n') break;
            if (n == buf.length) {
                if (buf.length >= MAX_PLAN) throw refusal("the plan line is longer than " + MAX_PLAN + " bytes");
                buf = Arrays.copyOf(buf, buf.length * 2);
            }
            buf[n++] = (byte) c;
        }
        return Arrays.copyOf(buf, n);
    }

    // ---------------------------------------------------------------- measurement

    /**
     * The busy work of the protocol on an unsigned 64-bit total: Java's long arithmetic wraps
     * modulo 2^64, and the unsigned division by 2 is a logical shift. Java has no black_box, but
     * none is needed: every step depends on the previous one through a non-affine map (no closed
     * form for the JIT to find), and the result is stored and reported, so the loop can neither be
     * folded nor dropped. The counter runs down to 0, so iters is unsigned too.
     */
    private static long busy(long iters, boolean yield) {
        long total = 0;
        for (long i = iters; i != 0; i--) {
            total = total + 1;
            total = (total * 3) >>> 1;
            if (yield) Thread.yield();
        }
        return total;
    }

    /**
     * A relative sleep of nanos (>= 0). Thread.sleep(Duration) has nanosecond resolution and
     * never returns early; nothing interrupts the units, but an interrupt would only restart
     * the sleep for the time left.
     */
    private static void sleepFor(long nanos) {
        long begin = System.nanoTime(), left = nanos;
        while (true) {
            try {
                Thread.sleep(Duration.ofNanos(left));
                return;
            } catch (InterruptedException e) {
                left = nanos - (System.nanoTime() - begin);
                if (left <= 0) return;
            }
        }
    }

    /** One unit: its work loop, its counts and its samples, one array per column. */
    private static final class Unit implements Runnable {
        final Plan plan;
        final long id;
        final int cls;           // (id - 1) % priority_classes
        final boolean applyPriority;
        final Gate gate;
        Thread thread;
        int index;               // in the list of units started
        int nice = NICE_UNREAD;  // read back after Thread.setPriority
        long origin, iterations, measured;
        long grown;              // times the sample columns outgrew the reserve
        long busyResult;
        boolean busyRan;
        Throwable failure;
        // The sample columns: entries base..pos-1 are this unit's, limit is where its room ends.
        // They start as a slice of the shared reserve and become the unit's own arrays if it outgrows it.
        long[] expected, start, busyEnd, intended, wake, missed;
        int base, pos, limit;

        Unit(Plan plan, long id, boolean applyPriority, Gate gate) {
            this.plan = plan;
            this.id = id;
            this.cls = (int) Long.remainderUnsigned(id - 1, plan.classes());
            this.applyPriority = applyPriority;
            this.gate = gate;
        }

        /* reserve(u) samples: a slice of the reserve while it lasts, otherwise arrays of the unit's own. */
        void allocate(Reserve reserve) {
            int cap = Reserve.samples(plan, id);
            if (reserve.taken + cap <= reserve.size) {
                long[][] c = reserve.columns;
                expected = c[0];
                start = c[1];
                busyEnd = c[2];
                intended = c[3];
                wake = c[4];
                missed = c[5];
                base = pos = reserve.taken;
                reserve.taken += cap;
            } else {
                expected = new long[cap];   // the JVM zeroes (touches) them now, before the unit runs
                start = new long[cap];
                busyEnd = new long[cap];
                intended = new long[cap];
                wake = new long[cap];
                missed = new long[cap];
            }
            limit = pos + cap;
        }

        @Override
        public void run() {
            try {
                if (applyPriority) {   // before origin is read, on the unit's own thread
                    Thread.currentThread().setPriority(cls == 0 ? Thread.MAX_PRIORITY : Thread.MIN_PRIORITY);
                    nice = niceOfThisThread();
                }
                // Write every entry of the reserved room now (then it counts as empty), so that
                // storing a sample in the loop never touches a page for the first time.
                for (long[] column : new long[][] {expected, start, busyEnd, intended, wake, missed})
                    Arrays.fill(column, base, limit, -1L);
            } catch (Throwable t) {
                failure = t;
                aborted = true;
            }
            gate.park(index);   // a unit that failed arrives too, so the gate still opens
            if (failure != null) return;
            try {
                loop();
            } catch (Throwable t) {   // OutOfMemoryError while growing the arrays, or a bug
                failure = t;
                aborted = true;
            }
        }

        /*
         * The work loop of the protocol README, line for line; no I/O, only memory. The counts and
         * the busy result stay in locals until the loop ends, so no shared field is written while
         * timed (except the atomic-sum counter, which is the point of that experiment).
         */
        private void loop() {
            final Plan p = plan;
            final long end = gate.end, measureStart = gate.measureStart;   // fixed before the gate opened
            final boolean sleeps = p.kind() != Kind.NONE, atomic = p.atomic();
            final long origin = this.origin = System.nanoTime();
            long k = 0, next = origin + p.expected(id, 0);
            long result = 0, iterations = 0, measured = 0;
            boolean ran = false;
            try {
                while (true) {
                    long t0 = System.nanoTime();
                    if (Long.compareUnsigned(t0, end) >= 0 || aborted) break;
                    if (stopRequested) {
                        interrupted = true;
                        break;
                    }
                    long t1 = t0;
                    if (p.iters() != 0) {
                        result = busy(p.iters(), p.yield());
                        ran = true;
                        t1 = System.nanoTime();
                    }
                    long e = 0, intent = 0, t2 = 0, m = 0;
                    if (!sleeps) {
                        Thread.yield();   // the schedule none: the same yield as busy.yield's
                    } else {
                        e = p.expected(id, k);
                        if (p.absolute()) {
                            // Java has no absolute-deadline sleep: sleep for what is left, if anything.
                            intent = next;
                            long left = next - System.nanoTime();
                            if (left > 0) sleepFor(left);
                        } else {
                            intent = t1 + e;
                            sleepFor(e);
                        }
                        t2 = System.nanoTime();
                        k++;
                        if (p.absolute()) {   // skipped periods are stored with the sample that overran
                            next += p.expected(id, k);
                            while (Long.compareUnsigned(t2, next) > 0) {
                                m++;
                                k++;
                                next += p.expected(id, k);
                            }
                        }
                    }
                    if (atomic) COUNTER.incrementAndGet();
                    iterations++;
                    if (Long.compareUnsigned(t0, measureStart) >= 0) measured++;
                    if (sleeps) {
                        if (pos == limit) grow();
                        expected[pos] = e;
                        start[pos] = t0;
                        busyEnd[pos] = t1;
                        intended[pos] = intent;
                        wake[pos] = t2;
                        missed[pos] = m;
                        pos++;
                    }
                }
            } finally {
                this.iterations = iterations;
                this.measured = measured;
                busyResult = result;
                busyRan = ran;
            }
        }

        /* Doubles the room, into arrays of the unit's own (a slice of the reserve stays behind, unused); counted. */
        private void grow() {
            grown++;
            int n = pos - base;
            if (n >= MAX_ARRAY) throw new OutOfMemoryError("more than " + MAX_ARRAY + " samples");
            int cap = (int) Math.min(MAX_ARRAY, Math.max(16, 2L * n));
            expected = moved(expected, n, cap);
            start = moved(start, n, cap);
            busyEnd = moved(busyEnd, n, cap);
            intended = moved(intended, n, cap);
            wake = moved(wake, n, cap);
            missed = moved(missed, n, cap);
            base = 0;
            pos = n;
            limit = cap;
        }

        private long[] moved(long[] column, int n, int cap) {
            long[] own = new long[cap];
            System.arraycopy(column, base, own, 0, n);
            return own;
        }
    }

    /**
     * The samples reserved for all units together: six columns of at most RESERVE_BUDGET entries
     * (4 Mi samples, 192 MiB), allocated once before the units are created, of which each unit
     * takes a slice of reserve(u) entries and writes it before it parks at the gate. A few large
     * arrays instead of six small ones per unit, because the garbage collector never copies them
     * (G1 keeps them in humongous regions): 600k small arrays of 100k units, live through the
     * run, would be copied by the young collections while measuring (before the gate existed,
     * they made pauses of several hundred ms while the units were being started).
     */
    private static final class Reserve {
        final long[][] columns;
        final int size;
        int taken;   // by the starter only

        private Reserve(int size) {
            this.size = size;
            columns = new long[6][size];
        }

        static Reserve of(Plan plan) throws Failure {
            // Unit 1 reserves the most (by-unit: the shortest sleep), so this covers every unit.
            long units = plan.units(), want = 0;
            if (plan.kind() != Kind.NONE)
                want = Long.compareUnsigned(units, RESERVE_BUDGET) >= 0 ? RESERVE_BUDGET
                    : Math.min(RESERVE_BUDGET, units * samples(plan, 1));
            try {
                return new Reserve((int) want);
            } catch (OutOfMemoryError e) {
                throw new Failure(1, "cannot allocate the samples (" + want + " x 48 bytes): " + e.getMessage());
            }
        }

        /*
         * reserve(u) of the protocol's "Storage", the same in every worker: as many samples as
         * the schedule allows (an iteration lasts at least its sleep, counted as at least 1 us; a
         * modulo cycle of m periods sleeps m(m+1)/2 x ns), plus 16, within RESERVE_BUDGET / units,
         * at least 16; 0 for the schedule none. Beyond it the arrays double while measuring.
         * The plan keeps warmup + duration, m x ns and units x ns below 2^63.
         */
        static int samples(Plan p, long u) {
            if (p.kind() == Kind.NONE) return 0;
            long total = p.warmup() + p.duration(), estimate;
            if (p.kind() == Kind.MODULO) {   // total x m may not fit in 64 bits
                BigInteger m = BigInteger.valueOf(p.m()), ns = BigInteger.valueOf(Math.max(p.ns(), 1000));
                BigInteger cycle = ns.multiply(m.multiply(m.add(BigInteger.ONE)).shiftRight(1));
                estimate = BigInteger.valueOf(total).multiply(m).divide(cycle).add(m).add(BigInteger.valueOf(16))
                    .min(BigInteger.valueOf(RESERVE_BUDGET)).longValue();
            } else {
                estimate = total / Math.max(p.expected(u, 0), 1000) + 16;
            }
            long share = Long.divideUnsigned(RESERVE_BUDGET, p.units());
            return (int) Math.max(16, Math.min(estimate, share));
        }
    }

    // ---------------------------------------------------------------- plan

    private enum Kind { FIXED, BY_UNIT, MODULO, NONE }

    /** A validated plan. units, startLimit, ns, m and iters hold unsigned 64-bit values. */
    private record Plan(String runtime, boolean virtual, boolean atomic, long units, int classes, long startLimit,
                        long duration, long warmup, boolean absolute, Kind kind, long ns, long m, long iters,
                        boolean yield) {

        long expected(long u, long k) {
            return switch (kind) {
                case FIXED -> ns;
                case BY_UNIT -> u * ns;
                case MODULO -> (Long.remainderUnsigned(k, m) + 1) * ns;
                case NONE -> 0;   // no sleep
            };
        }

        static Plan load(Json root) throws Failure {
            if (!(root instanceof JObj plan)) throw refusal("the plan must be a JSON object");
            JNum pv = typed(plan, "", "protocol", JNum.class, "an integer");
            if (!pv.integer() || pv.negative() || pv.overflow() || pv.magnitude() != 2)
                throw refusal("unsupported protocol version " + clip(pv.lexeme(), 40) + " (this worker speaks 2)");
            String experiment = typed(plan, "", "experiment", JStr.class, "a string").value();
            if (!experiment.equals("sleep") && !experiment.equals("atomic-sum"))
                throw refusal("unknown experiment " + quoted(experiment) + " (this worker runs \"sleep\" and \"atomic-sum\")");
            String runtime = typed(plan, "", "runtime", JStr.class, "a string").value();
            if (!runtime.equals(THREAD) && !runtime.equals(VIRTUAL))
                throw refusal("runtime " + quoted(runtime) + " is not served by this driver (" + THREAD + ", " + VIRTUAL + ")");
            long units = unsigned(plan, "", "units", 1);
            long classes = unsigned(plan, "", "priority_classes", 1);
            if (classes != 1 && classes != 2) throw refusal("priority_classes must be 1 or 2");
            long startLimit = unsigned(plan, "", "start_limit_ns", 1);
            long duration = unsigned(plan, "", "duration_ns", 1);
            long warmup = unsigned(plan, "", "warmup_ns", 0);
            JObj sleep = typed(plan, "", "sleep", JObj.class, "an object");
            String mode = typed(sleep, "sleep.", "mode", JStr.class, "a string").value();
            boolean absolute = mode.equals("absolute");
            if (!absolute && !mode.equals("relative")) throw refusal("unknown sleep mode " + quoted(mode));
            JObj schedule = typed(sleep, "sleep.", "schedule", JObj.class, "an object");
            String kindName = typed(schedule, "sleep.schedule.", "kind", JStr.class, "a string").value();
            Kind kind = switch (kindName) {
                case "fixed" -> Kind.FIXED;
                case "by-unit" -> Kind.BY_UNIT;
                case "modulo" -> Kind.MODULO;
                case "none" -> Kind.NONE;
                default -> throw refusal("unknown schedule kind " + quoted(kindName));
            };
            long m = kind == Kind.MODULO ? unsigned(schedule, "sleep.schedule.", "m", 1) : 1;
            long ns = kind == Kind.NONE ? 0 : unsigned(schedule, "sleep.schedule.", "ns", 0);
            JObj busy = typed(plan, "", "busy", JObj.class, "an object");
            long iters = unsigned(busy, "busy.", "iters", 0);
            boolean yield = typed(busy, "busy.", "yield", JBool.class, "true or false").value();

            // Timestamps (uptime) are far below 2^63 ns, so a run length and a longest period
            // below 2^63 keep every deadline below 2^64 (compared unsigned).
            if (duration < 0 || Long.compareUnsigned(warmup, Long.MAX_VALUE - duration) > 0)
                throw refusal("warmup_ns + duration_ns must be below 2^63");
            long mult = kind == Kind.BY_UNIT ? units : kind == Kind.MODULO ? m : 1;
            if (Math.unsignedMultiplyHigh(mult, ns) != 0 || mult * ns < 0)
                throw refusal("the longest sleep of the schedule must be below 2^63 ns");
            // With a zero period the absolute deadline never moves and the missed-period rule never ends.
            if (absolute && ns == 0 && kind != Kind.NONE)
                throw refusal("sleep.schedule.ns must be >= 1 in absolute mode (a zero period never advances)");
            return new Plan(runtime, runtime.equals(VIRTUAL), experiment.equals("atomic-sum"), units, (int) classes,
                startLimit, duration, warmup, absolute, kind, ns, m, iters, yield);
        }

        /* The member called name, which must be there exactly once. */
        private static Json field(JObj obj, String prefix, String name) throws Failure {
            Json found = null;
            for (Member member : obj.members()) {
                if (member.key().equals(name)) {
                    if (found != null) throw refusal("duplicate field " + prefix + name);
                    found = member.value();
                }
            }
            if (found == null) throw refusal("missing field " + prefix + name);
            return found;
        }

        private static <T extends Json> T typed(JObj obj, String prefix, String name, Class<T> type, String what)
            throws Failure {
            Json v = field(obj, prefix, name);
            if (!type.isInstance(v)) throw refusal(prefix + name + " must be " + what);
            return type.cast(v);
        }

        /* An integer >= min, up to 2^64-1, returned as the bits of an unsigned long. */
        private static long unsigned(JObj obj, String prefix, String name, long min) throws Failure {
            JNum v = typed(obj, prefix, name, JNum.class, "an integer");
            if (!v.integer()) throw refusal(prefix + name + " must be an integer (got " + clip(v.lexeme(), 40) + ")");
            if ((v.negative() && v.magnitude() != 0) || Long.compareUnsigned(v.magnitude(), min) < 0)
                throw refusal(prefix + name + " must be >= " + min);
            if (v.overflow()) throw refusal(prefix + name + " is out of range");
            return v.magnitude();
        }

        private static String quoted(String s) {
            return "\"" + clip(s, 64) + "\"";
        }

        /* At most max code points, so a surrogate pair is never cut. */
        private static String clip(String s, int max) {
            return s.codePointCount(0, s.length()) <= max ? s : s.substring(0, s.offsetByCodePoints(0, max));
        }
    }

    // ---------------------------------------------------------------- JSON

    private sealed interface Json permits JNull, JBool, JNum, JStr, JArr, JObj {}

    private record JNull() implements Json {}

    private record JBool(boolean value) implements Json {}

    /** A number: the lexeme as written; for integers, the magnitude (unsigned) unless it overflows 2^64-1. */
    private record JNum(String lexeme, boolean integer, boolean negative, long magnitude, boolean overflow)
        implements Json {}

    private record JStr(String value) implements Json {}

    private record JArr(List<Json> items) implements Json {}

    /** Members in order, duplicates kept: a plan field given twice is refused when it is looked up. */
    private record JObj(List<Member> members) implements Json {}

    private record Member(String key, Json value) {}

    /** RFC 8259 JSON, recursive descent over the bytes of the plan line. */
    private static final class JsonParser {
        private final byte[] s;
        private int p;
        private int depth;

        private JsonParser(byte[] s) {
            this.s = s;
        }

        static Json parse(byte[] text) throws Failure {
            JsonParser ps = new JsonParser(text);
            Json v = ps.value();
            ps.skipWhitespace();
            if (ps.p != text.length) throw ps.error("unexpected data after the plan");
            return v;
        }

        private Failure error(String what) {
            return refusal("the plan is not valid JSON: " + what + " at byte " + p);
        }

        private boolean at(char c) {
            return p < s.length && s[p] == c;
        }

        private boolean atDigit() {
            return p < s.length && s[p] >= '0' && s[p] <= '9';
        }

        private void skipWhitespace() {
            while (p < s.length && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r')) p++;
        }

        private Json value() throws Failure {
            skipWhitespace();
            if (p >= s.length) throw error("unexpected end of input");
            int c = s[p];
            return switch (c) {
                case '{' -> object();
                case '[' -> array();
                case '"' -> new JStr(string());
                case 't' -> literal("true", new JBool(true));
                case 'f' -> literal("false", new JBool(false));
                case 'n' -> literal("null", new JNull());
                default -> {
                    if (c == '-' || (c >= '0' && c <= '9')) yield number();
                    throw error("unexpected character");
                }
            };
        }

        private Json literal(String word, Json v) throws Failure {
            for (int i = 0; i < word.length(); i++) {
                if (p + i >= s.length || s[p + i] != word.charAt(i)) throw error("invalid literal");
            }
            p += word.length();
            return v;
        }

        private void enter() throws Failure {
            if (++depth > MAX_DEPTH) throw error("nesting too deep");
            p++;   // the opening bracket
            skipWhitespace();
        }

        /* After a member or an element: true for ',', false for the closing bracket. */
        private boolean more(char close) throws Failure {
            skipWhitespace();
            if (at(',')) {
                p++;
                return true;
            }
            if (at(close)) {
                p++;
                depth--;
                return false;
            }
            throw error("expected ',' or '" + close + "'");
        }

        private Json object() throws Failure {
            enter();
            List<Member> members = new ArrayList<>();
            if (at('}')) {
                p++;
                depth--;
                return new JObj(members);
            }
            do {
                skipWhitespace();
                if (!at('"')) throw error("expected a member name");
                String key = string();
                skipWhitespace();
                if (!at(':')) throw error("expected ':'");
                p++;
                members.add(new Member(key, value()));
            } while (more('}'));
            return new JObj(members);
        }

        private Json array() throws Failure {
            enter();
            List<Json> items = new ArrayList<>();
            if (at(']')) {
                p++;
                depth--;
                return new JArr(items);
            }
            do {
                items.add(value());
            } while (more(']'));
            return new JArr(items);
        }

        /* p is at the opening quote. Bytes are collected, then decoded as strict UTF-8. */
        private String string() throws Failure {
            p++;
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            while (true) {
                if (p >= s.length) throw error("unterminated string");
                int c = s[p] & 0xFF;
                if (c == '"') {
                    p++;
                    break;
                }
                if (c < 0x20) throw error("control character in string");
                if (c != '\\') {
                    bytes.write(c);
                    p++;
                    continue;
                }
                int e = p + 1 < s.length ? s[p + 1] : -1;
                switch (e) {
                    case '"', '\\', '/' -> bytes.write(e);
                    case 'b' -> bytes.write('\b');
                    case 'f' -> bytes.write('\f');
                    case 'n' -> bytes.write('\n');
                    case 'r' -> bytes.write('\r');
                    case 't' -> bytes.write('\t');
                    case 'u' -> {
                        bytes.writeBytes(Character.toString(unicodeEscape()).getBytes(StandardCharsets.UTF_8));
                        continue;   // p is past the escape(s)
                    }
                    default -> throw error("invalid escape");
                }
                p += 2;
            }
            try {
                return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(bytes.toByteArray()))
                    .toString();
            } catch (CharacterCodingException x) {
                throw error("invalid UTF-8 in string");
            }
        }

        /* p is at the backslash of \\uXXXX; a surrogate pair takes two escapes. */
        private int unicodeEscape() throws Failure {
            int cp = hex4(p + 2);
            if (cp < 0) throw error("invalid \\u escape");
            p += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) throw error("lone low surrogate");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = at('\\') && p + 1 < s.length && s[p + 1] == 'u' ? hex4(p + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) throw error("lone high surrogate");
                cp = Character.toCodePoint((char) cp, (char) lo);
                p += 6;
            }
            return cp;
        }

        private int hex4(int at) {
            if (at + 4 > s.length) return -1;
            int v = 0;
            for (int i = at; i < at + 4; i++) {
                int d = Character.digit(s[i], 16);   // a byte >= 0x80 is negative here: -1
                if (d < 0) return -1;
                v = v * 16 + d;
            }
            return v;
        }

        /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, integers kept exactly up to 2^64-1 */
        private Json number() throws Failure {
            int begin = p;
            boolean negative = false, integer = true, overflow = false;
            long magnitude = 0;
            if (at('-')) {
                negative = true;
                p++;
            }
            if (!atDigit()) throw error("invalid number");
            if (at('0')) {
                p++;
            } else {
                for (; atDigit(); p++) {
                    int d = s[p] - '0';
                    if (Long.compareUnsigned(magnitude, Long.divideUnsigned(-1L - d, 10)) > 0) overflow = true;
                    else magnitude = magnitude * 10 + d;
                }
            }
            if (at('.')) {
                p++;
                integer = false;
                if (!atDigit()) throw error("invalid number");
                while (atDigit()) p++;
            }
            if (at('e') || at('E')) {
                p++;
                integer = false;
                if (at('+') || at('-')) p++;
                if (!atDigit()) throw error("invalid number");
                while (atDigit()) p++;
            }
            String lexeme = new String(s, begin, p - begin, StandardCharsets.US_ASCII);
            return new JNum(lexeme, integer, negative, magnitude, overflow);
        }
    }

    // ---------------------------------------------------------------- output

    /**
     * NDJSON on stdout through one large buffer of its own; nothing is written while measuring.
     * Not a BufferedOutputStream, which takes a lock on every write (two per number here): this
     * buffer formats the numbers 1.3-1.8 times faster.
     */
    private static final class Out {
        private final FileOutputStream os = new FileOutputStream(FileDescriptor.out);
        private final byte[] buf = new byte[1 << 20];
        private int pos;
        private final byte[] digits = new byte[20];

        private void room(int n) throws IOException {
            if (buf.length - pos < n) drain();
        }

        Out ascii(String s) throws IOException {
            for (int i = 0; i < s.length(); i++) {
                room(1);
                buf[pos++] = (byte) s.charAt(i);
            }
            return this;
        }

        /** v as an unsigned 64-bit decimal (Long.toUnsignedString without the garbage). */
        Out u64(long v) throws IOException {
            int i = digits.length;
            if (v < 0) {   // 2^63 or more: one unsigned step, then v is positive
                digits[--i] = (byte) ('0' + Long.remainderUnsigned(v, 10));
                v = Long.divideUnsigned(v, 10);
            }
            do {
                digits[--i] = (byte) ('0' + v % 10);
                v /= 10;
            } while (v != 0);
            room(digits.length);
            System.arraycopy(digits, i, buf, pos, digits.length - i);
            pos += digits.length - i;
            return this;
        }

        Out column(String name, long[] values, int from, int to) throws IOException {
            ascii(",\"").ascii(name).ascii("\":[");
            for (int i = from; i < to; i++) {
                if (i > from) {
                    room(1);
                    buf[pos++] = ',';
                }
                u64(values[i]);
            }
            return ascii("]");
        }

        /** A JSON string: control characters escaped, other text as UTF-8, a lone surrogate as U+FFFD. */
        Out string(String s) throws IOException {
            StringBuilder b = new StringBuilder(s.length() + 2).append('"');
            for (int i = 0; i < s.length(); ) {
                int cp = s.codePointAt(i);
                i += Character.charCount(cp);
                if (cp == '"' || cp == '\\') b.append('\\').append((char) cp);
                else if (cp < 0x20 || cp == 0x7F) b.append(String.format("\\u%04x", cp));
                else if (Character.isSurrogate((char) cp) && cp <= 0xFFFF) b.append("\\ufffd");
                else b.appendCodePoint(cp);
            }
            for (byte x : b.append('"').toString().getBytes(StandardCharsets.UTF_8)) {
                room(1);
                buf[pos++] = x;
            }
            return this;
        }

        private void drain() throws IOException {
            os.write(buf, 0, pos);
            pos = 0;
        }

        void flush() throws IOException {
            drain();
        }

        /** The error line; if even that cannot be written, the reason goes to stderr. */
        void error(String message) {
            try {
                ascii("{\"type\":\"error\",\"message\":").string(message == null || message.isEmpty() ? "error" : message)
                    .ascii("}\n");
                flush();
            } catch (IOException e) {
                System.err.println("taskmeter-java: " + message + " (and stdout failed: " + e.getMessage() + ")");
            }
        }
    }
}
