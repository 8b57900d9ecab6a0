package sensor

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// rounds makes n sensors' readings for the given rounds, 5 minutes apart,
// each observed with up to ±40 s of jitter. Sensor i reads 20 + i/4 +
// round, so round r's mean is exactly 20 + (n−1)/8 + r.
func rounds(n int, rs ...int) []transform.Item {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []transform.Item
	for _, r := range rs {
		for i := range n {
			jitter := time.Duration(rng.IntN(81)-40) * time.Second
			when := at(float64(5 * r)).Add(jitter)
			it := rd(fmt.Sprintf("s%02d-r%d", i, r), fmt.Sprintf("s%02d", i), 20+float64(i)/4+float64(r), when)
			out = append(out, it)
		}
	}
	return out
}

func roundMean(n, r int) float64 { return 20 + float64(n-1)/8 + float64(r) }

func TestJoinRounds(t *testing.T) {
	const cfg = `{"by":"sensor","stat":"mean","tolerance":"2m","min":20,"unit":"C","sensor":"region"}`
	in := rounds(20, 0, 1, 2)
	want := []float64{roundMean(20, 0), roundMean(20, 1), roundMean(20, 2)}

	check := func(t *testing.T, out []transform.Item) {
		t.Helper()
		got := values(out)
		if !slices.Equal(got, want) { // exact: the values are multiples of 1/4
			t.Fatalf("fused %v, want %v", got, want)
		}
		for i, it := range out {
			if it.Reading.Sensor != "region" || it.Reading.Unit != "C" {
				t.Errorf("fused reading %+v", it.Reading)
			}
			if wantT := newestOf(in[20*i : 20*i+20]); !it.Reading.Time.Equal(wantT) || !it.Published.Equal(wantT) {
				t.Errorf("round %d fused at %v, want %v", i, it.Reading.Time, wantT)
			}
			if !strings.HasPrefix(it.Title, "region mean of 20: ") {
				t.Errorf("title %q", it.Title)
			}
		}
	}

	t.Run("one run", func(t *testing.T) {
		before := deepCopy(in)
		out := apply(t, build(t, "join", cfg), ctxAt(at(15)), in...)
		unchanged(t, before, in)
		check(t, out)
		if out[0].Title != "region mean of 20: 22.375 C" {
			t.Errorf("title %q", out[0].Title)
		}
	})
	t.Run("shuffled", func(t *testing.T) {
		sh := slices.Clone(in)
		rand.New(rand.NewPCG(3, 4)).Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
		check(t, apply(t, build(t, "join", cfg), ctxAt(at(15)), sh...))
	})
	t.Run("runs with state in between", func(t *testing.T) {
		for _, cuts := range [][]int{{12, 45}, {20, 40}, {1, 59}, {19, 21, 39, 41}} {
			op := build(t, "join", cfg)
			var out []transform.Item
			prev := 0
			for _, cut := range append(cuts, len(in)) {
				out = append(out, apply(t, op, ctxAt(at(15)), in[prev:cut]...)...)
				op = reload(t, op, "join", cfg)
				prev = cut
			}
			check(t, out)
		}
	})
	t.Run("pooled inputs", func(t *testing.T) {
		var a, b []transform.Item
		for i, it := range in {
			if i%3 == 0 {
				a = append(a, it)
			} else {
				b = append(b, it)
			}
		}
		out, err := build(t, "join", cfg).Apply(ctxAt(at(15)), [][]transform.Item{a, b})
		if err != nil {
			t.Fatal(err)
		}
		check(t, out)
	})
	t.Run("same ids on a rerun", func(t *testing.T) {
		x := apply(t, build(t, "join", cfg), ctxAt(at(15)), in...)
		y := apply(t, build(t, "join", cfg), ctxAt(at(99)), in...)
		if !slices.Equal(ids(x), ids(y)) || len(slices.Compact(slices.Sorted(slices.Values(ids(x))))) != 3 {
			t.Errorf("ids %v and %v", ids(x), ids(y))
		}
	})
	t.Run("the same input twice fuses nothing new", func(t *testing.T) {
		// The older rounds come too late for any fused item: each such
		// reading is shown as late, none is fused again.
		op := build(t, "join", cfg)
		apply(t, op, ctxAt(at(15)), in...)
		out := apply(t, op, ctxAt(at(15)), in...)
		for _, it := range out {
			if !slices.Contains(it.Categories, "late") {
				t.Errorf("fused again: %s %v", it.ID, it.Reading.Value)
			}
		}
		if n := op.(*joinOp).late; n != uint64(len(out)) || n == 0 {
			t.Errorf("%d late readings counted, %d shown", n, len(out))
		}
	})
	t.Run("a missing sensor", func(t *testing.T) {
		var some []transform.Item
		for _, it := range in {
			if it.Reading.Sensor != "s07" {
				some = append(some, it)
			}
		}
		if out := apply(t, build(t, "join", cfg), ctxAt(at(15)), some...); len(out) != 0 {
			t.Errorf("fused with 19 of 20: %v", values(out))
		}
		out := apply(t, build(t, "join", strings.Replace(cfg, `"min":20`, `"min":19`, 1)), ctxAt(at(15)), some...)
		if len(out) != 3 {
			t.Fatalf("min 19: %d fused items", len(out))
		}
	})
}

func newestOf(items []transform.Item) time.Time {
	var n time.Time
	for _, it := range items {
		if it.Reading.Time.After(n) {
			n = it.Reading.Time
		}
	}
	return n
}

func TestJoin(t *testing.T) {
	pair := []transform.Item{
		rd("a1", "a", 10, at(0)), rd("b1", "b", 20, at(0.5)),
		rd("a2", "a", 12, at(5)), rd("b2", "b", 30, at(5.2)),
	}
	inUnit := func(it transform.Item, u string) transform.Item {
		it = transform.Clone(it)
		it.Reading.Unit = u
		return it
	}
	tests := []struct {
		name string
		cfg  string
		in   []transform.Item
		want []float64
		unit string
	}{
		{"mean", `{}`, pair, []float64{15, 21}, "C"},
		{"median", `{"stat":"median"}`, pair, []float64{15, 21}, "C"},
		{"min", `{"stat":"min"}`, pair, []float64{10, 12}, "C"},
		{"max", `{"stat":"max"}`, pair, []float64{20, 30}, "C"},
		{"sum", `{"stat":"sum"}`, pair, []float64{30, 42}, "C"},
		{"count", `{"stat":"count"}`, pair, []float64{2, 2}, ""},
		{"stddev", `{"stat":"stddev"}`, pair, []float64{5, 9}, "C"},
		{"too far apart", `{"tolerance":"10s"}`, pair, nil, ""},
		{"one group", `{"by":""}`, pair, nil, ""},
		{"min 1", `{"min":1,"tolerance":"1m"}`, pair, []float64{15, 21}, "C"},
		{"units disagree", `{}`, []transform.Item{pair[0], inUnit(pair[1], "F")}, []float64{15}, ""},
		{"config unit", `{"unit":"K"}`, []transform.Item{pair[0], inUnit(pair[1], "F")}, []float64{15}, "K"},
		{"each", `{"emit":"each"}`, pair, []float64{15, 21}, "C"},
		{"each within tolerance", `{"emit":"each","tolerance":"6m"}`, pair, []float64{15, 16, 21}, "C"},
		{"each min 1", `{"emit":"each","min":1,"tolerance":"0s"}`, pair, []float64{10, 20, 12, 30}, "C"},
		{"by feed", `{"by":"feed"}`, []transform.Item{feed(pair[0], 1), feed(pair[1], 2), feed(pair[2], 1), feed(pair[3], 2)}, []float64{15, 21}, "C"},
		{"time order within a run", `{"min":2}`, []transform.Item{pair[0], rd("a0", "a", 1000, at(-0.5)), pair[1]}, []float64{15}, "C"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := apply(t, build(t, "join", tt.cfg), ctxAt(at(10)), tt.in...)
			if !near(values(out), tt.want) {
				t.Fatalf("fused %v, want %v (%q)", values(out), tt.want, titles(out))
			}
			for _, it := range out {
				if it.Reading.Unit != tt.unit || it.Reading.Sensor != "join" {
					t.Errorf("reading %+v, want unit %q", it.Reading, tt.unit)
				}
			}
		})
	}
	t.Run("by feed groups by input edge", func(t *testing.T) {
		a, b := feed(transform.Clone(pair[0]), 0), feed(transform.Clone(pair[1]), 0)
		a.Reading.Sensor, b.Reading.Sensor = "same", "same"
		out, err := build(t, "join", `{"by":"feed"}`).Apply(ctxAt(at(10)), [][]transform.Item{{a}, {b}})
		if err != nil || !near(values(out), []float64{15}) {
			t.Fatalf("got %v, %v", values(out), err)
		}
	})
	t.Run("items without reading pass", func(t *testing.T) {
		out := apply(t, build(t, "join", `{}`), ctxAt(at(10)), plain("p", "x"), pair[0], pair[1])
		if len(out) != 2 || out[0].ID != "p" || !strings.Contains(out[1].Summary, "a 10 C, b 20 C") {
			t.Fatalf("got %v %q", ids(out), out[len(out)-1].Summary)
		}
	})
}

func TestJoinLateReading(t *testing.T) {
	op := build(t, "join", `{}`)
	apply(t, op, ctxAt(at(10)), rd("a1", "a", 10, at(0)), rd("b1", "b", 20, at(0.5)))
	op = reload(t, op, "join", `{}`)
	// a's older reading is ignored; b's newer one alone is not a round.
	if out := apply(t, op, ctxAt(at(10)), rd("a0", "a", 1000, at(-0.5)), rd("b2", "b", 22, at(0.7))); len(out) != 0 {
		t.Fatalf("fused %v", values(out))
	}
	out := apply(t, op, ctxAt(at(10)), rd("a2", "a", 12, at(1)))
	if !near(values(out), []float64{17}) {
		t.Fatalf("fused %v, want [17]", values(out))
	}
}

func feed(it transform.Item, id uint64) transform.Item {
	it.FeedID = id
	return it
}

func TestJoinConfigErrors(t *testing.T) {
	configErrors(t, "join", []struct{ cfg, field string }{
		{`{"min":-1}`, "min"},
		{`{"min":10001}`, "min"},
		{`{"tolerance":"-1s"}`, "tolerance"},
		{`{"tolerance":"9000h"}`, "tolerance"},
		{`{"tolerance":"close"}`, "tolerance"},
		{`{"stat":"first"}`, "stat"},
		{`{"emit":"all"}`, "emit"},
		{`{"by":"planet"}`, "by"},
		{`{"unit":"` + strings.Repeat("u", 65) + `"}`, "unit"},
		{`{"sensor":"` + strings.Repeat("s", 257) + `"}`, "sensor"},
		{`{"size":2}`, "size"},
	})
}

// TestJoinOneSensorAhead is the republishing chain's case: readings
// arrive one at a time, and one sensor's reading of the next round
// arrives before another sensor's reading of this round. Every round
// still fuses, complete, as soon as its last reading arrives.
func TestJoinOneSensorAhead(t *testing.T) {
	const n = 5
	op := build(t, "join", fmt.Sprintf(`{"min":%d,"tolerance":"2m"}`, n))
	var arrivals []transform.Item
	for r := range 4 {
		for i := range n {
			if i == n-1 && r > 0 {
				continue // the slow sensor's reading comes after s00's next one
			}
			arrivals = append(arrivals, rd(fmt.Sprintf("s%d-r%d", i, r), fmt.Sprintf("s%d", i), 10*float64(r)+float64(i), at(float64(5*r))))
		}
		if r > 0 {
			arrivals = append(arrivals, rd(fmt.Sprintf("s%d-r%d", n-1, r), fmt.Sprintf("s%d", n-1), 10*float64(r)+float64(n-1), at(float64(5*r))))
		}
	}
	// Move s0's reading of round r+1 before s4's reading of round r.
	for r := 1; r < 4; r++ {
		slow := slices.IndexFunc(arrivals, func(it transform.Item) bool { return it.ID == fmt.Sprintf("s%d-r%d", n-1, r-1) })
		fast := slices.IndexFunc(arrivals, func(it transform.Item) bool { return it.ID == fmt.Sprintf("s0-r%d", r) })
		if slow >= 0 && fast > slow {
			it := arrivals[fast]
			arrivals = slices.Delete(arrivals, fast, fast+1)
			arrivals = slices.Insert(arrivals, slow, it)
		}
	}
	var fused []float64
	for i, it := range arrivals {
		out := apply(t, op, ctxAt(at(30)), it)
		op = reload(t, op, "join", fmt.Sprintf(`{"min":%d,"tolerance":"2m"}`, n))
		for _, o := range out {
			if o.Reading != nil {
				fused = append(fused, o.Reading.Value)
				if !strings.HasPrefix(it.ID, fmt.Sprintf("s%d-", n-1)) && i != len(arrivals)-1 {
					t.Errorf("fused after %s, want after the slow sensor's reading", it.ID)
				}
			}
		}
	}
	want := []float64{2, 12, 22, 32} // each round's mean
	if !near(fused, want) {
		t.Fatalf("fused %v, want %v", fused, want)
	}
}
