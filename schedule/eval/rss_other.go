//go:build !unix

package eval

// peakRSS returns 0: the peak resident set size is not measured here.
func peakRSS() int64 { return 0 }
