package sensor

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

func TestResample(t *testing.T) {
	// One reading a minute from 12:00 to 12:11: values 0..11.
	minutes := func(sensor string, from, to int) []transform.Item {
		var out []transform.Item
		for m := from; m <= to; m++ {
			out = append(out, rd(sensor+string(rune('a'+m)), sensor, float64(m), at(float64(m))))
		}
		return out
	}
	tests := []struct {
		name   string
		cfg    string
		in     []transform.Item
		now    time.Time
		starts []float64 // bucket starts, minutes after t0
		want   []float64
	}{
		{"mean", `{"every":"5m","stat":"mean"}`, minutes("s", 0, 11), at(11), []float64{0, 5}, []float64{2, 7}},
		{"default stat", `{"every":"5m"}`, minutes("s", 0, 11), at(11), []float64{0, 5}, []float64{2, 7}},
		{"min", `{"every":"5m","stat":"min"}`, minutes("s", 0, 11), at(11), []float64{0, 5}, []float64{0, 5}},
		{"max", `{"every":"5m","stat":"max"}`, minutes("s", 0, 11), at(11), []float64{0, 5}, []float64{4, 9}},
		{"sum", `{"every":"5m","stat":"sum"}`, minutes("s", 0, 11), at(11), []float64{0, 5}, []float64{10, 35}},
		{"count", `{"every":"5m","stat":"count"}`, minutes("s", 0, 11), at(11), []float64{0, 5}, []float64{5, 5}},
		{"first", `{"every":"5m","stat":"first"}`, minutes("s", 0, 11), at(11), []float64{0, 5}, []float64{0, 5}},
		{"last", `{"every":"5m","stat":"last"}`, minutes("s", 0, 11), at(11), []float64{0, 5}, []float64{4, 9}},
		{"median", `{"every":"4m","stat":"median"}`, minutes("s", 0, 11), at(11), []float64{0, 4}, []float64{1.5, 5.5}},
		{"stddev", `{"every":"2m","stat":"stddev"}`, minutes("s", 0, 4), at(4), []float64{0, 2}, []float64{0.5, 0.5}},
		{"align", `{"every":"5m","align":"2m"}`, minutes("s", 0, 11), at(11), []float64{-3, 2}, []float64{0.5, 4}},
		{"negative align", `{"every":"5m","align":"-3m"}`, minutes("s", 0, 11), at(11), []float64{-3, 2}, []float64{0.5, 4}},
		{"clock closes", `{"every":"5m","grace":"1m"}`, minutes("s", 0, 11), at(16), []float64{0, 5, 10}, []float64{2, 7, 10.5}},
		{"grace not yet over", `{"every":"5m","grace":"1m"}`, minutes("s", 0, 11), at(15.9), []float64{0, 5}, []float64{2, 7}},
		{"default grace is every", `{"every":"5m"}`, minutes("s", 0, 11), at(20), []float64{0, 5, 10}, []float64{2, 7, 10.5}},
		{"groups", `{"every":"5m","stat":"max"}`, append(minutes("a", 0, 5), minutes("b", 0, 5)...), at(5),
			[]float64{0, 0}, []float64{4, 4}},
		// One group: a's and b's readings are taken in time order, so
		// the 12:00 bucket holds ten of them.
		{"one group", `{"every":"5m","stat":"count","by":""}`, append(minutes("a", 0, 5), minutes("b", 0, 5)...), at(5),
			[]float64{0}, []float64{10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := deepCopy(tt.in)
			out := apply(t, build(t, "resample", tt.cfg), ctxAt(tt.now), tt.in...)
			unchanged(t, before, tt.in)
			if !near(values(out), tt.want) {
				t.Fatalf("values %v, want %v", values(out), tt.want)
			}
			for i, it := range out {
				if want := at(tt.starts[i]); !it.Reading.Time.Equal(want) {
					t.Errorf("bucket %d starts %v, want %v", i, it.Reading.Time, want)
				}
			}
		})
	}
}

func TestResampleItems(t *testing.T) {
	const cfg = `{"every":"5m","stat":"mean","grace":"1m"}`
	c := ctxAt(at(6))
	in := []transform.Item{rd("a", "lab-1", 20, at(1)), plain("p", "no reading"), rd("b", "lab-1", 22, at(3)), rd("c", "lab-1", 30, at(5))}
	out := apply(t, build(t, "resample", cfg), c, in...)
	if len(out) != 2 || out[0].ID != "p" {
		t.Fatalf("got %v", ids(out))
	}
	b := out[1]
	if want := c.DeriveID("lab-1", t0.Format(time.RFC3339Nano)); b.ID != want {
		t.Errorf("id %q, want %q", b.ID, want)
	}
	if b.Title != "lab-1 mean(5m) at 2026-11-21T12:00:00Z: 21 C" {
		t.Errorf("title %q", b.Title)
	}
	if !b.Published.Equal(at(5)) || b.Reading.Sensor != "lab-1" || b.Reading.Unit != "C" || b.FeedID != 1 {
		t.Errorf("item %+v reading %+v", b, b.Reading)
	}
	// The same input again, to a fresh operator: the same ids.
	again := apply(t, build(t, "resample", cfg), c, in...)
	if !slices.Equal(ids(again), ids(out)) {
		t.Errorf("rerun ids %v, want %v", ids(again), ids(out))
	}
}

func TestResampleState(t *testing.T) {
	const cfg = `{"every":"5m","stat":"median","grace":"2m"}`
	op := build(t, "resample", cfg)
	// Run 1: 12:00–12:03 of a and b; nothing closes.
	out := apply(t, op, ctxAt(at(4)), rd("a1", "a", 1, at(0)), rd("b1", "b", 10, at(1)), rd("a2", "a", 3, at(3)))
	if len(out) != 0 {
		t.Fatalf("run 1 emitted %v", ids(out))
	}
	op = reload(t, op, "resample", cfg)
	// Run 2: a's 12:06 reading closes a's first bucket.
	out = apply(t, op, ctxAt(at(6)), rd("a3", "a", 5, at(4)), rd("a4", "a", 100, at(6)))
	if !near(values(out), []float64{3}) {
		t.Fatalf("run 2: %v, want [3]", values(out))
	}
	op = reload(t, op, "resample", cfg)
	// Run 3, no input, the clock at 12:07: b's bucket (ended 12:05, grace
	// 2m) closes; a's 12:05 bucket is still open.
	out = apply(t, op, ctxAt(at(7)))
	if !near(values(out), []float64{10}) || out[0].Reading.Sensor != "b" {
		t.Fatalf("run 3: %v", values(out))
	}
	op = reload(t, op, "resample", cfg)
	// Run 4: late readings for closed buckets are left out, each shown
	// by a late item; a's 12:05 bucket gets 12:08 and closes at 12:12.
	out = apply(t, op, ctxAt(at(12)), rd("late-a", "a", -50, at(2)), rd("late-b", "b", -50, at(4)), rd("a5", "a", 102, at(8)))
	if !near(values(out), []float64{101, -50, -50}) || !slices.Equal(ids(out[1:]), []string{"late-a~late", "late-b~late"}) {
		t.Fatalf("run 4: %v %v, want [101] and two late items", ids(out), values(out))
	}
	op = reload(t, op, "resample", cfg)
	// Run 5: a late reading for b's closed bucket is still left out.
	if out = apply(t, op, ctxAt(at(12)), rd("late-b2", "b", 1, at(3))); !slices.Equal(ids(out), []string{"late-b2~late"}) {
		t.Fatalf("run 5: %v", ids(out))
	}
	if n := op.(*resampleOp).seq.late; n != 3 {
		t.Errorf("%d late readings counted, want 3", n)
	}
}

func TestResampleLoadState(t *testing.T) {
	op := build(t, "resample", `{"every":"5m"}`)
	ns := func(m float64) string { return strconv.FormatInt(at(m).UnixNano(), 10) }
	for _, raw := range []string{
		`{"v":1,"groups":[{"k":"a","open":{"start":-9000000000000000000}}]}`,
		`{"v":1,"groups":[{"k":"a","closed":9223372036854775807}]}`,
		`{"v":1,"groups":[{"k":"a","closed":` + ns(10) + `,"open":{"start":` + ns(5) + `,"n":1}}]}`,
		`{"v":1,"groups":[{"k":"a","open":{"start":` + ns(5) + `,"n":-1}}]}`,
	} {
		t.Run(raw, func(t *testing.T) {
			if err := op.(transform.Stateful).LoadState([]byte(raw)); err == nil {
				t.Error("malformed state loaded")
			}
			if out := apply(t, op, ctxAt(at(0)), rd("x", "a", 1, at(0))); len(out) != 0 {
				t.Errorf("after a refused state: %v", ids(out))
			}
		})
	}
	t.Run("buckets changed", func(t *testing.T) {
		// A bucket that does not start on the configured grid is dropped.
		raw := []byte(`{"v":1,"groups":[{"k":"a","open":{"start":` + ns(1) + `,"n":1,"sum":5,"mean":5,"min":5,"max":5,"first":5,"last":5}}]}`)
		if err := op.(transform.Stateful).LoadState(raw); err != nil {
			t.Fatal(err)
		}
		out := apply(t, op, ctxAt(at(30)), rd("x", "a", 1, at(20)))
		if len(out) != 1 || out[0].Reading.Value != 1 {
			t.Errorf("got %v, want only the new bucket", values(out))
		}
	})
}

func TestResampleConfigErrors(t *testing.T) {
	configErrors(t, "resample", []struct{ cfg, field string }{
		{`{}`, "every"},
		{`{"every":"500ms"}`, "every"},
		{`{"every":"10000h"}`, "every"},
		{`{"every":"often"}`, "every"},
		{`{"every":"5m","stat":"mode"}`, "stat"},
		{`{"every":"5m","grace":"-1m"}`, "grace"},
		{`{"every":"5m","grace":"1y"}`, "grace"},
		{`{"every":"5m","align":"9000h"}`, "align"},
		{`{"every":"5m","by":"nope"}`, "by"},
		{`{"every":"5m","size":3}`, "size"},
	})
}
