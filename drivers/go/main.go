// Command driver is the taskmeter Go driver: it serves the runtime ids "go" (one goroutine per
// unit) and "go-locked" (one goroutine per unit, each locked to its own OS thread with
// runtime.LockOSThread). It implements worker protocol v2 (protocol/README.md): the plan
// arrives as one JSON line on stdin, the results leave as NDJSON on stdout.
//
// Build: go build -o driver .   (standard library only, Linux)
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const (
	protocolVersion = 2
	maxPlanBytes    = 1 << 20 // bytes in the plan line
	maxDepth        = 64      // JSON nesting of the plan
	sampleBudget    = 1 << 22 // samples reserved before the gate, shared by all units (protocol: "Storage")
)

// ---------- clock ----------

// nanotime is the Go runtime's monotonic clock: on Linux it reads clock_gettime(CLOCK_MONOTONIC)
// through the vDSO, the clock every process on the machine shares. time.Now() hides it behind
// an offset from process start, so it is reached directly (runtime.nanotime is one of the
// linknamed symbols the toolchain keeps allowing).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// now returns nanoseconds on CLOCK_MONOTONIC.
func now() uint64 { return uint64(nanotime()) }

// ---------- output ----------

type helloLine struct {
	Type           string `json:"type"`
	Protocol       int    `json:"protocol"`
	Runtime        string `json:"runtime"`
	RuntimeVersion string `json:"runtime_version"`
	Clock          string `json:"clock"`
	Pid            int    `json:"pid"`
	Priority       string `json:"priority"`
}

type doneLine struct {
	Type           string  `json:"type"`
	CreateStartNs  uint64  `json:"create_start_ns"`
	RunStartNs     uint64  `json:"run_start_ns"`
	MeasureStartNs uint64  `json:"measure_start_ns"`
	EndNs          uint64  `json:"end_ns"`
	Units          uint64  `json:"units"`
	Samples        uint64  `json:"samples"`
	Missed         uint64  `json:"missed"`
	StorageGrown   uint64  `json:"storage_grown"`
	Interrupted    bool    `json:"interrupted"`
	BusyResult     string  `json:"busy_result"`
	StartError     string  `json:"start_error,omitempty"`
	AtomicSum      *uint64 `json:"atomic_sum,omitempty"`
}

type errorLine struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

var out = bufio.NewWriterSize(os.Stdout, 1<<20)

// writeLine writes one NDJSON line. The encoder escapes every string (invalid UTF-8 becomes
// U+FFFD), so a line is always valid JSON, and ends it with '\n'.
func writeLine(v any) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // the line types above always encode
	}
}

// fail writes an error line and exits: status 2 for a refused plan, 1 for a failure.
func fail(status int, format string, args ...any) {
	writeLine(errorLine{Type: "error", Message: fmt.Sprintf(format, args...)})
	out.Flush()
	os.Exit(status)
}

// ---------- JSON ----------

// A member of a JSON object. Objects are kept as their member lists, in order, so that a name
// given twice can be seen (a map would keep only one of them).
type member struct {
	name  string
	value any
}

type object []member

// readValue reads one JSON value token by token. Objects become object, arrays []any, numbers
// json.Number (the text as written) and the rest string, bool or nil.
func readValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= maxDepth {
		return nil, errors.New("nesting too deep")
	}
	var value any
	switch delim {
	case '{':
		obj := object{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			name, _ := tok.(string) // the decoder only accepts a string here
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj = append(obj, member{name, v})
		}
		value = obj
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		value = arr
	default:
		return nil, fmt.Errorf("unexpected %q", delim)
	}
	if _, err := dec.Token(); err != nil { // the closing '}' or ']'
		return nil, err
	}
	return value, nil
}

// parseJSON parses exactly one JSON value.
func parseJSON(text []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(text)))
	dec.UseNumber()
	v, err := readValue(dec, 0)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the plan")
	}
	return v, nil
}

// ---------- plan ----------

type scheduleKind int

const (
	fixed scheduleKind = iota
	byUnit
	modulo
	noSleep // the schedule "none": one yield per iteration instead of a sleep
)

type plan struct {
	runtime       string
	locked        bool // go-locked: each unit's goroutine runs on its own OS thread
	atomicSum     bool // the experiment "atomic-sum"
	units         uint64
	classes       uint64 // priority_classes, 1 or 2
	startLimitNs  uint64
	durationNs    uint64
	warmupNs      uint64
	absolute      bool
	kind          scheduleKind
	ns, m         uint64
	iters         uint64
	yieldEachStep bool
}

// expected is the sleep of unit u (1-based) in period k (0-based).
func (p *plan) expected(u, k uint64) uint64 {
	switch p.kind {
	case byUnit:
		return u * p.ns
	case modulo:
		return (k%p.m + 1) * p.ns
	default:
		return p.ns
	}
}

// planReader reads typed fields out of the parsed plan. The first refusal sticks: after it,
// every method does nothing, so the checks read in order like the protocol lists them.
type planReader struct{ err error }

func (r *planReader) refuse(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// field returns the one value of obj named name; path is the name of obj, for messages.
func (r *planReader) field(obj object, path, name string) any {
	if r.err != nil {
		return nil
	}
	var found any
	seen := false
	for _, m := range obj {
		if m.name != name {
			continue
		}
		if seen {
			r.refuse("duplicate field %s%s", path, name)
			return nil
		}
		found, seen = m.value, true
	}
	if !seen {
		r.refuse("missing field %s%s", path, name)
	}
	return found
}

func (r *planReader) object(obj object, path, name string) object {
	v := r.field(obj, path, name)
	o, ok := v.(object)
	if !ok {
		r.refuse("%s%s must be an object", path, name)
	}
	return o
}

func (r *planReader) string(obj object, path, name string) string {
	v := r.field(obj, path, name)
	s, ok := v.(string)
	if !ok {
		r.refuse("%s%s must be a string", path, name)
	}
	return s
}

func (r *planReader) bool(obj object, path, name string) bool {
	v := r.field(obj, path, name)
	b, ok := v.(bool)
	if !ok {
		r.refuse("%s%s must be true or false", path, name)
	}
	return b
}

// integer reads a non-negative integer written without a fraction or an exponent.
func (r *planReader) integer(obj object, path, name string, min uint64) uint64 {
	v := r.field(obj, path, name)
	if r.err != nil {
		return 0
	}
	num, ok := v.(json.Number)
	if !ok {
		r.refuse("%s%s must be an integer", path, name)
		return 0
	}
	text := string(num)
	if strings.ContainsAny(text, ".eE") {
		r.refuse("%s%s must be an integer (got %s)", path, name, clip(text, 40))
		return 0
	}
	negative := strings.HasPrefix(text, "-")
	n, err := strconv.ParseUint(strings.TrimPrefix(text, "-"), 10, 64)
	switch {
	case negative && (n != 0 || err != nil), err == nil && n < min:
		r.refuse("%s%s must be >= %d", path, name, min)
	case err != nil:
		r.refuse("%s%s is out of range", path, name)
	}
	return n
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// parsePlan checks the plan line; its error is the message of the worker's error line.
func parsePlan(text []byte) (*plan, error) {
	value, err := parseJSON(text)
	if err != nil {
		return nil, fmt.Errorf("the plan is not valid JSON: %v", err)
	}
	root, ok := value.(object)
	if !ok {
		return nil, errors.New("the plan must be a JSON object")
	}
	r := &planReader{}
	p := &plan{}

	// protocol first: a plan of another version may mean anything else.
	if v := r.field(root, "", "protocol"); r.err == nil {
		num, ok := v.(json.Number)
		if !ok {
			return nil, errors.New("protocol must be an integer")
		}
		if string(num) != strconv.Itoa(protocolVersion) {
			return nil, fmt.Errorf("unsupported protocol version %s (this worker speaks %d)", clip(string(num), 40), protocolVersion)
		}
	}
	switch s := r.string(root, "", "experiment"); {
	case r.err != nil:
	case s == "atomic-sum":
		p.atomicSum = true
	case s != "sleep":
		r.refuse("unknown experiment %q (this worker runs \"sleep\" and \"atomic-sum\")", clip(s, 64))
	}
	p.runtime = r.string(root, "", "runtime")
	if r.err == nil && p.runtime != "go" && p.runtime != "go-locked" {
		r.refuse("runtime %q is not served by this driver (go, go-locked)", clip(p.runtime, 64))
	}
	p.locked = p.runtime == "go-locked"
	p.units = r.integer(root, "", "units", 1)
	p.classes = r.integer(root, "", "priority_classes", 1)
	if r.err == nil && p.classes > 2 {
		r.refuse("priority_classes must be 1 or 2 (got %d)", p.classes)
	}
	p.startLimitNs = r.integer(root, "", "start_limit_ns", 1)
	p.durationNs = r.integer(root, "", "duration_ns", 1)
	p.warmupNs = r.integer(root, "", "warmup_ns", 0)

	sleep := r.object(root, "", "sleep")
	switch mode := r.string(sleep, "sleep.", "mode"); {
	case r.err != nil:
	case mode == "absolute":
		p.absolute = true
	case mode != "relative":
		r.refuse("unknown sleep mode %q", clip(mode, 64))
	}
	schedule := r.object(sleep, "sleep.", "schedule")
	switch kind := r.string(schedule, "sleep.schedule.", "kind"); {
	case r.err != nil:
	case kind == "fixed":
		p.kind = fixed
	case kind == "by-unit":
		p.kind = byUnit
	case kind == "modulo":
		p.kind = modulo
		p.m = r.integer(schedule, "sleep.schedule.", "m", 1)
	case kind == "none":
		p.kind = noSleep
	default:
		r.refuse("unknown schedule kind %q", clip(kind, 64))
	}
	if p.kind != noSleep {
		p.ns = r.integer(schedule, "sleep.schedule.", "ns", 0)
	}

	busy := r.object(root, "", "busy")
	p.iters = r.integer(busy, "busy.", "iters", 0)
	p.yieldEachStep = r.bool(busy, "busy.", "yield")
	if r.err != nil {
		return nil, r.err
	}

	// Every deadline stays below 2^64: timestamps (uptime) are far below 2^63 ns, so a run
	// length and a longest period below 2^63 cannot overflow end, intended or next.
	if p.durationNs > math.MaxInt64 || p.warmupNs > math.MaxInt64-p.durationNs {
		return nil, errors.New("warmup_ns + duration_ns must be below 2^63")
	}
	mult := uint64(1)
	switch p.kind {
	case byUnit:
		mult = p.units
	case modulo:
		mult = p.m
	}
	if hi, longest := bits.Mul64(mult, p.ns); hi != 0 || longest > math.MaxInt64 {
		return nil, errors.New("the longest sleep of the schedule must be below 2^63 ns")
	}
	// With a zero period the absolute deadline never moves and the missed-period rule never ends.
	if p.absolute && p.kind != noSleep && p.ns == 0 {
		return nil, errors.New("sleep.schedule.ns must be >= 1 in absolute mode (a zero period never advances)")
	}
	return p, nil
}

// readPlan reads the plan line (without its '\n'); end of file also ends it.
func readPlan(in *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := in.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxPlanBytes+1 {
			return nil, errTooLong
		}
		switch err {
		case nil:
			return line[:len(line)-1], nil
		case io.EOF:
			return line, nil
		case bufio.ErrBufferFull:
			continue
		default:
			return nil, err
		}
	}
}

var errTooLong = fmt.Errorf("the plan line is longer than %d bytes", maxPlanBytes)

// ---------- priority classes ----------

const (
	schedFIFO = 1
	schedRR   = 2
)

// threadSched is what /proc/thread-self/stat says about the calling thread: its nice value
// (field 19), real-time priority (field 40) and scheduling policy (field 41).
type threadSched struct{ nice, rtPrio, policy int }

func readThreadSched() (threadSched, error) {
	data, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		return threadSched{}, err
	}
	// Field 2, the command name, is in parentheses and may hold spaces: count after the last ')'.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	var s threadSched
	for _, f := range []struct {
		n   int
		dst *int
	}{{19, &s.nice}, {40, &s.rtPrio}, {41, &s.policy}} {
		if len(fields) < f.n-2 {
			return s, errors.New("/proc/thread-self/stat is too short")
		}
		if *f.dst, err = strconv.Atoi(fields[f.n-3]); err != nil {
			return s, fmt.Errorf("/proc/thread-self/stat field %d: %v", f.n, err)
		}
	}
	return s, nil
}

// priority is how the units of this run get their class's priority (protocol: "Priority
// classes"). Goroutines have none; the OS thread of a go-locked unit gets a nice value, or a
// real-time priority when the worker runs under SCHED_FIFO or SCHED_RR.
type priority struct {
	kind      string // "none", "nice" or "rt-priority"
	policy    int    // rt-priority: the worker's policy, kept
	high, low int    // the nice value or real-time priority of class 0 and class 1
}

func priorityOf(p *plan) (priority, error) {
	if p.classes < 2 || !p.locked {
		return priority{kind: "none"}, nil
	}
	// Every thread of the process still has the attributes the worker was started with.
	s, err := readThreadSched()
	if err != nil {
		return priority{}, fmt.Errorf("cannot read the worker's scheduling attributes: %v", err)
	}
	if s.policy == schedFIFO || s.policy == schedRR {
		return priority{kind: "rt-priority", policy: s.policy, high: s.rtPrio, low: max(1, s.rtPrio-1)}, nil
	}
	return priority{kind: "nice", high: s.nice, low: min(19, s.nice+10)}, nil
}

// describe is hello.priority.
func (pr priority) describe(p *plan) string {
	switch {
	case pr.kind == "nice":
		return fmt.Sprintf("nice: high %d, low %d (setpriority on each unit's locked thread, read back from /proc/thread-self/stat)", pr.high, pr.low)
	case pr.kind == "rt-priority":
		policy := map[int]string{schedFIFO: "SCHED_FIFO", schedRR: "SCHED_RR"}[pr.policy]
		return fmt.Sprintf("rt-priority: high %d, low %d (%s, sched_setscheduler on each unit's locked thread, read back from /proc/thread-self/stat)", pr.high, pr.low, policy)
	case p.classes > 1:
		return "none: goroutines have no priority"
	default:
		return "none"
	}
}

// apply gives the calling thread the priority of class, and checks in /proc that it has it.
// The caller is a goroutine locked to its thread, so the thread is the unit's own.
func (pr priority) apply(class uint64) error {
	if pr.kind == "none" {
		return nil
	}
	want := pr.high
	if class == 1 {
		want = pr.low
	}
	tid := syscall.Gettid()
	if pr.kind == "nice" {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, want); err != nil {
			return fmt.Errorf("setpriority(PRIO_PROCESS, %d, %d): %v", tid, want, err)
		}
	} else {
		param := struct{ priority int32 }{int32(want)} // struct sched_param
		_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(pr.policy), uintptr(unsafe.Pointer(&param)))
		if errno != 0 {
			return fmt.Errorf("sched_setscheduler(%d, %d, %d): %v", tid, pr.policy, want, errno)
		}
	}
	s, err := readThreadSched()
	switch {
	case err != nil:
		return fmt.Errorf("cannot read back the priority: %v", err)
	case pr.kind == "nice" && s.nice != want:
		return fmt.Errorf("set nice %d, but /proc/thread-self/stat says %d", want, s.nice)
	case pr.kind == "rt-priority" && (s.rtPrio != want || s.policy != pr.policy):
		return fmt.Errorf("set policy %d priority %d, but /proc/thread-self/stat says policy %d priority %d", pr.policy, want, s.policy, s.rtPrio)
	}
	return nil
}

// ---------- how many units may start ----------

// Go cannot recover from a failed start: a goroutine that finds no memory, or a locked unit whose
// thread the kernel refuses ("runtime: failed to create new OS thread"), aborts the whole
// process. So the driver computes, before starting, how many units the machine allows now, with
// a margin, and starts no more; the protocol counts that as a start that failed for a reason
// outside the plan.

// Memory of one unit, estimated on the high side: measured here, about 3 KiB per goroutine, and
// per locked unit 17-40 KiB of RSS (the runtime's g0 and signal stacks, its M) plus 23 KiB
// of kernel memory (stack, task), which MemAvailable also loses.
const (
	goroutineBytes = 16 << 10
	threadBytes    = 128 << 10
)

type unitLimit struct {
	units uint64 // at most this many units start
	why   string // the start_error when the plan asks for more
}

type room struct {
	free int64  // threads (or bytes) that may still be created
	what string // what sets it, for the start_error
}

func limitUnits(p *plan) unitLimit {
	lim := unitLimit{units: math.MaxUint64}
	perUnit := uint64(goroutineBytes)
	if p.locked {
		perUnit = threadBytes
	}
	perUnit += reserve(p, 1) * uint64(unsafe.Sizeof(sample{})) // unit 1 reserves the most
	if mem, ok := availableMemory(); ok {
		n := uint64(max(mem.free, 0)) / 2 / perUnit
		lim = unitLimit{n, fmt.Sprintf("%s stops at %d units: Go aborts the process when it runs out of memory, so units are capped at half of %s at about %d KiB per unit with its samples",
			p.runtime, n, mem.what, perUnit>>10)}
	}
	if !p.locked {
		return lim
	}
	// Threads that are not units: one per P, sysmon, the template thread, the stdin reader
	// and idle ones (measured: 9 to 10 with GOMAXPROCS 2).
	own := 16 + 2*int64(runtime.GOMAXPROCS(0))
	threads, _ := readStatusInt("Threads:")
	kernelRoom := int64(math.MaxInt32)
	for _, r := range threadRooms() {
		kernelRoom = min(kernelRoom, r.free)
		others := max(r.free/32, 0) // left to other processes, which share the limit
		if n := uint64(max(r.free-own-others, 0)); n < lim.units {
			lim = unitLimit{n, fmt.Sprintf("go-locked stops at %d units: the Go runtime aborts the whole process when it cannot create a thread, so the driver stays below the kernel's limits; the first is %s, which leaves %d threads, of which %d are kept for the runtime's own threads and %d (1/32) for other processes",
				n, r.what, r.free, own, others)}
		}
	}
	// The runtime's own limit (10000 threads by default) must not be the one hit first: the
	// kernel's is the real one.
	debug.SetMaxThreads(int(max(10000, min(threads+kernelRoom, math.MaxInt32))))
	return lim
}

// threadRooms lists the kernel's limits on the number of threads this process may still create.
func threadRooms() []room {
	var rooms []room
	if tasks, ok := tasksOnMachine(); ok {
		if n, ok := readInt("/proc/sys/kernel/threads-max"); ok {
			rooms = append(rooms, room{n - tasks, fmt.Sprintf("kernel.threads-max %d with %d threads on the machine", n, tasks)})
		}
		// Once the pid counter has wrapped, pids below 300 are never handed out again.
		if n, ok := readInt("/proc/sys/kernel/pid_max"); ok {
			rooms = append(rooms, room{n - 300 - tasks, fmt.Sprintf("kernel.pid_max %d (less 300 reserved pids) with %d threads on the machine", n, tasks)})
		}
	}
	// RLIMIT_NPROC counts every thread of the user, and does not apply to root.
	var rl syscall.Rlimit
	const rlimitNproc = 6
	if uid := os.Getuid(); uid != 0 && syscall.Getrlimit(rlimitNproc, &rl) == nil && rl.Cur < math.MaxInt64 {
		mine := threadsOfUser(uint32(uid))
		rooms = append(rooms, room{int64(rl.Cur) - mine, fmt.Sprintf("RLIMIT_NPROC (ulimit -u) %d with %d threads of uid %d", rl.Cur, mine, uid)})
	}
	for _, dir := range cgroupDirs("pids") {
		limit, ok1 := readInt(filepath.Join(dir, "pids.max"))
		current, ok2 := readInt(filepath.Join(dir, "pids.current"))
		if ok1 && ok2 {
			rooms = append(rooms, room{limit - current, fmt.Sprintf("%s/pids.max %d with %d in use", dir, limit, current)})
		}
	}
	return rooms
}

// availableMemory is the smaller of MemAvailable and the room left under a cgroup memory limit.
func availableMemory() (room, bool) {
	best, found := room{free: math.MaxInt64}, false
	if kb, ok := readMeminfo("MemAvailable:"); ok {
		best, found = room{kb << 10, fmt.Sprintf("MemAvailable (%d MiB)", kb>>10)}, true
	}
	for _, dir := range cgroupDirs("memory") {
		for _, f := range [][2]string{{"memory.max", "memory.current"}, {"memory.limit_in_bytes", "memory.usage_in_bytes"}} {
			limit, ok1 := readInt(filepath.Join(dir, f[0]))
			used, ok2 := readInt(filepath.Join(dir, f[1]))
			if ok1 && ok2 && limit-used < best.free {
				best, found = room{limit - used, fmt.Sprintf("the room under %s/%s (%d MiB)", dir, f[0], (limit-used)>>20)}, true
			}
		}
	}
	return best, found
}

// cgroupDirs lists this process's cgroup directories for a controller (cgroup v2, or the v1
// hierarchy of that controller), from its own up to the root: the limits of ancestors apply too.
func cgroupDirs(controller string) []string {
	data, _ := os.ReadFile("/proc/self/cgroup")
	var dirs []string
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var roots []string
		switch {
		case parts[0] == "0" && parts[1] == "":
			roots = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
		case parts[1] == controller || strings.Contains(","+parts[1]+",", ","+controller+","):
			roots = []string{"/sys/fs/cgroup/" + parts[1]}
		}
		for _, root := range roots {
			for dir := filepath.Join(root, parts[2]); strings.HasPrefix(dir, root); dir = filepath.Dir(dir) {
				dirs = append(dirs, dir)
				if dir == root {
					break
				}
			}
		}
	}
	return dirs
}

// tasksOnMachine is the number of threads on the machine (the kernel's nr_threads, which
// /proc/loadavg shows after the '/').
func tasksOnMachine() (int64, bool) {
	data, err := os.ReadFile("/proc/loadavg")
	fields := strings.Fields(string(data))
	if err != nil || len(fields) < 4 {
		return 0, false
	}
	_, total, _ := strings.Cut(fields[3], "/")
	n, err := strconv.ParseInt(total, 10, 64)
	return n, err == nil
}

// threadsOfUser counts the threads of the processes uid owns.
func threadsOfUser(uid uint32) int64 {
	entries, _ := os.ReadDir("/proc")
	var n int64
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if info, err := os.Stat("/proc/" + e.Name()); err == nil && info.Sys().(*syscall.Stat_t).Uid == uid {
			tasks, _ := os.ReadDir("/proc/" + e.Name() + "/task")
			n += int64(len(tasks))
		}
	}
	return n
}

// readInt reads a file holding one integer ("max" and the like do not count).
func readInt(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil
}

// readMeminfo reads a "Name: value kB" line of /proc/meminfo.
func readMeminfo(name string) (int64, bool) { return readKeyed("/proc/meminfo", name) }

// readStatusInt reads a "Name: value" line of /proc/self/status.
func readStatusInt(name string) (int64, bool) { return readKeyed("/proc/self/status", name) }

func readKeyed(path, name string) (int64, bool) {
	data, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0, false
			}
			n, err := strconv.ParseInt(fields[0], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// ---------- measurement ----------

// sink keeps the busy work's result alive, so the compiler can neither drop nor fold the loop.
var sink uint64

// busy is the protocol's busy work: wrap-around uint64 arithmetic, optionally yielding to the
// Go scheduler after every step.
//
//go:noinline
func busy(iters uint64, yieldEachStep bool) uint64 {
	var total uint64
	for i := uint64(0); i < iters; i++ {
		total++
		total = total * 3 / 2
		if yieldEachStep {
			runtime.Gosched()
		}
	}
	sink = total
	return total
}

// A sample, in the order of the unit line's columns.
type sample [6]uint64

var columns = [6]string{"expected_ns", "start_ns", "busy_end_ns", "intended_ns", "wake_ns", "missed"}

type unit struct {
	id, class  uint64
	origin     uint64
	iterations uint64 // n of the work loop
	measured   uint64 // n_meas
	busyResult uint64
	busyRan    bool
	samples    []sample
	grown      uint64 // times samples outgrew its reserve
}

type worker struct {
	plan         *plan
	prio         priority
	parked       sync.WaitGroup // every unit started is Done once it waits at the gate
	start        chan struct{}  // closed at run_start: the start gate
	measureStart uint64
	end          uint64
	counter      atomic.Uint64 // atomic-sum: Add is sequentially consistent (Go memory model)
	stop         atomic.Bool   // stdin reached end of file: stop early
	interrupted  atomic.Bool   // a unit stopped because of it
}

// sleepUntil sleeps until deadline on CLOCK_MONOTONIC. Go has no absolute-deadline sleep:
// this is a relative time.Sleep of what is left (none when the deadline has passed). The Go
// timer itself computes its own deadline from nanotime() a moment later, so it never fires early.
func sleepUntil(deadline uint64) {
	if left := int64(deadline - now()); left > 0 {
		time.Sleep(time.Duration(left))
	}
}

// run is one unit: it takes its class's priority (go-locked), reserves its storage, parks at
// the start gate (reporting on ready, go-locked), then runs the work loop of the protocol
// README, step for step.
func (w *worker) run(u *unit, ready chan<- error) {
	p := w.plan
	if p.locked {
		// Never unlocked: when the goroutine ends its thread ends too, so a thread with a
		// unit's nice value never goes back to the runtime to run something else. (Threads
		// the runtime starts from a locked one are cloned from its clean template thread.)
		runtime.LockOSThread()
		if err := w.prio.apply(u.class); err != nil {
			ready <- err
			return
		}
	}
	u.samples = reserveSamples(reserve(p, u.id))
	w.parked.Done()
	if p.locked {
		ready <- nil
	}
	<-w.start
	origin := now()
	u.origin = origin
	k := uint64(0)
	next := origin + p.expected(u.id, 0)
	for {
		t0 := now()
		if t0 >= w.end {
			break
		}
		if w.stop.Load() {
			w.interrupted.Store(true)
			break
		}
		t1 := t0
		if p.iters > 0 {
			u.busyResult = busy(p.iters, p.yieldEachStep)
			u.busyRan = true
			t1 = now()
		}
		var s sample
		if p.kind == noSleep {
			runtime.Gosched()
		} else {
			e := p.expected(u.id, k)
			var intended uint64
			if p.absolute {
				intended = next
				sleepUntil(next)
			} else {
				intended = t1 + e
				time.Sleep(time.Duration(e)) // returns at once for 0
			}
			t2 := now()
			k++
			var missed uint64
			if p.absolute { // skipped periods are stored with the sample that overran
				next += p.expected(u.id, k)
				for t2 > next {
					missed++
					k++
					next += p.expected(u.id, k)
				}
			}
			s = sample{e, t0, t1, intended, t2, missed}
		}
		if p.atomicSum {
			w.counter.Add(1)
		}
		u.iterations++
		if t0 >= w.measureStart {
			u.measured++
		}
		if p.kind != noSleep { // memory only, never I/O, while measuring
			if len(u.samples) == cap(u.samples) { // past the reserve: double it, and count it
				u.samples = slices.Grow(u.samples, cap(u.samples))
				u.grown++
			}
			u.samples = append(u.samples, s)
		}
	}
}

// reserve is the number of samples unit u reserves before the gate, the same in every worker
// (protocol: "Storage"): what the schedule can take (an iteration lasts at least its sleep,
// counted as at least 1 us; a modulo cycle of m periods sleeps m(m+1)/2 x ns) plus 16, within
// an equal share of sampleBudget, and at least 16.
func reserve(p *plan, u uint64) uint64 {
	total := p.warmupNs + p.durationNs // below 2^63
	var estimate uint64
	switch p.kind {
	case noSleep:
		return 0
	case modulo:
		// total*m / (ns*m*(m+1)/2) is 2*total / (ns*(m+1)); a denominator past 64 bits exceeds
		// 2*total (below 2^64), so no whole cycle fits.
		if hi, den := bits.Mul64(max(p.ns, 1000), p.m+1); hi == 0 {
			estimate = 2 * total / den
		}
		estimate += p.m
	default:
		estimate = total / max(p.expected(u, 0), 1000)
	}
	return max(16, min(estimate+16, sampleBudget/p.units))
}

// reserveSamples allocates n samples and writes every one of them, so that storing a sample
// while measuring takes no page fault (a fresh make maps zero pages, faulted in on first write),
// and returns them empty.
func reserveSamples(n uint64) []sample {
	s := make([]sample, n)
	for i := range s {
		s[i] = sample{math.MaxUint64}
	}
	return s[:0]
}

// writeUnit writes one unit line, its samples in columns.
func writeUnit(u *unit, buf []byte) []byte {
	buf = append(buf[:0], `{"type":"unit","unit":`...)
	buf = strconv.AppendUint(buf, u.id, 10)
	buf = append(buf, `,"class":`...)
	buf = strconv.AppendUint(buf, u.class, 10)
	buf = append(buf, `,"origin_ns":`...)
	buf = strconv.AppendUint(buf, u.origin, 10)
	buf = append(buf, `,"iterations":`...)
	buf = strconv.AppendUint(buf, u.iterations, 10)
	buf = append(buf, `,"measured_iterations":`...)
	buf = strconv.AppendUint(buf, u.measured, 10)
	for c, name := range columns {
		buf = append(buf, `,"`...)
		buf = append(buf, name...)
		buf = append(buf, `":[`...)
		for i := range u.samples {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendUint(buf, u.samples[i][c], 10)
			if len(buf) >= 1<<16 { // keep the scratch buffer small
				out.Write(buf)
				buf = buf[:0]
			}
		}
		buf = append(buf, ']')
	}
	buf = append(buf, "}\n"...)
	out.Write(buf)
	return buf[:0]
}

// fmtNs writes a duration of the plan for a message.
func fmtNs(ns uint64) string {
	if ns > math.MaxInt64 {
		return strconv.FormatUint(ns, 10) + "ns"
	}
	return time.Duration(ns).String()
}

func plural(n uint64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.FormatUint(n, 10) + " " + word + "s"
}

// The orchestrator reads the worker's scheduling attributes back from /proc/<pid>, which shows
// the main thread: the main goroutine keeps it (LockOSThread in init runs main on the main
// thread), so that no go-locked unit takes it over and renices it.
func init() { runtime.LockOSThread() }

func main() {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	line, err := readPlan(in)
	planRead := now() // start_limit_ns counts from here
	switch {
	case err == errTooLong:
		fail(2, "%v", err)
	case err != nil:
		fail(1, "cannot read the plan: %v", err)
	}
	p, err := parsePlan(line)
	if err != nil {
		fail(2, "%v", err)
	}
	if !p.locked {
		runtime.UnlockOSThread() // go: the main goroutine is an ordinary one
	}
	prio, err := priorityOf(p)
	if err != nil {
		fail(1, "%v", err)
	}
	limit := limitUnits(p)
	if limit.units == 0 {
		fail(1, "cannot start unit 1: %s", limit.why)
	}

	units := make([]unit, min(p.units, limit.units))
	for i := range units {
		units[i].id = uint64(i) + 1
		units[i].class = uint64(i) % p.classes
	}

	version := runtime.Version()
	if p.locked {
		version += " (LockOSThread)"
	}
	writeLine(helloLine{Type: "hello", Protocol: protocolVersion, Runtime: p.runtime,
		RuntimeVersion: version, Clock: "CLOCK_MONOTONIC", Pid: os.Getpid(), Priority: prio.describe(p)})
	if err := out.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "taskmeter go driver: cannot write: %v\n", err)
		os.Exit(1)
	}

	w := &worker{plan: p, prio: prio, start: make(chan struct{})}
	// End of file (or an error) on stdin after the plan means: stop early.
	go func() {
		io.Copy(io.Discard, in)
		w.stop.Store(true)
	}()

	// Start the units in order; each parks at the start gate once its storage is written (the
	// protocol's work loop, steps 1 and 2). A go-locked unit reports once it holds its thread,
	// its priority and its storage, so the next one is started after that thread exists.
	var wg sync.WaitGroup
	ready := make(chan error)
	started, startError := uint64(0), ""
	createStart := now()
	for i := range units {
		u := &units[i]
		if u.id > 1 {
			if w.stop.Load() {
				startError = fmt.Sprintf("stop requested (stdin closed) after %s had started", plural(started, "unit"))
				break
			}
			if now()-planRead >= p.startLimitNs {
				startError = fmt.Sprintf("start limit of %s reached after %s", fmtNs(p.startLimitNs), plural(started, "unit"))
				break
			}
		}
		wg.Add(1)
		w.parked.Add(1)
		go func() {
			defer wg.Done()
			w.run(u, ready)
		}()
		if p.locked {
			if err := <-ready; err != nil {
				fail(1, "unit %d could not take the priority of class %d: %v", u.id, u.class, err)
			}
		}
		started = u.id
	}
	if startError == "" && started < p.units {
		startError = limit.why
	}

	w.parked.Wait()
	runStart := now()
	w.measureStart = runStart + p.warmupNs
	w.end = w.measureStart + p.durationNs
	close(w.start)
	// A diagnostic for humans (stderr is shown when a row fails): how long the start took.
	fmt.Fprintf(os.Stderr, "taskmeter go driver: %s started %d of %d units in %.3f s\n",
		p.runtime, started, p.units, float64(runStart-createStart)/1e9)
	wg.Wait()

	var samples, missed, grown, result uint64
	haveResult := false
	for i := range units[:started] {
		if u := &units[i]; u.busyRan && !haveResult {
			result, haveResult = u.busyResult, true
		}
	}
	if !haveResult { // no unit got to run its busy phase
		result = busy(p.iters, false)
	}

	var buf []byte
	for i := range units[:started] {
		u := &units[i]
		buf = writeUnit(u, buf)
		samples += uint64(len(u.samples))
		grown += u.grown
		for _, s := range u.samples {
			missed += s[5]
		}
	}
	done := doneLine{Type: "done", CreateStartNs: createStart, RunStartNs: runStart, MeasureStartNs: w.measureStart,
		EndNs: w.end, Units: started, Samples: samples, Missed: missed, StorageGrown: grown, Interrupted: w.interrupted.Load(),
		BusyResult: strconv.FormatUint(result, 10), StartError: startError}
	if p.atomicSum {
		sum := w.counter.Load()
		done.AtomicSum = &sum
	}
	writeLine(done)
	if err := out.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "taskmeter go driver: cannot write the results: %v\n", err)
		os.Exit(1)
	}
}
