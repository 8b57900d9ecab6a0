package parser

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	ext "github.com/mmcdole/gofeed/extensions"

	"github.com/slogfeed/slogfeed/storage"
)

func TestParseNumber(t *testing.T) {
	for s, want := range map[string]float64{
		"21.3": 21.3, "-4": -4, "+4.5": 4.5, " 7 ": 7, "1e3": 1000, "-4.5e-1": -0.45, ".5": 0.5, "5.": 5,
	} {
		if got, ok := parseNumber(s); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "NaN", "Inf", "-Inf", "infinity", "0x1p3", "1_000", "1e999", "-1e999", "1,5", "e5", "--1", "1-", "12 C", strings.Repeat("1", 100)} {
		if got, ok := parseNumber(s); ok {
			t.Errorf("%q: accepted as %v", s, got)
		}
	}
}

func TestParseLocalNumber(t *testing.T) {
	for s, want := range map[string]float64{
		"21,5": 21.5, "21.5": 21.5, "1.234,5": 1234.5, "1,234.5": 1234.5, "1,234,567": 1234567,
		"−3,2": -3.2, "1 234,5": 1234.5, "12": 12,
	} {
		if got, ok := parseLocalNumber(s); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", s, got, ok, want)
		}
	}
	for _, s := range []string{",", "abc", "1,2,3.4.5", "NaN"} {
		if got, ok := parseLocalNumber(s); ok {
			t.Errorf("%q: accepted as %v", s, got)
		}
	}
}

func TestApplyRule(t *testing.T) {
	for _, c := range []struct {
		name           string
		rule           storage.ExtractRule
		title, summary string
		want           float64
		ok             bool
		err            error
	}{
		{"title", storage.ExtractRule{Regex: `Temp (\S+) C`}, "Temp 21,5 C", "", 21.5, true, nil},
		{"summary HTML", storage.ExtractRule{Field: "summary", Regex: `level: (\d+(?:\.\d+)?)`}, "x", "<p>level: <b>3.25</b></p>", 3.25, true, nil},
		{"first group of the first match", storage.ExtractRule{Regex: `(\d+)`}, "12 then 34", "", 12, true, nil},
		{"no match", storage.ExtractRule{Regex: `(\d+)`}, "none", "", 0, false, nil},
		{"not a number", storage.ExtractRule{Regex: `v=(\w+)`}, "v=high", "", 0, false, nil},
		{"infinite", storage.ExtractRule{Regex: `v=(\S+)`}, "v=1e999", "", 0, false, nil},
		{"optional group unmatched", storage.ExtractRule{Regex: `a(\d+)?`}, "a", "", 0, false, nil},
		{"no group", storage.ExtractRule{Regex: `\d+`}, "1", "", 0, false, ErrExtractRule},
		{"bad regex", storage.ExtractRule{Regex: `(\d+`}, "1", "", 0, false, ErrExtractRule},
		{"backreference (not RE2)", storage.ExtractRule{Regex: `(\d)\1`}, "11", "", 0, false, ErrExtractRule},
		{"too long", storage.ExtractRule{Regex: "(" + strings.Repeat("a", MaxRuleRegex) + ")"}, "", "", 0, false, ErrExtractRule},
		{"empty", storage.ExtractRule{}, "1", "", 0, false, ErrExtractRule},
		{"bad field", storage.ExtractRule{Field: "content", Regex: `(\d)`}, "1", "", 0, false, ErrExtractRule},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, ok, err := ApplyRule(c.rule, c.title, c.summary)
			if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
			if v != c.want || ok != c.ok {
				t.Errorf("got %v %v, want %v %v", v, ok, c.want, c.ok)
			}
			if (c.err == nil) != (ValidateRule(c.rule) == nil) {
				t.Errorf("ValidateRule disagrees")
			}
		})
	}
}

// Compiled rules are cached, and the cache stays bounded.
func TestRuleCache(t *testing.T) {
	r1, _ := compileRule(storage.ExtractRule{Regex: `cache (\d)`})
	r2, _ := compileRule(storage.ExtractRule{Regex: `cache (\d)`})
	if r1 == nil || r1 != r2 {
		t.Errorf("not cached")
	}
	for i := range 3 * ruleCacheSize {
		compileRule(storage.ExtractRule{Regex: `n` + strings.Repeat("x", i%50) + `(\d)` + strings.Repeat("y", i/50)})
	}
	ruleCache.Lock()
	n := len(ruleCache.m)
	ruleCache.Unlock()
	if n > ruleCacheSize {
		t.Errorf("cache holds %d rules", n)
	}
}

func TestReadingFromExt(t *testing.T) {
	el := func(attrs map[string]string, value string) ext.Extensions {
		return ext.Extensions{"k": {"reading": {{Name: "reading", Attrs: attrs, Value: value}}}}
	}
	keys := []string{"k"}
	if r := readingFromExt(el(map[string]string{"value": "1.5"}, ""), keys); r == nil || r.Value != 1.5 {
		t.Errorf("%+v", r)
	}
	if r := readingFromExt(el(map[string]string{"unit": "C"}, "2.5"), keys); r == nil || r.Value != 2.5 || r.Unit != "C" {
		t.Errorf("element text: %+v", r)
	}
	if r := readingFromExt(el(map[string]string{"value": "x"}, ""), keys); r != nil {
		t.Errorf("bad value: %+v", r)
	}
	if r := readingFromExt(el(map[string]string{"value": "1", "lat": "95", "lon": "1"}, ""), keys); r == nil || r.Lat != nil {
		t.Errorf("out-of-range position kept: %+v", r)
	}
	if r := readingFromExt(el(map[string]string{"value": "1", "time": "1980-01-01T00:00:00Z"}, ""), keys); r == nil || !r.Time.IsZero() {
		t.Errorf("implausible time kept: %+v", r)
	}
	if r := readingFromExt(el(map[string]string{"value": "1", "unit": "<b>°C\x00</b>"}, ""), keys); r == nil || r.Unit != "°C" {
		t.Errorf("unit not cleaned: %+v", r)
	}
	if r := readingFromExt(el(map[string]string{"value": "1"}, ""), []string{"other"}); r != nil {
		t.Errorf("other namespace read: %+v", r)
	}
}

func TestReadingFromJSON(t *testing.T) {
	for in, want := range map[string]float64{
		`{"value": 1.5}`: 1.5, `{"value": "2,5"}`: -1, `{"value": "2.5"}`: 2.5, `{"value": null}`: -1,
		`{"value": 1e999}`: -1, `{}`: -1, `null`: -1, `[1]`: -1, `{"value": true}`: -1, `"x"`: -1,
	} {
		r := readingFromJSON(json.RawMessage(in))
		if want < 0 && r != nil || want >= 0 && (r == nil || r.Value != want) {
			t.Errorf("%s: %+v", in, r)
		}
	}
}
