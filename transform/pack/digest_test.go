package pack

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

func TestSummarise(t *testing.T) {
	dig := func(id string, d storage.Digest) Item {
		it := rd(id, "", d.Sum/float64(max(d.Count, 1)), 0)
		it.Digest = &d
		return it
	}
	tests := []struct {
		name  string
		items []Item
		want  storage.Digest
		ok    bool
	}{
		{"nothing", nil, storage.Digest{Field: "value"}, false},
		{"no readings", []Item{news("n", "x", 0)}, storage.Digest{Field: "value"}, false},
		{"readings", []Item{rd("a", "s", 3, 2), news("n", "x", 0), rd("b", "s", 1, 1), rd("c", "s", 2, 5)},
			storage.Digest{Field: "value", Count: 3, Sum: 6, Min: 1, Max: 3, From: t0.Add(time.Minute), To: t0.Add(5 * time.Minute), Items: []string{"a", "b", "c"}}, true},
		{"a digest merges whole", []Item{
			dig("d", storage.Digest{Field: "value", Count: 10, Sum: 100, Min: -5, Max: 50, From: t0.Add(-time.Hour), To: t0, Items: []string{"x", "y"}}),
			rd("a", "s", 7, 3)},
			storage.Digest{Field: "value", Count: 11, Sum: 107, Min: -5, Max: 50, From: t0.Add(-time.Hour), To: t0.Add(3 * time.Minute), Items: []string{"x", "y", "a"}}, true},
		{"a digest of another field is one reading", []Item{
			dig("d", storage.Digest{Field: "lat", Count: 10, Sum: 100, Min: 1, Max: 50})},
			storage.Digest{Field: "value", Count: 1, Sum: 10, Min: 10, Max: 10, From: t0, To: t0, Items: []string{"d"}}, true},
		{"broken digests are left out", []Item{
			dig("d", storage.Digest{Field: "value", Count: 0, Sum: 100}),
			dig("e", storage.Digest{Field: "value", Count: 2, Sum: 1, Min: 5, Max: 1}),
			rd("a", "s", 7, 0)},
			storage.Digest{Field: "value", Count: 1, Sum: 7, Min: 7, Max: 7, From: t0, To: t0, Items: []string{"a"}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Summarise("value", tc.items)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Summarise = %+v, %v\nwant %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	t.Run("at most 16 ids", func(t *testing.T) {
		d, _ := Summarise("value", manyReadings(40))
		if len(d.Items) != MaxDigestItems || d.Items[0] != "r0000" || d.Count != 40 {
			t.Errorf("digest %+v", d)
		}
	})
}

func TestDigesters(t *testing.T) {
	type want struct {
		group string
		value float64
		count int64
	}
	tests := []struct {
		op, cfg string
		want    []want
	}{
		{"MEAN", `{"field":"value","by":"sensor"}`, []want{{"s1", 15, 3}, {"s2", 20, 2}}},
		{"MIN", `{"by":"sensor"}`, []want{{"s1", 10, 3}, {"s2", 20, 2}}},
		{"MAX", `{"by":"sensor"}`, []want{{"s1", 25, 3}, {"s2", 20, 2}}},
		{"COUNT", `{"by":"sensor"}`, []want{{"s1", 3, 3}, {"s2", 2, 2}}},
		{"SUM", `{"by":"sensor"}`, []want{{"s1", 45, 3}, {"s2", 40, 2}}},
		{"MEAN", `{}`, []want{{"", 17, 5}}},
		{"SUM", `{"field":"value","by":""}`, []want{{"", 85, 5}}},
		{"COUNT", `{"field":"lat"}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.op+" "+tc.cfg, func(t *testing.T) {
			c := testContext()
			q := testQueue()
			out, err := build(t, tc.op, tc.cfg).Apply(c, [][]Item{q})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(tc.want) {
				t.Fatalf("made %d digests, want %d: %v", len(out), len(tc.want), out)
			}
			for i, w := range tc.want {
				it := out[i]
				d := it.Digest
				if d == nil || it.Reading == nil {
					t.Fatalf("digest %d has no digest or reading: %+v", i, it)
				}
				if it.Reading.Value != w.value || d.Count != w.count || it.Reading.Sensor != w.group {
					t.Errorf("digest %d: value %v count %d group %q, want %v %d %q", i, it.Reading.Value, d.Count, it.Reading.Sensor, w.value, w.count, w.group)
				}
				unit := "C"
				if tc.op == "COUNT" {
					unit = ""
				}
				if it.Reading.Unit != unit || !it.Reading.Time.Equal(d.To) || !it.Published.Equal(d.To) {
					t.Errorf("digest %d reading %+v, span %v–%v", i, it.Reading, d.From, d.To)
				}
				if !slices.Equal(it.Categories, []string{"digest", "digest:" + tc.op}) {
					t.Errorf("categories %v", it.Categories)
				}
				of := ""
				if w.group != "" {
					of = " of " + w.group
				}
				wt := fmt.Sprintf("%s value%s (%d readings): %s", tc.op, of, w.count, formatNumber(w.value))
				if unit != "" {
					wt += " " + unit
				}
				if it.Title != wt {
					t.Errorf("title %q, want %q", it.Title, wt)
				}
				if wid := c.DeriveID(tc.op, w.group, d.Items[0], d.Items[len(d.Items)-1]); it.ID != wid {
					t.Errorf("id %q, want %q", it.ID, wid)
				}
			}
		})
	}
}

func TestDigestUnitsAndGroups(t *testing.T) {
	t.Run("mixed units give none", func(t *testing.T) {
		q := []Item{rd("a", "s", 1, 0), rd("b", "s", 2, 1)}
		q[1].Reading.Unit = "F"
		out, err := build(t, "MEAN", `{}`).Apply(testContext(), [][]Item{q})
		if err != nil || len(out) != 1 {
			t.Fatalf("%v %v", out, err)
		}
		if out[0].Reading.Unit != "" || out[0].Title != "MEAN value (2 readings): 1.5" {
			t.Errorf("unit %q title %q", out[0].Reading.Unit, out[0].Title)
		}
	})
	t.Run("too many groups", func(t *testing.T) {
		q := make([]Item, MaxGroups+1)
		for i := range q {
			q[i] = rd(fmt.Sprint(i), fmt.Sprint("s", i), 1, 0)
		}
		_, err := build(t, "COUNT", `{"by":"sensor"}`).Apply(testContext(), [][]Item{q})
		if !errors.Is(err, transform.ErrLimit) {
			t.Errorf("%d groups: %v", len(q), err)
		}
	})
	t.Run("long group names are bounded", func(t *testing.T) {
		long := string(make([]byte, 5000))
		q := []Item{rd("a", long, 1, 0), rd("b", long+"x", 2, 0)}
		out, err := build(t, "COUNT", `{"by":"sensor"}`).Apply(testContext(), [][]Item{q})
		if err != nil || len(out) != 2 {
			t.Fatalf("%d digests, %v", len(out), err)
		}
		for _, it := range out {
			if len(it.Reading.Sensor) > maxGroupKey {
				t.Errorf("group of %d bytes", len(it.Reading.Sensor))
			}
		}
	})
}

// TestDigestOfDigests checks that digesting digests gives exactly the
// digest of all the readings.
func TestDigestOfDigests(t *testing.T) {
	q := manyReadings(100)
	for i := range q {
		q[i].Reading.Value = float64((i*37)%101 - 50)
	}
	for _, name := range Digesters {
		t.Run(name, func(t *testing.T) {
			c := testContext()
			direct, err := build(t, name, `{"by":"sensor"}`).Apply(c, [][]Item{q})
			if err != nil {
				t.Fatal(err)
			}
			var parts []Item
			for i := 0; i < len(q); i += 13 {
				p, err := build(t, name, `{"by":"sensor"}`).Apply(c, [][]Item{q[i:min(i+13, len(q))]})
				if err != nil {
					t.Fatal(err)
				}
				parts = append(parts, p...)
			}
			merged, err := build(t, name, `{"by":"sensor"}`).Apply(c, [][]Item{parts})
			if err != nil {
				t.Fatal(err)
			}
			byGroup := map[string]Item{}
			for _, it := range merged {
				byGroup[it.Reading.Sensor] = it
			}
			if len(byGroup) != len(direct) {
				t.Fatalf("%d groups merged, %d direct", len(byGroup), len(direct))
			}
			for _, d := range direct {
				m := byGroup[d.Reading.Sensor]
				a, b := *d.Digest, *m.Digest
				a.Items, b.Items = nil, nil
				if !reflect.DeepEqual(a, b) || d.Reading.Value != m.Reading.Value {
					t.Errorf("group %s: direct %+v (%v), merged %+v (%v)", d.Reading.Sensor, a, d.Reading.Value, b, m.Reading.Value)
				}
			}
		})
	}
}

// randomDigest draws a digest; about one in ten is empty.
func randomDigest(r *rand.Rand, n *int) storage.Digest {
	if r.IntN(10) == 0 {
		return storage.Digest{Field: "value"}
	}
	a, b := r.NormFloat64()*1e3, r.NormFloat64()*1e3
	lo, hi := min(a, b), max(a, b)
	count := int64(1 + r.IntN(1000))
	from := t0.Add(time.Duration(r.IntN(1e6)) * time.Second)
	d := storage.Digest{
		Field: "value", Count: count, Min: lo, Max: hi,
		Sum:  (lo + hi) / 2 * float64(count),
		From: from, To: from.Add(time.Duration(r.IntN(1e6)) * time.Second),
	}
	for range r.IntN(10) {
		*n++
		d.Items = append(d.Items, fmt.Sprint("id", *n))
	}
	return d
}

func TestMergeAssociative(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 0
	for i := range 2000 {
		a, b, c := randomDigest(r, &n), randomDigest(r, &n), randomDigest(r, &n)
		left := Merge(Merge(a, b), c)
		right := Merge(a, Merge(b, c))
		if math.Abs(left.Sum-right.Sum) > 1e-9*max(1, math.Abs(left.Sum)) {
			t.Fatalf("case %d: sums %v and %v", i, left.Sum, right.Sum)
		}
		left.Sum, right.Sum = 0, 0
		if !reflect.DeepEqual(left, right) {
			t.Fatalf("case %d:\n(a+b)+c = %+v\na+(b+c) = %+v", i, left, right)
		}
		if want := a.Count + b.Count + c.Count; left.Count != want {
			t.Fatalf("case %d: count %d, want %d", i, left.Count, want)
		}
	}
}

func TestMerge(t *testing.T) {
	a := storage.Digest{Field: "value", Count: 2, Sum: 3, Min: 1, Max: 2, From: t0, To: t0.Add(time.Hour), Items: []string{"a", "b"}}
	b := storage.Digest{Field: "value", Count: 1, Sum: -4, Min: -4, Max: -4, From: t0.Add(-time.Hour), To: t0, Items: []string{"b", "c"}}
	tests := []struct {
		name string
		a, b storage.Digest
		want storage.Digest
	}{
		{"union", a, b, storage.Digest{Field: "value", Count: 3, Sum: -1, Min: -4, Max: 2, From: t0.Add(-time.Hour), To: t0.Add(time.Hour), Items: []string{"a", "b", "c"}}},
		{"empty left", storage.Digest{}, a, a},
		{"empty right", a, storage.Digest{Field: "value"}, a},
		{"times unknown on one side", a, storage.Digest{Field: "value", Count: 1, Sum: 5, Min: 5, Max: 5},
			storage.Digest{Field: "value", Count: 3, Sum: 8, Min: 1, Max: 5, From: t0, To: t0.Add(time.Hour), Items: []string{"a", "b"}}},
		{"sums saturate", storage.Digest{Field: "value", Count: 1, Sum: math.MaxFloat64, Min: 1, Max: 1},
			storage.Digest{Field: "value", Count: 1, Sum: math.MaxFloat64, Min: 1, Max: 1},
			storage.Digest{Field: "value", Count: 2, Sum: math.MaxFloat64, Min: 1, Max: 1}},
		{"counts saturate", storage.Digest{Field: "value", Count: math.MaxInt64, Sum: 1, Min: 1, Max: 1},
			storage.Digest{Field: "value", Count: 5, Sum: 1, Min: 1, Max: 1},
			storage.Digest{Field: "value", Count: math.MaxInt64, Sum: 2, Min: 1, Max: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			aItems := slices.Clone(tc.a.Items)
			got := Merge(tc.a, tc.b)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Merge = %+v\nwant %+v", got, tc.want)
			}
			if !slices.Equal(tc.a.Items, aItems) {
				t.Errorf("Merge changed a's ids: %v", tc.a.Items)
			}
		})
	}
}

func TestFormatNumber(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{21.366666, "21.3667"}, {20, "20"}, {-0.5, "-0.5"}, {0, "0"}, {1.5e12, "1.5e+12"}, {0.0001234, "0.0001234"}, {-0.00001, "-1e-05"}} {
		if got := formatNumber(tc.v); got != tc.want {
			t.Errorf("formatNumber(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
