// create+join throughput: goroutines started in waves (start the wave,
// then wait for all of it with a sync.WaitGroup), each returning a value
// through a slice slot. Mirrors bench/create_join.c.
//
//	create_join [total=20000] [wave=1000]
package main

import (
	"fmt"
	"os"
	"sync"

	"goshimbench/internal/bench"
)

func fn(arg int) int { return arg * 2 }

func wave(n int, res []int) {
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			res[i] = fn(i)
			wg.Done()
		}(i)
	}
	wg.Wait()
}

func main() {
	total := bench.Arg(1, 20000)
	w := bench.Arg(2, 1000)
	res := make([]int, w)
	sum := 0
	wave(w, res) // warm-up, not timed
	t0 := bench.Now()
	for done := 0; done < total; done += w {
		if w == 1 {
			// single create+join: one goroutine, joined through a channel
			ch := make(chan int)
			go func() { ch <- fn(0) }()
			sum += <-ch
			continue
		}
		wave(w, res)
		for _, r := range res {
			sum += r
		}
	}
	dt := bench.Now() - t0
	if sum != total/w*w*(w-1) {
		fmt.Fprintln(os.Stderr, "wrong results")
		os.Exit(1)
	}
	fmt.Printf("RESULT %.3f us per create+join (%d goroutines, waves of %d)\n", dt*1e6/float64(total), total, w)
}
