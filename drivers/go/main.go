// Command driver is the taskmeter Go driver: it serves the runtime ids "go" (one goroutine per
// unit) and "go-locked" (one goroutine per unit, each locked to its own OS thread with
// runtime.LockOSThread). It implements worker protocol v1 (protocol/README.md): the plan
// arrives as one JSON line on stdin, the results leave as NDJSON on stdout.
//
// Build: go build -o driver .   (standard library only)
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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

const (
	protocolVersion = 1
	maxPlanBytes    = 1 << 20 // bytes in the plan line
	maxDepth        = 64      // JSON nesting of the plan
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
}

type doneLine struct {
	Type           string `json:"type"`
	RunStartNs     uint64 `json:"run_start_ns"`
	MeasureStartNs uint64 `json:"measure_start_ns"`
	EndNs          uint64 `json:"end_ns"`
	Units          uint64 `json:"units"`
	Samples        uint64 `json:"samples"`
	Missed         uint64 `json:"missed"`
	Interrupted    bool   `json:"interrupted"`
	BusyResult     string `json:"busy_result"`
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
)

type plan struct {
	runtime       string
	locked        bool // go-locked: each unit's goroutine runs on its own OS thread
	units         uint64
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
	if s := r.string(root, "", "experiment"); r.err == nil && s != "sleep" {
		r.refuse("unknown experiment %q (this worker runs \"sleep\")", clip(s, 64))
	}
	p.runtime = r.string(root, "", "runtime")
	if r.err == nil && p.runtime != "go" && p.runtime != "go-locked" {
		r.refuse("runtime %q is not served by this driver (go, go-locked)", clip(p.runtime, 64))
	}
	p.locked = p.runtime == "go-locked"
	p.units = r.integer(root, "", "units", 1)
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
	default:
		r.refuse("unknown schedule kind %q", clip(kind, 64))
	}
	p.ns = r.integer(schedule, "sleep.schedule.", "ns", 0)

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
	if p.absolute && p.ns == 0 {
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

type sample struct {
	expected, start, busyEnd, intended, wake, missed uint64
}

type unit struct {
	id         uint64
	origin     uint64
	busyResult uint64
	busyRan    bool
	samples    []sample
}

type worker struct {
	plan        *plan
	end         uint64
	stop        atomic.Bool // stdin reached end of file: stop early
	interrupted atomic.Bool // a unit stopped because of it
}

// sleepUntil sleeps until deadline on CLOCK_MONOTONIC. Go has no absolute-deadline sleep:
// this is a relative time.Sleep of what is left (none when the deadline has passed). The Go
// timer itself computes its own deadline from nanotime() a moment later, so it never fires early.
func sleepUntil(deadline uint64) {
	if left := int64(deadline - now()); left > 0 {
		time.Sleep(time.Duration(left))
	}
}

// run is the work loop of the protocol README, step for step.
func (w *worker) run(u *unit) {
	p := w.plan
	if p.locked {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
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
		// memory only, never I/O, while measuring (append grows past the estimate if needed)
		u.samples = append(u.samples, sample{e, t0, t1, intended, t2, missed})
	}
}

// initialCapacity is room for the whole run (capped), estimated from the shortest period.
func (p *plan) initialCapacity(u uint64) int {
	shortest := p.ns
	if p.kind == byUnit {
		shortest = u * p.ns
	}
	shortest = max(shortest, 1000)
	estimate := (p.warmupNs+p.durationNs)/shortest + 2
	limit := min(max((uint64(1)<<22)/p.units, 64), 1<<16)
	return int(min(estimate, limit))
}

// newSamples allocates and touches the sample buffer, so that measuring neither allocates nor
// page-faults until the estimate is exceeded.
func newSamples(n int) []sample {
	s := make([]sample, n)
	for i := range s {
		s[i] = sample{math.MaxUint64, math.MaxUint64, math.MaxUint64, math.MaxUint64, math.MaxUint64, math.MaxUint64}
	}
	return s[:0]
}

// writeUnit writes one unit line, its samples in columns.
func writeUnit(u *unit, buf []byte) []byte {
	buf = append(buf[:0], `{"type":"unit","unit":`...)
	buf = strconv.AppendUint(buf, u.id, 10)
	buf = append(buf, `,"origin_ns":`...)
	buf = strconv.AppendUint(buf, u.origin, 10)
	columns := []struct {
		name string
		get  func(*sample) uint64
	}{
		{"expected_ns", func(s *sample) uint64 { return s.expected }},
		{"start_ns", func(s *sample) uint64 { return s.start }},
		{"busy_end_ns", func(s *sample) uint64 { return s.busyEnd }},
		{"intended_ns", func(s *sample) uint64 { return s.intended }},
		{"wake_ns", func(s *sample) uint64 { return s.wake }},
		{"missed", func(s *sample) uint64 { return s.missed }},
	}
	for _, c := range columns {
		buf = append(buf, `,"`...)
		buf = append(buf, c.name...)
		buf = append(buf, `":[`...)
		for i := range u.samples {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendUint(buf, c.get(&u.samples[i]), 10)
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

func main() {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	line, err := readPlan(in)
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

	units := make([]unit, p.units)
	for i := range units {
		units[i].id = uint64(i) + 1
		units[i].samples = newSamples(p.initialCapacity(units[i].id))
	}

	version := runtime.Version()
	if p.locked {
		version += " (LockOSThread)"
	}
	writeLine(helloLine{Type: "hello", Protocol: protocolVersion, Runtime: p.runtime,
		RuntimeVersion: version, Clock: "CLOCK_MONOTONIC", Pid: os.Getpid()})
	if err := out.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "taskmeter go driver: cannot write: %v\n", err)
		os.Exit(1)
	}

	w := &worker{plan: p}
	// End of file (or an error) on stdin after the plan means: stop early.
	go func() {
		io.Copy(io.Discard, in)
		w.stop.Store(true)
	}()

	runStart := now()
	measureStart := runStart + p.warmupNs
	w.end = measureStart + p.durationNs
	var wg sync.WaitGroup
	wg.Add(len(units))
	for i := range units {
		u := &units[i]
		go func() {
			defer wg.Done()
			w.run(u)
		}()
	}
	wg.Wait()

	var samples, missed, result uint64
	haveResult := false
	for i := range units {
		if units[i].busyRan && !haveResult {
			result, haveResult = units[i].busyResult, true
		}
	}
	if !haveResult { // no unit got to run its busy phase
		result = busy(p.iters, false)
	}

	var buf []byte
	for i := range units {
		u := &units[i]
		buf = writeUnit(u, buf)
		samples += uint64(len(u.samples))
		for _, s := range u.samples {
			missed += s.missed
		}
	}
	writeLine(doneLine{Type: "done", RunStartNs: runStart, MeasureStartNs: measureStart, EndNs: w.end,
		Units: p.units, Samples: samples, Missed: missed, Interrupted: w.interrupted.Load(),
		BusyResult: strconv.FormatUint(result, 10)})
	if err := out.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "taskmeter go driver: cannot write the results: %v\n", err)
		os.Exit(1)
	}
}
