package sensor

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// rdIn is rd in unit.
func rdIn(id, sensor string, v float64, when time.Time, unit string) transform.Item {
	it := rd(id, sensor, v, when)
	it.Reading.Unit = unit
	return it
}

func unitsOf(items []transform.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		if it.Reading != nil {
			out[i] = it.Reading.Unit
		}
	}
	return out
}

// mixedUnits is a temperature and a humidity sensor read in turn, one a
// minute.
var mixedUnits = []transform.Item{
	rdIn("t0", "temp", 20, at(0), "C"), rdIn("h0", "hum", 85, at(1), "%"),
	rdIn("t1", "temp", 22, at(2), "C"), rdIn("h1", "hum", 80, at(3), "%"),
	rdIn("h2", "hum", 75, at(4), "%"),
}

// A window's statistic has the unit of its readings, none when they
// differ (readings of several sensors pooled).
func TestWindowMixedUnits(t *testing.T) {
	tests := []struct {
		name  string
		cfg   string
		in    []transform.Item
		units []string
	}{
		{"pooled", `{"stat":"mean","size":10,"by":""}`, mixedUnits, []string{"C", "", "", "", ""}},
		{"pooled, the other unit left the window", `{"stat":"mean","size":2,"by":""}`, mixedUnits, []string{"C", "", "", "", "%"}},
		{"pooled span, the other unit left the window", `{"stat":"max","span":"1m","by":""}`, mixedUnits, []string{"C", "", "", "", "%"}},
		{"per sensor", `{"stat":"mean","size":10}`, mixedUnits, []string{"C", "%", "C", "%", "%"}},
		{"pooled, one unit", `{"stat":"stddev","size":10,"by":""}`, series("a", 1, 2, 3), []string{"C", "C", "C"}},
		{"count has none", `{"stat":"count","size":10,"by":""}`, mixedUnits, []string{"", "", "", "", ""}},
		{"no unit and a unit", `{"stat":"sum","size":10,"by":""}`,
			[]transform.Item{rdIn("a", "a", 1, at(0), ""), rdIn("b", "b", 2, at(1), "C")}, []string{"", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole := apply(t, build(t, "window", tt.cfg), ctxAt(t0), tt.in...)
			if got := unitsOf(whole); !slices.Equal(got, tt.units) {
				t.Fatalf("units %q, want %q", got, tt.units)
			}
			for i, it := range whole {
				if it.Reading.Unit == "" && (strings.HasSuffix(it.Title, "C") || strings.HasSuffix(it.Title, "%")) {
					t.Errorf("item %d title %q names a unit", i, it.Title)
				}
			}
			// The units of the readings in the window survive a saved state.
			for cut := 1; cut < len(tt.in); cut++ {
				op := build(t, "window", tt.cfg)
				first := apply(t, op, ctxAt(t0), tt.in[:cut]...)
				op = reload(t, op, "window", tt.cfg)
				got := append(first, apply(t, op, ctxAt(t0), tt.in[cut:]...)...)
				if !slices.Equal(unitsOf(got), tt.units) || !near(values(got), values(whole)) {
					t.Fatalf("cut at %d: units %q values %v, want %q %v", cut, unitsOf(got), values(got), tt.units, values(whole))
				}
			}
		})
	}
	t.Run("title", func(t *testing.T) {
		out := apply(t, build(t, "window", `{"stat":"mean","size":2,"by":""}`), ctxAt(t0), mixedUnits[:2]...)
		if out[1].Title != "mean(2): 52.5" {
			t.Errorf("title %q, want \"mean(2): 52.5\"", out[1].Title)
		}
	})
}

// A window state saved without units (its readings' units unknown) or
// with units that do not match its readings.
func TestWindowLoadStateUnits(t *testing.T) {
	ts := fmt.Sprintf("[%d,%d]", at(0).UnixNano(), at(1).UnixNano())
	tests := []struct {
		name string
		raw  string
		ok   bool
		unit string // of the mean once a reading in % is added
	}{
		{"without units", `{"v":1,"groups":[{"k":"","n":2,"v":[1,2],"t":` + ts + `}]}`, true, "%"},
		{"in the same unit", `{"v":1,"groups":[{"k":"","n":2,"v":[1,2],"t":` + ts + `,"u":[{"u":"%","n":2}]}]}`, true, "%"},
		{"in another unit", `{"v":1,"groups":[{"k":"","n":2,"v":[1,2],"t":` + ts + `,"u":[{"u":"%","n":1},{"u":"C","n":1}]}]}`, true, ""},
		{"partly unknown", `{"v":1,"groups":[{"k":"","n":2,"v":[1,2],"t":` + ts + `,"u":[{"n":1,"x":true},{"u":"C","n":1}]}]}`, true, ""},
		{"too few units", `{"v":1,"groups":[{"k":"","n":2,"v":[1,2],"t":` + ts + `,"u":[{"u":"C","n":1}]}]}`, false, ""},
		{"too many units", `{"v":1,"groups":[{"k":"","n":2,"v":[1,2],"t":` + ts + `,"u":[{"u":"C","n":3}]}]}`, false, ""},
		{"an empty run", `{"v":1,"groups":[{"k":"","n":2,"v":[1,2],"t":` + ts + `,"u":[{"u":"C","n":2},{"u":"F","n":0}]}]}`, false, ""},
	}
	const cfg = `{"stat":"mean","size":10,"by":""}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := build(t, "window", cfg)
			err := op.(transform.Stateful).LoadState([]byte(tt.raw))
			if (err == nil) != tt.ok {
				t.Fatalf("LoadState: %v, want ok %v", err, tt.ok)
			}
			if !tt.ok {
				return
			}
			out := apply(t, op, ctxAt(t0), rdIn("h", "hum", 6, at(2), "%"))
			if len(out) != 1 || out[0].Reading.Value != 3 || out[0].Reading.Unit != tt.unit {
				t.Errorf("got %v in %q, want 3 in %q", values(out), unitsOf(out), tt.unit)
			}
		})
	}
}

// A resampled bucket has the unit of its readings; when they differ,
// none, except for first and last, which are a reading's value.
func TestResampleMixedUnits(t *testing.T) {
	tests := []struct {
		cfg  string
		in   []transform.Item
		unit string
	}{
		{`{"every":"5m","by":""}`, mixedUnits, ""},
		{`{"every":"5m","by":"","stat":"median"}`, mixedUnits, ""},
		{`{"every":"5m","by":"","stat":"first"}`, mixedUnits, "C"},
		{`{"every":"5m","by":"","stat":"last"}`, mixedUnits, "%"},
		{`{"every":"5m","by":"","stat":"max"}`, mixedUnits[1:2], "%"},
		{`{"every":"5m","by":""}`, series("a", 1, 2, 3), "C"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d readings", tt.cfg, len(tt.in)), func(t *testing.T) {
			for cut := 0; cut < len(tt.in); cut++ {
				op := build(t, "resample", tt.cfg)
				out := apply(t, op, ctxAt(at(4)), tt.in[:cut]...)
				if cut > 0 {
					op = reload(t, op, "resample", tt.cfg)
				}
				out = append(out, apply(t, op, ctxAt(at(20)), tt.in[cut:]...)...)
				if len(out) != 1 || out[0].Reading.Unit != tt.unit {
					t.Fatalf("cut at %d: %q %q, want one item in %q", cut, ids(out), unitsOf(out), tt.unit)
				}
				if tt.unit == "" && (strings.HasSuffix(out[0].Title, "C") || strings.HasSuffix(out[0].Title, "%")) {
					t.Errorf("title %q names a unit", out[0].Title)
				}
			}
		})
	}
}
