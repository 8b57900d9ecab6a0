package pack

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// fuzzItems makes a queue from data, three bytes an item: readings of a
// few sensors, items without a reading, digests, repeated ids.
func fuzzItems(data []byte) []Item {
	var q []Item
	cats := []string{"temperature", "outdoor", "alarm", "indoor"}
	for i := 0; i+2 < len(data) && len(q) < 200; i += 3 {
		a, b, c := data[i], data[i+1], data[i+2]
		id := fmt.Sprint("i", i)
		if b%8 == 0 {
			id = "dup"
		}
		it := news(id, fmt.Sprintf("title %d", a%5), int(c)-128)
		for k, cat := range cats {
			if c&(1<<k) != 0 {
				it.Categories = append(it.Categories, cat)
			}
		}
		switch {
		case a == 0xff:
		case b%16 == 1:
			it = rd(id, fmt.Sprint("s", b%3), float64(int8(a)), int(c)-128)
			it.Digest = &storage.Digest{Field: "value", Count: int64(a) + 1, Sum: float64(int8(a)) * float64(a), Min: -float64(a), Max: float64(a), From: t0, To: t0.Add(time.Duration(c) * time.Minute)}
		default:
			it = rd(id, fmt.Sprint("s", b%3), float64(int8(a))/4, int(c)-128, it.Categories...)
			if b%5 == 0 {
				it.Reading.Time = time.Time{}
			}
		}
		if c%7 == 0 {
			it.Published = time.Time{}
		}
		q = append(q, it)
	}
	return q
}

// checkOutput checks what operator name made from q.
func checkOutput(t *testing.T, name string, q, out []Item) {
	t.Helper()
	if slices.Contains(Digesters, name) {
		for _, it := range out {
			if it.Digest == nil || it.Reading == nil || !finite(it.Reading.Value) || it.ID == "" {
				t.Fatalf("%s made a bad digest %+v", name, it)
			}
		}
		return
	}
	j := 0
	for _, it := range out {
		for j < len(q) && (q[j].ID != it.ID || q[j].Published != it.Published) {
			j++
		}
		if j == len(q) {
			t.Fatalf("%s output %v is not a subsequence of its input %v", name, ids(out), ids(q))
		}
		j++
	}
}

func FuzzFilters(f *testing.F) {
	names := append(slices.Clone(Filters), Digesters...)
	for i, s := range append(slices.Clone(filterSpecs), digesterSpecs...) {
		f.Add(uint8(i), s.example, []byte("\x10\x01\x02\x20\x11\x07\xff\x08\x00\x05\x05\x05"))
	}
	f.Add(uint8(7), `{"field":"published","last":"1h"}`, []byte("abcdefghi"))
	f.Add(uint8(8), `{"field":"value","set":[1,-2,"3"]}`, []byte("\x01\x01\x01\xfe\x02\x02"))
	f.Add(uint8(19), `{"n":1}`, []byte("abcdefghijkl"))
	f.Add(uint8(0), `{"field":"time","value":0}`, []byte("abc"))
	f.Fuzz(func(t *testing.T, which uint8, cfg string, data []byte) {
		name := names[int(which)%len(names)]
		spec, ok := transform.Lookup(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		op, err := spec.New(json.RawMessage(cfg))
		if err != nil {
			var fe *transform.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, transform.ErrInvalid) && !errors.Is(err, transform.ErrLimit) {
				t.Fatalf("%s %q: error %T %v is not a FieldError", name, cfg, err, err)
			}
			return
		}
		q := fuzzItems(data)
		for range 2 { // twice, for DELTA's memory
			out, err := op.Apply(testContext(), [][]Item{q})
			if err != nil {
				if !errors.Is(err, transform.ErrLimit) {
					t.Fatalf("%s %q: %v", name, cfg, err)
				}
				return
			}
			checkOutput(t, name, q, out)
		}
		if st, ok := op.(transform.Stateful); ok {
			raw, err := st.SaveState()
			if err != nil {
				t.Fatal(err)
			}
			if raw != nil {
				if err := st.LoadState(raw); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(docPolicy), []byte("\x10\x01\x02\x20\x11\x07\xff\x08\x00\x05\x05\x05"))
	f.Add([]byte(`{"levels":[{"above":1,"filters":[{"op":"RANDOM","config":{"p":0.5}},{"op":"LATEST","config":{"by":"sensor"}}],"digest":["SUM"],"by":"sensor"}]}`), []byte("0123456789abcdef"))
	f.Add([]byte(`{"levels":[{"above":0},{"above":2,"filters":[{"op":"MATCH","config":{"field":"title","pattern":"[0-2]"}}],"digest":["MAX","COUNT"],"field":"lat"}]}`), []byte("xyz"))
	f.Add([]byte(`{"levels":[{"above":1,"filters":[{"op":"EVERY","config":{"n":0}}]}]}`), []byte{})
	f.Add([]byte(`{"levels":[{"above":1e400}]}`), []byte{})
	f.Add([]byte(`{"levels":null}`), []byte{})
	f.Fuzz(func(t *testing.T, raw, data []byte) {
		p, err := ParsePolicy(raw)
		if err != nil {
			var fe *transform.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("ParsePolicy(%q): %T %v is not a FieldError", raw, err, err)
			}
			return
		}
		for i := 1; i < len(p.Levels); i++ {
			if !(p.Levels[i].Above > p.Levels[i-1].Above) {
				t.Fatalf("levels out of order: %+v", p.Levels)
			}
		}
		q := seqs(fuzzItems(data))
		for _, fill := range []float64{0.5, 1, 1.5, 2, 3, 10, math.MaxFloat64} {
			keep, digests, err := p.Apply(testContext(), "9", fill, q)
			if err != nil {
				if !errors.Is(err, transform.ErrLimit) {
					t.Fatalf("Apply at %v: %v", fill, err)
				}
				continue
			}
			for _, k := range keep {
				if k.Seq < 100 || k.Seq >= uint64(100+len(q)) || q[k.Seq-100].ID != k.ID {
					t.Fatalf("kept an item not given: %+v", k)
				}
			}
			for _, d := range digests {
				if d.Digest == nil || d.Reading == nil || !finite(d.Reading.Value) || d.ID == "" {
					t.Fatalf("bad digest %+v", d)
				}
			}
		}
	})
}
