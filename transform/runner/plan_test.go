package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

func TestFanIn(t *testing.T) {
	type run struct {
		fresh  []uint64
		output bool
	}
	one := func(id uint64) run { return run{[]uint64{id}, true} }
	round := []run{{[]uint64{1}, false}, {[]uint64{2}, false}, {[]uint64{3}, true}}
	rounds := func(n int) []run {
		var rs []run
		for range n {
			rs = append(rs, round...)
		}
		return rs
	}
	tests := []struct {
		name string
		runs []run
		want int // 0: no typical fan-in
	}{
		{"nothing yet", nil, 0},
		{"three outputs are too few", []run{one(1), one(1), one(1)}, 0},
		{"one input per output", []run{one(1), one(1), one(1), one(1)}, 1},
		{"a join of three, one input per run", rounds(4), 3},
		{"a join of three, all in one run", []run{{[]uint64{1, 2, 3}, true}, {[]uint64{3, 2, 1}, true}, {[]uint64{1, 2, 3}, true}, {[]uint64{1, 2, 3}, true}}, 3},
		{"an input counted once per output", []run{{[]uint64{1}, false}, {[]uint64{1}, false}, one(1), one(1), one(1), one(1)}, 1},
		{"three in four agree", append(rounds(3), run{[]uint64{1}, true}), 3},
		{"half agree: no plan", append(rounds(2), one(1), one(1)), 0},
		{"the last eight count", append([]run{one(1), one(1), one(1), one(1), one(1), one(1), one(1), one(1)}, rounds(8)...), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f fanIn
			for _, r := range tt.runs {
				f.ran(r.fresh, r.output)
			}
			k, ok := f.typical()
			if tt.want == 0 && ok || tt.want != 0 && (!ok || k != tt.want) {
				t.Errorf("typical = %d, %v; want %d", k, ok, tt.want)
			}
		})
	}
}

// A pipe plans its next update from its inputs' planned fetches and its
// fan-in, and tells subscribers (Hints.Due).
func TestHintsPlan(t *testing.T) {
	clock := schedule.NewVirtualClock(t0)
	e := newEnv(t, clock)
	ctx := context.Background()
	a, b, c := e.sensor(t, "a"), e.sensor(t, "b"), e.sensor(t, "c")
	planned := map[uint64]time.Duration{} // feed → planned fetch, after now; absent: none
	e.r.opt.PlannedFetch = func(id uint64, now time.Time) (time.Time, bool) {
		d, ok := planned[id]
		return now.Add(d), ok
	}

	fuse := transform.Pipe{Output: transform.Output{Slug: "fuse"}}
	for _, f := range []storage.Feed{a, b, c} {
		fuse.Nodes = append(fuse.Nodes, transform.Node{ID: f.Slug, Op: "source", Config: json.RawMessage(fmt.Sprintf(`{"feed":"sensor/%s"}`, f.Slug))})
		fuse.Edges = append(fuse.Edges, transform.Edge{From: f.Slug, To: "mean"})
	}
	fuse.Nodes = append(fuse.Nodes, transform.Node{ID: "mean", Op: "join", Config: json.RawMessage(`{"by":"sensor","stat":"mean","tolerance":"2m","min":3,"sensor":"region"}`)})
	fi, err := e.r.Create(ctx, fuse)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := e.r.Create(ctx, transform.Pipe{
		Nodes: []transform.Node{
			{ID: "in", Op: "source", Config: json.RawMessage(`{"feed":"sensor/a"}`)},
			{ID: "cal", Op: "calibrate", Config: json.RawMessage(`{"scale":1,"offset":-0.4}`)},
		},
		Edges:  []transform.Edge{{From: "in", To: "cal"}},
		Output: transform.Output{Slug: "cal"},
	})
	if err != nil {
		t.Fatal(err)
	}
	hints := func(id uint64) FeedHints {
		t.Helper()
		in, err := e.r.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		f, err := e.st.Feed(in.FeedID)
		if err != nil {
			t.Fatal(err)
		}
		return e.r.Hints(f, clock.Now())
	}
	arrive := func(f storage.Feed, v float64) {
		t.Helper()
		e.post(t, f, clock.Now(), v)
		for _, id := range []uint64{fi.ID, cal.ID} {
			if _, err := e.r.RunNow(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(10 * time.Second)
	}
	planned[a.ID], planned[b.ID], planned[c.ID] = 280*time.Second, 290*time.Second, 300*time.Second
	// A pipe of one input waits for that input's fetch only: it plans
	// from the start, with nothing to learn.
	if h := hints(cal.ID); !h.Due.Equal(clock.Now().Add(280 * time.Second)) {
		t.Fatalf("one input, before any run: planned %v, want 280s", h.Due.Sub(clock.Now()))
	}
	for k := range 3 {
		arrive(a, 10+float64(k))
		arrive(b, 11)
		arrive(c, 12)
		clock.Advance(270 * time.Second)
		if h := hints(fi.ID); !h.Due.IsZero() {
			t.Fatalf("round %d: planned %v before the fan-in is learned", k, h.Due)
		}
		if h := hints(cal.ID); !h.Due.Equal(clock.Now().Add(280 * time.Second)) {
			t.Fatalf("round %d, one input: planned %v, want 280s", k, h.Due.Sub(clock.Now()))
		}
	}
	arrive(a, 13)
	arrive(b, 11)
	arrive(c, 12)
	if n := len(e.output(t, fi.ID)); n != 4 {
		t.Fatalf("%d fused items after 4 rounds, want 4", n)
	}

	now := clock.Now()
	tests := []struct {
		name    string
		arrive  []storage.Feed // this round, before asking
		planned map[uint64]time.Duration
		pipe    uint64
		want    time.Duration // after now (once the arrivals' 10 s each are added); -1: no plan
	}{
		{"a join is due at its last input's fetch", nil, map[uint64]time.Duration{a.ID: 280 * time.Second, b.ID: 300 * time.Second, c.ID: 290 * time.Second}, fi.ID, 300 * time.Second},
		{"a one-input pipe at its input's fetch", nil, map[uint64]time.Duration{a.ID: 280 * time.Second, b.ID: 300 * time.Second, c.ID: 290 * time.Second}, cal.ID, 280 * time.Second},
		{"an input without a plan leaves none", nil, map[uint64]time.Duration{a.ID: 280 * time.Second, b.ID: 300 * time.Second}, fi.ID, -1},
		{"a fetch under way is due now", nil, map[uint64]time.Duration{a.ID: -5 * time.Second, b.ID: -time.Second, c.ID: -2 * time.Second}, fi.ID, 0},
		{"inputs in this round are not waited for", []storage.Feed{a, b}, map[uint64]time.Duration{a.ID: 280 * time.Second, b.ID: 290 * time.Second, c.ID: 100 * time.Second}, fi.ID, 100 * time.Second},
		{"nor need their plans", nil, map[uint64]time.Duration{c.ID: 120 * time.Second}, fi.ID, 120 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range tt.arrive {
				arrive(f, 11)
			}
			planned = tt.planned
			h := hints(tt.pipe)
			if tt.want < 0 {
				if !h.Due.IsZero() {
					t.Errorf("planned %v, want no plan", h.Due.Sub(clock.Now()))
				}
				return
			}
			if want := clock.Now().Add(tt.want); !h.Due.Equal(want) || !h.Next.Equal(want) {
				t.Errorf("planned %v, next %v; want both %v after now", h.Due.Sub(clock.Now()), h.Next.Sub(clock.Now()), tt.want)
			}
		})
	}
	if clock.Now().Sub(now) != 20*time.Second {
		t.Fatalf("the table moved the clock %v", clock.Now().Sub(now))
	}
}
