package schedule

import (
	"math"
	"slices"
	"time"
)

// HistoryLen is how many publish-to-publish gaps DPT keeps (Algorithm 1).
const HistoryLen = 20

// ring is a fixed-size ring of the most recent values (seconds). It never
// allocates and stores float32 (millisecond precision up to days), which
// keeps a policy's state small and flat: the million-feed simulation keeps
// one per feed.
type ring struct {
	v    [HistoryLen]float32
	n    uint8 // number of valid entries (≤ HistoryLen)
	next uint8 // where the next value goes
}

func (r *ring) push(x float64) {
	r.v[r.next] = float32(x)
	r.next = (r.next + 1) % HistoryLen
	if r.n < HistoryLen {
		r.n++
	}
}

func (r *ring) len() int { return int(r.n) }

// values copies the valid entries into buf (oldest order is not kept).
func (r *ring) values(buf *[HistoryLen]float64) []float64 {
	s := buf[:r.n]
	for i := range s {
		s[i] = float64(r.v[i])
	}
	return s
}

// ordered copies the valid entries into buf, oldest first.
func (r *ring) ordered(buf *[HistoryLen]float64) []float64 {
	s := buf[:r.n]
	first := (int(r.next) - int(r.n) + HistoryLen) % HistoryLen
	for i := range s {
		s[i] = float64(r.v[(first+i)%HistoryLen])
	}
	return s
}

// median returns the median of xs, sorting xs in place. For an even count it
// is the mean of the two middle values.
func median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	slices.Sort(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// jitter returns the deviation of gap g from the nearest whole multiple of
// the period med (at least one period): a gap of 2λ+j after a lost reading
// is jitter j, not an outlier of 2λ.
func jitter(g, med float64) float64 {
	if med <= 0 {
		return 0
	}
	k := math.Round(g / med)
	if k < 1 {
		k = 1
	}
	return g - k*med
}

// jitterSpread returns the spread of the publishing jitter in gaps: the
// population standard deviation of each gap's deviation from the nearest
// whole multiple of period, gaps of more than OutagePeriods+1 periods
// (long outages) left out, and how many gaps it counted. It overwrites gs.
func jitterSpread(gs []float64, period float64) (sd float64, n int) {
	for _, g := range gs {
		if g <= float64(OutagePeriods+1)*period {
			gs[n] = jitter(g, period)
			n++
		}
	}
	return stddev(gs[:n]), n
}

// stddev returns the population standard deviation of xs.
func stddev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		d := x - mean
		ss += d * d
	}
	return math.Sqrt(ss / float64(len(xs)))
}

// seconds converts a float number of seconds to a Duration, saturating.
func seconds(s float64) time.Duration {
	const max = float64(1<<63 - 1)
	ns := s * 1e9
	switch {
	case math.IsNaN(ns):
		return 0
	case ns >= max:
		return time.Duration(1<<63 - 1)
	case ns <= -max:
		return time.Duration(-1 << 63)
	}
	return time.Duration(ns)
}
