package pipes

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// get returns field name of it as text.
func get(it transform.Item, name string) string {
	v, ok := transform.Get(&it, name)
	if !ok {
		return "<none>"
	}
	return transform.AsString(v)
}

func TestRename(t *testing.T) {
	base := item("1", title("21.5"), summary("hello"), value(3, "C"), cats("a", "b"))
	cases := []struct {
		name, cfg string
		in        transform.Item
		want      map[string]string
	}{
		{"move", `{"mappings":[{"from":"title","to":"summary"}]}`, base,
			map[string]string{"title": "<none>", "summary": "21.5"}},
		{"copy", `{"mappings":[{"from":"title","to":"summary","copy":true}]}`, base,
			map[string]string{"title": "21.5", "summary": "21.5"}},
		{"string to number", `{"mappings":[{"from":"title","to":"value","copy":true}]}`, base,
			map[string]string{"value": "21.5", "unit": "C"}},
		{"number to string", `{"mappings":[{"from":"value","to":"title","copy":true}]}`, base,
			map[string]string{"title": "3", "value": "3"}},
		{"list to string", `{"mappings":[{"from":"categories","to":"summary"}]}`, base,
			map[string]string{"summary": "a, b", "categories": "<none>"}},
		{"read-only field copied", `{"mappings":[{"from":"feed","to":"author","copy":true}]}`, base,
			map[string]string{"author": "1"}},
		{"id copied", `{"mappings":[{"from":"id","to":"guid","copy":true}]}`, base,
			map[string]string{"guid": "1", "id": "1"}},
		{"missing source leaves the item", `{"mappings":[{"from":"author","to":"title"}]}`, base,
			map[string]string{"title": "21.5"}},
		{"value that does not fit leaves both", `{"mappings":[{"from":"summary","to":"value"}]}`, base,
			map[string]string{"summary": "hello", "value": "3"}},
		{"in order", `{"mappings":[{"from":"title","to":"author"},{"from":"summary","to":"title"},{"from":"author","to":"summary"}]}`, base,
			map[string]string{"title": "hello", "summary": "21.5", "author": "<none>"}},
		{"time to string", `{"mappings":[{"from":"published","to":"summary","copy":true}]}`, base,
			map[string]string{"summary": "2025-03-01T11:59:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, build(t, "rename", tc.cfg), []transform.Item{tc.in})
			if len(out) != 1 || out[0].ID != tc.in.ID {
				t.Fatalf("got %v, want the one item", ids(out))
			}
			for f, want := range tc.want {
				if got := get(out[0], f); got != want {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}
		})
	}
	many := `{"mappings":[` + strings.Repeat(`{"from":"title","to":"summary"},`, 32) + `{"from":"title","to":"summary"}]}`
	configErrors(t, "rename", []struct{ name, cfg, field string }{
		{"no mappings", `{"mappings":[]}`, "mappings"},
		{"too many", many, "mappings"},
		{"unknown from", `{"mappings":[{"from":"colour","to":"title"}]}`, "mappings[0].from"},
		{"unknown to", `{"mappings":[{"from":"title","to":"summary"},{"from":"title","to":"colour"}]}`, "mappings[1].to"},
		{"read-only target", `{"mappings":[{"from":"title","to":"fetched"}]}`, "mappings[0].to"},
		{"moving a read-only field", `{"mappings":[{"from":"feed","to":"title"}]}`, "mappings[0].from"},
		{"moving the id", `{"mappings":[{"from":"id","to":"title"}]}`, "mappings[0].from"},
		{"same field", `{"mappings":[{"from":"category","to":"categories"}]}`, "mappings[0].to"},
		{"list to number", `{"mappings":[{"from":"categories","to":"value"}]}`, "mappings[0].to"},
	})
}

func TestSet(t *testing.T) {
	base := item("1", title("x"), value(3, "F"), cats("a"))
	bare := item("2", title("y"))
	cases := []struct {
		name, cfg string
		in        transform.Item
		want      map[string]string
	}{
		{"string", `{"field":"unit","value":"C"}`, base, map[string]string{"unit": "C", "value": "3"}},
		{"reading field on an item without one", `{"field":"unit","value":"C"}`, bare, map[string]string{"unit": "C", "value": "0", "time": "2025-03-01T11:59:00Z"}},
		{"number", `{"field":"value","value":21.5}`, base, map[string]string{"value": "21.5", "unit": "F"}},
		{"numeric string", `{"field":"value","value":"7"}`, base, map[string]string{"value": "7"}},
		{"number into a string field", `{"field":"title","value":42}`, base, map[string]string{"title": "42"}},
		{"time", `{"field":"updated","value":"2024-05-06T07:08:09Z"}`, base, map[string]string{"updated": "2024-05-06T07:08:09Z"}},
		{"relative time", `{"field":"published","value":"-1h"}`, base, map[string]string{"published": "2025-03-01T11:00:00Z"}},
		{"now", `{"field":"time","value":"now"}`, base, map[string]string{"time": "2025-03-01T12:00:00Z"}},
		{"categories", `{"field":"categories","value":["p","q"]}`, base, map[string]string{"categories": "p, q"}},
		{"one category", `{"field":"category","value":"p"}`, base, map[string]string{"categories": "p"}},
		{"null clears", `{"field":"title","value":null}`, base, map[string]string{"title": "<none>"}},
		{"null clears a reading field", `{"field":"unit","value":null}`, base, map[string]string{"unit": "<none>", "value": "3"}},
		{"lat", `{"field":"lat","value":50.8}`, base, map[string]string{"lat": "50.8"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, build(t, "set", tc.cfg), []transform.Item{tc.in, bare})
			if len(out) != 2 || out[0].ID != tc.in.ID {
				t.Fatalf("got %v", ids(out))
			}
			for f, want := range tc.want {
				if got := get(out[0], f); got != want {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}
		})
	}
	configErrors(t, "set", []struct{ name, cfg, field string }{
		{"unknown field", `{"field":"colour","value":"red"}`, "field"},
		{"read-only field", `{"field":"fetched","value":"2024-01-01T00:00:00Z"}`, "field"},
		{"the id", `{"field":"id","value":"x"}`, "field"},
		{"missing value", `{"field":"title"}`, "value"},
		{"word into a number", `{"field":"value","value":"warm"}`, "value"},
		{"bool into a number", `{"field":"value","value":true}`, "value"},
		{"not a time", `{"field":"published","value":"soon"}`, "value"},
		{"lat out of range", `{"field":"lat","value":91}`, "value"},
		{"array into a string field", `{"field":"title","value":["a"]}`, "value"},
		{"array of numbers", `{"field":"categories","value":["a",1]}`, "value[1]"},
		{"object", `{"field":"title","value":{"a":1}}`, "value"},
		{"string too long", fmt.Sprintf(`{"field":"title","value":%q}`, strings.Repeat("x", 5000)), "value"},
	})
	t.Run("every item", func(t *testing.T) {
		in := []transform.Item{item("a"), item("b"), item("c", pub(time.Time{}))}
		out := run(t, build(t, "set", `{"field":"author","value":"lab"}`), in)
		if got := []string{out[0].Author, out[1].Author, out[2].Author}; !slices.Equal(got, []string{"lab", "lab", "lab"}) {
			t.Errorf("authors %v", got)
		}
	})
}
