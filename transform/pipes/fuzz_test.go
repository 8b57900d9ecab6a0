package pipes

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// fuzzItems are the items a fuzzed operator runs on.
func fuzzItems(title string, v float64, unix int64) []transform.Item {
	it := item("f", summary(title), cats(title, "x"))
	it.Title = title
	it.Published = time.Unix(unix%(1<<35), 0).UTC()
	if !math.IsNaN(v) && !math.IsInf(v, 0) {
		value(v, title)(&it)
	}
	return append(richItems(), it, item("bare"))
}

// wantConfigError checks that a configuration error is a *FieldError.
func wantConfigError(t *testing.T, err error) {
	t.Helper()
	var fe *transform.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("configuration error %v (%T) is not a *FieldError", err, err)
	}
}

func FuzzFilterConfig(f *testing.F) {
	f.Add(`{"rules":[{"field":"value","op":"gt","value":25}]}`, "Lab 21C", 21.5, int64(1740830000))
	f.Add(`{"mode":"block","match":"any","rules":[{"field":"title","op":"matches","value":"(?i)lab"},{"field":"published","op":"ge","value":"-1h"}]}`, "x", 0.0, int64(0))
	f.Add(`{"rules":[{"field":"categories","op":"not_in","value":["x",1,true]}]}`, "", -3.0, int64(-5))
	f.Add(`{"rules":[{"field":"time","op":"in","value":["now","+5m",12]},{"field":"lat","op":"missing"}]}`, "é", 1e300, int64(99))
	f.Add(`{"rules":[{"field":"summary","op":"contains","value":3.5}]}`, "3.5", 3.5, int64(1))
	f.Add(`{"rules":null}`, "", 0.0, int64(0))
	f.Add(`{"rules":[{"field":"value","op":"eq","value":1e400}]}`, "", 0.0, int64(0))
	f.Fuzz(func(t *testing.T, cfg, title string, v float64, unix int64) {
		op, err := newOp("filter", cfg)
		if err != nil {
			wantConfigError(t, err)
			return
		}
		in := fuzzItems(title, v, unix)
		before := deepCopy(in)
		out, err := op.Apply(newCtx(), [][]transform.Item{in})
		if err != nil {
			t.Fatalf("run of a valid filter %s: %v", cfg, err)
		}
		if len(out) > len(in) {
			t.Fatalf("filter made items: %d from %d", len(out), len(in))
		}
		// A block filter with the same rules keeps exactly the others.
		var c FilterConfig
		if json.Unmarshal([]byte(cfg), &c) == nil {
			if c.Mode == "" || c.Mode == "permit" {
				c.Mode = "block"
			} else {
				c.Mode = "permit"
			}
			raw, _ := json.Marshal(c)
			if inv, err := newOp("filter", string(raw)); err == nil {
				rest, err := inv.Apply(newCtx(), [][]transform.Item{in})
				if err != nil {
					t.Fatal(err)
				}
				if len(rest)+len(out) != len(in) {
					t.Fatalf("permit kept %d and block %d of %d items", len(out), len(rest), len(in))
				}
			}
		}
		for i := range in {
			if !itemsEqual(in[i], before[i]) {
				t.Fatalf("input %d changed", i)
			}
		}
	})
}

// itemsEqual compares two items by their JSON form.
func itemsEqual(a, b transform.Item) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func FuzzTemplate(f *testing.F) {
	f.Add("{sensor}: {value|%.1f} {unit} at {time|15:04}", "Lab", 21.46)
	f.Add("{{literal}} {title} }} {{", "x}y{z", 0.0)
	f.Add("{value|%+08.3e}{value|%x}{value|% d}{feed|%g}", "", -1e19)
	f.Add("{published|Monday, 02-Jan-06 15:04:05 MST}{updated|unix}", "é", 1.0)
	f.Add("{categories}{summary}{summary}{summary}", "abcdefghij", 2.0)
	f.Add("{value|%}", "", 0.0)
	f.Add("{title|}", "", 0.0)
	f.Fuzz(func(t *testing.T, tmpl, title string, v float64) {
		raw, _ := json.Marshal(TemplateConfig{Field: "summary", Template: tmpl})
		op, err := newOp("template", string(raw))
		if err != nil {
			wantConfigError(t, err)
			return
		}
		const limit = 50
		c := transform.NewContext(context.Background(), t0, "p", "n", transform.Limits{MaxText: limit})
		out, err := op.Apply(c, [][]transform.Item{fuzzItems(title, v, 1740830000)})
		if err != nil {
			t.Fatalf("run of a valid template %q: %v", tmpl, err)
		}
		for _, it := range out {
			if len(it.Summary) > limit {
				t.Fatalf("template %q made %d bytes, limit %d", tmpl, len(it.Summary), limit)
			}
		}
	})
}

// FuzzRegexReplace checks regex_replace against regexp's own replacement.
func FuzzRegexReplace(f *testing.F) {
	f.Add(`(\d+)C`, `$1 °C`, "21C 22C")
	f.Add(`(?P<a>x)(?P<b>y)?`, `[$b$a${a}${b}$$$]`, "xyxzx")
	f.Add(`(a)(b)?`, `$2$1$10$0${1}0${`, "abab a")
	f.Add(`\b`, `$`, "hi there")
	f.Fuzz(func(t *testing.T, pattern, replace, in string) {
		if len(replace) > maxString {
			return
		}
		checkReplace(t, pattern, replace, in)
	})
}

// FuzzConfig builds every operator from arbitrary configurations and runs
// the ones that build: no panic, errors only as *FieldError.
func FuzzConfig(f *testing.F) {
	for i, name := range operators {
		spec, _ := transform.Lookup(name)
		f.Add(uint8(i), spec.Example, "Lab 21C; 22C", 21.5)
	}
	f.Add(uint8(14), `{"field":"summary","pattern":"\\d","to":"lat"}`, "1 2 3 99", 0.0)
	f.Add(uint8(13), `{"field":"time","format":"Jan _2 .000","tz":"Pacific/Chatham","to":"unit"}`, "", -1.0)
	f.Add(uint8(9), `{"mappings":[{"from":"published","to":"value","copy":true},{"from":"value","to":"updated"}]}`, "", 1e12)
	f.Fuzz(func(t *testing.T, which uint8, cfg, title string, v float64) {
		name := operators[int(which)%len(operators)]
		op, err := newOp(name, cfg)
		if err != nil {
			wantConfigError(t, err)
			return
		}
		in := fuzzItems(title, v, 1740830000)
		before := deepCopy(in)
		c := transform.NewContext(context.Background(), t0, "p", "n", transform.Limits{MaxText: 100, MaxItems: 2000})
		if _, err := op.Apply(c, [][]transform.Item{in, in[:2]}); err != nil && !errors.Is(err, transform.ErrLimit) {
			t.Fatalf("%s %s: %v", name, cfg, err)
		}
		for i := range in {
			if !itemsEqual(in[i], before[i]) {
				t.Fatalf("%s %s changed input %d", name, cfg, i)
			}
		}
	})
}
