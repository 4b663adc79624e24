// Channel ping-pong: two goroutines hand a token back and forth over two
// unbuffered channels, Go's idiomatic hand-off (the C programs' equivalent
// is the futex ping-pong, bench/futex_pingpong.c). Mean round trip of the
// best of 10 timed segments after a tenth as many untimed round trips.
//
//	chan_pingpong [round_trips=200000]
package main

import (
	"fmt"

	"goshimbench/internal/bench"
)

const segments = 10

func main() {
	n := bench.Arg(1, 200000)
	warm := n / 10
	ping, pong := make(chan int), make(chan int)
	done := make(chan struct{})
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(done)
	}()
	var tStart float64
	best := 1e30
	v := 0
	for i := 0; i < warm+n; i++ {
		if i >= warm && (i-warm)%(n/segments) == 0 {
			t := bench.Now()
			if i > warm && t-tStart < best {
				best = t - tStart
			}
			tStart = t
		}
		ping <- v
		v = <-pong
	}
	if bench.Now()-tStart < best {
		best = bench.Now() - tStart
	}
	close(ping)
	<-done
	if v != warm+n {
		panic("wrong count")
	}
	fmt.Printf("RESULT %.1f ns per round trip (best of %d segments of %d round trips)\n",
		best*segments*1e9/float64(n), segments, n/segments)
}
