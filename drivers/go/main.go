// Command driver is the taskmeter Go driver, worker protocol v6 (protocol/README.md). It serves
// "go" (one goroutine per unit) and "go-locked" (one goroutine per unit, each locked to its own
// OS thread). Standard library only, Linux.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// nanotime is clock_gettime(CLOCK_MONOTONIC) through the vDSO, the clock every process shares
// (time.Now only exposes an offset from process start).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

func now() uint64 { return uint64(nanotime()) }

// ---------- plan ----------

// plan is the flat plan, already validated by the orchestrator (encoding/json matches a key to
// a field name ignoring case; the tags name the others).
type plan struct {
	Protocol                            int
	Runtime, Experiment, Mode, Schedule string
	Units, Classes, Modulo, Ring        uint64
	StartLimit                          uint64 `json:"start_limit_ns"`
	Warmup                              uint64 `json:"warmup_ns"`
	Duration                            uint64 `json:"duration_ns"`
	SleepNs                             uint64 `json:"sleep_ns"`
	BusyIters                           uint64 `json:"busy_iters"`
	BusyYield                           bool   `json:"busy_yield"`
	Flush                               uint64 `json:"flush_ns"`
	// The machine's room, read by the orchestrator as it started this worker (nil: unknown).
	RoomThreads                       *int64 `json:"room_threads"`
	RoomThreadsWhy                    string `json:"room_threads_why"`
	RoomMemory                        *int64 `json:"room_memory_bytes"`
	RoomMemoryWhy                     string `json:"room_memory_why"`
	locked, absolute, none, atomicSum bool   // derived once, so the loop compares no strings
	// The granularity experiment's keys (absent from the other experiments' plans).
	Pattern      string
	Width, Steps uint64
	Grains       string `json:"grains_ns"`
	Calibrate    uint64 `json:"calibrate_ns"`
	// The wait recipe (protocol: "Wait recipes"): "" (or "sleep") for the runtime's own sleep.
	Wait string
}

// expected is the sleep of unit u (1-based) in period k (0-based).
func (p *plan) expected(u, k uint64) uint64 {
	switch p.Schedule {
	case "by-unit":
		return u * p.SleepNs
	case "modulo":
		return (k%p.Modulo + 1) * p.SleepNs
	}
	return p.SleepNs
}

// ---------- frames ----------

// appendFrame appends one frame: kind, u32 little-endian payload length, JSON payload.
func appendFrame(buf []byte, kind byte, payload map[string]any) []byte {
	text, _ := json.Marshal(payload) // maps of numbers, strings and booleans always encode
	buf = binary.LittleEndian.AppendUint32(append(buf, kind), uint32(len(text)))
	return append(buf, text...)
}

// appendUnitEnd appends a unit's U frame: 36 bytes, little-endian, unit (u32), then origin,
// iterations, measured iterations and lost (u64).
func appendUnitEnd(buf []byte, u *unit) []byte {
	le := binary.LittleEndian
	buf = le.AppendUint32(le.AppendUint32(append(buf, 'U'), 36), uint32(u.id))
	for _, word := range []uint64{u.origin, u.n, u.nMeas, u.lost} {
		buf = le.AppendUint64(buf, word)
	}
	return buf
}

// emit writes whole frames to stdout once buf holds at least min bytes, and returns what is
// left to send.
func emit(buf []byte, min int) []byte {
	if len(buf) < max(min, 1) {
		return buf
	} else if _, err := os.Stdout.Write(buf); err != nil {
		os.Exit(1) // the orchestrator is gone: no one is left to tell
	}
	return buf[:0]
}

// protocol is the worker protocol this driver speaks: the plan's, and H's.
const protocol = 6

// sampleFile is the descriptor of the sample file, which taskmeter opens for appending.
const sampleFile = 3

// appendSamples writes whole frames to the sample file in one write(2), so that frames of the
// writer and of units writing at once never interleave: syscall.Write, since an os.File would
// finish a short write with a second one, which another goroutine's frame could precede. False
// when the write failed or was short.
func appendSamples(frames []byte) bool {
	for {
		n, err := syscall.Write(sampleFile, frames)
		if err != syscall.EINTR {
			return err == nil && n == len(frames)
		}
	}
}

// emitSamples is emit for the writer's S frames, to the sample file.
func emitSamples(buf []byte, min int) []byte {
	if len(buf) < max(min, 1) {
		return buf
	} else if !appendSamples(buf) {
		fmt.Fprintf(os.Stderr, "taskmeter go driver: cannot append %d bytes to the sample file\n", len(buf))
		os.Exit(1)
	}
	return buf[:0]
}

// fail sends an E frame and exits: status 2 for a refused plan, 1 for a failure.
func fail(status int, format string, args ...any) {
	emit(appendFrame(nil, 'E', map[string]any{"message": fmt.Sprintf(format, args...)}), 0)
	os.Exit(status)
}

// ---------- units ----------

type unit struct {
	id, class uint64
	ring      []uint64 // ring samples of 4 words, filled before the gate
	// Positions: head is published by the unit; tail moves by compare-and-swap, by the writer
	// or by the unit when its ring is full.
	head, tail         atomic.Uint64
	origin, busyResult uint64
	n, nMeas, lost     uint64   // the loop's n and n_meas; samples whose own write failed
	own                []byte   // the F frame of its full ring, made at its first own write
	_                  [64]byte // keeps one unit's hot fields off its neighbour's cache line
}

// appendFrame appends an S or F frame (kind) of the samples at positions from to to. A
// consumer's copy may race the unit's rewrite of a slot it has taken back (a racy read of a
// word still yields a word written): such a copy is thrown away when its swap of tail fails.
func (u *unit) appendFrame(buf []byte, kind byte, from, to uint64) []byte {
	le, ring := binary.LittleEndian, uint64(len(u.ring)/4)
	buf = le.AppendUint32(append(buf, kind), uint32(24+32*(to-from)))
	buf = le.AppendUint32(le.AppendUint32(buf, uint32(u.id)), uint32(to-from))
	buf = le.AppendUint64(le.AppendUint64(buf, u.origin), from) // origin: set before the first sample
	for t := from; t < to; t++ {
		for _, v := range u.ring[t%ring*4:][:4] {
			buf = le.AppendUint64(buf, v)
		}
	}
	return buf
}

// writeOwnRing: the ring is full (the writer fell behind, tail was read at t), so the unit takes
// its samples back by a compare-and-swap of tail (if it fails, the writer took them and there is
// room) and appends them as one F frame itself: it never waits for the writer. The slots are its
// own until its next put. A failed write loses them, counted.
func (u *unit) writeOwnRing(t, head uint64) {
	if !u.tail.CompareAndSwap(t, head) {
		return
	}
	u.own = u.appendFrame(u.own[:0], 'F', t, head)
	if !appendSamples(u.own) {
		u.lost += head - t
	}
}

type worker struct {
	plan              *plan
	prio              priority
	parked            sync.WaitGroup // Done once per unit waiting at the gate
	gate              chan struct{}  // closed at run_start
	measureStart, end uint64
	counter           atomic.Uint64 // atomic-sum: Go's atomics are sequentially consistent
	stop              atomic.Bool   // stdin reached end of file
	interrupted       atomic.Bool
}

// busy is the protocol's busy work. Not inlined, and its result is kept in the unit, so the
// compiler can neither drop nor fold the loop (checked with go tool objdump).
//
//go:noinline
func busy(iters uint64, yield bool) uint64 {
	var total uint64
	for i := uint64(0); i < iters; i++ {
		total++
		total = total * 3 / 2
		if yield {
			runtime.Gosched()
		}
	}
	return total
}

// sleepUntil: Go has no absolute-deadline sleep, so it sleeps what is left (nothing once the
// deadline has passed). The timer takes its deadline from the clock a moment later: never early.
func sleepUntil(deadline uint64) {
	if left := int64(deadline - now()); left > 0 {
		time.Sleep(time.Duration(left))
	}
}

// ---------- wait recipes ----------

// Wait recipes (protocol: "Wait recipes"): other ways for a unit to wait until an absolute
// CLOCK_MONOTONIC deadline in ns (now() above), each a function to copy into a program. The
// plan's "wait" names one; each unit makes its own waiter (the timer recipe keeps a timer).
var recipes = map[string]func() func(deadline uint64){
	"timer":           newTimerWait,
	"clock-nanosleep": func() func(uint64) { return clockNanosleepUntil },
	"spin-gosched":    func() func(uint64) { return spinGoschedUntil },
	"spin":            func() func(uint64) { return spinUntil },
	"hybrid":          func() func(uint64) { return hybridUntil },
}

// newTimerWait returns a wait on one time.Timer, reset to each deadline: the select-able way
// (a case beside other channels). Not a time.Ticker: a ticker ticks at a fixed period from
// when it was made, so it fits neither the by-unit and modulo schedules nor the unit's origin,
// and it drops the ticks its reader misses instead of counting them.
func newTimerWait() func(uint64) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	return func(deadline uint64) {
		timer.Reset(time.Duration(int64(deadline - now()))) // fires at once when it has passed
		<-timer.C
	}
}

// clockNanosleepUntil is clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME): the kernel's own
// absolute sleep, past the runtime's millisecond epoll_wait. syscall.Syscall6 (not
// RawSyscall6) tells the scheduler, which hands the goroutine's P to another thread while it
// sleeps: so every sleeping unit holds an OS thread of its own (in go-locked it has one anyway).
func clockNanosleepUntil(deadline uint64) {
	const clockMonotonic, timerAbstime = 1, 1 // <time.h>; package syscall names neither
	at := syscall.NsecToTimespec(int64(deadline))
	for { // the runtime's preemption signals (SIGURG) interrupt it: sleep again, same deadline
		_, _, errno := syscall.Syscall6(syscall.SYS_CLOCK_NANOSLEEP, clockMonotonic, timerAbstime,
			uintptr(unsafe.Pointer(&at)), 0, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// spinGoschedUntil yields to the scheduler (runtime.Gosched) until the deadline: other
// goroutines run in between, and the unit keeps its core busy whenever none is runnable.
func spinGoschedUntil(deadline uint64) {
	for now() < deadline {
		runtime.Gosched()
	}
}

// spinUntil reads the clock until the deadline, without yielding: the most precise wait, and
// one that starves the other goroutines of its P until the runtime preempts it (every 10 ms).
func spinUntil(deadline uint64) {
	for now() < deadline {
	}
}

// hybridMargin is how long before the deadline hybridUntil stops sleeping: time.Sleep wakes
// up to about 1.05 ms late here (epoll_wait in whole milliseconds, see README.md), so a shorter
// margin would leave the spin nothing to correct.
const hybridMargin = 1_100_000

// hybridUntil sleeps (time.Sleep) until hybridMargin before the deadline, then yields until it
// (spinGoschedUntil).
func hybridUntil(deadline uint64) {
	sleepUntil(deadline - min(deadline, hybridMargin))
	spinGoschedUntil(deadline)
}

// run is one unit: priority (go-locked), ring, start gate, then the work loop of the protocol.
// A go-locked unit reports on ready, so that the next one starts after its thread exists.
func (w *worker) run(u *unit, ready chan<- error) {
	p := w.plan
	if p.locked {
		// Never unlocked: the thread ends with the goroutine, so a reniced thread never goes
		// back to the runtime's pool.
		runtime.LockOSThread()
		if err := w.prio.apply(u.class); err != nil {
			ready <- err // the main goroutine ends the worker
			return
		}
	}
	if !p.none { // every word written now, so that storing a sample never takes a page fault
		u.ring = make([]uint64, 4*p.Ring)
		for i := range u.ring {
			u.ring[i] = math.MaxUint64
		}
	}
	w.parked.Done()
	if p.locked {
		ready <- nil
	}
	<-w.gate

	wait := sleepUntil // the runtime's own sleep, or this unit's waiter of the plan's recipe
	if p.Wait != "" {
		wait = recipes[p.Wait]()
	}
	origin := now()
	u.origin = origin
	var k, head uint64
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
		if p.BusyIters > 0 {
			u.busyResult = busy(p.BusyIters, p.BusyYield)
			t1 = now()
		}
		var s [4]uint64
		if p.none {
			runtime.Gosched()
		} else {
			var intended uint64
			switch {
			case p.absolute:
				intended = next
				wait(next)
			case p.Wait != "": // a recipe waits until an absolute deadline
				intended = t1 + p.expected(u.id, k)
				wait(intended)
			default:
				e := p.expected(u.id, k)
				intended = t1 + e
				time.Sleep(time.Duration(e)) // returns at once for 0
			}
			t2 := now()
			k++
			if p.absolute { // skip the periods whose deadline the wake passed (the orchestrator counts them)
				next += p.expected(u.id, k)
				for t2 > next {
					k++
					next += p.expected(u.id, k)
				}
			}
			s = [4]uint64{t0, t1, intended, t2}
		}
		if p.atomicSum {
			w.counter.Add(1)
		}
		u.n++
		if t0 >= w.measureStart {
			u.nMeas++
		}
		if !p.none {
			if t := u.tail.Load(); head-t == p.Ring {
				u.writeOwnRing(t, head)
			}
			copy(u.ring[head%p.Ring*4:], s[:])
			head++
			u.head.Store(head)
		}
	}
}

// ---------- writer ----------

// opened is what the writer gets when the gate opens: the G frame to send, and the units.
type opened struct {
	gate  []byte
	units []unit
}

// write is the one writer: once the gate opens it sends G, then every flush_ns, or at once when
// every unit has ended (ended is closed), it appends what each ring holds to the sample file as
// S frames; after the units ended, one last time.
func (w *worker) write(named chan<- struct{}, gateOpened <-chan opened, ended <-chan struct{}) {
	// On a thread of its own, named so that the orchestrator finds it and runs it above the units.
	runtime.LockOSThread()
	_ = os.WriteFile("/proc/thread-self/comm", []byte("tm-writer"), 0)
	close(named)
	open := <-gateOpened
	emit(open.gate, 0)
	units := open.units
	flush := time.Duration(w.plan.Flush)
	timer := time.NewTimer(flush)
	var buf []byte
	for last := false; !last; {
		select {
		case <-timer.C:
			timer.Reset(flush)
		case <-ended:
			last = true
		}
		for i := range units {
			buf = drain(&units[i], buf)
		}
		buf = emitSamples(buf, 0)
	}
}

// drain appends unit u's samples to buf as S frames, each kept only if the compare-and-swap of
// tail from the value read succeeds (which gives their slots back to the unit); if it fails,
// the unit took those samples itself meanwhile: the copy is dropped.
func drain(u *unit, buf []byte) []byte {
	for t, h := u.tail.Load(), u.head.Load(); t < h; {
		count, before := min(h-t, 1<<14), len(buf) // frames below 1 MB
		buf = u.appendFrame(buf, 'S', t, t+count)
		if !u.tail.CompareAndSwap(t, t+count) {
			return buf[:before]
		}
		t += count
		buf = emitSamples(buf, 1<<20) // writes of about a megabyte
	}
	return buf
}

// ---------- main ----------

// The orchestrator reads the worker's scheduling attributes from /proc/<pid>, the main thread:
// the main goroutine keeps it, so that no go-locked unit takes it over and renices it.
func init() { runtime.LockOSThread() }

func main() {
	in := bufio.NewReader(os.Stdin)
	line, _ := in.ReadBytes('\n')
	planRead := now() // start_limit_ns counts from here
	p := &plan{}
	err := json.Unmarshal(line, p)
	if p.Wait == "sleep" {
		p.Wait = "" // the runtime's own
	}
	switch {
	case err != nil:
		fail(2, "the plan is not a flat JSON object: %v", err)
	case p.Protocol != protocol:
		fail(2, "unsupported protocol version %d (this worker speaks %d)", p.Protocol, protocol)
	case p.Runtime != "go" && p.Runtime != "go-locked":
		fail(2, "runtime %q is not served by this driver (go, go-locked)", p.Runtime)
	case p.Wait != "" && recipes[p.Wait] == nil:
		fail(2, "runtime %s has no wait recipe %q", p.Runtime, p.Wait)
	}
	p.locked, p.absolute, p.none, p.atomicSum = p.Runtime == "go-locked", p.Mode == "absolute", p.Schedule == "none", p.Experiment == "atomic-sum"
	// go: the main goroutine becomes an ordinary one, but only once the writer has a thread of
	// its own: unlocked earlier, the main thread could become the writer's, and the
	// orchestrator (which reads the main thread's scheduling) would record the writer's.
	unlockMain := func() {
		if !p.locked {
			runtime.UnlockOSThread()
		}
	}
	prio, err := priorityOf(p)
	if err != nil {
		fail(1, "%v", err)
	}
	limit, limitWhy := limitUnits(p)
	if limit == 0 {
		fail(1, "cannot start unit 1: %s", limitWhy)
	}
	version := runtime.Version()
	if p.locked {
		version += " (LockOSThread)"
	}
	hello := map[string]any{"protocol": protocol, "runtime": p.Runtime, "runtime_version": version,
		"clock": "CLOCK_MONOTONIC", "pid": os.Getpid(), "priority": prio.desc}
	if p.Wait != "" {
		hello["wait"] = p.Wait
	}
	emit(appendFrame(nil, 'H', hello), 0)

	w := &worker{plan: p, prio: prio, gate: make(chan struct{})}
	go func() { // end of file (or an error) on stdin after the plan: stop early
		io.Copy(io.Discard, in)
		w.stop.Store(true)
	}()
	if p.Experiment == "granularity" {
		unlockMain()
		w.grains(planRead)
		return
	}
	// Started by hand, fd 3 may be an unrelated file: write only to one open for appending.
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(sampleFile), syscall.F_GETFL, 0)
	if errno != 0 || flags&syscall.O_APPEND == 0 || flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		fail(2, "fd 3, the sample file, is not open for appending (taskmeter opens it for every worker it starts)")
	}

	// The writer starts before the units (protocol: "The writer"): once 100,000 goroutines are
	// released, a goroutine started after them would wait behind them.
	allEnded, written, viewed := make(chan struct{}), make(chan struct{}), make(chan map[string]any, 1)
	gateOpened, named := make(chan opened, 1), make(chan struct{})
	go func() { w.write(named, gateOpened, allEnded); close(written) }()
	<-named // the writer's thread has its name before G, when the orchestrator looks for it
	unlockMain()

	// Units 1, 2, ... in order, each parked at the gate; see "Starting units".
	units := make([]unit, min(p.Units, limit))
	var ended sync.WaitGroup
	ready := make(chan error)
	started, startError := uint64(0), ""
	createStart := now()
	for i := range units {
		u := &units[i]
		u.id, u.class = uint64(i)+1, uint64(i)%p.Classes
		if u.id > 1 && w.stop.Load() {
			startError = fmt.Sprintf("stop requested (stdin closed); units started: %d", started)
			break
		} else if u.id > 1 && now()-planRead >= p.StartLimit {
			startError = fmt.Sprintf("start limit of %v reached; units started: %d", time.Duration(p.StartLimit), started)
			break
		}
		ended.Add(1)
		w.parked.Add(1)
		go func() {
			defer ended.Done()
			w.run(u, ready)
		}()
		if p.locked {
			if err := <-ready; err != nil {
				fail(1, "unit %d could not take the priority of class %d: %v", u.id, u.class, err)
			}
		}
		started = u.id
	}
	if startError == "" && started < p.Units {
		startError = limitWhy
	}
	units = units[:started]

	w.parked.Wait()
	runStart := now()
	w.measureStart = runStart + p.Warmup
	w.end = w.measureStart + p.Duration
	close(w.gate)
	gate := map[string]any{"create_start_ns": createStart, "run_start_ns": runStart, "units": started}
	if startError != "" {
		gate["start_error"] = startError
	}
	gateOpened <- opened{appendFrame(nil, 'G', gate), units} // the writer sends G
	fmt.Fprintf(os.Stderr, "taskmeter go driver: %s started %d of %d units in %.3f s\n",
		p.Runtime, started, p.Units, float64(runStart-createStart)/1e9)

	go func() { ended.Wait(); close(allEnded) }()
	go func() { viewed <- w.view(allEnded) }()
	<-written

	var buf []byte
	ran := -1 // a unit that ran an iteration, and so its busy phase
	for i := range units {
		u := &units[i]
		if u.n > 0 && ran < 0 {
			ran = i
		}
		buf = emit(appendUnitEnd(buf, u), 1<<20)
	}
	result := busy(p.BusyIters, false) // when no unit got to run a busy phase
	if ran >= 0 {
		result = units[ran].busyResult
	}
	if view := <-viewed; view != nil {
		buf = appendFrame(buf, 'V', view)
	}
	done := map[string]any{"interrupted": w.interrupted.Load(), "busy_result": strconv.FormatUint(result, 10)}
	if p.atomicSum {
		done["atomic_sum"] = w.counter.Load()
	}
	emit(appendFrame(buf, 'D', done), 0)
}

// ---------- the granularity experiment ----------

// tasks is the granularity experiment (protocol: "The granularity experiment"): a goroutine per
// task (in go-locked, locked to its OS thread, as the units are), awaited through a WaitGroup
// and a result slot per task; a chain's next goroutine is started by its predecessor.
type tasks struct {
	p                         *plan
	iters, expected           uint64
	started, completed, wrong atomic.Uint64
	results                   []uint64
}

func (t *tasks) check(result uint64) {
	if result != t.expected {
		t.wrong.Add(1)
	}
}

// work is a task's body: the busy work, counted once it has returned.
func (t *tasks) work() uint64 {
	if t.p.locked {
		runtime.LockOSThread() // a goroutine that ends locked takes its thread with it
	}
	result := busy(t.iters, false)
	t.completed.Add(1)
	return result
}

func (t *tasks) round() {
	var wg sync.WaitGroup
	startAndAwait := func(n uint64) {
		wg.Add(int(n))
		for i := uint64(0); i < n; i++ {
			t.started.Add(1)
			go func(slot *uint64) { defer wg.Done(); *slot = t.work() }(&t.results[i])
		}
		wg.Wait()
		for _, result := range t.results[:n] {
			t.check(result)
		}
	}
	switch t.p.Pattern {
	case "trivial":
		startAndAwait(t.p.Width * t.p.Steps)
	case "stencil":
		for step := uint64(0); step < t.p.Steps; step++ {
			startAndAwait(t.p.Width)
		}
	case "chain":
		var link func(k, handed uint64)
		link = func(k, handed uint64) {
			if k > 0 {
				t.check(handed)
			}
			result := t.work()
			if k+1 < t.p.Steps {
				t.started.Add(1)
				go link(k+1, result)
				return
			}
			t.check(result)
			wg.Done()
		}
		wg.Add(int(t.p.Width))
		for chain := uint64(0); chain < t.p.Width; chain++ {
			t.started.Add(1)
			go link(0, 0)
		}
		wg.Wait()
	}
}

// serial: busy(iters) one call after another until calibrate_ns has passed, the clock read only
// between batches, so it is not counted as work; the calls and their time.
func (t *tasks) serial() (calls, ns uint64) {
	batch, start := max(10000/t.iters, 1), now()
	for ns < t.p.Calibrate {
		for i := uint64(0); i < batch; i++ {
			t.check(busy(t.iters, false))
		}
		calls += batch
		ns = now() - start
	}
	return calls, ns
}

// nsPerIter: the shortest of three calls of busy(n), for the first n (1024, doubling) whose call
// takes a quarter of calibrate_ns.
func nsPerIter(calibrate uint64) float64 {
	timed := func(n uint64) uint64 { start := now(); busy(n, false); return now() - start }
	n := uint64(1024)
	for timed(n) < calibrate/4 {
		n *= 2
	}
	shortest := min(timed(n), timed(n), timed(n))
	return float64(max(shortest, 1)) / float64(n)
}

func (w *worker) grains(planRead uint64) {
	p := w.plan
	emit(appendFrame(nil, 'G', map[string]any{"create_start_ns": planRead, "run_start_ns": now(), "units": 1}), 0)
	t := &tasks{p: p, results: make([]uint64, p.Width*p.Steps)}
	cores := min(runtime.GOMAXPROCS(0), runtime.NumCPU())
	perIter := nsPerIter(p.Calibrate)
	for _, text := range strings.Split(p.Grains, ",") {
		grain, _ := strconv.ParseUint(text, 10, 64)
		t.iters = max(uint64(math.Round(float64(grain)/perIter)), 1)
		t.expected = busy(t.iters, false)
		calls, serial := t.serial()
		for warmStart := now(); ; {
			t.round()
			if w.stop.Load() {
				w.interrupted.Store(true)
				break
			}
			if now()-warmStart >= p.Warmup {
				break
			}
		}
		if w.interrupted.Load() {
			break
		}
		started, completed, wrong := t.started.Load(), t.completed.Load(), t.wrong.Load()
		rounds, start, wall := uint64(0), now(), uint64(0)
		for wall < p.Duration && !w.stop.Load() {
			t.round()
			rounds++
			wall = now() - start
		}
		if w.stop.Load() {
			w.interrupted.Store(true)
			break
		}
		started, completed, wrong = t.started.Load()-started, t.completed.Load()-completed, t.wrong.Load()-wrong
		// The task alone again, after its rounds: one of the two may have been disturbed.
		callsAfter, serialAfter := t.serial()
		emit(appendFrame(nil, 'P', map[string]any{"grain_ns": grain, "iters": t.iters, "busy_result": strconv.FormatUint(t.expected, 10),
			"serial_tasks": calls, "serial_ns": serial, "serial_after_tasks": callsAfter, "serial_after_ns": serialAfter,
			"rounds": rounds, "tasks": started, "completed": completed, "wrong": wrong, "wall_ns": wall, "cores": cores}), 0)
	}
	emit(appendFrame(nil, 'D', map[string]any{"interrupted": w.interrupted.Load(), "busy_result": "0"}), 0)
}

// ---------- the runtime's own view ----------

const latencies = "/sched/latencies:seconds"

// readLatencies reads runtime/metrics' histogram of how long goroutines waited runnable before
// they ran (cumulative since the process started).
func readLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: latencies}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// view reads the histogram at measure_start and at end (or when every unit has ended, after a
// stop) and returns the V frame of what happened in between; nil when it has nothing to say.
func (w *worker) view(ended <-chan struct{}) map[string]any {
	wait := func(at uint64) bool { // false when the units ended first
		if t := now(); at > t {
			select {
			case <-time.After(time.Duration(at - t)):
			case <-ended:
				return false
			}
		}
		return true
	}
	if !wait(w.measureStart) {
		return nil
	}
	before := readLatencies()
	wait(w.end)
	after := readLatencies()
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return nil
	}
	// Bucket i holds [Buckets[i], Buckets[i+1]) seconds; a percentile is its bucket's upper bound.
	ns := func(s float64) uint64 { return uint64(math.Round(s * 1e9)) }
	upper := func(i int) float64 {
		if b := after.Buckets[i+1]; !math.IsInf(b, 1) {
			return b
		}
		return after.Buckets[i]
	}
	var total uint64
	var sum float64
	counts := make([]uint64, len(after.Counts))
	for i := range counts {
		counts[i] = after.Counts[i] - before.Counts[i]
		total += counts[i]
		sum += float64(counts[i]) * (max(after.Buckets[i], 0) + upper(i)) / 2
	}
	delay := map[string]any{"count": total, "mean_ns": 0, "p50_ns": 0, "p99_ns": 0, "max_ns": 0}
	if total > 0 {
		at := func(q float64) uint64 {
			var seen uint64
			for i, c := range counts {
				if seen += c; c > 0 && float64(seen) >= q*float64(total) {
					return ns(upper(i))
				}
			}
			return 0
		}
		delay["p50_ns"], delay["p99_ns"], delay["max_ns"] = at(0.5), at(0.99), at(1)
		delay["mean_ns"] = min(ns(sum/float64(total)), at(1))
	}
	return map[string]any{"source": "runtime/metrics " + latencies,
		"what":  "time goroutines waited runnable before running, every goroutine of the worker; percentiles are bucket upper bounds",
		"delay": delay}
}

// ---------- priority classes (go-locked) ----------

// priority is how units take their class: goroutines have none; a go-locked unit's thread gets
// a nice value, or a real-time priority when the worker runs under SCHED_FIFO or SCHED_RR.
type priority struct {
	mech, desc        string // "none", "nice" or "rt-priority"; H.priority
	policy, high, low int    // rt-priority: the worker's policy, kept; class 0 and class 1
}

// readSched reads the calling thread's nice value, real-time priority and policy: fields 19, 40
// and 41 of /proc/thread-self/stat, counted after the command (which may hold spaces).
func readSched() (nice, rtPrio, policy int, err error) {
	data, err := os.ReadFile("/proc/thread-self/stat")
	f := strings.Fields(string(data)[strings.LastIndexByte(string(data), ')')+1:])
	if err != nil || len(f) < 39 {
		return 0, 0, 0, fmt.Errorf("cannot read /proc/thread-self/stat (%v)", err)
	}
	nice, _ = strconv.Atoi(f[16])
	rtPrio, _ = strconv.Atoi(f[37])
	policy, _ = strconv.Atoi(f[38])
	return nice, rtPrio, policy, nil
}

func priorityOf(p *plan) (priority, error) {
	if p.Classes < 2 {
		return priority{mech: "none", desc: "none"}, nil
	} else if !p.locked {
		return priority{mech: "none", desc: "none: goroutines have no priority"}, nil
	}
	nice, rt, policy, err := readSched() // every thread still has the worker's attributes
	how := "on each unit's locked thread, read back from /proc/thread-self/stat"
	switch {
	case err != nil:
		return priority{}, err
	case policy == 1 || policy == 2:
		name := [3]string{1: "SCHED_FIFO", 2: "SCHED_RR"}[policy]
		return priority{"rt-priority", fmt.Sprintf("rt-priority: high %d, low %d (%s, sched_setscheduler %s)", rt, max(1, rt-1), name, how), policy, rt, max(1, rt-1)}, nil
	}
	return priority{"nice", fmt.Sprintf("nice: high %d, low %d (setpriority %s)", nice, min(19, nice+10), how), 0, nice, min(19, nice+10)}, nil
}

// apply gives the calling (locked) thread the priority of class, and checks it in /proc.
func (pr priority) apply(class uint64) error {
	want, tid := pr.high, syscall.Gettid()
	if class == 1 {
		want = pr.low
	}
	var err error
	switch pr.mech {
	case "none":
		return nil
	case "nice":
		err = syscall.Setpriority(syscall.PRIO_PROCESS, tid, want)
	default:
		param := int32(want) // struct sched_param
		if _, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(pr.policy), uintptr(unsafe.Pointer(&param))); errno != 0 {
			err = errno
		}
	}
	nice, rt, policy, readErr := readSched()
	switch {
	case err != nil:
		return fmt.Errorf("%s %d on thread %d: %v", pr.mech, want, tid, err)
	case readErr != nil:
		return readErr
	case pr.mech == "nice" && nice != want, pr.mech == "rt-priority" && (rt != want || policy != pr.policy):
		return fmt.Errorf("set %s %d, but /proc/thread-self/stat says nice %d, policy %d, rt priority %d", pr.mech, want, nice, policy, rt)
	}
	return nil
}

// ---------- how many units may start ----------

// Go cannot recover from a failed start: a goroutine that finds no memory, or a locked unit whose
// thread the kernel refuses ("runtime: failed to create new OS thread"), aborts the process. So
// the driver starts no more units than the machine's room allows (a partial start): the plan
// carries it, measured by the orchestrator as it started this worker (the memory available,
// the threads this user may still create, 1/32 already left to other processes). Memory per
// unit is estimated high: measured, about 3 KiB per goroutine, and per locked thread 17-40 KiB
// of RSS plus 23 KiB of kernel memory.
func limitUnits(p *plan) (uint64, string) {
	// A unit asleep in clock_nanosleep holds an OS thread, as a locked unit does.
	threadPerUnit := p.locked || p.Wait == "clock-nanosleep"
	perUnit := uint64(16 << 10)
	if threadPerUnit {
		perUnit = 128 << 10
	}
	if !p.none { // its ring, and the F frame it may write the ring in
		perUnit += 2 * 32 * p.Ring
	}
	n, why := uint64(math.MaxUint64), ""
	if p.RoomMemory != nil {
		n = uint64(max(*p.RoomMemory, 0)) / 2 / perUnit
		why = fmt.Sprintf("%s stops at %d units: Go aborts the process when it runs out of memory, so units are capped at half of %s at about %d KiB per unit with its ring",
			p.Runtime, n, p.RoomMemoryWhy, perUnit>>10)
	}
	if !threadPerUnit {
		return n, why
	}
	// Threads that are not units: one per P, sysmon, the template thread, the stdin reader,
	// the writer and idle ones (measured: 9 to 10 with GOMAXPROCS 2). The orchestrator measured
	// the room before this process existed, so they are taken from it here.
	own := 16 + 2*int64(runtime.GOMAXPROCS(0))
	kernelRoom := int64(math.MaxInt32)
	if p.RoomThreads != nil {
		kernelRoom = *p.RoomThreads
		if m := uint64(max(kernelRoom-own, 0)); m < n {
			n, why = m, fmt.Sprintf("%s stops at %d units: the Go runtime aborts the whole process when it cannot create a thread, so the driver stays below the kernel's limits: the plan leaves room for %d threads, of which %d are kept for the runtime's own threads; %s",
				p.Runtime, m, kernelRoom, own, p.RoomThreadsWhy)
		}
	}
	// The runtime's own limit (10,000 threads) must not be hit first: the kernel's is the real one.
	threads, _ := readKeyed("/proc/self/status", "Threads:")
	debug.SetMaxThreads(int(max(10000, min(threads+kernelRoom, math.MaxInt32))))
	return n, why
}

// readKeyed reads the number after name in a "Name: value" file (/proc/meminfo, .../status).
func readKeyed(path, name string) (n int64, ok bool) {
	data, _ := os.ReadFile(path)
	_, rest, found := strings.Cut("\n"+string(data), "\n"+name)
	_, err := fmt.Sscan(rest, &n)
	return n, found && err == nil
}
