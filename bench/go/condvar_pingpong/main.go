// sync.Cond ping-pong: two goroutines take turns through one sync.Mutex and
// one sync.Cond. Mean round trip of the best of 10 timed segments after a
// tenth as many untimed round trips. Mirrors bench/condvar_pingpong.c.
//
//	condvar_pingpong [round_trips=200000]
package main

import (
	"fmt"
	"sync"

	"goshimbench/internal/bench"
)

const segments = 10

func main() {
	n := int64(bench.Arg(1, 200000))
	warm := n / 10
	var mu sync.Mutex
	cv := sync.NewCond(&mu)
	turn := 0
	var tStart float64
	best := 1e30
	var wg sync.WaitGroup
	player := func(me int) {
		defer wg.Done()
		for i := int64(0); i < warm+n; i++ {
			if me == 0 && i >= warm && (i-warm)%(n/segments) == 0 {
				t := bench.Now()
				if i > warm && t-tStart < best {
					best = t - tStart
				}
				tStart = t
			}
			mu.Lock()
			for turn != me {
				cv.Wait()
			}
			turn = 1 - me
			cv.Signal()
			mu.Unlock()
		}
		if me == 0 && bench.Now()-tStart < best {
			best = bench.Now() - tStart
		}
	}
	wg.Add(2)
	go player(0)
	go player(1)
	wg.Wait()
	fmt.Printf("RESULT %.1f ns per round trip (best of %d segments of %d round trips)\n",
		best*segments*1e9/float64(n), segments, n/segments)
}
