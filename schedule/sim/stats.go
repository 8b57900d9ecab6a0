package sim

import (
	"math"
	"slices"
	"time"
)

// Stats summarises a Result: counts, hit percentage and the use latency
// distribution in seconds (see Summarize for the definitions).
type Stats struct {
	Polls, Hits, Items, Unfetched int
	// HitPct is 100·Hits/Polls (0 without polls).
	HitPct float64
	// MedianS, MeanS, P90S and StdS describe the latencies in seconds.
	MedianS, MeanS, P90S, StdS float64
}

// Stats returns the summary of r.
func (r Result) Stats() Stats {
	s := Stats{Polls: r.Polls, Hits: r.Hits, Items: r.Items, Unfetched: r.Unfetched}
	if r.Polls > 0 {
		s.HitPct = 100 * float64(r.Hits) / float64(r.Polls)
	}
	s.MedianS, s.MeanS, s.P90S, s.StdS = Summarize(r.Latencies)
	return s
}

// Merge adds up several results: counts are summed, latencies and poll
// times concatenated in argument order. The result shares no memory with
// its arguments.
func Merge(rs ...Result) Result {
	var out Result
	nl, np := 0, 0
	for _, r := range rs {
		nl += len(r.Latencies)
		np += len(r.PollTimes)
	}
	out.Latencies = make([]float64, 0, nl)
	if np > 0 {
		out.PollTimes = make([]time.Time, 0, np)
	}
	for _, r := range rs {
		out.Polls += r.Polls
		out.Hits += r.Hits
		out.Items += r.Items
		out.Unfetched += r.Unfetched
		out.Forced += r.Forced
		out.Latencies = append(out.Latencies, r.Latencies...)
		out.PollTimes = append(out.PollTimes, r.PollTimes...)
	}
	return out
}

// Summarize returns the median, mean, 90th percentile and population
// standard deviation of lat. Percentiles (the median included) interpolate
// linearly between the closest ranks: the q-quantile of the sorted values
// x[0..n-1] is x[i] + f·(x[i+1]−x[i]) with i+f = q·(n−1) (R's type 7,
// NumPy's default). NaN values are ignored; an empty input yields zeros.
// lat is not modified.
func Summarize(lat []float64) (median, mean, p90, std float64) {
	xs := make([]float64, 0, len(lat))
	for _, x := range lat {
		if !math.IsNaN(x) {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(xs)
	median = quantile(xs, 0.5)
	p90 = quantile(xs, 0.9)
	// Two passes for a numerically stable variance.
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean = sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		d := x - mean
		ss += d * d
	}
	std = math.Sqrt(ss / float64(len(xs)))
	return median, mean, p90, std
}

// quantile is the type-7 q-quantile of the sorted, non-empty xs.
func quantile(xs []float64, q float64) float64 {
	pos := q * float64(len(xs)-1)
	i := int(pos)
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	f := pos - float64(i)
	return xs[i] + f*(xs[i+1]-xs[i])
}
