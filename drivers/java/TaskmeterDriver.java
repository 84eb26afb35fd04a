/*
 * taskmeter Java driver, runtime ids "java-thread" (one platform thread per unit) and
 * "java-virtual" (one virtual thread per unit). Implements worker protocol v1
 * (protocol/README.md): the plan as one JSON line on stdin, NDJSON on stdout.
 * Build and run: javac -d classes TaskmeterDriver.java && java -cp classes TaskmeterDriver
 * Standard library only (JDK 21 or newer, for virtual threads).
 */

import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;

public final class TaskmeterDriver {
    private static final String THREAD = "java-thread";
    private static final String VIRTUAL = "java-virtual";
    private static final int MAX_PLAN = 1 << 20;           // bytes in the plan line
    private static final int MAX_DEPTH = 64;               // JSON nesting; bounds the parser's recursion
    private static final int MAX_ARRAY = Integer.MAX_VALUE - 8;

    /* Set by the stdin watcher, the units and the main thread; read by every unit once per iteration. */
    private static volatile boolean stopRequested;
    private static volatile boolean interrupted;
    private static volatile boolean aborted;

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
        Plan plan = Plan.load(JsonParser.parse(line));

        Unit[] units;
        try {
            units = new Unit[plan.units()];
            for (int i = 0; i < units.length; i++) units[i] = new Unit(plan, i + 1);
        } catch (OutOfMemoryError e) {
            throw new Failure(1, "cannot allocate the sample arrays of " + plan.units() + " units: " + e.getMessage());
        }

        out.ascii("{\"type\":\"hello\",\"protocol\":1,\"runtime\":").string(plan.runtime())
            .ascii(",\"runtime_version\":").string(runtimeVersion())
            .ascii(",\"clock\":\"CLOCK_MONOTONIC\",\"pid\":").u64(ProcessHandle.current().pid()).ascii("}\n");
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

        prime(plan.virtual() ? Thread.ofVirtual() : Thread.ofPlatform());
        Thread.Builder builder = plan.virtual() ? Thread.ofVirtual().name("unit-", 1) : Thread.ofPlatform().name("unit-", 1);

        long runStart = System.nanoTime();
        long measureStart = runStart + plan.warmup();
        long end = measureStart + plan.duration();   // below 2^64: compared unsigned
        Thread[] threads = new Thread[units.length];
        for (int i = 0; i < units.length; i++) {
            units[i].end = end;
            try {
                threads[i] = builder.start(units[i]);
            } catch (Throwable t) {   // e.g. OutOfMemoryError: unable to create native thread
                aborted = true;
                for (int j = 0; j < i; j++) joinUninterruptibly(threads[j]);
                throw new Failure(1, "cannot start the thread of unit " + (i + 1) + ": " + t);
            }
        }
        for (Thread t : threads) joinUninterruptibly(t);

        long result = 0;
        boolean haveResult = false;
        for (Unit u : units) {
            if (u.failure != null) {
                String what = u.failure instanceof OutOfMemoryError ? "cannot store the samples of unit " : "unit failed: ";
                throw new Failure(1, what + u.id + ": " + u.failure);
            }
            if (u.busyRan && !haveResult) {
                result = u.busyResult;
                haveResult = true;
            }
        }
        if (!haveResult) result = busy(plan.iters(), false);   // no unit got to run its busy phase

        long samples = 0, missed = 0;
        for (int i = 0; i < units.length; i++) {
            Unit u = units[i];
            units[i] = null;   // each unit's samples can be collected once written
            out.ascii("{\"type\":\"unit\",\"unit\":").u64(u.id).ascii(",\"origin_ns\":").u64(u.origin);
            out.column("expected_ns", u.expected, u.n).column("start_ns", u.start, u.n)
                .column("busy_end_ns", u.busyEnd, u.n).column("intended_ns", u.intended, u.n)
                .column("wake_ns", u.wake, u.n).column("missed", u.missed, u.n).ascii("}\n");
            samples += u.n;
            for (int j = 0; j < u.n; j++) missed += u.missed[j];
        }
        out.ascii("{\"type\":\"done\",\"run_start_ns\":").u64(runStart)
            .ascii(",\"measure_start_ns\":").u64(measureStart).ascii(",\"end_ns\":").u64(end)
            .ascii(",\"units\":").u64(plan.units()).ascii(",\"samples\":").u64(samples)
            .ascii(",\"missed\":").u64(missed).ascii(",\"interrupted\":").ascii(interrupted ? "true" : "false")
            .ascii(",\"busy_result\":\"").u64(result).ascii("\"}\n");
        out.flush();
        return 0;
    }

    /*
     * Start, sleep, yield and join one throw-away thread of the runtime before run_start, so the
     * first unit does not pay for loading and starting the machinery (for virtual threads: the
     * scheduler's ForkJoinPool, its delayed-task scheduler, continuations), which takes tens of
     * milliseconds in a fresh JVM. Nothing of it is measured.
     */
    private static void prime(Thread.Builder builder) throws Failure {
        try {
            joinUninterruptibly(builder.name("prime").start(() -> {
                busy(1, true);
                sleepFor(1);
                sleepFor(0);
            }));
        } catch (Throwable t) {
            throw new Failure(1, "cannot start a thread: " + t);
        }
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

    /** One unit: its work loop and its samples, one array per column. */
    private static final class Unit implements Runnable {
        final Plan plan;
        final long id;
        long end;             // set before the thread starts
        long origin;
        long busyResult;
        boolean busyRan;
        Throwable failure;
        long[] expected, start, busyEnd, intended, wake, missed;
        int n;

        Unit(Plan plan, long id) {
            this.plan = plan;
            this.id = id;
            int cap = initialCapacity(plan, id);
            expected = new long[cap];   // the JVM zeroes (touches) the arrays now, before the run
            start = new long[cap];
            busyEnd = new long[cap];
            intended = new long[cap];
            wake = new long[cap];
            missed = new long[cap];
        }

        /* Room for the whole run (capped): (warmup + duration) / shortest period, as the C driver. */
        private static int initialCapacity(Plan plan, long u) {
            long shortest = plan.kind() == Kind.BY_UNIT ? u * plan.ns() : plan.ns();   // < 2^63
            if (shortest < 1000) shortest = 1000;
            long cap = Math.max(64, Math.min(1L << 16, (1L << 22) / plan.units()));
            long estimate = Long.divideUnsigned(plan.warmup() + plan.duration(), shortest) + 2;
            return (int) Math.min(estimate, cap);
        }

        @Override
        public void run() {
            try {
                loop();
            } catch (Throwable t) {   // OutOfMemoryError while growing the arrays, or a bug
                failure = t;
                aborted = true;
            }
        }

        /*
         * The work loop of the protocol README, line for line; no I/O, only memory. The busy
         * result stays in a local until the loop ends, so no shared field is written while timed.
         */
        private void loop() {
            final Plan p = plan;
            final long end = this.end;
            final long origin = this.origin = System.nanoTime();
            long k = 0, next = origin + p.expected(id, 0);
            long result = 0;
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
                    long e = p.expected(id, k), intent;
                    if (p.absolute()) {
                        // Java has no absolute-deadline sleep: sleep for what is left, if anything.
                        intent = next;
                        long left = next - System.nanoTime();
                        if (left > 0) sleepFor(left);
                    } else {
                        intent = t1 + e;
                        sleepFor(e);
                    }
                    long t2 = System.nanoTime();
                    k++;
                    long m = 0;
                    if (p.absolute()) {   // skipped periods are stored with the sample that overran
                        next += p.expected(id, k);
                        while (Long.compareUnsigned(t2, next) > 0) {
                            m++;
                            k++;
                            next += p.expected(id, k);
                        }
                    }
                    if (n == expected.length) grow();
                    expected[n] = e;
                    start[n] = t0;
                    busyEnd[n] = t1;
                    intended[n] = intent;
                    wake[n] = t2;
                    missed[n] = m;
                    n++;
                }
            } finally {
                busyResult = result;
                busyRan = ran;
            }
        }

        private void grow() {
            if (expected.length >= MAX_ARRAY) throw new OutOfMemoryError("more than " + MAX_ARRAY + " samples");
            int cap = (int) Math.min(MAX_ARRAY, 2L * expected.length);
            expected = Arrays.copyOf(expected, cap);
            start = Arrays.copyOf(start, cap);
            busyEnd = Arrays.copyOf(busyEnd, cap);
            intended = Arrays.copyOf(intended, cap);
            wake = Arrays.copyOf(wake, cap);
            missed = Arrays.copyOf(missed, cap);
        }
    }

    // ---------------------------------------------------------------- plan

    private enum Kind { FIXED, BY_UNIT, MODULO }

    /** A validated plan. ns, m and iters hold unsigned 64-bit values. */
    private record Plan(String runtime, boolean virtual, int units, long duration, long warmup, boolean absolute,
                        Kind kind, long ns, long m, long iters, boolean yield) {

        long expected(long u, long k) {
            return switch (kind) {
                case FIXED -> ns;
                case BY_UNIT -> u * ns;
                case MODULO -> (Long.remainderUnsigned(k, m) + 1) * ns;
            };
        }

        static Plan load(Json root) throws Failure {
            if (!(root instanceof JObj plan)) throw refusal("the plan must be a JSON object");
            JNum pv = typed(plan, "", "protocol", JNum.class, "an integer");
            if (!pv.integer() || pv.negative() || pv.overflow() || pv.magnitude() != 1)
                throw refusal("unsupported protocol version " + clip(pv.lexeme(), 40) + " (this worker speaks 1)");
            String s = typed(plan, "", "experiment", JStr.class, "a string").value();
            if (!s.equals("sleep")) throw refusal("unknown experiment " + quoted(s) + " (this worker runs \"sleep\")");
            String runtime = typed(plan, "", "runtime", JStr.class, "a string").value();
            if (!runtime.equals(THREAD) && !runtime.equals(VIRTUAL))
                throw refusal("runtime " + quoted(runtime) + " is not served by this driver (" + THREAD + ", " + VIRTUAL + ")");
            long units = unsigned(plan, "", "units", 1);
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
                default -> throw refusal("unknown schedule kind " + quoted(kindName));
            };
            long m = kind == Kind.MODULO ? unsigned(schedule, "sleep.schedule.", "m", 1) : 1;
            long ns = unsigned(schedule, "sleep.schedule.", "ns", 0);
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
            if (absolute && ns == 0)
                throw refusal("sleep.schedule.ns must be >= 1 in absolute mode (a zero period never advances)");
            if (Long.compareUnsigned(units, MAX_ARRAY) > 0)
                throw refusal("units must be at most " + MAX_ARRAY + " in this driver");
            return new Plan(runtime, runtime.equals(VIRTUAL), (int) units, duration, warmup, absolute, kind, ns, m,
                iters, yield);
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

    /** NDJSON on stdout through one large buffer; nothing is written while measuring. */
    private static final class Out {
        private final OutputStream os = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 20);
        private final byte[] digits = new byte[20];

        Out ascii(String s) throws IOException {
            for (int i = 0; i < s.length(); i++) os.write(s.charAt(i));
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
            os.write(digits, i, digits.length - i);
            return this;
        }

        Out column(String name, long[] values, int n) throws IOException {
            ascii(",\"").ascii(name).ascii("\":[");
            for (int i = 0; i < n; i++) {
                if (i > 0) os.write(',');
                u64(values[i]);
            }
            os.write(']');
            return this;
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
            os.write(b.append('"').toString().getBytes(StandardCharsets.UTF_8));
            return this;
        }

        void flush() throws IOException {
            os.flush();
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
