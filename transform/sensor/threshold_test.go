package sensor

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

func TestThreshold(t *testing.T) {
	tests := []struct {
		name   string
		cfg    string
		vals   []float64
		alerts []string // "<index>:<high|low>"
	}{
		{"crossings", `{"above":30,"below":28}`, []float64{25, 29, 30.5, 29.5, 30.2, 29.8, 27.9, 28.5, 29, 30},
			[]string{"2:high", "6:low", "9:high"}},
		{"first reading is silent", `{"above":30,"below":28}`, []float64{31, 32, 27, 31},
			[]string{"2:low", "3:high"}},
		{"first reading in the band is low", `{"above":30,"below":28}`, []float64{29, 30},
			[]string{"1:high"}},
		{"initial low", `{"above":30,"below":28,"initial":"low"}`, []float64{31, 27},
			[]string{"0:high", "1:low"}},
		{"initial high", `{"above":30,"below":28,"initial":"high"}`, []float64{29, 28},
			[]string{"1:low"}},
		{"no hysteresis", `{"above":30}`, []float64{29, 30, 30, 29.99, 30}, []string{"1:high", "3:low", "4:high"}},
		{"at the limits", `{"above":30,"below":28}`, []float64{20, 30, 28}, []string{"1:high", "2:low"}},
		{"equal limits", `{"above":5,"below":5}`, []float64{0, 5, 5, 4, 5}, []string{"1:high", "2:low", "4:high"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in []transform.Item
			for i, v := range tt.vals {
				in = append(in, rd(fmt.Sprint(i), "lab-1", v, at(float64(i))))
			}
			check := func(out []transform.Item) {
				t.Helper()
				var got []string
				for _, a := range out {
					got = append(got, a.ID[:len(a.ID)-len("~alert")]+":"+a.Categories[1][len("alert:"):])
				}
				if !slices.Equal(got, tt.alerts) {
					t.Errorf("alerts %v, want %v", got, tt.alerts)
				}
			}
			before := deepCopy(in)
			check(apply(t, build(t, "threshold", tt.cfg), ctxAt(t0), in...))
			unchanged(t, before, in)
			// The same with the state saved and loaded between runs.
			for cut := 1; cut < len(in); cut++ {
				op := build(t, "threshold", tt.cfg)
				first := apply(t, op, ctxAt(t0), in[:cut]...)
				op = reload(t, op, "threshold", tt.cfg)
				check(append(first, apply(t, op, ctxAt(t0), in[cut:]...)...))
			}
		})
	}
}

func TestThresholdNoChatter(t *testing.T) {
	// Noise of ±0.9 around 29 and around 30.5: once high, the value never
	// falls to 28, so one alert only; noise around 29 from low never
	// reaches 30.
	var in []transform.Item
	for i := 0; i < 400; i++ {
		base := 29.0
		if i >= 200 {
			base = 30.5
		}
		noise := 0.9 * math.Sin(float64(i)*1.7)
		in = append(in, rd(fmt.Sprint(i), "s", base+noise, at(float64(i))))
	}
	out := apply(t, build(t, "threshold", `{"above":30,"below":28,"initial":"low"}`), ctxAt(t0), in...)
	if len(out) != 1 || out[0].Categories[1] != "alert:high" {
		t.Fatalf("%d alerts: %v", len(out), titles(out))
	}
	// Without hysteresis the same noise chatters.
	out = apply(t, build(t, "threshold", `{"above":30,"initial":"low"}`), ctxAt(t0), in...)
	if len(out) < 10 {
		t.Errorf("without hysteresis only %d alerts", len(out))
	}
}

func TestThresholdItems(t *testing.T) {
	in := []transform.Item{rd("a", "lab-1", 25, at(0)), plain("p", "x"), rd("b", "lab-1", 31.2, at(1)), rd("c", "lab-1", 27.9, at(2)), rd("d", "lab-2", 40, at(2))}
	in[2].Categories = []string{"lab"}
	out := apply(t, build(t, "threshold", `{"above":30,"below":28}`), ctxAt(t0), in...)
	if !slices.Equal(ids(out), []string{"p", "b~alert", "c~alert"}) {
		t.Fatalf("ids %v", ids(out))
	}
	if got := titles(out[1:]); !slices.Equal(got, []string{"lab-1 above 30 C: 31.2", "lab-1 back below 28 C: 27.9"}) {
		t.Errorf("titles %q", got)
	}
	if !slices.Equal(out[1].Categories, []string{"alert", "alert:high"}) || !slices.Equal(out[2].Categories, []string{"alert", "alert:low"}) {
		t.Errorf("categories %v %v", out[1].Categories, out[2].Categories)
	}
	if out[1].Reading.Value != 31.2 || out[1].GUID != "" || !out[1].Published.Equal(in[2].Published) {
		t.Errorf("alert %+v", out[1])
	}
	if !slices.Equal(in[2].Categories, []string{"lab"}) {
		t.Error("input categories changed")
	}
}

func TestThresholdConfigErrors(t *testing.T) {
	configErrors(t, "threshold", []struct{ cfg, field string }{
		{`{}`, "above"},
		{`{"below":3}`, "above"},
		{`{"above":"30"}`, "above"},
		{`{"above":30,"below":31}`, "below"},
		{`{"above":30,"initial":"warm"}`, "initial"},
		{`{"above":30,"by":"weather"}`, "by"},
		{`{"above":30,"delta":1}`, "delta"},
	})
}
