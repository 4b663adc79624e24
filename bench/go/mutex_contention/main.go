// sync.Mutex contention: T goroutines each do N lock/increment/unlock
// rounds on one mutex, with the same work outside the lock as
// bench/mutex_contention.c. Million lock acquisitions per second.
//
//	mutex_contention [goroutines=4] [rounds_per_goroutine=10000000/goroutines]
package main

import (
	"fmt"
	"os"
	"sync"

	"goshimbench/internal/bench"
)

func main() {
	t := bench.Arg(1, 4)
	rounds := bench.Arg(2, 10000000/t)
	var mu sync.Mutex
	counter := 0
	var wg sync.WaitGroup
	sink := make([]uint32, t)
	t0 := bench.Now()
	wg.Add(t)
	for i := 0; i < t; i++ {
		go func(i int) {
			defer wg.Done()
			x := uint32(i)*2654435761 + 1
			for r := 0; r < rounds; r++ {
				mu.Lock()
				counter++
				mu.Unlock()
				for k := 0; k < 20; k++ {
					x = x*1103515245 + 12345
				}
			}
			sink[i] = x & 1
		}(i)
	}
	wg.Wait()
	dt := bench.Now() - t0
	if counter != rounds*t {
		fmt.Fprintf(os.Stderr, "counter %d, expected %d\n", counter, rounds*t)
		os.Exit(1)
	}
	fmt.Printf("RESULT %.2f M locks/s (%d goroutines x %d)\n", float64(counter)/dt/1e6, t, rounds)
}
