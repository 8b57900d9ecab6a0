package sensor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

// opNames are the operators of the package.
var opNames = []string{"extract", "convert", "calibrate", "window", "resample", "threshold", "deadband", "gap", "join"}

var statefulNames = []string{"window", "resample", "threshold", "deadband", "gap", "join"}

func TestRegistered(t *testing.T) {
	for _, name := range opNames {
		t.Run(name, func(t *testing.T) {
			spec, ok := transform.Lookup(name)
			if !ok {
				t.Fatal("not registered")
			}
			if spec.Family != transform.FamilySensor || spec.Doc == "" || spec.MinInputs != 1 {
				t.Errorf("spec %+v", spec)
			}
			wantMax := 1
			if name == "join" {
				wantMax = -1
			}
			if spec.MaxInputs != wantMax {
				t.Errorf("MaxInputs %d, want %d", spec.MaxInputs, wantMax)
			}
			if k := reflect.TypeOf(spec.Config).Kind(); k != reflect.Struct {
				t.Errorf("Config is a %v, want a struct", k)
			}
			if !json.Valid([]byte(spec.Example)) {
				t.Fatalf("example %s is not JSON", spec.Example)
			}
			op := build(t, name, spec.Example)
			_, stateful := op.(transform.Stateful)
			if stateful != slices.Contains(statefulNames, name) {
				t.Errorf("stateful %v", stateful)
			}
			if _, err := op.Apply(ctxAt(at(60)), [][]transform.Item{mixed()}); err != nil {
				t.Errorf("example fails: %v", err)
			}
		})
	}
}

// mixed is an input for every operator: readings of three sensors every
// minute with some noise, and items without a reading.
func mixed() []transform.Item {
	var out []transform.Item
	for m := 0; m < 40; m++ {
		for s, name := range []string{"lab-1", "lab-2", "lab-3"} {
			v := 25 + float64((m*7+s*3)%11) - 3*float64(s)
			it := rd(fmt.Sprintf("%s-%d", name, m), name, v, at(float64(m)))
			it.Author = name
			it.Title = fmt.Sprintf("%s: %v °C", name, v)
			out = append(out, it)
		}
		if m%10 == 0 {
			out = append(out, plain(fmt.Sprintf("note-%d", m), fmt.Sprintf("note %d", m)))
		}
	}
	return out
}

func TestIdempotentIDs(t *testing.T) {
	configs := map[string]string{
		"extract":   `{"unit":"C","sensor_from":"author"}`,
		"convert":   `{"to":"F"}`,
		"calibrate": `{"offset":1}`,
		"window":    `{"stat":"mean","size":5}`,
		"resample":  `{"every":"5m"}`,
		"threshold": `{"above":30,"below":28}`,
		"deadband":  `{"delta":2}`,
		"gap":       `{"period":"30s"}`,
		"join":      `{"min":3}`,
	}
	in := mixed()
	for _, name := range opNames {
		t.Run(name, func(t *testing.T) {
			cfg := configs[name]
			a := apply(t, build(t, name, cfg), ctxAt(at(50)), in...)
			b := apply(t, build(t, name, cfg), ctxAt(at(50)), deepCopy(in)...)
			if len(a) == 0 {
				t.Fatal("no output to compare")
			}
			if !slices.Equal(ids(a), ids(b)) {
				t.Errorf("ids differ between runs:\n%v\n%v", ids(a), ids(b))
			}
			seen := map[string]bool{}
			for _, id := range ids(a) {
				if id == "" || seen[id] {
					t.Errorf("empty or repeated id %q", id)
				}
				seen[id] = true
			}
		})
	}
}

func TestStateAcrossRuns(t *testing.T) {
	configs := map[string]string{
		"window":    `{"stat":"median","size":4}`,
		"resample":  `{"every":"5m","stat":"max"}`,
		"threshold": `{"above":30,"below":28}`,
		"deadband":  `{"delta":2}`,
		"gap":       `{"period":"10s"}`,
		"join":      `{"min":3,"tolerance":"10s"}`,
	}
	in := mixed()
	for _, name := range statefulNames {
		t.Run(name, func(t *testing.T) {
			cfg := configs[name]
			// The clock before every reading, so that only readings close
			// buckets and report gaps.
			c := ctxAt(at(-1))
			// join emits the items without a reading first: compare the
			// readings only.
			readings := func(items []transform.Item) []transform.Item {
				return slices.DeleteFunc(items, func(it transform.Item) bool { return it.Reading == nil })
			}
			whole := readings(apply(t, build(t, name, cfg), c, in...))
			if len(whole) == 0 {
				t.Fatal("no output to compare")
			}
			for _, cut := range []int{1, 7, 31, 60, 99, len(in) - 1} {
				op := build(t, name, cfg)
				first := apply(t, op, c, in[:cut]...)
				op = reload(t, op, name, cfg)
				got := readings(append(first, apply(t, op, c, in[cut:]...)...))
				if !slices.Equal(ids(got), ids(whole)) || !near(values(got), values(whole)) {
					t.Fatalf("cut at %d:\n%v %v\nwant\n%v %v", cut, ids(got), values(got), ids(whole), values(whole))
				}
			}
		})
	}
}

func TestLoadStateGarbage(t *testing.T) {
	garbage := []string{
		`not json`,
		`null`,
		`[]`,
		`{}`,
		`{"v":2,"groups":[]}`,
		`{"v":"1"}`,
		`{"v":1,"groups":"many"}`,
		`{"v":1,"groups":[{"k":5}]}`,
		`{"v":1,"groups":[{"k":"a","t":-99999999999999999999}]}`,
	}
	for _, name := range statefulNames {
		spec, _ := transform.Lookup(name)
		for _, g := range garbage {
			t.Run(name+" "+g, func(t *testing.T) {
				op := build(t, name, spec.Example)
				apply(t, op, ctxAt(at(10)), mixed()[:30]...)
				err := op.(transform.Stateful).LoadState(json.RawMessage(g))
				if err == nil {
					t.Fatal("garbage loaded")
				}
				// Afterwards the operator works as a new one.
				fresh := build(t, name, spec.Example)
				probe := mixed()[30:60]
				a := apply(t, op, ctxAt(at(20)), probe...)
				b := apply(t, fresh, ctxAt(at(20)), probe...)
				if !slices.Equal(ids(a), ids(b)) {
					t.Errorf("after garbage %v, fresh %v", ids(a), ids(b))
				}
			})
		}
		t.Run(name+" empty state", func(t *testing.T) {
			op := build(t, name, spec.Example).(transform.Stateful)
			if err := op.LoadState(json.RawMessage(`{"v":1}`)); err != nil {
				t.Errorf("empty state: %v", err)
			}
			if raw, err := op.SaveState(); err != nil || raw != nil {
				t.Errorf("empty operator saves %s, %v", raw, err)
			}
		})
	}
}

func TestLoadStateBoundsGroups(t *testing.T) {
	many := func(group func(i int) string) json.RawMessage {
		b := []byte(`{"v":1,"groups":[`)
		for i := 0; i < MaxGroups+100; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, group(i)...)
		}
		return append(b, "]}"...)
	}
	ns := at(0).UnixNano()
	states := map[string]json.RawMessage{
		"window":    many(func(i int) string { return fmt.Sprintf(`{"k":"g%d","n":1,"v":[1],"t":[%d]}`, i, ns) }),
		"resample":  many(func(i int) string { return fmt.Sprintf(`{"k":"g%d"}`, i) }),
		"threshold": many(func(i int) string { return fmt.Sprintf(`{"k":"g%d","s":"low"}`, i) }),
		"deadband":  many(func(i int) string { return fmt.Sprintf(`{"k":"g%d","x":1}`, i) }),
		"gap":       many(func(i int) string { return fmt.Sprintf(`{"k":"g%d","last":%d}`, i, ns) }),
		"join":      many(func(i int) string { return fmt.Sprintf(`{"k":"g%d","h":[{"t":%d,"x":1}]}`, i, ns) }),
	}
	for _, name := range statefulNames {
		t.Run(name, func(t *testing.T) {
			spec, _ := transform.Lookup(name)
			op := build(t, name, spec.Example).(transform.Stateful)
			if err := op.LoadState(states[name]); err != nil {
				t.Fatal(err)
			}
			raw, err := op.SaveState()
			if err != nil {
				t.Fatal(err)
			}
			var st struct {
				Groups []struct {
					K string `json:"k"`
				} `json:"groups"`
			}
			if err := json.Unmarshal(raw, &st); err != nil {
				t.Fatal(err)
			}
			if len(st.Groups) != MaxGroups || st.Groups[len(st.Groups)-1].K != fmt.Sprintf("g%d", MaxGroups+99) {
				t.Errorf("kept %d groups", len(st.Groups))
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := transform.NewContext(ctx, at(60), "pipe", "node", transform.Limits{})
	for _, name := range opNames {
		t.Run(name, func(t *testing.T) {
			spec, _ := transform.Lookup(name)
			_, err := build(t, name, spec.Example).Apply(c, [][]transform.Item{mixed()})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err %v, want context.Canceled", err)
			}
		})
	}
}

func TestNilContext(t *testing.T) {
	for _, name := range opNames {
		spec, _ := transform.Lookup(name)
		if _, err := build(t, name, spec.Example).Apply(nil, [][]transform.Item{mixed()}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
