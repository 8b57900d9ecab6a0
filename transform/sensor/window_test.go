package sensor

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

// series is readings of sensor with the values vs, one a minute from
// t0, with ids "<sensor><i>".
func series(sensor string, vs ...float64) []transform.Item {
	out := make([]transform.Item, len(vs))
	for i, v := range vs {
		out[i] = rd(fmt.Sprintf("%s%d", sensor, i), sensor, v, at(float64(i)))
	}
	return out
}

func TestWindow(t *testing.T) {
	one := series("a", 1, 2, 3, 4, 5)
	interleaved := []transform.Item{
		rd("a0", "a", 1, at(0)), rd("b0", "b", 10, at(0)),
		rd("a1", "a", 3, at(1)), rd("b1", "b", 20, at(1)),
		rd("a2", "a", 5, at(2)), rd("b2", "b", 60, at(2)),
	}
	spanned := []transform.Item{
		rd("a0", "a", 1, at(0)), rd("a1", "a", 2, at(5)), rd("a2", "a", 4, at(14)),
		rd("a3", "a", 8, at(20)), rd("a4", "a", 16, at(40)),
	}
	tests := []struct {
		name string
		cfg  string
		in   []transform.Item
		ids  []string
		want []float64
	}{
		{"mean", `{"stat":"mean","size":3}`, one, []string{"a0~mean", "a1~mean", "a2~mean", "a3~mean", "a4~mean"}, []float64{1, 1.5, 2, 3, 4}},
		{"default stat", `{"size":2}`, one, nil, []float64{1, 1.5, 2.5, 3.5, 4.5}},
		{"min", `{"stat":"min","size":2}`, one, nil, []float64{1, 1, 2, 3, 4}},
		{"max", `{"stat":"max","size":2}`, one, nil, []float64{1, 2, 3, 4, 5}},
		{"sum", `{"stat":"sum","size":3}`, one, nil, []float64{1, 3, 6, 9, 12}},
		{"count", `{"stat":"count","size":3}`, one, nil, []float64{1, 2, 3, 3, 3}},
		{"median", `{"stat":"median","size":4}`, series("a", 5, 1, 4, 2, 3), nil, []float64{5, 3, 4, 3, 2.5}},
		{"stddev", `{"stat":"stddev","size":2}`, series("a", 1, 3, 3), nil, []float64{0, 1, 0}},
		{"size 1", `{"stat":"mean","size":1}`, one, nil, []float64{1, 2, 3, 4, 5}},
		{"per sensor", `{"stat":"mean","size":2}`, interleaved,
			[]string{"a0~mean", "b0~mean", "a1~mean", "b1~mean", "a2~mean", "b2~mean"}, []float64{1, 10, 2, 15, 4, 40}},
		{"one group", `{"stat":"max","size":2,"by":""}`, interleaved, nil, []float64{1, 10, 10, 20, 20, 60}},
		{"span", `{"stat":"sum","span":"15m"}`, spanned, nil, []float64{1, 3, 7, 14, 16}},
		{"span inclusive", `{"stat":"count","span":"5m"}`, spanned[:2], nil, []float64{1, 2}},
		{"every", `{"stat":"sum","size":10,"every":2}`, one, []string{"a1~sum", "a3~sum"}, []float64{3, 10}},
		{"emit last", `{"stat":"mean","size":2,"emit":"last"}`, interleaved, []string{"a2~mean", "b2~mean"}, []float64{4, 40}},
		{"emit last every", `{"stat":"sum","size":10,"every":2,"emit":"last"}`, one, []string{"a3~sum"}, []float64{10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := deepCopy(tt.in)
			out := apply(t, build(t, "window", tt.cfg), ctxAt(t0), tt.in...)
			unchanged(t, before, tt.in)
			if !near(values(out), tt.want) {
				t.Errorf("values %v, want %v", values(out), tt.want)
			}
			if tt.ids != nil && !slices.Equal(ids(out), tt.ids) {
				t.Errorf("ids %v, want %v", ids(out), tt.ids)
			}
		})
	}
}

func TestWindowItems(t *testing.T) {
	in := append(series("lab-1", 20, 22), plain("p", "no reading"))
	out := apply(t, build(t, "window", `{"stat":"mean","size":10}`), ctxAt(t0), in...)
	if len(out) != 3 {
		t.Fatalf("got %d items", len(out))
	}
	w := out[1]
	if w.Title != "lab-1 mean(2): 21 C" {
		t.Errorf("title %q", w.Title)
	}
	if w.GUID != "" || w.Reading.Sensor != "lab-1" || w.Reading.Unit != "C" || !w.Reading.Time.Equal(in[1].Reading.Time) {
		t.Errorf("item %+v reading %+v", w, w.Reading)
	}
	if out[2].ID != "p" || out[2].Reading != nil {
		t.Errorf("item without reading changed: %+v", out[2])
	}
	c := apply(t, build(t, "window", `{"stat":"count","size":10}`), ctxAt(t0), in[:2]...)
	if c[1].Reading.Unit != "" || c[1].Title != "lab-1 count(2): 2" {
		t.Errorf("count item %q unit %q", c[1].Title, c[1].Reading.Unit)
	}
	// A span window drops readings without a usable time.
	old := rd("x", "lab-1", 1, at(0))
	old.Reading.Time, old.Published = at(0).AddDate(-300, 0, 0), at(0).AddDate(-300, 0, 0)
	if out := apply(t, build(t, "window", `{"span":"1h"}`), ctxAt(t0), old); len(out) != 0 {
		t.Errorf("reading without usable time gave %v", ids(out))
	}
}

func TestWindowState(t *testing.T) {
	// The readings in time order (the operator processes them so), so
	// that any cut into two runs sees them in the same order as one run.
	in := append(series("a", 1, 2, 3, 4, 5, 6, 7), series("b", 10, 20, 30)...)
	slices.SortStableFunc(in, func(x, y transform.Item) int { return x.Reading.Time.Compare(y.Reading.Time) })
	for _, cfg := range []string{
		`{"stat":"mean","size":3}`,
		`{"stat":"median","span":"3m"}`,
		`{"stat":"sum","size":4,"every":2}`,
	} {
		t.Run(cfg, func(t *testing.T) {
			whole := apply(t, build(t, "window", cfg), ctxAt(t0), in...)
			for cut := 1; cut < len(in); cut++ {
				op := build(t, "window", cfg)
				first := apply(t, op, ctxAt(t0), in[:cut]...)
				op = reload(t, op, "window", cfg)
				second := apply(t, op, ctxAt(t0), in[cut:]...)
				got := append(first, second...)
				if !slices.Equal(ids(got), ids(whole)) || !near(values(got), values(whole)) {
					t.Fatalf("cut at %d: %v %v, want %v %v", cut, ids(got), values(got), ids(whole), values(whole))
				}
			}
		})
	}
}

func TestWindowLoadStateBounds(t *testing.T) {
	op := build(t, "window", `{"stat":"count","size":5}`).(*windowOp)
	vs := make([]float64, 2*MaxWindow)
	ts := make([]int64, 2*MaxWindow)
	for i := range vs {
		vs[i], ts[i] = float64(i), at(float64(i)).UnixNano()
	}
	groups := []windowGroup{{K: "a", N: 7, V: vs, T: ts}}
	for i := 0; i < MaxGroups+5; i++ {
		groups = append(groups, windowGroup{K: fmt.Sprintf("g%d", i), V: []float64{1}, T: []int64{ts[0]}})
	}
	groups = append(groups, windowGroup{K: "a", N: 7, V: vs, T: ts}) // repeated: the later one counts
	raw, _ := json.Marshal(orderedState[windowGroup]{V: 1, Groups: groups})
	if err := op.LoadState(raw); err != nil {
		t.Fatal(err)
	}
	if op.groups.len() > MaxGroups {
		t.Errorf("%d groups loaded", op.groups.len())
	}
	g, ok := op.groups.get("a")
	if !ok || g.ring.len() != 5 {
		t.Fatalf("group a holds %v readings, want 5", g)
	}
	if v, _ := g.ring.at(4); v != float64(2*MaxWindow-1) {
		t.Errorf("newest loaded value %v", v)
	}
	out := apply(t, op, ctxAt(t0), rd("n", "a", 1, at(0)))
	if len(out) != 1 || out[0].Reading.Value != 5 {
		t.Errorf("after load: %v", values(out))
	}
}

func TestWindowConfigErrors(t *testing.T) {
	configErrors(t, "window", []struct{ cfg, field string }{
		{`{}`, "size"},
		{`{"stat":"mean"}`, "size"},
		{`{"size":3,"span":"5m"}`, "span"},
		{`{"size":10001}`, "size"},
		{`{"size":-1}`, "size"},
		{`{"size":"3"}`, "size"},
		{`{"span":"0s"}`, "span"},
		{`{"span":"9000h"}`, "span"},
		{`{"span":"soon"}`, "span"},
		{`{"size":3,"stat":"mode"}`, "stat"},
		{`{"size":3,"every":-2}`, "every"},
		{`{"size":3,"every":20000}`, "every"},
		{`{"size":3,"emit":"first"}`, "emit"},
		{`{"size":3,"by":"colour"}`, "by"},
		{`{"size":3,"by":7}`, "by"},
		{`{"size":3,"window":3}`, "window"},
	})
}

func TestWindowTotalBound(t *testing.T) {
	op := build(t, "window", `{"stat":"count","size":10}`).(*windowOp)
	op.maxTotal = 45
	var in []transform.Item
	for g := 0; g < 8; g++ {
		for i := 0; i < 10; i++ {
			in = append(in, rd(fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("g%d", g), 1, at(float64(10*g+i))))
		}
	}
	out := apply(t, op, ctxAt(t0), in...)
	if len(out) != len(in) || out[len(out)-1].Reading.Value != 10 {
		t.Fatalf("got %d items, last %v", len(out), values(out[len(out)-1:]))
	}
	if op.total > op.maxTotal {
		t.Errorf("holds %d readings, at most %d", op.total, op.maxTotal)
	}
	n := 0
	op.groups.each(func(_ string, g *winGroup) { n += g.ring.len() })
	if n != op.total {
		t.Errorf("counted %d readings, holds %d", op.total, n)
	}
	if got, want := op.groups.len(), 4; got != want {
		t.Errorf("%d groups remembered, want %d", got, want)
	}
	if _, ok := op.groups.get("g7"); !ok {
		t.Error("the newest group was forgotten")
	}
	if _, ok := op.groups.get("g3"); ok {
		t.Error("an old group was kept")
	}
}

// A statistic's item is named for its group: the sensor when grouped by
// sensor, the group's value when grouped by another field, nobody when
// every reading is pooled (not the last reading's sensor).
func TestStatisticNames(t *testing.T) {
	in := []transform.Item{rd("a0", "a", 1, at(0)), rd("b0", "b", 10, at(1))}
	in[0].Author, in[1].Author = "north", "north"
	tests := []struct {
		op, cfg            string
		sensor, title, sum string // of the last item out
	}{
		{"window", `{"stat":"max","size":2}`, "b", "b max(1): 10", "max of the last 1 readings of b"},
		{"window", `{"stat":"max","size":2,"by":""}`, "", "max(2): 10", "max of the last 2 readings up to"},
		{"window", `{"stat":"max","size":2,"by":"author"}`, "north", "north max(2): 10", "max of the last 2 readings of north"},
		{"resample", `{"every":"5m","stat":"max"}`, "b", "b max(5m)", "max of 1 readings of b from"},
		{"resample", `{"every":"5m","stat":"max","by":""}`, "", "max(5m)", "max of 2 readings from"},
		{"resample", `{"every":"5m","stat":"max","by":"author"}`, "north", "north max(5m)", "max of 2 readings of north from"},
	}
	for _, tt := range tests {
		t.Run(tt.op+" "+tt.cfg, func(t *testing.T) {
			out := apply(t, build(t, tt.op, tt.cfg), ctxAt(at(10)), in...)
			if len(out) == 0 {
				t.Fatal("no item out")
			}
			last := out[len(out)-1]
			if last.Reading.Sensor != tt.sensor || !strings.HasPrefix(last.Title, tt.title) || !strings.HasPrefix(last.Summary, tt.sum) {
				t.Errorf("sensor %q, title %q, summary %q; want %q, %q…, %q…", last.Reading.Sensor, last.Title, last.Summary, tt.sensor, tt.title, tt.sum)
			}
		})
	}
}
