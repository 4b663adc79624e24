// Package bench holds what the Go benchmark programs share: the clock and
// /proc/self/status fields. Each program mirrors the C program of the same
// name in bench/ and prints the same RESULT lines (bench/run.sh parses them).
package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
)

var t0 = time.Now()

// Now is the monotonic time in seconds.
func Now() float64 { return time.Since(t0).Seconds() }

// StatusKB returns a "Key:" field of /proc/self/status (kB, or a count), -1 if absent.
func StatusKB(key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, key) {
			fields := strings.Fields(line[len(key):])
			if len(fields) > 0 {
				v, err := strconv.ParseInt(fields[0], 10, 64)
				if err == nil {
					return v
				}
			}
		}
	}
	return -1
}

// Arg returns os.Args[i] as an int, or def.
func Arg(i int, def int) int {
	if len(os.Args) > i {
		if v, err := strconv.Atoi(os.Args[i]); err == nil {
			return v
		}
	}
	return def
}
