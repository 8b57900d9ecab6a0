package storage

import (
	"math"
)

// FleetStats sums up every feed of the store, as the write path keeps
// them (see Store.FleetStats).
type FleetStats struct {
	Feeds, Remote, Erroring int
	Polls, Hits             int64
	// LatencyFeeds counts the feeds with a measured use latency.
	LatencyFeeds int
	// Quantiles over the feeds of each feed's mean use latency, in
	// seconds (0 without LatencyFeeds). Each is within latencyRelErr of
	// the exact figure: the mean of the feeds' values in a bucket of the
	// latency histogram, exact when they are equal.
	LatencyP50, LatencyP90, LatencyP99, LatencyMax float64
}

// The latency histogram: buckets of the feeds' mean latencies, by the
// binary exponent and the top latencyMantBits bits of the mantissa,
// for magnitudes from 2^latencyMinExp to 2^latencyMaxExp seconds (a
// microsecond to 35,000 years; beyond, clamped), negative values (clock
// skew) mirrored below a bucket for those under a microsecond.
const (
	latencyMantBits = 8
	latencyMinExp   = -20
	latencyMaxExp   = 40
	latencyPerSign  = (latencyMaxExp - latencyMinExp) << latencyMantBits
	latencyBuckets  = 2*latencyPerSign + 1
	// latencyRelErr bounds the relative error of a quantile: a bucket's
	// width.
	latencyRelErr = 1.0 / (1 << latencyMantBits)
)

// latencyHist counts the feeds' mean latencies by bucket, with the sum of
// each bucket's values (a quantile reports its bucket's mean).
type latencyHist struct {
	n   int
	cnt []int32
	sum []float64
}

func newLatencyHist() latencyHist {
	return latencyHist{cnt: make([]int32, latencyBuckets), sum: make([]float64, latencyBuckets)}
}

// latencyBucket is x's bucket; buckets are in the order of their values.
func latencyBucket(x float64) int {
	a := math.Abs(x)
	if !(a >= 0x1p-20) { // under a microsecond (or NaN)
		return latencyPerSign
	}
	frac, exp := math.Frexp(a) // a = frac·2^exp, frac in [0.5, 1)
	e := exp - 1
	k := 0
	switch {
	case e >= latencyMaxExp:
		k = latencyPerSign - 1
	default:
		m := int((frac*2 - 1) * (1 << latencyMantBits)) // top mantissa bits
		k = (e-latencyMinExp)<<latencyMantBits + min(m, 1<<latencyMantBits-1)
	}
	if x < 0 {
		return latencyPerSign - 1 - k
	}
	return latencyPerSign + 1 + k
}

func (h *latencyHist) add(x float64, sign int) {
	b := latencyBucket(x)
	h.cnt[b] += int32(sign)
	h.n += sign
	if h.cnt[b] == 0 {
		h.sum[b] = 0 // no drift left behind
	} else {
		h.sum[b] += float64(sign) * x
	}
}

// quantiles returns the values at ranks p·n (p in ps, ascending) and
// the largest, with quantile(p) the value of rank min(n-1, ⌊p·n⌋) in
// ascending order.
func (h *latencyHist) quantiles(ps []float64) (qs []float64, max float64) {
	if h.n == 0 {
		return make([]float64, len(ps)), 0
	}
	qs = make([]float64, len(ps))
	next, seen := 0, 0
	last := -1
	for b, c := range h.cnt {
		if c == 0 {
			continue
		}
		seen += int(c)
		last = b
		for next < len(ps) && min(h.n-1, int(ps[next]*float64(h.n))) < seen {
			qs[next] = h.value(b)
			next++
		}
	}
	return qs, h.value(last)
}

// value is the mean of bucket b's values.
func (h *latencyHist) value(b int) float64 {
	if b < 0 || h.cnt[b] == 0 {
		return 0
	}
	return h.sum[b] / float64(h.cnt[b])
}
