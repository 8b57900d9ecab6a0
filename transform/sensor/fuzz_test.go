package sensor

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// fuzzItems is a small input built from fuzzed numbers.
func fuzzItems(v1, v2 float64, step int64, sensor, text string) []transform.Item {
	when := func(i int64) time.Time { return t0.Add(time.Duration(step * i)) }
	a := rd("a", sensor, v1, when(0))
	b := rd("b", sensor, v2, when(1))
	b.Title = text
	c := rd("c", "other", v1-v2, when(2))
	c.Reading.Time = time.Time{}
	d := plain("d", text)
	d.Summary = text
	e := rd("e", sensor, v2, when(-3))
	e.Reading.Unit = text
	return []transform.Item{a, b, c, d, e}
}

func checkOutput(t *testing.T, in, out []transform.Item) {
	t.Helper()
	known := map[string]bool{}
	for _, it := range in {
		known[it.ID] = true
	}
	for _, it := range out {
		if it.ID == "" {
			t.Fatalf("item without id: %+v", it)
		}
		if r := it.Reading; r != nil && !known[it.ID] && (math.IsNaN(r.Value) || math.IsInf(r.Value, 0)) {
			t.Fatalf("new item %q with value %v", it.ID, r.Value)
		}
	}
}

func FuzzConfigs(f *testing.F) {
	for i, name := range opNames {
		spec, _ := transform.Lookup(name)
		f.Add(uint8(i), []byte(spec.Example), 21.5, 23.0, int64(time.Minute), "lab-1", "lab: 21,5 °C")
	}
	f.Add(uint8(3), []byte(`{"span":"1ns","stat":"median"}`), math.MaxFloat64, -math.MaxFloat64, int64(1), "", "")
	f.Add(uint8(4), []byte(`{"every":"1s","align":-1e9,"grace":0,"stat":"stddev"}`), 1e308, 1e308, int64(-time.Hour), "s", "x")
	f.Add(uint8(8), []byte(`{"emit":"each","min":1,"tolerance":0,"by":"feed"}`), math.NaN(), math.Inf(1), int64(0), "s", "1e999")
	f.Add(uint8(7), []byte(`{"k":0.001}`), 0.0, 0.0, int64(1<<62), "s", "")
	f.Add(uint8(1), []byte(`{"to":"%","from":"ppm"}`), 1e300, -1e300, int64(time.Second), "s", "ppm")
	f.Add(uint8(0), []byte(`{"regex":"(.*)","field":"summary","keep":true}`), 1.0, 2.0, int64(time.Second), "s", "<p>1.234,5</p>")
	f.Fuzz(func(t *testing.T, which uint8, cfg []byte, v1, v2 float64, step int64, sensor, text string) {
		name := opNames[int(which)%len(opNames)]
		spec, _ := transform.Lookup(name)
		op, err := spec.New(json.RawMessage(cfg))
		if err != nil {
			var fe *transform.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%s %q: error %v is not a *FieldError", name, cfg, err)
			}
			return
		}
		in := fuzzItems(v1, v2, step, sensor, text)
		c := ctxAt(t0.Add(time.Duration(step) * 7))
		out, err := op.Apply(c, [][]transform.Item{in, in[:2]})
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		checkOutput(t, in, out)
		st, ok := op.(transform.Stateful)
		if !ok {
			return
		}
		raw, err := st.SaveState()
		if err != nil {
			t.Fatalf("SaveState: %v", err)
		}
		if raw == nil {
			return
		}
		again, _ := spec.New(json.RawMessage(cfg))
		if err := again.(transform.Stateful).LoadState(raw); err != nil {
			t.Fatalf("own state refused: %v\n%s", err, raw)
		}
		out, err = again.Apply(c, [][]transform.Item{in})
		if err != nil {
			t.Fatalf("Apply after LoadState: %v", err)
		}
		checkOutput(t, in, out)
	})
}

func FuzzLoadState(f *testing.F) {
	ns := at(0).UnixNano()
	seeds := []string{
		`{"v":1}`,
		`{"v":1,"groups":[{"k":"a","n":3,"v":[1,2,3],"t":[1,2,3]}]}`,
		`{"v":1,"groups":[{"k":"a","n":3,"v":[1,2,3],"t":[1,2,3],"u":[{"u":"C","n":1},{"n":1,"x":true},{"u":"%","n":1}]}]}`,
		`{"v":1,"groups":[{"k":"a","n":3,"v":[1,2,3],"t":[1,2,3],"u":[{"u":"C","n":4},{"u":"%","n":-1}]}]}`,
		`{"v":1,"groups":[{"k":"a","open":{"start":1795269600000000000,"n":2,"unit":"%","mixed":true,"first_unit":"C"}}]}`,
		`{"v":1,"groups":[{"k":"a","closed":1795269600000000000,"open":{"start":1795269600000000000,"n":2,"vals":[1,2]}}]}`,
		`{"v":1,"groups":[{"k":"a","s":"high"},{"k":"b","s":"low"}]}`,
		`{"v":1,"groups":[{"k":"a","x":1e308}]}`,
		`{"v":1,"groups":[{"k":"a","last":1795269600000000000,"intervals":[-1,0,300000000000]}]}`,
		`{"v":1,"fused":1795269600000000000,"anchor":1795269600000000000,"groups":[{"k":"a","x":1,"t":1795269600000000000}]}`,
		`{"v":1,"groups":[{"k":"a","v":[1],"t":[]}]}`,
		`{"v":1,"groups":null}`,
		`{"v":1,"groups":[],"order":{"late":3,"marks":[{"k":"a","done":1795269600000000000,"seen":1795269660000000000}],"held":[{"id":"h","reading":{"value":1,"time":"2026-11-21T12:00:30Z"}}]}}`,
		`{"v":1,"order":{"marks":[{"k":"a","done":-1,"seen":9e18}],"held":[{"id":"x"}]}}`,
		`garbage`,
	}
	for i := range statefulNames {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		name := statefulNames[int(which)%len(statefulNames)]
		spec, _ := transform.Lookup(name)
		op, err := spec.New(json.RawMessage(spec.Example))
		if err != nil {
			t.Fatal(err)
		}
		st := op.(transform.Stateful)
		_ = st.LoadState(raw) // an error means a fresh start; either way the operator must work
		in := []transform.Item{rd("a", "a", 1, at(0)), rd("b", "b", 2, at(1)), rd("c", "a", 40, at(30))}
		out, err := op.Apply(ctxAt(time.Unix(0, ns).Add(time.Hour)), [][]transform.Item{in})
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		checkOutput(t, in, out)
		saved, err := st.SaveState()
		if err != nil {
			t.Fatalf("SaveState: %v", err)
		}
		if saved == nil {
			return
		}
		again, _ := spec.New(json.RawMessage(spec.Example))
		if err := again.(transform.Stateful).LoadState(saved); err != nil {
			t.Fatalf("own state refused: %v\n%s", err, saved)
		}
	})
}
