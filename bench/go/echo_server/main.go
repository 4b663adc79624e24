// The goroutine-per-connection echo server (net.Listen, a goroutine per
// accepted connection, blocking-style Read/Write), loaded by the same C
// client as bench/echo_server.c (echo_client, found next to this binary or
// one directory up, started without goshim's environment). Prints the
// client's RESULT lines and the server's peak RSS and kernel threads.
//
//	echo_server [conns=1000] [seconds=2] [msg=64]
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"goshimbench/internal/bench"
)

func serve(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n <= 0 || err != nil {
			break
		}
		if _, err := c.Write(buf[:n]); err != nil {
			break
		}
	}
	c.Close()
}

func findClient() string {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	dir := filepath.Dir(self)
	for _, d := range []string{dir, filepath.Dir(dir)} {
		p := filepath.Join(d, "echo_client")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	fmt.Fprintln(os.Stderr, "echo_client not found next to", self)
	os.Exit(1)
	return ""
}

func main() {
	nconn := bench.Arg(1, 1000)
	secs, msg := "2", "64"
	if len(os.Args) > 2 {
		secs = os.Args[2]
	}
	if len(os.Args) > 3 {
		msg = os.Args[3]
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	port := l.Addr().(*net.TCPAddr).Port

	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "LD_PRELOAD=") && !strings.HasPrefix(e, "GOSHIM_") {
			env = append(env, e)
		}
	}
	cmd := exec.Command(findClient(), strconv.Itoa(port), strconv.Itoa(nconn), secs, msg)
	cmd.Env = env
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot start the client:", err)
		os.Exit(1)
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; i < nconn; i++ {
			c, err := l.Accept()
			if err != nil {
				fmt.Fprintln(os.Stderr, "accept:", err)
				os.Exit(1)
			}
			// net's TCP connections have TCP_NODELAY set already
			go serve(c)
		}
	}()
	go func() { done <- cmd.Wait() }()
	// Wait for the client, sampling the kernel threads meanwhile.
	var maxThreads int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if th := bench.StatusKB("Threads:"); th > maxThreads {
			maxThreads = th
		}
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintln(os.Stderr, "client failed:", err)
				os.Exit(1)
			}
			fmt.Printf("RESULT %.1f MB peak RSS of the server\n", float64(bench.StatusKB("VmHWM:"))/1024.0)
			fmt.Printf("RESULT %d kernel threads in the server (peak)\n", maxThreads)
			return
		case <-tick.C:
		}
	}
}
