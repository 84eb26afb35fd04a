//go:build wasip1

package main

import (
	"bufio"
	"net"
	"os"
	"runtime"
	"strconv"
)

// identity names this receiver in its hello line. WASI has no getpid: the wazero host
// (receivers/wasm-go/host) passes its own pid and runtime in the environment.
func identity() (name, version string, pid *int) {
	version = runtime.Version() + " wasip1/wasm"
	if host := os.Getenv("TASKMETER_HOST_RUNTIME"); host != "" {
		version += " on " + host
	}
	if n, err := strconv.Atoi(os.Getenv("TASKMETER_HOST_PID")); err == nil {
		pid = &n
	}
	return "wasm-go", version, pid
}

// watchStdin does nothing in the guest: its host owns the real stdin and exits at its EOF (a
// goroutine blocked on stdin would stall the guest's single thread).
func watchStdin(*bufio.Reader) {}

// peerOf is "unknown", as the contract allows: WASI preview 1 has no getpeername, so Go gives
// a guest's connections an empty address.
func peerOf(net.Conn) string {
	return "unknown"
}

// hangUp closes a connection, and first shuts down its sending side: wazero v1.12.0 closes no
// host socket when its guest closes one (tcpConnFile.close marks the file closed, then calls
// Shutdown(SHUT_RDWR), which calls close again and returns at once), so the socket stays open
// until the host's garbage collector finalizes it. The shutdown does reach the host socket, and
// the peer gets its end-of-file now, as from a close: a sender refused for lack of a handshake
// slot connects again at once rather than waiting for a challenge that never comes.
func hangUp(conn net.Conn) {
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.CloseWrite()
	}
	conn.Close()
}
