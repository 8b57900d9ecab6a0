package pack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// rd is a reading of sensor, published and observed minute minutes
// after t0.
func rd(id, sensor string, v float64, minute int, cats ...string) Item {
	at := t0.Add(time.Duration(minute) * time.Minute)
	return Item{
		ID: id, Title: "reading " + id, Published: at, Categories: cats,
		Reading: &storage.Reading{Value: v, Unit: "C", Sensor: sensor, Time: at},
	}
}

// news is an item without a reading.
func news(id, title string, minute int, cats ...string) Item {
	return Item{ID: id, Title: title, Published: t0.Add(time.Duration(minute) * time.Minute), Categories: cats}
}

// testQueue is the queue most filter tests run on.
func testQueue() []Item {
	return []Item{
		rd("a", "s1", 10, 0, "temperature"),
		rd("b", "s1", 10, 1),
		rd("c", "s2", 20, 2, "temperature", "outdoor"),
		rd("d", "s1", 25, 3, "humidity"),
		rd("e", "s2", 20, 4, "temperature", "indoor"),
		news("f", "Alarm raised", 5, "alarm", "outdoor"),
	}
}

// testContext is a run at t0 + 5 minutes.
func testContext() *transform.Context {
	return transform.NewContext(context.Background(), t0.Add(5*time.Minute), "pipe", "node", transform.Limits{})
}

// build builds the registered operator name with configuration cfg.
func build(t testing.TB, name, cfg string) transform.Operator {
	t.Helper()
	spec, ok := transform.Lookup(name)
	if !ok {
		t.Fatalf("operator %s not registered", name)
	}
	op, err := spec.New(json.RawMessage(cfg))
	if err != nil {
		t.Fatalf("%s %s: %v", name, cfg, err)
	}
	return op
}

func ids(items []Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func TestFilters(t *testing.T) {
	all := []string{"a", "b", "c", "d", "e", "f"}
	tests := []struct {
		name, op, cfg string
		want          []string
	}{
		{"gt number", "GT", `{"field":"value","value":15}`, []string{"c", "d", "e"}},
		{"gt numeric string", "GT", `{"field":"value","value":"15"}`, []string{"c", "d", "e"}},
		{"gt time", "GT", `{"field":"published","value":"2026-03-01T12:02:00Z"}`, []string{"d", "e", "f"}},
		{"ge", "GE", `{"field":"value","value":20}`, []string{"c", "d", "e"}},
		{"eq number", "EQ", `{"field":"value","value":20}`, []string{"c", "e"}},
		{"eq string", "EQ", `{"field":"sensor","value":"s1"}`, []string{"a", "b", "d"}},
		{"ne drops items without the field", "NE", `{"field":"value","value":20}`, []string{"a", "b", "d"}},
		{"lt", "LT", `{"field":"value","value":20}`, []string{"a", "b"}},
		{"le", "LE", `{"field":"value","value":10}`, []string{"a", "b"}},
		{"lt text", "LT", `{"field":"title","value":"reading c"}`, []string{"a", "b", "f"}},
		{"match", "MATCH", `{"field":"title","pattern":"(?i)alarm"}`, []string{"f"}},
		{"match anchored", "MATCH", `{"field":"title","pattern":"^reading [a-c]$"}`, []string{"a", "b", "c"}},
		{"match list entry", "MATCH", `{"field":"categories","pattern":"^out"}`, []string{"c", "f"}},
		{"within", "WITHIN", `{"field":"value","min":10,"max":20}`, []string{"a", "b", "c", "e"}},
		{"within min only", "WITHIN", `{"field":"value","min":21}`, []string{"d"}},
		{"within max only", "WITHIN", `{"field":"value","max":10}`, []string{"a", "b"}},
		{"within times", "WITHIN", `{"field":"published","min":"2026-03-01T12:01:00Z","max":"2026-03-01T12:03:00Z"}`, []string{"b", "c", "d"}},
		{"within last", "WITHIN", `{"field":"published","last":"2m"}`, []string{"d", "e", "f"}},
		{"within last seconds", "WITHIN", `{"field":"time","last":60}`, []string{"e"}},
		{"inset strings", "INSET", `{"field":"sensor","set":["s2","s9"]}`, []string{"c", "e"}},
		{"inset numbers", "INSET", `{"field":"value","set":[10,"25"]}`, []string{"a", "b", "d"}},
		{"inset list", "INSET", `{"field":"categories","set":["humidity","alarm"]}`, []string{"d", "f"}},
		{"inset time", "INSET", `{"field":"published","set":["2026-03-01T13:01:00+01:00"]}`, []string{"b"}},
		{"contain", "CONTAIN", `{"field":"categories","value":"outdoor"}`, []string{"c", "f"}},
		{"contain default field", "CONTAIN", `{"value":"temperature"}`, []string{"a", "c", "e"}},
		{"subset", "SUBSET", `{"field":"categories","set":["temperature","outdoor"]}`, []string{"a", "c"}},
		{"supset", "SUPSET", `{"set":["outdoor"]}`, []string{"c", "f"}},
		{"supset two", "SUPSET", `{"set":["temperature","outdoor"]}`, []string{"c"}},
		{"first", "FIRST", `{"n":2}`, []string{"a", "b"}},
		{"first more than the queue", "FIRST", `{"n":100}`, all},
		{"last", "LAST", `{"n":2}`, []string{"e", "f"}},
		{"last more than the queue", "LAST", `{"n":7}`, all},
		{"uniq", "UNIQ", `{"field":"value"}`, []string{"a", "c", "d", "e", "f"}},
		{"uniq default field", "UNIQ", `{}`, []string{"a", "c", "d", "e", "f"}},
		{"uniq sensor", "UNIQ", `{"field":"sensor"}`, []string{"a", "c", "d", "e", "f"}},
		{"guniq", "GUNIQ", `{"field":"value"}`, []string{"a", "c", "d", "f"}},
		{"guniq sensor", "GUNIQ", `{"field":"sensor"}`, []string{"a", "c", "f"}},
		{"delta", "DELTA", `{"field":"value","delta":5}`, []string{"a", "c"}},
		{"delta zero", "DELTA", `{"delta":0}`, []string{"a", "c", "d", "e"}},
		{"delta by", "DELTA", `{"field":"value","delta":5,"by":"sensor"}`, []string{"a", "c", "d"}},
		{"latest by", "LATEST", `{"by":"sensor"}`, []string{"d", "e", "f"}},
		{"latest", "LATEST", `{}`, []string{"f"}},
		{"every 2", "EVERY", `{"n":2}`, []string{"a", "c", "e"}},
		{"every 3", "EVERY", `{"n":3}`, []string{"a", "d"}},
		{"every 1", "EVERY", `{"n":1}`, all},
		{"random p 1", "RANDOM", `{"p":1}`, all},
		{"random n over the queue", "RANDOM", `{"n":10}`, all},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := testQueue()
			before := fmt.Sprint(q)
			out, err := build(t, tc.op, tc.cfg).Apply(testContext(), [][]Item{q})
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got := ids(out); !slices.Equal(got, tc.want) {
				t.Errorf("%s %s kept %v, want %v", tc.op, tc.cfg, got, tc.want)
			}
			if fmt.Sprint(q) != before {
				t.Errorf("%s changed its input", tc.op)
			}
		})
	}
}

func TestFiltersEmptyQueueAndInputs(t *testing.T) {
	for _, s := range filterSpecs {
		t.Run(s.name, func(t *testing.T) {
			op := build(t, s.name, s.example)
			out, err := op.Apply(testContext(), [][]Item{nil})
			if err != nil || len(out) != 0 {
				t.Errorf("empty queue: %v, %v", ids(out), err)
			}
			// Two inputs form one queue, in edge order.
			q := testQueue()
			one, err1 := build(t, s.name, s.example).Apply(testContext(), [][]Item{q})
			two, err2 := build(t, s.name, s.example).Apply(testContext(), [][]Item{q[:3], q[3:]})
			if err1 != nil || err2 != nil {
				t.Fatalf("Apply: %v, %v", err1, err2)
			}
			if !slices.Equal(ids(one), ids(two)) {
				t.Errorf("one input kept %v, two inputs %v", ids(one), ids(two))
			}
		})
	}
}

func TestLatestTies(t *testing.T) {
	q := []Item{rd("x", "s", 1, 3), rd("y", "s", 2, 3), rd("z", "s", 3, 1), news("n", "no time", 0)}
	q[3].Published = time.Time{}
	tests := []struct {
		name string
		q    []Item
		want []string
	}{
		{"same time: the last in the queue", q[:3], []string{"y"}},
		{"no publish time: queue order", q, []string{"n"}},
		{"older later in the queue", []Item{q[1], q[2]}, []string{"y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := build(t, "LATEST", `{}`).Apply(testContext(), [][]Item{tc.q})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(out), tc.want) {
				t.Errorf("kept %v, want %v", ids(out), tc.want)
			}
		})
	}
}

func manyReadings(n int) []Item {
	q := make([]Item, n)
	for i := range q {
		q[i] = rd(fmt.Sprintf("r%04d", i), fmt.Sprintf("s%d", i%7), float64(i), i)
	}
	return q
}

func TestRandom(t *testing.T) {
	q := manyReadings(1000)
	t.Run("p keeps about p", func(t *testing.T) {
		out, err := build(t, "RANDOM", `{"p":0.25}`).Apply(testContext(), [][]Item{q})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) < 180 || len(out) > 320 {
			t.Errorf("p=0.25 kept %d of 1000", len(out))
		}
		again, _ := build(t, "RANDOM", `{"p":0.25}`).Apply(testContext(), [][]Item{q})
		if !slices.Equal(ids(out), ids(again)) {
			t.Error("a rerun kept other items")
		}
		// An item's fate does not depend on the rest of the queue.
		half, _ := build(t, "RANDOM", `{"p":0.25}`).Apply(testContext(), [][]Item{q[:500]})
		want := 0
		for _, it := range out {
			if it.ID < "r0500" {
				want++
			}
		}
		if len(half) != want {
			t.Errorf("on the first half kept %d, want %d", len(half), want)
		}
		assertSubsequence(t, q, out)
	})
	t.Run("n keeps n", func(t *testing.T) {
		out, err := build(t, "RANDOM", `{"n":10}`).Apply(testContext(), [][]Item{q})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 10 {
			t.Fatalf("kept %d, want 10", len(out))
		}
		assertSubsequence(t, q, out)
		again, _ := build(t, "RANDOM", `{"n":10}`).Apply(testContext(), [][]Item{q})
		if !slices.Equal(ids(out), ids(again)) {
			t.Error("a rerun kept other items")
		}
		other := transform.NewContext(context.Background(), t0, "pipe", "other-node", transform.Limits{})
		elsewhere, _ := build(t, "RANDOM", `{"n":10}`).Apply(other, [][]Item{q})
		if slices.Equal(ids(out), ids(elsewhere)) {
			t.Error("another node drew the same items")
		}
	})
}

// assertSubsequence checks that out is a subsequence of q.
func assertSubsequence(t *testing.T, q, out []Item) {
	t.Helper()
	j := 0
	for _, it := range out {
		for j < len(q) && q[j].ID != it.ID {
			j++
		}
		if j == len(q) {
			t.Fatalf("output %v is not a subsequence of the input", ids(out))
		}
		j++
	}
}

func TestDeltaState(t *testing.T) {
	cfg := `{"delta":1,"by":"sensor"}`
	op := build(t, "DELTA", cfg).(transform.Stateful)
	run := func(op transform.Operator, q ...Item) []string {
		t.Helper()
		out, err := op.Apply(testContext(), [][]Item{q})
		if err != nil {
			t.Fatal(err)
		}
		return ids(out)
	}
	if got := run(op, rd("a", "s1", 10, 0), rd("b", "s2", 5, 0)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first run kept %v", got)
	}
	t.Run("remembers between runs", func(t *testing.T) {
		if got := run(op, rd("c", "s1", 10.5, 1), rd("d", "s2", 7, 1)); !slices.Equal(got, []string{"d"}) {
			t.Errorf("second run kept %v, want [d]", got)
		}
	})
	t.Run("save and load", func(t *testing.T) {
		raw, err := op.SaveState()
		if err != nil || raw == nil {
			t.Fatalf("SaveState: %s, %v", raw, err)
		}
		next := build(t, "DELTA", cfg).(transform.Stateful)
		if err := next.LoadState(raw); err != nil {
			t.Fatal(err)
		}
		if got := run(next, rd("e", "s1", 11.5, 2), rd("f", "s2", 7.5, 2)); !slices.Equal(got, []string{"e"}) {
			t.Errorf("after LoadState kept %v, want [e]", got)
		}
	})
	t.Run("state of another configuration starts afresh", func(t *testing.T) {
		raw, _ := op.SaveState()
		for _, other := range []string{`{"delta":1}`, `{"delta":1,"by":"sensor","field":"lat"}`} {
			next := build(t, "DELTA", other).(transform.Stateful)
			if err := next.LoadState(raw); err != nil {
				t.Fatal(err)
			}
			if s, _ := next.SaveState(); s != nil {
				t.Errorf("%s loaded %s", other, s)
			}
		}
		for _, bad := range []string{`garbage`, `{"version":99}`, `[]`, `{"version":1,"field":"value","by":"sensor","groups":"x"}`} {
			next := build(t, "DELTA", cfg).(transform.Stateful)
			if err := next.LoadState(json.RawMessage(bad)); err != nil {
				t.Errorf("LoadState(%s): %v", bad, err)
			}
			if got := run(next, rd("g", "s1", 10, 3)); !slices.Equal(got, []string{"g"}) {
				t.Errorf("after LoadState(%s) kept %v", bad, got)
			}
		}
	})
	t.Run("nothing to save", func(t *testing.T) {
		fresh := build(t, "DELTA", cfg).(transform.Stateful)
		if s, err := fresh.SaveState(); s != nil || err != nil {
			t.Errorf("SaveState of a fresh DELTA: %s, %v", s, err)
		}
	})
	t.Run("a failed run remembers nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		fresh := build(t, "DELTA", cfg).(transform.Stateful)
		c := transform.NewContext(ctx, t0, "pipe", "node", transform.Limits{})
		if _, err := fresh.Apply(c, [][]Item{{rd("a", "s1", 1, 0)}}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Apply on a cancelled run: %v", err)
		}
		if s, _ := fresh.SaveState(); s != nil {
			t.Errorf("state after a failed run: %s", s)
		}
	})
	t.Run("groups are bounded", func(t *testing.T) {
		fresh := build(t, "DELTA", cfg).(transform.Stateful)
		q := make([]Item, MaxGroups+10)
		for i := range q {
			q[i] = rd(fmt.Sprint(i), fmt.Sprintf("s%d", i), 1, 0)
		}
		if got := run(fresh, q...); len(got) != len(q) {
			t.Fatalf("kept %d of %d first readings", len(got), len(q))
		}
		raw, _ := fresh.SaveState()
		var st deltaState
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Groups) != MaxGroups {
			t.Errorf("state holds %d groups, want %d", len(st.Groups), MaxGroups)
		}
		// The oldest groups were forgotten: their next reading is kept.
		if got := run(fresh, rd("x", "s0", 1, 1), rd("y", "s20", 1, 1)); !slices.Equal(got, []string{"x"}) {
			t.Errorf("kept %v, want [x]", got)
		}
	})
}

func TestFilterErrors(t *testing.T) {
	longSet := `{"field":"sensor","set":[` + strings.Repeat(`"x",`, MaxSet) + `"y"]}`
	tests := []struct {
		op, cfg, field string
		limit          bool
	}{
		{"GT", `{}`, "field", false},
		{"GT", `{"field":"nope","value":1}`, "field", false},
		{"GT", `{"field":"value"}`, "value", false},
		{"GT", `{"field":"value","value":null}`, "value", false},
		{"GT", `{"field":"value","value":"abc"}`, "value", false},
		{"GT", `{"field":"value","value":true}`, "value", false},
		{"GT", `{"field":"value","value":[1]}`, "value", false},
		{"GT", `{"field":"categories","value":"x"}`, "field", false},
		{"GT", `{"field":"published","value":"yesterday"}`, "value", false},
		{"GT", `{"field":"value","value":1,"extra":1}`, "extra", false},
		{"GT", `{"field":"title","value":"` + strings.Repeat("x", MaxValueLen+1) + `"}`, "value", true},
		{"EQ", `{"field":1,"value":1}`, "field", false},
		{"MATCH", `{"field":"title"}`, "pattern", false},
		{"MATCH", `{"pattern":"x"}`, "field", false},
		{"MATCH", `{"field":"title","pattern":"("}`, "pattern", false},
		{"MATCH", `{"field":"title","pattern":"` + strings.Repeat("a", 600) + `"}`, "pattern", true},
		{"WITHIN", `{"field":"value"}`, "min", false},
		{"WITHIN", `{"field":"value","min":5,"max":1}`, "max", false},
		{"WITHIN", `{"field":"title","min":1}`, "field", false},
		{"WITHIN", `{"field":"value","min":"x"}`, "min", false},
		{"WITHIN", `{"field":"value","last":"1h"}`, "last", false},
		{"WITHIN", `{"field":"published","last":"1h","min":1}`, "last", false},
		{"WITHIN", `{"field":"published","last":"-1h"}`, "last", false},
		{"INSET", `{"field":"sensor","set":[]}`, "set", false},
		{"INSET", `{"field":"sensor"}`, "set", false},
		{"INSET", longSet, "set", true},
		{"INSET", `{"field":"value","set":["x"]}`, "set[0]", false},
		{"INSET", `{"field":"sensor","set":["a",true]}`, "set[1]", false},
		{"INSET", `{"set":["a"]}`, "field", false},
		{"CONTAIN", `{"field":"title","value":"x"}`, "field", false},
		{"CONTAIN", `{}`, "value", false},
		{"CONTAIN", `{"value":{}}`, "value", false},
		{"SUBSET", `{"set":[]}`, "set", false},
		{"SUBSET", `{"field":"sensor","set":["a"]}`, "field", false},
		{"SUPSET", `{"set":[null]}`, "set[0]", false},
		{"FIRST", `{}`, "n", false},
		{"FIRST", `{"n":0}`, "n", false},
		{"LAST", `{"n":100001}`, "n", false},
		{"EVERY", `{"n":1.5}`, "n", false},
		{"EVERY", `{"n":-2}`, "n", false},
		{"UNIQ", `{"field":"nope"}`, "field", false},
		{"DELTA", `{"delta":-1}`, "delta", false},
		{"DELTA", `{"field":"title","delta":1}`, "field", false},
		{"DELTA", `{"by":"nope","delta":1}`, "by", false},
		{"LATEST", `{"by":"nope"}`, "by", false},
		{"RANDOM", `{}`, "p", false},
		{"RANDOM", `{"p":0}`, "p", false},
		{"RANDOM", `{"p":1.5}`, "p", false},
		{"RANDOM", `{"p":0.5,"n":2}`, "n", false},
		{"RANDOM", `{"n":0}`, "n", false},
		{"MEAN", `{"field":"title"}`, "field", false},
		{"MAX", `{"by":"nope"}`, "by", false},
		{"SUM", `{"field":"value","x":1}`, "x", false},
	}
	for _, tc := range tests {
		t.Run(tc.op+" "+truncateForName(tc.cfg), func(t *testing.T) {
			spec, _ := transform.Lookup(tc.op)
			_, err := spec.New(json.RawMessage(tc.cfg))
			if err == nil {
				t.Fatalf("%s %s: no error", tc.op, tc.cfg)
			}
			var fe *transform.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%s %s: %T %v is not a FieldError", tc.op, tc.cfg, err, err)
			}
			if fe.Field != tc.field {
				t.Errorf("%s %s: error names %q, want %q (%v)", tc.op, tc.cfg, fe.Field, tc.field, err)
			}
			if tc.limit != errors.Is(err, transform.ErrLimit) || !tc.limit && !errors.Is(err, transform.ErrInvalid) {
				t.Errorf("%s %s: %v: ErrLimit %v, want %v", tc.op, tc.cfg, err, errors.Is(err, transform.ErrLimit), tc.limit)
			}
		})
	}
}

func truncateForName(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}

func TestRegistry(t *testing.T) {
	names := map[string]bool{}
	for _, s := range transform.Specs() {
		if s.Family == transform.FamilyPACK {
			names[s.Name] = true
		}
	}
	for _, name := range append(slices.Clone(Filters), Digesters...) {
		t.Run(name, func(t *testing.T) {
			if !names[name] {
				t.Fatalf("%s is not registered in family pack", name)
			}
			spec, _ := transform.Lookup(name)
			if spec.Doc == "" || spec.Config == nil || spec.MinInputs != 1 || spec.MaxInputs != -1 {
				t.Errorf("incomplete spec %+v", spec)
			}
			if _, err := spec.New(json.RawMessage(spec.Example)); err != nil {
				t.Errorf("example %s: %v", spec.Example, err)
			}
		})
	}
	if len(names) != len(Filters)+len(Digesters) {
		t.Errorf("%d PACK operators registered, want %d", len(names), len(Filters)+len(Digesters))
	}
}
