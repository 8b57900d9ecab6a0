package sensor

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

func TestGapFixedPeriod(t *testing.T) {
	const cfg = `{"period":"5m","k":3}`
	op := build(t, "gap", cfg)
	in := []transform.Item{rd("a", "lab-1", 1, at(0)), rd("b", "lab-1", 2, at(5)), plain("p", "x"), rd("c", "lab-1", 3, at(10))}
	if out := apply(t, op, ctxAt(at(10.5)), in...); len(out) != 0 {
		t.Fatalf("readings passed or gap reported: %v", titles(out))
	}
	steps := []struct {
		now    float64
		titles []string
	}{
		{20, nil}, // 10m of silence: not more than 15m
		{25, nil}, // exactly 15m: not more
		{27, []string{"lab-1: no reading for 17m (expected every 5m)"}},
		{40, nil}, // already reported for the 12:10 reading
		{90, nil},
	}
	c10 := ctxAt(at(27))
	wantID := c10.DeriveID("lab-1", at(10).Format(time.RFC3339Nano))
	for _, s := range steps {
		op = reload(t, op, "gap", cfg)
		c := ctxAt(at(s.now))
		out := apply(t, op, c) // no input: the clock alone
		if !slices.Equal(titles(out), s.titles) {
			t.Fatalf("at +%vm: %q, want %q", s.now, titles(out), s.titles)
		}
		for _, g := range out {
			r := g.Reading
			if g.ID != wantID || !slices.Equal(g.Categories, []string{"gap"}) || !g.Published.Equal(c.Now) ||
				r.Value != 17*60 || r.Unit != "s" || !r.Time.Equal(at(10)) || r.Sensor != "lab-1" {
				t.Errorf("gap item %+v reading %+v", g, r)
			}
		}
	}
	// A reading after the reported gap: no second report; a new silence
	// after it is reported again.
	op = reload(t, op, "gap", cfg)
	if out := apply(t, op, ctxAt(at(95)), rd("d", "lab-1", 4, at(95))); len(out) != 0 {
		t.Fatalf("reported twice: %q", titles(out))
	}
	out := apply(t, op, ctxAt(at(120)))
	if len(out) != 1 || out[0].Title != "lab-1: no reading for 25m (expected every 5m)" {
		t.Fatalf("second silence: %q", titles(out))
	}
}

func TestGapOnArrival(t *testing.T) {
	// A reading arrives after a silence nobody reported: the gap item
	// comes first, the readings do not pass.
	c := ctxAt(at(40))
	out := apply(t, build(t, "gap", `{"period":"5m"}`), c,
		rd("a", "s1", 1, at(0)), rd("b", "s1", 1, at(5)), rd("z", "s2", 1, at(6)), rd("c", "s1", 1, at(40)))
	want := []string{"s1: no reading for 35m (expected every 5m)", "s2: no reading for 34m (expected every 5m)"}
	if !slices.Equal(titles(out), want) {
		t.Fatalf("%q, want %q", titles(out), want)
	}
	if out[0].ID != c.DeriveID("s1", at(5).Format(time.RFC3339Nano)) {
		t.Error("gap id not derived from the group and the last reading")
	}
}

func TestGapLearned(t *testing.T) {
	const cfg = `{"k":3}`
	jitter := []float64{0, 0.2, -0.1, 0.3, 0}
	var in []transform.Item
	for i := range jitter {
		in = append(in, rd(string(rune('a'+i)), "s", float64(i), at(float64(5*i)+jitter[i])))
	}
	t.Run("too few intervals", func(t *testing.T) {
		op := build(t, "gap", cfg)
		if out := apply(t, op, ctxAt(at(500)), in[:3]...); len(out) != 0 {
			t.Errorf("gap with 2 intervals: %q", titles(out))
		}
	})
	t.Run("median of the intervals", func(t *testing.T) {
		op := build(t, "gap", cfg)
		apply(t, op, ctxAt(at(20)), in...)
		op = reload(t, op, "gap", cfg)
		// Intervals 5.2, 4.7, 5.4, 4.7 minutes: median 4.95m, 3 periods
		// 14.85m after 12:20.
		if out := apply(t, op, ctxAt(at(34.8))); len(out) != 0 {
			t.Fatalf("early gap: %q", titles(out))
		}
		out := apply(t, op, ctxAt(at(34.9)))
		if len(out) != 1 || out[0].Title != "s: no reading for 14m54s (expected every 4m57s)" {
			t.Fatalf("got %q", titles(out))
		}
	})
}

func TestGapIdempotentIDs(t *testing.T) {
	in := []transform.Item{rd("a", "s1", 1, at(0)), rd("b", "s2", 1, at(0)), rd("c", "s1", 1, at(5))}
	var runs [][]string
	for range 2 {
		out := apply(t, build(t, "gap", `{"period":"1m"}`), ctxAt(at(60)), in...)
		runs = append(runs, ids(out))
	}
	// s1's 5-minute silence on arrival, then s1's and s2's silence up to now.
	if len(runs[0]) != 3 || !slices.Equal(runs[0], runs[1]) {
		t.Errorf("ids %v then %v", runs[0], runs[1])
	}
}

func TestGapConfigErrors(t *testing.T) {
	configErrors(t, "gap", []struct{ cfg, field string }{
		{`{"k":0}`, "k"},
		{`{"k":-3}`, "k"},
		{`{"k":1e9}`, "k"},
		{`{"period":"0s"}`, "period"},
		{`{"period":"-5m"}`, "period"},
		{`{"period":"whenever"}`, "period"},
		{`{"period":"9000h"}`, "period"},
		{`{"by":"mood"}`, "by"},
		{`{"tolerance":"1m"}`, "tolerance"},
	})
}

// With a lateness allowance, readings the sequencer holds back are not
// silence: a sensor reporting every minute, run every minute with a 5m
// allowance and k = 3, never has a gap; once it stops, the gap comes
// allow later than without the allowance.
func TestGapWithLateness(t *testing.T) {
	const cfg = `{"period":"1m","k":3,"lateness":"5m"}`
	op := build(t, "gap", cfg)
	for m := 0.0; m <= 20; m++ {
		op = reload(t, op, "gap", cfg)
		for _, it := range apply(t, op, ctxAt(at(m)), rd(fmt.Sprint("r", m), "lab-1", m, at(m))) {
			if slices.Contains(it.Categories, "gap") {
				t.Fatalf("at +%vm: gap %q while the sensor reports every minute", m, it.Title)
			}
		}
	}
	// The last reading (20m) is released at 25m; silence counts from it,
	// less the allowance: more than 3m of it only after 28m.
	for _, s := range []struct {
		now float64
		gap bool
	}{{27, false}, {28, false}, {29, true}} {
		op = reload(t, op, "gap", cfg)
		gap := false
		for _, it := range apply(t, op, ctxAt(at(s.now))) {
			gap = gap || slices.Contains(it.Categories, "gap")
		}
		if gap != s.gap {
			t.Fatalf("at +%vm: gap %v, want %v", s.now, gap, s.gap)
		}
		if gap {
			break
		}
	}
}
