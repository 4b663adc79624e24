// Pipe ping-pong: two goroutines, two os.Pipe pairs, one byte each way
// (Go's netpoller serves the pipes). Mean round trip. Mirrors
// bench/pingpong_pipe.c.
//
//	pingpong_pipe [round_trips=200000]
package main

import (
	"fmt"
	"os"

	"goshimbench/internal/bench"
)

func main() {
	n := bench.Arg(1, 200000)
	ar, aw, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	br, bw, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() {
		b := make([]byte, 1)
		for i := 0; i < n; i++ {
			if _, err := ar.Read(b); err != nil {
				panic(err)
			}
			if _, err := bw.Write(b); err != nil {
				panic(err)
			}
		}
		close(done)
	}()
	b := []byte{'x'}
	t0 := bench.Now()
	for i := 0; i < n; i++ {
		if _, err := aw.Write(b); err != nil {
			panic(err)
		}
		if _, err := br.Read(b); err != nil {
			panic(err)
		}
	}
	dt := bench.Now() - t0
	<-done
	fmt.Printf("RESULT %.3f us per round trip (%d round trips)\n", dt*1e6/float64(n), n)
}
