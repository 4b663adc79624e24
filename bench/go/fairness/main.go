// Fairness: 4 CPU-bound goroutines (no calls in their loops: Go preempts
// them asynchronously) for 2 s; the smallest count divided by the largest.
// Mirrors bench/fairness.c.
package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

const n = 4

func main() {
	var stop int32
	counts := make([]uint64, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			defer wg.Done()
			var c uint64
			for atomic.LoadInt32(&stop) == 0 {
				c++
			}
			counts[i] = c
		}(i)
	}
	time.Sleep(2 * time.Second)
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	mn, mx := ^uint64(0), uint64(0)
	for _, c := range counts {
		if c < mn {
			mn = c
		}
		if c > mx {
			mx = c
		}
	}
	fmt.Printf("RESULT %.3f min/max of 4 CPU-bound goroutines' progress in 2 s\n", float64(mn)/float64(mx))
}
