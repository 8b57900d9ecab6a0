package eval

import (
	"math"
	"runtime"
	"testing"
)

func TestScaleSmall(t *testing.T) {
	const n = 20_000
	run := func(procs int) *Report {
		old := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(old)
		rep, err := scaleScenario(newAuto, n).Run(t.Context(), Options{Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	one, two := run(1), run(2)
	if len(one.Rows) != 1 || len(two.Rows) != 1 {
		t.Fatalf("rows %d, %d", len(one.Rows), len(two.Rows))
	}
	r := two.Rows[0]
	if r.Policy != "auto" {
		t.Fatalf("policy %q", r.Policy)
	}
	for _, k := range []string{"wall_s", "allocs", "bytes_per_feed", "polls"} {
		if _, ok := r.Extra[k]; !ok {
			t.Fatalf("no %s in %v", k, r.Extra)
		}
	}
	if r.Extra["polls"] != r.Polls || r.Polls < n || r.Items < n {
		t.Fatalf("polls %d (extra %v), items %d", r.Polls, r.Extra["polls"], r.Items)
	}
	if b := r.Extra["bytes_per_feed"].(float64); b <= 0 || b > 1024 {
		t.Fatalf("bytes_per_feed %v", b)
	}
	// The result does not depend on the number of cores.
	a := one.Rows[0]
	if a.Polls != r.Polls || a.Items != r.Items || a.MeanLatencyS != r.MeanLatencyS ||
		a.MedianLatencyS != r.MedianLatencyS || a.HitPct != r.HitPct {
		t.Fatalf("1 core %+v\n2 cores %+v", a, r)
	}
	t.Logf("%d feeds: %v", n, r.Extra)
}

// TestScaleMillion runs the full scenario and holds it to its limits: at
// most 1 KiB per feed of the process's peak RSS and a wall time of 60 s on
// two cores. It skips under -race and -short; CI runs it in a step of its
// own, alone in its process and without the race detector (scripts/test),
// so that the peak RSS is the scenario's.
func TestScaleMillion(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a million feeds take tens of seconds (minutes with -race)")
	}
	rep, err := Scale().Run(t.Context(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	x := rep.Rows[0].Extra
	t.Logf("%+v polls=%d items=%d hit=%.1f%%", x, rep.Rows[0].Polls, rep.Rows[0].Items, rep.Rows[0].HitPct)
	if b := x["bytes_per_feed"].(float64); b > ScaleMaxBytesPerFeed {
		t.Errorf("%v heap bytes per feed, limit %d", b, ScaleMaxBytesPerFeed)
	}
	if b := x["rss_per_feed"].(float64); b > ScaleMaxBytesPerFeed {
		t.Errorf("%v bytes of peak RSS per feed, limit %d", b, ScaleMaxBytesPerFeed)
	}
	if w := x["wall_s"].(float64); w > ScaleMaxWall.Seconds() {
		t.Errorf("wall %.1f s, limit %.0f s", w, ScaleMaxWall.Seconds())
	}
}

func TestLatHistQuantile(t *testing.T) {
	tests := []struct {
		name string
		vals []float64
		q    float64
		want float64
	}{
		{"single", []float64{42}, 0.5, 42},
		{"median of three", []float64{1, 100, 10000}, 0.5, 100},
		{"p90 of ten", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9},
		{"tiny values", []float64{0.001, 0.002, 0.003}, 0.5, latFloor / 2},
		{"huge value", []float64{1e12}, 0.5, latFloor * math.Exp((latBins-1.5)*latStep)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h latHist
			for _, v := range tc.vals {
				h.add(v)
			}
			got := h.quantile(tc.q, int64(len(tc.vals)))
			if math.Abs(got-tc.want) > 0.005*tc.want {
				t.Fatalf("quantile %v = %v, want %v ± 0.5%%", tc.q, got, tc.want)
			}
		})
	}
	var h latHist
	if h.quantile(0.5, 0) != 0 {
		t.Fatal("empty histogram quantile not 0")
	}
}
