//go:build unix

package eval

import (
	"runtime"
	"syscall"
)

// peakRSS returns the process's peak resident set size in bytes (0 when
// unknown).
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return ru.Maxrss // bytes there
	}
	return ru.Maxrss * 1024 // kilobytes elsewhere
}
