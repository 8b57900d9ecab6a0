package pipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

func filterInput() []transform.Item {
	return []transform.Item{
		item("hot", pub(t0.Add(-30*time.Minute)), title("Lab Hot"), value(30, "C"), cats("Temperature", "Lab")),
		item("cold", pub(t0.Add(-3*time.Hour)), title("cold room"), value(10, "C"), cats("temperature")),
		item("news", pub(t0.Add(-10*time.Minute)), title("News 42")),
		item("str", title("25")),
	}
}

func TestFilter(t *testing.T) {
	in := filterInput()
	cases := []struct {
		name, cfg string
		want      []string
	}{
		{"gt number", `{"rules":[{"field":"value","op":"gt","value":25}]}`, []string{"hot"}},
		{"ge numeric string", `{"rules":[{"field":"value","op":"ge","value":"10"}]}`, []string{"hot", "cold"}},
		{"lt, missing fails", `{"rules":[{"field":"value","op":"lt","value":25}]}`, []string{"cold"}},
		{"le", `{"rules":[{"field":"value","op":"le","value":10.0}]}`, []string{"cold"}},
		{"eq", `{"rules":[{"field":"value","op":"eq","value":10}]}`, []string{"cold"}},
		{"ne, missing fails", `{"rules":[{"field":"value","op":"ne","value":30}]}`, []string{"cold"}},
		{"relative time", `{"rules":[{"field":"published","op":"gt","value":"-1h"}]}`, []string{"hot", "news", "str"}},
		{"relative time from now, ge at the edge", `{"rules":[{"field":"published","op":"ge","value":"now-30m"}]}`, []string{"hot", "news", "str"}},
		{"absolute time", `{"rules":[{"field":"published","op":"lt","value":"2025-03-01T10:00:00Z"}]}`, []string{"cold"}},
		{"time as unix seconds", fmt.Sprintf(`{"rules":[{"field":"published","op":"lt","value":%d}]}`, t0.Add(-2*time.Hour).Unix()), []string{"cold"}},
		{"time in a set", `{"rules":[{"field":"published","op":"in","value":["2025-03-01T11:30:00Z","2025-03-01T09:00:00+00:00"]}]}`, []string{"hot", "cold"}},
		{"contains, case-insensitive", `{"rules":[{"field":"title","op":"contains","value":"lab"}]}`, []string{"hot"}},
		{"not_contains, missing passes", `{"rules":[{"field":"summary","op":"not_contains","value":"x"}]}`, []string{"hot", "cold", "news", "str"}},
		{"not_contains", `{"rules":[{"field":"title","op":"not_contains","value":"LAB"}]}`, []string{"cold", "news", "str"}},
		{"list contains is element match", `{"rules":[{"field":"categories","op":"contains","value":"temperature"}]}`, []string{"hot", "cold"}},
		{"list contains no substring", `{"rules":[{"field":"categories","op":"contains","value":"temp"}]}`, nil},
		{"list not_contains", `{"rules":[{"field":"category","op":"not_contains","value":"lab"}]}`, []string{"cold", "news", "str"}},
		{"list eq an element", `{"rules":[{"field":"categories","op":"eq","value":"Lab"}]}`, []string{"hot"}},
		{"list matches an element", `{"rules":[{"field":"categories","op":"matches","value":"^temp"}]}`, []string{"cold"}},
		{"matches", `{"rules":[{"field":"title","op":"matches","value":"^\\w+ \\d+$"}]}`, []string{"news"}},
		{"not_matches", `{"rules":[{"field":"title","op":"not_matches","value":"(?i)lab"}]}`, []string{"cold", "news", "str"}},
		{"exists", `{"rules":[{"field":"value","op":"exists"}]}`, []string{"hot", "cold"}},
		{"missing", `{"rules":[{"field":"value","op":"missing","value":null}]}`, []string{"news", "str"}},
		{"in", `{"rules":[{"field":"value","op":"in","value":[10,"30"]}]}`, []string{"hot", "cold"}},
		{"in strings", `{"rules":[{"field":"sensor","op":"in","value":["lab-1","lab-2"]}]}`, []string{"hot", "cold"}},
		{"not_in, missing passes", `{"rules":[{"field":"value","op":"not_in","value":[10]}]}`, []string{"hot", "news", "str"}},
		{"number against a string field", `{"rules":[{"field":"title","op":"gt","value":20}]}`, []string{"str"}},
		{"ne number against a string field", `{"rules":[{"field":"title","op":"ne","value":25}]}`, []string{"hot", "cold", "news"}},
		{"string eq is exact", `{"rules":[{"field":"title","op":"eq","value":"cold room"}]}`, []string{"cold"}},
		{"all rules", `{"rules":[{"field":"value","op":"gt","value":5},{"field":"title","op":"contains","value":"room"}]}`, []string{"cold"}},
		{"any rule", `{"match":"any","rules":[{"field":"value","op":"gt","value":25},{"field":"title","op":"contains","value":"news"}]}`, []string{"hot", "news"}},
		{"block", `{"mode":"block","rules":[{"field":"value","op":"gt","value":25}]}`, []string{"cold", "news", "str"}},
		{"block any", `{"mode":"block","match":"any","rules":[{"field":"value","op":"gt","value":25},{"field":"title","op":"contains","value":"news"}]}`, []string{"cold", "str"}},
		{"permit explicit", `{"mode":"permit","match":"all","rules":[{"field":"unit","op":"eq","value":"C"}]}`, []string{"hot", "cold"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ids(run(t, build(t, "filter", tc.cfg), in))
			if len(got) == 0 && len(tc.want) == 0 {
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("relative times follow the run's time", func(t *testing.T) {
		op := build(t, "filter", `{"rules":[{"field":"published","op":"gt","value":"-1h"}]}`)
		c := transform.NewContext(context.Background(), t0.Add(time.Hour), "p", "n", transform.Limits{})
		out, err := op.Apply(c, [][]transform.Item{in})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 0 {
			t.Errorf("an hour later got %v, want none", ids(out))
		}
	})
	t.Run("stops when the run is cancelled", func(t *testing.T) {
		op := build(t, "filter", `{"rules":[{"field":"value","op":"exists"}]}`)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c := transform.NewContext(ctx, t0, "p", "n", transform.Limits{})
		if _, err := op.Apply(c, [][]transform.Item{in}); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})

	rule := `{"field":"value","op":"gt","value":1}`
	many := `{"rules":[` + strings.Repeat(rule+",", 64) + rule + `]}`
	bigSet := `{"rules":[{"field":"title","op":"in","value":[` + strings.Repeat(`"a",`, 256) + `"a"]}]}`
	longRegex := `{"rules":[{"field":"title","op":"matches","value":"` + strings.Repeat("a", 600) + `"}]}`
	configErrors(t, "filter", []struct{ name, cfg, field string }{
		{"no rules", `{"rules":[]}`, "rules"},
		{"rules missing", `{"mode":"block"}`, "rules"},
		{"too many rules", many, "rules"},
		{"bad mode", `{"mode":"allow","rules":[` + rule + `]}`, "mode"},
		{"mode not a string", `{"mode":1,"rules":[` + rule + `]}`, "mode"},
		{"bad match", `{"match":"some","rules":[` + rule + `]}`, "match"},
		{"unknown item field", `{"rules":[` + rule + `,{"field":"colour","op":"eq","value":"red"}]}`, "rules[1].field"},
		{"unknown op", `{"rules":[` + rule + `,{"field":"value","op":"between","value":1}]}`, "rules[1].op"},
		{"comparison without value", `{"rules":[{"field":"value","op":"gt"}]}`, "rules[0].value"},
		{"number field, not a number", `{"rules":[{"field":"value","op":"gt","value":"warm"}]}`, "rules[0].value"},
		{"number field, a bool", `{"rules":[{"field":"value","op":"eq","value":true}]}`, "rules[0].value"},
		{"time field, not a time", `{"rules":[{"field":"published","op":"gt","value":"yesterday"}]}`, "rules[0].value"},
		{"time field, bad duration", `{"rules":[{"field":"published","op":"gt","value":"-1x"}]}`, "rules[0].value"},
		{"object value", `{"rules":[{"field":"title","op":"eq","value":{"a":1}}]}`, "rules[0].value"},
		{"bad regex", `{"rules":[{"field":"title","op":"matches","value":"(a"}]}`, "rules[0].value"},
		{"regex too long", longRegex, "rules[0].value"},
		{"regex not a string", `{"rules":[{"field":"title","op":"matches","value":3}]}`, "rules[0].value"},
		{"exists with a value", `{"rules":[{"field":"title","op":"exists","value":"x"}]}`, "rules[0].value"},
		{"contains without value", `{"rules":[{"field":"title","op":"contains"}]}`, "rules[0].value"},
		{"in not an array", `{"rules":[{"field":"title","op":"in","value":"a"}]}`, "rules[0].value"},
		{"in too many", bigSet, "rules[0].value"},
		{"in with an object", `{"rules":[{"field":"title","op":"in","value":["a",{}]}]}`, "rules[0].value[1]"},
		{"in number field with a word", `{"rules":[{"field":"value","op":"not_in","value":[1,"x"]}]}`, "rules[0].value[1]"},
		{"string too long", `{"rules":[{"field":"title","op":"eq","value":"` + strings.Repeat("x", 5000) + `"}]}`, "rules[0].value"},
	})
}
