//go:build !race

package eval

// raceEnabled reports that the race detector is on: it slows the
// simulations about tenfold, so the full-size scenario tests run without it.
const raceEnabled = false
