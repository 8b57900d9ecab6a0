package sim

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name                   string
		in                     []float64
		median, mean, p90, std float64
	}{
		{"empty", nil, 0, 0, 0, 0},
		{"only NaN", []float64{math.NaN()}, 0, 0, 0, 0},
		{"one", []float64{5}, 5, 5, 5, 0},
		{"even count", []float64{4, 1, 3, 2}, 2.5, 2.5, 3.7, math.Sqrt(1.25)},
		{"NaN ignored", []float64{10, math.NaN(), 1, 7}, 7, 6, 9.4, math.Sqrt(14)},
		{"one to ten", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 5.5, 5.5, 9.1, math.Sqrt(8.25)},
		{"constant", []float64{3, 3, 3}, 3, 3, 3, 0},
		{"skewed", []float64{0, 0, 0, 0, 100}, 0, 20, 60, 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			median, mean, p90, std := Summarize(in)
			got := []float64{median, mean, p90, std}
			want := []float64{tc.median, tc.mean, tc.p90, tc.std}
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-12 {
					t.Errorf("Summarize = %v, want %v", got, want)
					break
				}
			}
			for i := range in {
				if in[i] != tc.in[i] && !math.IsNaN(in[i]) {
					t.Fatal("Summarize modified its input")
				}
			}
		})
	}
}

func TestStatsAndMerge(t *testing.T) {
	a := Result{Polls: 4, Hits: 3, Items: 3, Unfetched: 1, Latencies: []float64{1, 2, 3},
		PollTimes: secs(0, 1)}
	b := Result{Polls: 6, Hits: 2, Items: 2, Forced: 2, Latencies: []float64{4, 10}}
	m := Merge(a, b)
	if m.Polls != 10 || m.Hits != 5 || m.Items != 5 || m.Unfetched != 1 || m.Forced != 2 ||
		!slices.Equal(m.Latencies, []float64{1, 2, 3, 4, 10}) || !slices.Equal(m.PollTimes, secs(0, 1)) {
		t.Fatalf("Merge = %+v", m)
	}
	m.Latencies[0] = 99
	if a.Latencies[0] != 1 {
		t.Error("Merge shares memory with its arguments")
	}
	m.Latencies[0] = 1
	want := Stats{Polls: 10, Hits: 5, Items: 5, Unfetched: 1, HitPct: 50, MedianS: 3, MeanS: 4, P90S: 7.6,
		StdS: math.Sqrt(10)}
	got := m.Stats()
	if math.Abs(got.P90S-want.P90S) > 1e-12 || math.Abs(got.StdS-want.StdS) > 1e-12 {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	got.P90S, got.StdS = want.P90S, want.StdS
	if got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if s := (Result{}).Stats(); s != (Stats{}) {
		t.Errorf("empty Stats = %+v", s)
	}
	if e := Merge(); e.Polls != 0 || len(e.Latencies) != 0 {
		t.Errorf("Merge() = %+v", e)
	}
}

func TestStatsOfRun(t *testing.T) {
	r := Run(fixed{Interval: time.Minute}, itemsAt(10, 20, 130), t0, sec(240))
	// Polls at 0, 60, 120, 180: hits at 60 (latencies 50, 40) and 180 (50).
	want := Stats{Polls: 4, Hits: 2, Items: 3, HitPct: 50, MedianS: 50, MeanS: 140.0 / 3, P90S: 50,
		StdS: math.Sqrt(200.0 / 9)}
	got := r.Stats()
	if math.Abs(got.MeanS-want.MeanS) > 1e-12 || math.Abs(got.StdS-want.StdS) > 1e-12 {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	got.MeanS, got.StdS = want.MeanS, want.StdS
	if got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}
