package pipes

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

func TestUnique(t *testing.T) {
	in := []transform.Item{
		item("1", title("a"), value(1, ""), cats("x", "y")),
		item("2", title("b"), value(1, ""), cats("x")),
		item("3", title("a"), value(2, ""), cats("x", "y")),
		item("4", value(2, "")),
		item("5", cats("x, y")),
		item("6"),
	}
	cases := []struct {
		name, cfg string
		want      []string
	}{
		{"default title, lacking kept", `{}`, []string{"1", "2", "4", "5", "6"}},
		{"by value", `{"field":"value"}`, []string{"1", "3", "5", "6"}},
		{"by categories, exact lists", `{"field":"categories"}`, []string{"1", "2", "4", "5", "6"}},
		{"by id: all distinct", `{"field":"id"}`, []string{"1", "2", "3", "4", "5", "6"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := build(t, "unique", tc.cfg)
			if _, ok := op.(transform.Stateful); ok {
				t.Error("unique without remember is stateful")
			}
			if got := ids(run(t, op, in)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			// Without memory a second run sees the same.
			if got := ids(run(t, op, in)); !slices.Equal(got, tc.want) {
				t.Errorf("second run got %v, want %v", got, tc.want)
			}
		})
	}
	configErrors(t, "unique", []struct{ name, cfg, field string }{
		{"unknown item field", `{"field":"colour"}`, "field"},
		{"negative remember", `{"remember":-1}`, "remember"},
		{"remember too large", `{"remember":100001}`, "remember"},
		{"remember not a number", `{"remember":"10"}`, "remember"},
	})
}

// stateful builds a remembering unique.
func stateful(t *testing.T, cfg string) transform.Stateful {
	t.Helper()
	op, ok := build(t, "unique", cfg).(transform.Stateful)
	if !ok {
		t.Fatalf("unique %s is not stateful", cfg)
	}
	return op
}

// titled returns items with the given titles, ids prefix+index.
func titled(prefix string, titles ...string) []transform.Item {
	out := make([]transform.Item, len(titles))
	for i, s := range titles {
		out[i] = item(prefix+string(rune('a'+i)), title(s))
	}
	return out
}

// reload saves op's state and loads it into a new operator of cfg.
func reload(t *testing.T, op transform.Stateful, cfg string) transform.Stateful {
	t.Helper()
	st, err := op.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	next := stateful(t, cfg)
	if st != nil {
		if err := next.LoadState(st); err != nil {
			t.Fatal(err)
		}
	}
	return next
}

func TestUniqueRemember(t *testing.T) {
	titlesOf := func(items []transform.Item) []string {
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = it.Title
		}
		return out
	}
	cases := []struct {
		name string
		cfg  string
		runs [][]string // titles of each run's input
		want [][]string // titles of each run's output
	}{
		{"drops values of earlier runs", `{"remember":10}`,
			[][]string{{"a", "b", "a"}, {"b", "c"}, {"a", "d"}},
			[][]string{{"a", "b"}, {"c"}, {"d"}}},
		{"forgets beyond N", `{"remember":2}`,
			[][]string{{"a", "b"}, {"c"}, {"a", "b", "c"}},
			[][]string{{"a", "b"}, {"c"}, {"a"}}},
		{"a value seen again is refreshed", `{"remember":2}`,
			[][]string{{"a", "b"}, {"a"}, {"c"}, {"a", "b"}},
			[][]string{{"a", "b"}, nil, {"c"}, {"b"}}},
		{"long values are hashed", `{"remember":5}`,
			[][]string{{strings.Repeat("x", 500)}, {strings.Repeat("x", 500), strings.Repeat("x", 499)}},
			[][]string{{strings.Repeat("x", 500)}, {strings.Repeat("x", 499)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := stateful(t, tc.cfg)
			for i, titles := range tc.runs {
				op = reload(t, op, tc.cfg)
				got := titlesOf(run(t, op, titled("r", titles...)))
				if len(got) == 0 && len(tc.want[i]) == 0 {
					continue
				}
				if !slices.Equal(got, tc.want[i]) {
					t.Fatalf("run %d: got %v, want %v", i, got, tc.want[i])
				}
			}
		})
	}

	t.Run("state is bounded and hashed", func(t *testing.T) {
		op := stateful(t, `{"remember":3}`)
		run(t, op, titled("r", "a", "b", "c", "d", strings.Repeat("é", 200)))
		raw, err := op.SaveState()
		if err != nil {
			t.Fatal(err)
		}
		var st uniqueState
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Keys) != 3 || st.Keys[0] != "=c" || st.Keys[1] != "=d" || !strings.HasPrefix(st.Keys[2], "#") || len(st.Keys[2]) != 33 {
			t.Errorf("state keys %q, want c, d and a hash", st.Keys)
		}
	})
	t.Run("nothing to save", func(t *testing.T) {
		op := stateful(t, `{"remember":3}`)
		if raw, err := op.SaveState(); raw != nil || err != nil {
			t.Errorf("SaveState of a fresh operator = %s, %v; want nil, nil", raw, err)
		}
	})
	t.Run("preview keeps no state", func(t *testing.T) {
		op := stateful(t, `{"remember":3}`)
		c := newCtx()
		c.Preview = true
		if _, err := op.Apply(c, [][]transform.Item{titled("r", "a")}); err != nil {
			t.Fatal(err)
		}
		op = reload(t, op, `{"remember":3}`)
		if got := run(t, op, titled("r", "a")); len(got) != 1 {
			t.Errorf("after a preview got %d items, want 1", len(got))
		}
	})
	t.Run("a run whose state is not saved is forgotten", func(t *testing.T) {
		op := stateful(t, `{"remember":3}`)
		run(t, op, titled("r", "a")) // say the pipe failed further down
		run(t, op, titled("r", "b"))
		op = reload(t, op, `{"remember":3}`)
		if got := titlesOf(run(t, op, titled("s", "a", "b"))); !slices.Equal(got, []string{"a"}) {
			t.Errorf("got %v, want [a]", got)
		}
	})
	t.Run("the same operator across saved runs", func(t *testing.T) {
		op := stateful(t, `{"remember":3}`)
		run(t, op, titled("r", "a"))
		if _, err := op.SaveState(); err != nil {
			t.Fatal(err)
		}
		if got := titlesOf(run(t, op, titled("s", "a", "b"))); !slices.Equal(got, []string{"b"}) {
			t.Errorf("got %v, want [b]", got)
		}
	})
	t.Run("smaller memory keeps the most recent", func(t *testing.T) {
		op := stateful(t, `{"remember":5}`)
		run(t, op, titled("r", "a", "b", "c"))
		op = reload(t, op, `{"remember":2}`)
		if got := titlesOf(run(t, op, titled("s", "a", "b", "c"))); !slices.Equal(got, []string{"a"}) {
			t.Errorf("got %v, want [a]", got)
		}
	})
	for _, tc := range []struct{ name, state string }{
		{"garbage", `not json`},
		{"another field", `{"field":"summary","keys":["=a"]}`},
		{"bad keys", `{"field":"title","keys":["a"]}`},
		{"bad hash", `{"field":"title","keys":["#zz"]}`},
		{"wrong shape", `[1,2]`},
	} {
		t.Run("state that does not fit: "+tc.name, func(t *testing.T) {
			op := stateful(t, `{"remember":5}`)
			if err := op.LoadState(json.RawMessage(tc.state)); err != nil {
				t.Fatalf("LoadState: %v", err)
			}
			if got := run(t, op, titled("r", "a")); len(got) != 1 {
				t.Errorf("got %d items, want 1 (fresh start)", len(got))
			}
		})
	}
}
