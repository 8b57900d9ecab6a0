package pipes

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

func TestUnion(t *testing.T) {
	a := []transform.Item{item("a1"), item("a2")}
	b := []transform.Item{item("b1")}
	cases := []struct {
		name string
		in   [][]transform.Item
		want []string
	}{
		{"two inputs in order", [][]transform.Item{a, b}, []string{"a1", "a2", "b1"}},
		{"second first", [][]transform.Item{b, a}, []string{"b1", "a1", "a2"}},
		{"one input", [][]transform.Item{a}, []string{"a1", "a2"}},
		{"empty input", [][]transform.Item{nil, b, {}}, []string{"b1"}},
	}
	op := build(t, "union", `{}`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(run(t, op, tc.in...)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("over MaxItems", func(t *testing.T) {
		c := transform.NewContext(context.Background(), t0, "p", "n", transform.Limits{MaxItems: 2})
		if _, err := op.Apply(c, [][]transform.Item{a, b}); !errors.Is(err, transform.ErrLimit) {
			t.Errorf("err = %v, want ErrLimit", err)
		}
	})
	configErrors(t, "union", []struct{ name, cfg, field string }{
		{"unknown field", `{"by":"title"}`, "by"},
	})
}

func TestMerge(t *testing.T) {
	at := func(m int) opt { return pub(t0.Add(time.Duration(m) * time.Minute)) }
	a := []transform.Item{item("a1", at(1), value(3, "")), item("a3", at(3), value(1, "")), item("a5", at(5))}
	b := []transform.Item{item("b2", at(2), value(2, "")), item("b3", at(3), value(1, "")), item("b0", pub(time.Time{}))}
	cases := []struct {
		name, cfg string
		want      []string
	}{
		{"default published ascending", `{}`, []string{"a1", "b2", "a3", "b3", "a5", "b0"}},
		{"published descending", `{"desc":true}`, []string{"a5", "a3", "b3", "b2", "a1", "b0"}},
		{"by value, stable, lacking last", `{"by":"value"}`, []string{"a3", "b3", "b2", "a1", "a5", "b0"}},
		{"by value descending", `{"by":"value","desc":true}`, []string{"a1", "b2", "a3", "b3", "a5", "b0"}},
		{"by id", `{"by":"id"}`, []string{"a1", "a3", "a5", "b0", "b2", "b3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ids(run(t, build(t, "merge", tc.cfg), a, b))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	configErrors(t, "merge", []struct{ name, cfg, field string }{
		{"unknown item field", `{"by":"colour"}`, "by"},
		{"wrong type", `{"by":3}`, "by"},
		{"desc not bool", `{"desc":"yes"}`, "desc"},
	})
}

func TestSort(t *testing.T) {
	in := []transform.Item{
		item("x", title("b"), value(2, "")),
		item("y", title("a"), value(2, "")),
		item("z", title("c")),
		item("w", title("a"), value(10, "")),
		item("v", value(1, "")),
	}
	cases := []struct {
		name, cfg string
		want      []string
	}{
		{"value ascending, numeric, lacking last", `{"by":[{"field":"value"}]}`, []string{"v", "x", "y", "w", "z"}},
		{"value descending, lacking still last", `{"by":[{"field":"value","desc":true}]}`, []string{"w", "x", "y", "v", "z"}},
		{"title", `{"by":[{"field":"title"}]}`, []string{"y", "w", "x", "z", "v"}},
		{"value then title", `{"by":[{"field":"value"},{"field":"title"}]}`, []string{"v", "y", "x", "w", "z"}},
		{"title then value descending", `{"by":[{"field":"title"},{"field":"value","desc":true}]}`, []string{"w", "y", "x", "z", "v"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ids(run(t, build(t, "sort", tc.cfg), in))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	configErrors(t, "sort", []struct{ name, cfg, field string }{
		{"no keys", `{"by":[]}`, "by"},
		{"missing by", `{}`, "by"},
		{"too many keys", `{"by":[{"field":"a"},{"field":"a"},{"field":"a"},{"field":"a"},{"field":"a"},{"field":"a"},{"field":"a"},{"field":"a"},{"field":"a"}]}`, "by"},
		{"unknown field", `{"by":[{"field":"value"},{"field":"colour"}]}`, "by[1].field"},
		{"unknown key member", `{"by":[{"field":"value","asc":true}]}`, "asc"},
	})
}

func TestTruncateTail(t *testing.T) {
	in := []transform.Item{item("1"), item("2"), item("3"), item("4")}
	cases := []struct {
		name, op, cfg string
		want          []string
	}{
		{"truncate 2", "truncate", `{"count":2}`, []string{"1", "2"}},
		{"truncate more than there are", "truncate", `{"count":10}`, []string{"1", "2", "3", "4"}},
		{"truncate 0", "truncate", `{"count":0}`, []string{}},
		{"tail 2", "tail", `{"count":2}`, []string{"3", "4"}},
		{"tail more than there are", "tail", `{"count":9}`, []string{"1", "2", "3", "4"}},
		{"tail 0", "tail", `{"count":0}`, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, build(t, tc.op, tc.cfg), in)
			if got := ids(out); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			// Appending to the output must not write into the input.
			_ = append(out, item("extra"))
			if in[len(out)%len(in)].ID == "extra" {
				t.Error("output shares spare capacity with the input")
			}
		})
	}
	for _, name := range []string{"truncate", "tail"} {
		configErrors(t, name, []struct{ name, cfg, field string }{
			{"missing count", `{}`, "count"},
			{"negative", `{"count":-1}`, "count"},
			{"too large", `{"count":100001}`, "count"},
			{"not an integer", `{"count":1.5}`, "count"},
			{"a string", `{"count":"3"}`, "count"},
		})
	}
}

func TestReverse(t *testing.T) {
	cases := []struct {
		name string
		in   []transform.Item
		want []string
	}{
		{"three", []transform.Item{item("1"), item("2"), item("3")}, []string{"3", "2", "1"}},
		{"one", []transform.Item{item("1")}, []string{"1"}},
		{"none", nil, []string{}},
	}
	op := build(t, "reverse", `{}`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(run(t, op, tc.in)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	configErrors(t, "reverse", []struct{ name, cfg, field string }{
		{"unknown field", `{"count":1}`, "count"},
	})
}

func TestCount(t *testing.T) {
	op := build(t, "count", `{}`)
	three := []transform.Item{item("1"), item("2"), item("3")}
	cases := []struct {
		name  string
		in    []transform.Item
		count int // -1: no item
	}{
		{"three", three, 3},
		{"one", three[:1], 1},
		{"none", nil, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, op, tc.in)
			if tc.count < 0 {
				if len(out) != 0 {
					t.Fatalf("got %d items for an empty input, want none", len(out))
				}
				return
			}
			if len(out) != 1 {
				t.Fatalf("got %d items, want 1", len(out))
			}
			it := out[0]
			if it.Reading == nil || it.Reading.Value != float64(tc.count) {
				t.Errorf("reading %+v, want value %d", it.Reading, tc.count)
			}
			if want := "count: " + strconv.Itoa(tc.count); it.Title != want {
				t.Errorf("title %q, want %q", it.Title, want)
			}
			if !it.Published.Equal(t0) {
				t.Errorf("published %v, want the run's time %v", it.Published, t0)
			}
			if again := run(t, op, tc.in); again[0].ID != it.ID || it.ID == "" {
				t.Errorf("ids %q and %q of two runs on the same input differ", it.ID, again[0].ID)
			}
		})
	}
	t.Run("id depends on the input", func(t *testing.T) {
		a, b := run(t, op, three[:2]), run(t, op, three[1:])
		if a[0].ID == b[0].ID {
			t.Errorf("same id %q for different inputs", a[0].ID)
		}
	})
	configErrors(t, "count", []struct{ name, cfg, field string }{
		{"unknown field", `{"field":"value"}`, "field"},
	})
}
