//go:build wasip1

package main

import (
	"bufio"
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
