// wasm-go-host GUEST.wasm [ARGS...]: the wazero host of the wasm-go receiver (net protocol 2,
// receivers/README.md). It runs a GOOS=wasip1 guest with the listening TCP socket that
// taskmeter passes as fd 3 as the guest's fd 3, owns the real stdin (the plan line becomes the
// guest's whole stdin; EOF after it ends the process, as the contract says) and passes its pid
// and runtime to the guest in TASKMETER_HOST_PID and TASKMETER_HOST_RUNTIME.
//
// wazero v1.12.0 can only preopen a listener it opens itself from a host:port
// (experimental/sock), and binding taskmeter's port again fails (EADDRINUSE). So the host lets
// wazero listen on 127.0.0.1:0, finds that socket among its new file descriptors before the
// guest starts, and dup3s fd 3 over it: the guest's fd 3 is then taskmeter's socket, with
// nothing in between. (wazero accepts on it only after poll(2) says a connection is waiting,
// so the stale netpoll registration of the replaced socket is never waited on.)
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sock"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// runtimeName is what the guest reports; the version is pinned in go.mod.
const runtimeName = "wazero v1.12.0"

// fail is the protocol's error line on stdout, the same on stderr, and exit status 1.
func fail(message string) {
	message = strings.Join(strings.Fields(message), " ")
	line, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{"error", message})
	fmt.Println(string(line))
	fmt.Fprintln(os.Stderr, "wasm-go-host: "+message)
	os.Exit(1)
}

// listening says why fd is not a listening TCP socket, or nil.
func listening(fd int) error {
	kind, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE)
	if err != nil {
		return err
	}
	accepting, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	if err != nil {
		return err
	}
	if kind != syscall.SOCK_STREAM || accepting != 1 {
		return errors.New("a socket, but not a listening stream socket")
	}
	switch address, _ := syscall.Getsockname(fd); address.(type) {
	case *syscall.SockaddrInet4, *syscall.SockaddrInet6:
		return nil
	default:
		return errors.New("not an IP socket")
	}
}

// listeners lists this process's listening TCP sockets.
func listeners() map[int]bool {
	fds := map[int]bool{}
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, entry := range entries {
		if fd, err := strconv.Atoi(entry.Name()); err == nil && listening(fd) == nil {
			fds[fd] = true
		}
	}
	return fds
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: wasm-go-host GUEST.wasm [ARGS...]")
	}
	if err := listening(3); err != nil {
		fail("fd 3 is not a listening TCP socket: " + err.Error())
	}
	stdin := bufio.NewReader(os.Stdin)
	plan, err := stdin.ReadBytes('\n')
	if err == nil {
		go func() { // EOF on stdin: taskmeter has gone or given up
			io.Copy(io.Discard, stdin)
			os.Exit(0)
		}()
	} // else the guest finds no plan on its stdin and says so

	ctx := context.Background()
	// Compiling the Go guest takes seconds: cache the machine code next to the guest (in
	// target/), so only the first start of a build pays it.
	runtimeConfig := wazero.NewRuntimeConfig()
	if cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(filepath.Dir(os.Args[1]), "wazero-cache")); err == nil {
		runtimeConfig = runtimeConfig.WithCompilationCache(cache)
	}
	r := wazero.NewRuntimeWithConfig(ctx, runtimeConfig)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	code, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("cannot load the guest: " + err.Error())
	}
	compiled, err := r.CompileModule(ctx, code)
	if err != nil {
		fail("cannot load the guest " + os.Args[1] + ": " + err.Error())
	}

	before := listeners()
	ctx = sock.WithConfig(ctx, sock.NewConfig().WithTCPListener("127.0.0.1", 0))
	config := wazero.NewModuleConfig().
		WithArgs(os.Args[1:]...).
		WithStdin(bytes.NewReader(plan)).
		WithStdout(os.Stdout).
		WithStderr(os.Stderr).
		WithEnv("TASKMETER_HOST_PID", strconv.Itoa(os.Getpid())).
		WithEnv("TASKMETER_HOST_RUNTIME", runtimeName).
		// wazero's clocks are fake unless asked for: the receiver times messages.
		WithSysNanotime().WithSysWalltime().WithSysNanosleep().
		WithStartFunctions() // _start is called below, once fd 3 is in place
	mod, err := r.InstantiateModule(ctx, compiled, config)
	if err != nil {
		fail("cannot instantiate the guest: " + err.Error())
	}
	placeholder := -1
	for fd := range listeners() {
		if !before[fd] {
			placeholder = fd
		}
	}
	if placeholder < 0 {
		fail("cannot find wazero's listener to put fd 3 in its place")
	}
	if err := syscall.Dup3(3, placeholder, syscall.O_CLOEXEC); err != nil {
		fail("cannot put fd 3 in place of wazero's listener: " + err.Error())
	}
	// The guest's fd 3 is now the only hold on the socket: when the guest closes it (every
	// sender has joined), the socket stops listening, and a sender meant for the next point is
	// refused rather than left in the backlog of a socket nobody accepts on.
	syscall.Close(3)

	_, err = mod.ExportedFunction("_start").Call(ctx)
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		os.Exit(int(exit.ExitCode()))
	} else if err != nil {
		fail("the guest trapped: " + err.Error())
	}
}
