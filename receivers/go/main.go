// The go and wasm-go receivers of `taskmeter run net` (net protocol 1, receivers/README.md): one
// goroutine per connection, each reading a message, timing it and echoing it. Built natively it
// is `go`; built with GOOS=wasip1 GOARCH=wasm it is the guest of `wasm-go` (platform_*.go).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

type plan struct {
	Protocol    int `json:"protocol"`
	Connections int `json:"connections"`
	MessageSize int `json:"message_size"`
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

// fail prints the fatal error line. Lines are structs, not maps, so that "type" comes first as
// in the contract's examples.
func fail(message string) {
	line, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{"error", message})
	fmt.Println(string(line))
	os.Exit(1)
}

func serve(conn net.Conn, report *connection, size int) {
	defer conn.Close()
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

func main() {
	stdin := bufio.NewReader(os.Stdin)
	line, err := stdin.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		fail("no plan on stdin")
	}
	var p plan
	if json.Unmarshal(line, &p) != nil || p.Protocol != 1 || p.Connections < 1 || p.MessageSize < 1 {
		fail("a plan of protocol 1 with connections and message_size above 0 was expected")
	}
	listener, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		fail("fd 3 is not a listening TCP socket: " + err.Error())
	}
	watchStdin(stdin)
	name, version, pid := identity()
	hello, _ := json.Marshal(struct {
		Type           string `json:"type"`
		Receiver       string `json:"receiver"`
		RuntimeVersion string `json:"runtime_version"`
		Pid            *int   `json:"pid"`
	}{"hello", name, version, pid})
	fmt.Println(string(hello))

	reports := make([]connection, p.Connections)
	var wg sync.WaitGroup
	for i := range reports {
		reports[i] = connection{Type: "connection", Index: i}
		conn, err := listener.Accept()
		if err != nil {
			text := "accept failed: " + err.Error()
			reports[i].Error = &text
			continue
		}
		wg.Add(1)
		go func(r *connection) {
			defer wg.Done()
			serve(conn, r, p.MessageSize)
		}(&reports[i])
	}
	// Every connection is here: a sender of the next point must not reach this receiver.
	listener.Close()
	wg.Wait()
	out := bufio.NewWriter(os.Stdout)
	var total uint64
	for i := range reports {
		line, _ := json.Marshal(&reports[i])
		out.Write(append(line, '\n'))
		total += reports[i].Messages
	}
	done, _ := json.Marshal(struct {
		Type     string `json:"type"`
		Messages uint64 `json:"messages"`
	}{"done", total})
	out.Write(append(done, '\n'))
	out.Flush()
}
