package sensor

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// dtnBatch is what a DTN-batched feed delivers in one fetch: the readings
// of sensors a and b observed at minutes from..to-1, newest first, as the
// feed lists them (and as a fetch used to store them).
func dtnBatch(from, to int) []transform.Item {
	var out []transform.Item
	for m := to - 1; m >= from; m-- {
		for _, s := range []string{"b", "a"} {
			v := float64((m*7)%11) + map[string]float64{"a": 0, "b": 100}[s]
			out = append(out, rd(fmt.Sprintf("%s%d", s, m), s, v, at(float64(m))))
		}
	}
	return out
}

// inTimeOrder returns items sorted by observation time (stable).
func inTimeOrder(items []transform.Item) []transform.Item {
	out := slices.Clone(items)
	slices.SortStableFunc(out, func(x, y transform.Item) int { return x.Reading.Time.Compare(y.Reading.Time) })
	return out
}

func notLate(items []transform.Item) []transform.Item {
	return slices.DeleteFunc(slices.Clone(items), func(it transform.Item) bool { return slices.Contains(it.Categories, "late") })
}

func lateIDs(items []transform.Item) []string {
	var out []string
	for _, it := range items {
		if slices.Contains(it.Categories, "late") {
			out = append(out, it.ID)
		}
	}
	return out
}

// Every stateful operator, given a DTN feed's batches newest first, one
// batch a run (its state saved and reloaded between runs), gives what it
// gives for the same readings in observation-time order; a reading that
// comes after newer ones of its sensor were processed is shown as late
// and counted, never folded in.
func TestBatchedFeedInTimeOrder(t *testing.T) {
	tests := []struct {
		op, cfg string
		now     time.Time // the runs' clock
	}{
		{"window", `{"stat":"mean","size":4}`, at(0)},
		{"window", `{"stat":"max","span":"3m"}`, at(0)},
		{"deadband", `{"delta":2}`, at(0)},
		{"threshold", `{"above":8,"below":3}`, at(0)},
		{"gap", `{"k":2}`, at(0)},
		{"resample", `{"every":"5m","stat":"mean"}`, at(0)},
		{"join", `{"tolerance":"10s","min":2,"stat":"mean"}`, at(0)},
	}
	batches := [][]transform.Item{dtnBatch(0, 10), dtnBatch(10, 20), dtnBatch(20, 30)}
	var all []transform.Item
	for _, b := range batches {
		all = append(all, b...)
	}
	for _, tt := range tests {
		t.Run(tt.op+" "+tt.cfg, func(t *testing.T) {
			want := apply(t, build(t, tt.op, tt.cfg), ctxAt(tt.now), inTimeOrder(all)...)
			if len(want) == 0 && tt.op != "gap" {
				t.Fatal("the reference run emitted nothing: the test checks nothing")
			}
			op := build(t, tt.op, tt.cfg)
			var got []transform.Item
			for _, b := range batches {
				got = append(got, apply(t, op, ctxAt(tt.now), b...)...)
				op = reload(t, op, tt.op, tt.cfg)
			}
			if !slices.Equal(ids(got), ids(want)) || !near(values(got), values(want)) {
				t.Fatalf("batched: %v %v\nin time order: %v %v", ids(got), values(got), ids(want), values(want))
			}
			// A straggler of sensor a from minute 12, after minute 29
			// was processed: late.
			straggler := rd("a12-late", "a", 1000, at(12.5))
			out := apply(t, op, ctxAt(tt.now), straggler)
			if l := lateIDs(out); !slices.Equal(l, []string{"a12-late~late"}) {
				t.Fatalf("straggler: late %v of %v", l, ids(out))
			}
			if n := len(notLate(out)); n != 0 {
				t.Errorf("the straggler was folded in: %v", ids(notLate(out)))
			}
		})
	}
}

// The gap operator on a DTN feed: readings every minute, with a silence
// of 10 minutes in the middle of a batch, reported once, at its place.
func TestBatchedFeedGap(t *testing.T) {
	var batch []transform.Item
	for _, m := range []int{30, 29, 28, 27, 26, 15, 14, 13, 12, 11, 10} { // newest first
		batch = append(batch, rd(fmt.Sprintf("a%d", m), "a", 1, at(float64(m))))
	}
	op := build(t, "gap", `{"k":3}`)
	out := apply(t, op, ctxAt(at(30)), batch...)
	if len(out) != 1 || out[0].Reading.Value != (11*time.Minute).Seconds() || !out[0].Reading.Time.Equal(at(15)) {
		t.Fatalf("gaps %v %v, want one of 11m after 12:15", ids(out), values(out))
	}
}

// A window "up to" a reading holds only readings observed up to it, also
// when the batch came newest first (the reported bug: a window up to
// 29:12 held readings from 29:17 to 29:42).
func TestBatchedFeedWindowUpTo(t *testing.T) {
	var batch []transform.Item
	for i := 9; i >= 0; i-- {
		batch = append(batch, rd(fmt.Sprintf("r%d", i), "buoy", float64(i), at(29).Add(time.Duration(i)*5*time.Second)))
	}
	out := apply(t, build(t, "window", `{"stat":"count","span":"1m"}`), ctxAt(at(31)), batch...)
	for i, it := range out {
		if want := float64(i + 1); it.Reading.Value != want || it.ID != fmt.Sprintf("r%d~count", i) {
			t.Errorf("item %d: %s count %v, want r%d~count %v", i, it.ID, it.Reading.Value, i, want)
		}
	}
}

// With a lateness allowance a reading up to that much out of order is
// waited for and processed in order; past it, it is late.
func TestLatenessAllowance(t *testing.T) {
	const cfg = `{"stat":"sum","size":10,"lateness":"2m"}`
	op := build(t, "window", cfg)
	// Run 1: minutes 0, 1, 3, 4 (2 is late). Readings within 2m of the
	// newest (3, 4) are held; 0 and 1 go through.
	out := apply(t, op, ctxAt(time.Time{}), rd("r0", "s", 1, at(0)), rd("r1", "s", 1, at(1)), rd("r3", "s", 1, at(3)), rd("r4", "s", 1, at(4)))
	if !slices.Equal(ids(out), []string{"r0~sum", "r1~sum"}) {
		t.Fatalf("run 1: %v", ids(out))
	}
	op = reload(t, op, "window", cfg)
	// Run 2: minute 2 arrives, then 7: everything up to 5 is released in
	// order, 2 among them.
	out = apply(t, op, ctxAt(time.Time{}), rd("r2", "s", 1, at(2)), rd("r7", "s", 1, at(7)))
	if !slices.Equal(ids(out), []string{"r2~sum", "r3~sum", "r4~sum"}) || !near(values(out), []float64{3, 4, 5}) {
		t.Fatalf("run 2: %v %v", ids(out), values(out))
	}
	op = reload(t, op, "window", cfg)
	// Run 3: minute 1.5 is past the allowance: late. The run's clock at
	// 9:30 releases 7 (held for 2m).
	out = apply(t, op, ctxAt(at(9.5)), rd("r1.5", "s", 1, at(1.5)))
	if !slices.Equal(ids(out), []string{"r7~sum", "r1.5~late"}) {
		t.Fatalf("run 3: %v", ids(out))
	}
	if s := op.(*windowOp).seq; s.late != 1 || len(s.held) != 0 {
		t.Errorf("late %d, held %d; want 1 and 0", s.late, len(s.held))
	}
	if err := buildErr("window", `{"size":3,"lateness":"-1s"}`); err == nil {
		t.Error("a negative lateness was accepted")
	}
}
