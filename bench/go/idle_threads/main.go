// Idle-goroutine memory: N goroutines, each started and then blocked
// receiving from one channel that main closes at the end. Once all of
// them have checked in (a sync.WaitGroup), the resident memory grown
// since before the first one started, divided by N. Mirrors
// bench/idle_threads.c.
//
//	idle_threads [goroutines=100000]
package main

import (
	"fmt"
	"runtime"
	"sync"

	"goshimbench/internal/bench"
)

func main() {
	n := bench.Arg(1, 100000)
	runtime.GC()
	before := bench.StatusKB("VmRSS:")
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(n)
	finished.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			started.Done()
			<-release
			finished.Done()
		}()
	}
	started.Wait()
	after := bench.StatusKB("VmRSS:")
	close(release)
	finished.Wait()
	fmt.Printf("RESULT %.0f bytes resident per idle goroutine (%d goroutines)\n",
		float64(after-before)*1024/float64(n), n)
	fmt.Printf("RESULT %d idle goroutines\n", n)
}
