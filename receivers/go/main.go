// The go and wasm-go receivers of `taskmeter run net` (net protocol 2, receivers/README.md):
// each accepted connection gets its handshake in a goroutine; once every sender has joined they
// start together, and each is served by its goroutine, reading a message, timing it and echoing
// it. Built natively it is `go`; built with GOOS=wasip1 GOARCH=wasm it is the guest of `wasm-go`
// (platform_*.go).
package main

import (
	"bufio"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// The handshake's bytes (receivers/README.md, "The handshake").
const (
	challengeMagic = "TMNET2C\x00"
	helloMagic     = "TMNET2H\x00"
	helloBytes     = 44
	joinedVerdict  = "TMNET2OK"
	wrongToken     = "TMNET2NO"
	indexTaken     = "TMNET2DU"
)

type plan struct {
	Protocol    int      `json:"protocol"`
	Connections uint32   `json:"connections"`
	MessageSize uint32   `json:"message_size"`
	HandshakeMs uint64   `json:"handshake_ms"`
	MaxPending  uint32   `json:"max_pending"`
	Nonce       string   `json:"nonce"`
	Tokens      []string `json:"tokens"`
}

type connection struct {
	Type     string  `json:"type"`
	Index    int     `json:"index"`
	Messages uint64  `json:"messages"`
	FirstNs  *int64  `json:"first_ns"`
	LastNs   *int64  `json:"last_ns"`
	Error    *string `json:"error"`
}

// start anchors the monotonic clock: only differences of times are used.
var start = time.Now()

// stdout is held for each line: lines from several goroutines must not interleave.
var stdout sync.Mutex

// say prints one protocol line. Lines are structs, not maps, so that "type" comes first as in
// the contract's examples.
func say(line any) {
	text, _ := json.Marshal(line)
	stdout.Lock()
	defer stdout.Unlock()
	os.Stdout.Write(append(text, '\n'))
}

// fail prints the fatal error line and exits.
func fail(message string) {
	say(struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{"error", message})
	os.Exit(1)
}

// stranger reports a refused connection.
func stranger(peer, reason string) {
	say(struct {
		Type   string `json:"type"`
		Peer   string `json:"peer"`
		Reason string `json:"reason"`
	}{"stranger", peer, reason})
}

// gate is what every handshake of a point shares: the challenge, the tokens, who has joined.
type gate struct {
	challenge  []byte
	tokens     [][]byte
	deadline   time.Duration
	maxPending int
	listener   net.Listener // closed by the last sender to join
	// allJoined is closed when the last sender joins: every sender starts then, together.
	allJoined chan struct{}

	mu      sync.Mutex
	pending int
	joined  []bool
	count   int
}

func newGate(p *plan) (*gate, error) {
	bad := fmt.Errorf("bad plan: a nonce and %d tokens of 64 hexadecimal digits were expected", p.Connections)
	nonce, ok := unhex(p.Nonce)
	if !ok || len(p.Tokens) != int(p.Connections) {
		return nil, bad
	}
	tokens := make([][]byte, len(p.Tokens))
	for i, text := range p.Tokens {
		if tokens[i], ok = unhex(text); !ok {
			return nil, bad
		}
	}
	challenge := append([]byte(challengeMagic), nonce...)
	challenge = binary.LittleEndian.AppendUint32(challenge, p.Connections)
	challenge = binary.LittleEndian.AppendUint32(challenge, p.MessageSize)
	return &gate{
		challenge:  challenge,
		tokens:     tokens,
		deadline:   time.Duration(p.HandshakeMs) * time.Millisecond,
		maxPending: max(int(p.MaxPending), 1),
		allJoined:  make(chan struct{}),
		joined:     make([]bool, p.Connections),
	}, nil
}

// unhex reads 64 hexadecimal digits (a nonce or a token).
func unhex(text string) ([]byte, bool) {
	bytes, err := hex.DecodeString(text)
	return bytes, err == nil && len(bytes) == 32
}

// admit takes a handshake slot, or says the connection must be refused at once.
func (g *gate) admit() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending >= g.maxPending {
		return false
	}
	g.pending++
	return true
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending--
}

// handshake is the receiver's side of the handshake, within the gate's deadline from the
// accept: the sender's index, or why the connection is refused (after its verdict, when its
// hello came in full). It reads exactly the hello, never more.
func (g *gate) handshake(conn net.Conn, accepted time.Time) (uint32, error) {
	conn.SetDeadline(accepted.Add(g.deadline))
	if _, err := conn.Write(g.challenge); err != nil {
		return 0, fmt.Errorf("cannot send the challenge: %w", err)
	}
	hello := make([]byte, helloBytes)
	if got, err := io.ReadFull(conn, hello); err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return 0, fmt.Errorf("no hello within %d ms (%d of %d bytes)", g.deadline.Milliseconds(), got, helloBytes)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return 0, fmt.Errorf("closed after %d of the %d bytes of a hello", got, helloBytes)
		default:
			return 0, fmt.Errorf("read failed: %w", err)
		}
	}
	index, verdict, err := g.judge(hello)
	if err != nil {
		conn.Write([]byte(verdict))
		return 0, err
	}
	conn.SetDeadline(time.Time{}) // joined: it waits for the others as long as they take
	return index, nil
}

// judge admits a whole hello: the sender's index, or the verdict to send and why not. The last
// sender to join stops the accepting, then starts everyone.
func (g *gate) judge(hello []byte) (index uint32, verdict string, err error) {
	index = binary.LittleEndian.Uint32(hello[8:12])
	if string(hello[:8]) != helloMagic {
		return 0, wrongToken, errors.New("not a taskmeter sender")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case index >= uint32(len(g.tokens)):
		return 0, indexTaken, fmt.Errorf("sender %d is not of this point", index)
	// The token before the slot: only a sender with the secret learns who has joined.
	case subtle.ConstantTimeCompare(hello[12:], g.tokens[index]) != 1:
		return 0, wrongToken, fmt.Errorf("wrong token for sender %d", index)
	case g.joined[index]:
		return 0, indexTaken, fmt.Errorf("sender %d had already joined", index)
	}
	g.joined[index] = true
	if g.count++; g.count == len(g.joined) {
		// Every sender is here: a sender meant for the next point must be refused by the
		// kernel, not caught by this receiver. Closing the listener also ends the accept loop.
		g.listener.Close()
		close(g.allJoined)
	}
	return index, "", nil
}

// done says whether every sender has joined (and so the listener is closed).
func (g *gate) done() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.count == len(g.joined)
}

func serve(conn net.Conn, report *connection, size uint32) {
	defer hangUp(conn)
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetNoDelay(true) // Go's default already; said here as the other receivers say it
	}
	buffer := make([]byte, size)
	var first, last int64
	for {
		// ReadFull says io.EOF only when nothing was read: a clean end at a message boundary.
		if n, err := io.ReadFull(conn, buffer); err != nil {
			if !errors.Is(err, io.EOF) {
				text := "read failed: " + err.Error()
				if errors.Is(err, io.ErrUnexpectedEOF) {
					text = fmt.Sprintf("end of file after %d of %d bytes of a message", n, size)
				}
				report.Error = &text
			}
			break
		}
		t := int64(time.Since(start))
		if report.Messages == 0 {
			first = t
		}
		last = t
		report.Messages++
		if _, err := conn.Write(buffer); err != nil {
			text := "write failed: " + err.Error()
			report.Error = &text
			break
		}
	}
	if report.Messages > 0 {
		report.FirstNs, report.LastNs = &first, &last
	}
}

// listen takes the listening socket on fd 3.
func listen() (net.Listener, error) {
	// Non-blocking first: os.NewFile and FileListener keep a descriptor's mode, and in the
	// wasip1 guest an Accept on a blocking socket blocks its one thread, handshakes and all,
	// until a connection comes. (Natively FileListener's dup is made non-blocking anyway.)
	if err := syscall.SetNonblock(3, true); err != nil {
		return nil, err
	}
	file := os.NewFile(3, "listener")
	// The listener holds the socket on its own (a dup natively, a reference count in wasip1):
	// let it be the only holder, so that closing it closes the socket.
	defer file.Close()
	return net.FileListener(file)
}

func main() {
	// No line limit: with 1000 senders the plan is about 67 KB.
	stdin := bufio.NewReader(os.Stdin)
	line, err := stdin.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		fail("no plan on stdin")
	}
	var p plan
	if err := json.Unmarshal(line, &p); err != nil {
		fail("bad plan: " + err.Error())
	}
	if p.Protocol != 2 || p.Connections < 1 || p.MessageSize < 1 {
		fail(fmt.Sprintf("unsupported plan (protocol %d, %d connections, message_size %d): net protocol 2 with connections and a message size above 0 was expected", p.Protocol, p.Connections, p.MessageSize))
	}
	g, err := newGate(&p)
	if err != nil {
		fail(err.Error())
	}
	listener, err := listen()
	if err != nil {
		fail("fd 3 is not a listening TCP socket: " + err.Error())
	}
	g.listener = listener
	watchStdin(stdin)
	name, version, pid := identity()
	say(struct {
		Type           string `json:"type"`
		Receiver       string `json:"receiver"`
		RuntimeVersion string `json:"runtime_version"`
		Pid            *int   `json:"pid"`
	}{"hello", name, version, pid})

	reports := make([]connection, p.Connections)
	for i := range reports {
		reports[i] = connection{Type: "connection", Index: i}
	}
	// Every goroutine, the senders' and those of strangers still in their handshake: all their
	// lines come before the last ones.
	var wg sync.WaitGroup
	for {
		conn, err := listener.Accept()
		accepted := time.Now()
		if err != nil {
			if g.done() {
				break // closed by the last sender's join (net.ErrClosed; in wasip1 "use of closed file")
			}
			stranger("unknown", "accept failed: "+err.Error())
			time.Sleep(10 * time.Millisecond) // an error that stays (no file descriptors left) must not spin
			continue
		}
		peer := peerOf(conn)
		if !g.admit() {
			hangUp(conn)
			stranger(peer, "too many connections waiting for their handshake")
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			index, err := g.handshake(conn, accepted)
			g.release()
			if err != nil {
				hangUp(conn)
				stranger(peer, err.Error())
				return
			}
			<-g.allJoined
			report := &reports[index]
			if _, err := conn.Write([]byte(joinedVerdict)); err != nil {
				text := "cannot start the sender: " + err.Error()
				report.Error = &text
				hangUp(conn)
				return
			}
			serve(conn, report, p.MessageSize)
		}()
	}
	wg.Wait()
	var total uint64
	for i := range reports {
		say(&reports[i])
		total += reports[i].Messages
	}
	say(struct {
		Type     string `json:"type"`
		Messages uint64 `json:"messages"`
	}{"done", total})
}
