// Command flood EVENTS [THREADS] calls Record() EVENTS times in total from THREADS goroutines
// as fast as it can, flushes, and prints the rate to stderr.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	taskmeter "taskmeter/clients/go"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: flood EVENTS [THREADS]")
		os.Exit(2)
	}
	events, err := strconv.ParseUint(os.Args[1], 10, 64)
	threads := uint64(1)
	if err == nil && len(os.Args) == 3 {
		threads, err = strconv.ParseUint(os.Args[2], 10, 64)
	}
	if err != nil || threads < 1 {
		fmt.Fprintln(os.Stderr, "flood: EVENTS and THREADS must be integers, THREADS >= 1")
		os.Exit(2)
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := uint64(0); i < threads; i++ {
		share := events / threads
		if i < events%threads {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ; share > 0; share-- {
				taskmeter.Record()
			}
		}()
	}
	wg.Wait()
	taskmeter.Flush()
	s := time.Since(t0).Seconds()
	fmt.Fprintf(os.Stderr, "flood: %d events in %.3f s = %.0f events/s\n", events, s, float64(events)/s)
}
