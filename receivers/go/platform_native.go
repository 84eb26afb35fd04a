//go:build !wasip1

package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"runtime"
)

// identity names this receiver in its hello line.
func identity() (name, version string, pid *int) {
	self := os.Getpid()
	return "go", runtime.Version(), &self
}

// watchStdin exits at EOF on stdin: taskmeter has gone or given up.
func watchStdin(stdin *bufio.Reader) {
	go func() {
		io.Copy(io.Discard, stdin)
		os.Exit(0)
	}()
}

// peerOf names a connection's peer in a stranger line.
func peerOf(conn net.Conn) string {
	if addr := conn.RemoteAddr(); addr != nil {
		return addr.String()
	}
	return "unknown"
}

// hangUp closes a connection.
func hangUp(conn net.Conn) {
	conn.Close()
}
