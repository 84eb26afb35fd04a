// Command sleeper MS: while Running(), start a goroutine that sleeps MS milliseconds and then
// records one unit, wait for it, loop. `sleeper 100` gives about 9.9 units/s.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	taskmeter "taskmeter/clients/go"
)

func main() {
	ms, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if len(os.Args) != 2 || err != nil || ms < 0 {
		fmt.Fprintln(os.Stderr, "usage: sleeper MS")
		os.Exit(2)
	}
	for taskmeter.Running() {
		done := make(chan struct{})
		go func() {
			time.Sleep(time.Duration(ms) * time.Millisecond)
			taskmeter.Record()
			close(done)
		}()
		<-done
	}
	taskmeter.Flush() // Go has no exit hook
}
