// Package taskmeter is the Go record() client for `taskmeter bench` (wire format v1, see
// clients/README.md): it sends the program's completed units of work to the collector.
// Standard library only, Linux. Every call is a no-op when TASKMETER_RECORD is unset.
//
// Go cannot hook process exit: call Flush() before the program ends, or what is buffered is lost.
package taskmeter

import (
	"encoding/binary"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's CLOCK_MONOTONIC reading (vDSO), the clock all processes share;
// time.Now() hides it behind an offset from process start.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

const (
	batchEvents = 2048                          // events per datagram: 32 + 2048*16 = 32800 bytes
	maxAge      = int64(100 * time.Millisecond) // send when the oldest buffered event is older
	sendTimeout = 10 * time.Millisecond         // a batch not taken by then is dropped and counted
	// A final batch waits this long for a full queue: no later batch of its stream carries its count.
	finalPatience = time.Second
	final         = 1
	valueMax      = 1<<62 - 1
)

var le = binary.LittleEndian

// client is the process's one stream: goroutines share its buffer under a mutex.
type client struct {
	mu                   sync.Mutex
	conn                 *net.UnixConn // nil if the collector was unreachable: batches are dropped
	buf                  []byte        // 32-byte header, then the events
	pid                  uint32
	stream, seq, dropped uint32
}

var (
	once  sync.Once
	std   *client // nil when TASKMETER_RECORD is unset
	until int64   // TASKMETER_RECORD_UNTIL, 0 if unset
)

func get() *client {
	once.Do(func() {
		until, _ = strconv.ParseInt(os.Getenv("TASKMETER_RECORD_UNTIL"), 10, 64)
		path := os.Getenv("TASKMETER_RECORD")
		if path == "" {
			return
		}
		std = &client{buf: make([]byte, 32, 32+16*batchEvents), pid: uint32(os.Getpid())}
		std.conn, _ = net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	})
	return std
}

func event(kind, value uint64) {
	c := get()
	if c == nil {
		return
	}
	// Taken before the lock, so a goroutine waiting on another's send keeps its own time
	// (events in a batch are therefore not strictly ordered between goroutines).
	t := nanotime()
	c.mu.Lock()
	c.buf = le.AppendUint64(c.buf, uint64(t))
	c.buf = le.AppendUint64(c.buf, kind<<62|value)
	if len(c.buf) == cap(c.buf) || t-int64(le.Uint64(c.buf[32:])) > maxAge {
		c.send(0)
	}
	c.mu.Unlock()
}

// send sends the buffer as one batch; seq advances only on success, so the collector sees
// drops (carried in `dropped` of the next batch) rather than gaps. A final batch has no next
// batch: it waits up to finalPatience for a full queue (a write fails at once when the collector
// is gone), then a header-only final batch carries its count. Called with mu held.
func (c *client) send(flags uint32) {
	deadline := time.Now().Add(sendTimeout)
	if flags&final != 0 {
		deadline = time.Now().Add(finalPatience)
	}
	n := uint32(len(c.buf)-32) / 16
	sent := c.write(flags, n, deadline)
	if !sent && flags&final != 0 {
		c.dropped, n = c.dropped+n, 0
		c.buf = c.buf[:32]
		sent = c.write(flags, 0, later(deadline, time.Now().Add(sendTimeout)))
	}
	if sent {
		c.seq, c.dropped = c.seq+1, 0
	} else {
		c.dropped += n
	}
	c.buf = c.buf[:32]
}

// write sends the header and the n events in the buffer as one datagram, waiting for room in
// the collector's queue until deadline.
func (c *client) write(flags, n uint32, deadline time.Time) bool {
	if c.conn == nil {
		return false
	}
	h := c.buf[:32]
	copy(h, "TMR1")
	for i, v := range [7]uint32{flags, c.pid, c.stream, c.seq, c.dropped, n, 0} {
		le.PutUint32(h[4+4*i:], v)
	}
	c.conn.SetWriteDeadline(deadline)
	_, err := c.conn.Write(c.buf)
	return err == nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Record reports one unit of work completed, now.
func Record() { event(0, 1) }

// RecordN reports n units completed, now; n < 1 is ignored.
func RecordN(n int) {
	if n > 0 {
		event(0, min(uint64(n), valueMax))
	}
}

// Start reports that the unit id (0 <= id < 2^62) started.
func Start(id uint64) { event(1, id&valueMax) }

// Complete reports that the unit id completed; it also counts as one unit.
func Complete(id uint64) { event(2, id&valueMax) }

// Flush sends what is buffered as the stream's final batch; as Go has no exit hook, this is
// how the collector learns that nothing was lost. Later calls open a new stream.
func Flush() {
	c := get()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.buf) > 32 || c.seq > 0 || c.dropped > 0 {
		c.send(final)
		c.stream, c.seq = c.stream+1, 0
	}
}

// Running is true until the collector's measurement window ends (TASKMETER_RECORD_UNTIL,
// CLOCK_MONOTONIC ns), and always without it: loop `for taskmeter.Running()`, then Flush().
func Running() bool {
	get()
	return until == 0 || nanotime() < until
}
