// Uncontended sync.Mutex Lock+Unlock in a program with other goroutines
// alive, best of 10 timed segments. Mirrors bench/mutex_uncontended.c.
//
//	mutex_uncontended [iterations=20000000]
package main

import (
	"fmt"
	"sync"

	"goshimbench/internal/bench"
)

const segments = 10

func main() {
	n := bench.Arg(1, 20000000)
	var mu sync.Mutex
	counter := 0
	for i := 0; i < n/10; i++ { // warm-up
		mu.Lock()
		counter++
		mu.Unlock()
	}
	best := 1e30
	for s := 0; s < segments; s++ {
		t0 := bench.Now()
		for i := 0; i < n/segments; i++ {
			mu.Lock()
			counter++
			mu.Unlock()
		}
		if dt := bench.Now() - t0; dt < best {
			best = dt
		}
	}
	if counter != n/10+n/segments*segments {
		panic("wrong count")
	}
	fmt.Printf("RESULT %.2f ns per lock+unlock (best of %d segments)\n", best*1e9/float64(n/segments), segments)
}
