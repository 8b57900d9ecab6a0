package pipes

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

func TestSplit(t *testing.T) {
	type out struct{ id, val string }
	cases := []struct {
		name, cfg string
		in        []transform.Item
		field     string // field whose value is checked
		want      []out
	}{
		{"categories", `{"field":"categories"}`,
			[]transform.Item{item("1", cats("a", "b")), item("2", cats("c"))}, "categories",
			[]out{{"1#0", "a"}, {"1#1", "b"}, {"2#0", "c"}}},
		{"categories into the title", `{"field":"category","to":"title"}`,
			[]transform.Item{item("1", title("t"), cats("a", " ", "b"))}, "title",
			[]out{{"1#0", "a"}, {"1#1", "b"}}},
		{"separator, trimmed, empties dropped", `{"field":"summary","separator":";"}`,
			[]transform.Item{item("1", summary("x; y;;z "))}, "summary",
			[]out{{"1#0", "x"}, {"1#1", "y"}, {"1#2", "z"}}},
		{"separator into another field", `{"field":"summary","separator":";","to":"title"}`,
			[]transform.Item{item("1", summary("x;y"))}, "title",
			[]out{{"1#0", "x"}, {"1#1", "y"}}},
		{"pattern matches into the value", `{"field":"summary","pattern":"\\d+(\\.\\d+)?","to":"value"}`,
			[]transform.Item{item("1", summary("t=21.5 h=40 p=1013"))}, "value",
			[]out{{"1#0", "21.5"}, {"1#1", "40"}, {"1#2", "1013"}}},
		{"parts that do not fit are skipped, indexes stay", `{"field":"summary","separator":",","to":"value"}`,
			[]transform.Item{item("1", summary("1,x,3"))}, "value",
			[]out{{"1#0", "1"}, {"1#2", "3"}}},
		{"items without parts pass unchanged", `{"field":"categories"}`,
			[]transform.Item{item("1"), item("2", cats("a"))}, "categories",
			[]out{{"1", "<none>"}, {"2#0", "a"}}},
		{"a single part still gets an index", `{"field":"summary","separator":";"}`,
			[]transform.Item{item("1", summary("only"))}, "summary",
			[]out{{"1#0", "only"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, build(t, "split", tc.cfg), tc.in)
			var got []out
			for _, it := range res {
				got = append(got, out{it.ID, get(it, tc.field)})
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("copies keep the rest and suffix the guid", func(t *testing.T) {
		res := run(t, build(t, "split", `{"field":"summary","separator":";","to":"title"}`),
			[]transform.Item{item("1", summary("a;b"), guid("g"), value(3, "C"))})
		for i, it := range res {
			if it.Summary != "a;b" || it.Reading == nil || it.Reading.Value != 3 {
				t.Errorf("part %d lost the item's other fields: %+v", i, it)
			}
			if want := "g#" + string(rune('0'+i)); it.GUID != want {
				t.Errorf("part %d guid %q, want %q", i, it.GUID, want)
			}
		}
		if res[0].Reading == res[1].Reading {
			t.Error("parts share a reading")
		}
	})
	t.Run("at most 1000 parts", func(t *testing.T) {
		res := run(t, build(t, "split", `{"field":"summary","separator":","}`),
			[]transform.Item{item("1", summary(strings.Repeat("x,", 1500)))})
		if len(res) != 1000 || res[999].ID != "1#999" {
			t.Errorf("got %d parts, want 1000", len(res))
		}
		res = run(t, build(t, "split", `{"field":"summary","pattern":"x"}`),
			[]transform.Item{item("1", summary(strings.Repeat("x", 1500)))})
		if len(res) != 1000 {
			t.Errorf("got %d matches, want 1000", len(res))
		}
	})
	t.Run("over MaxItems", func(t *testing.T) {
		op := build(t, "split", `{"field":"categories"}`)
		c := transform.NewContext(context.Background(), t0, "p", "n", transform.Limits{MaxItems: 3})
		_, err := op.Apply(c, [][]transform.Item{{item("1", cats("a", "b")), item("2", cats("c", "d"))}})
		if !errors.Is(err, transform.ErrLimit) {
			t.Errorf("err = %v, want ErrLimit", err)
		}
	})
	configErrors(t, "split", []struct{ name, cfg, field string }{
		{"unknown field", `{"field":"colour"}`, "field"},
		{"number field", `{"field":"value","separator":","}`, "field"},
		{"string field without a way to split", `{"field":"summary"}`, "separator"},
		{"both", `{"field":"summary","separator":",","pattern":"x"}`, "pattern"},
		{"separator on a list", `{"field":"categories","separator":","}`, "separator"},
		{"pattern on a list", `{"field":"categories","pattern":"x"}`, "pattern"},
		{"bad pattern", `{"field":"title","pattern":"(x"}`, "pattern"},
		{"pattern matching nothing", `{"field":"title","pattern":"x*"}`, "pattern"},
		{"unknown target", `{"field":"title","separator":",","to":"colour"}`, "to"},
		{"read-only target", `{"field":"title","separator":",","to":"fetched"}`, "to"},
		{"id target", `{"field":"title","separator":",","to":"id"}`, "to"},
		{"separator too long", `{"field":"title","separator":"` + strings.Repeat(",", 5000) + `"}`, "separator"},
	})
}
