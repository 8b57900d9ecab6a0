package ui

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// stamp is a time as the pages show it: a <time> element with its
// machine-readable value and a human text relative to now.
type stamp struct {
	ISO   string // RFC 3339, UTC; empty for no time
	Human string // "3 s ago", "in 12 s"
	Title string // the absolute time, for a tooltip
}

// newStamp returns the stamp of t seen at now (empty for the zero time).
func newStamp(t, now time.Time) stamp {
	if t.IsZero() {
		return stamp{}
	}
	t = t.UTC()
	d := now.Sub(t)
	var human string
	switch {
	case d > -time.Second && d < time.Second:
		human = "now"
	case d > 0:
		human = humanDuration(d) + " ago"
	default:
		human = "in " + humanDuration(-d)
	}
	return stamp{ISO: t.Format(time.RFC3339), Human: human, Title: t.Format("2006-01-02 15:04:05 UTC")}
}

// humanDuration writes d with one unit, rounded: "3 s", "12 min",
// "5 h", "3 d".
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		return itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		return itoa(int(d/time.Hour)) + " h"
	default:
		return itoa(int(d/(24*time.Hour))) + " d"
	}
}

// seconds writes a duration given in seconds with about three significant
// digits and a unit: "0.42 s", "12.3 s", "4.5 min", "2.1 h".
func seconds(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "—"
	}
	neg := s < 0
	if neg {
		s = -s
	}
	var out string
	switch {
	case s < 0.001 && s > 0:
		out = strconv.FormatFloat(s*1000, 'g', 2, 64) + " ms"
	case s < 10:
		out = strconv.FormatFloat(s, 'f', 2, 64) + " s"
	case s < 100:
		out = strconv.FormatFloat(s, 'f', 1, 64) + " s"
	case s < 3600:
		out = strconv.FormatFloat(s/60, 'f', 1, 64) + " min"
	case s < 172800:
		out = strconv.FormatFloat(s/3600, 'f', 1, 64) + " h"
	default:
		out = strconv.FormatFloat(s/86400, 'f', 1, 64) + " d"
	}
	if neg {
		return "−" + out
	}
	return out
}

// percent writes p (0–100) with one decimal.
func percent(p float64) string { return strconv.FormatFloat(p, 'f', 1, 64) + "\u00a0%" }

func itoa(n int) string { return strconv.Itoa(n) }

// latencyStats summarises latencies in seconds.
type latencyStats struct {
	N                     int
	Median, P90, P99, Max string
	Min                   string
}

// summarise sorts lat in place and returns its summary; ok is false when
// it is empty.
func summarise(lat []float64) (latencyStats, bool) {
	if len(lat) == 0 {
		return latencyStats{}, false
	}
	slices.Sort(lat)
	return latencyStats{
		N:      len(lat),
		Min:    seconds(lat[0]),
		Median: seconds(median(lat)),
		P90:    seconds(quantile(lat, 0.9)),
		P99:    seconds(quantile(lat, 0.99)),
		Max:    seconds(lat[len(lat)-1]),
	}, true
}

// median of sorted values (the mean of the middle two for an even count,
// as the JSON API computes it).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// quantile of sorted values, by linear interpolation between ranks.
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}
