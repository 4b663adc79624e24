// N goroutines each sleeping MS ms, twice (time.Sleep), joined with a
// sync.WaitGroup: time to start them all, wall time from the first start
// to the last join, and peak RSS. Mirrors bench/sleepers.c.
//
//	sleepers [goroutines=10000] [ms=100] [rounds=2]
package main

import (
	"fmt"
	"sync"
	"time"

	"goshimbench/internal/bench"
)

func main() {
	n := bench.Arg(1, 10000)
	ms := bench.Arg(2, 100)
	rounds := bench.Arg(3, 2)
	var wg sync.WaitGroup
	t0 := bench.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			for r := 0; r < rounds; r++ {
				time.Sleep(time.Duration(ms) * time.Millisecond)
			}
			wg.Done()
		}()
	}
	created := bench.Now() - t0
	wg.Wait()
	dt := bench.Now() - t0
	fmt.Printf("RESULT %.1f ms to create %d goroutines\n", created*1e3, n)
	fmt.Printf("RESULT %.1f ms wall time for %d goroutines sleeping %d x %d ms\n", dt*1e3, n, rounds, ms)
	fmt.Printf("RESULT %.1f MB peak RSS\n", float64(bench.StatusKB("VmHWM:"))/1024.0)
}
