package pipes

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/transform"
)

func TestRegexReplace(t *testing.T) {
	cases := []struct {
		name, cfg string
		in        transform.Item
		field     string
		want      string
	}{
		{"all", `{"field":"title","pattern":"(\\d+)C","replace":"$1 °C","all":true}`,
			item("1", title("21C and 23C")), "title", "21 °C and 23 °C"},
		{"first only", `{"field":"title","pattern":"(\\d+)C","replace":"$1 °C"}`,
			item("1", title("21C and 23C")), "title", "21 °C and 23C"},
		{"named group in braces", `{"field":"title","pattern":"(?P<n>\\d+)x","replace":"${n}y","all":true}`,
			item("1", title("1x 2x")), "title", "1y 2y"},
		{"$1x is group 1x, which is empty", `{"field":"title","pattern":"(\\d)","replace":"$1x"}`,
			item("1", title("a5")), "title", "a"},
		{"dollar literal", `{"field":"title","pattern":"EUR","replace":"$$"}`,
			item("1", title("5 EUR")), "title", "5 $"},
		{"lone dollar", `{"field":"title","pattern":"a","replace":"$!"}`,
			item("1", title("cat")), "title", "c$!t"},
		{"no match leaves the item", `{"field":"title","pattern":"z","replace":"y","all":true}`,
			item("1", title("cat")), "title", "cat"},
		{"missing field", `{"field":"summary","pattern":"a","replace":"b"}`,
			item("1", title("cat")), "summary", "<none>"},
		{"reading field", `{"field":"unit","pattern":"^deg","replace":"°"}`,
			item("1", value(1, "degC")), "unit", "°C"},
		{"empty matches", `{"field":"title","pattern":"x*","replace":"-","all":true}`,
			item("1", title("abc")), "title", "-a-b-c-"},
		{"id kept when emptied", `{"field":"id","pattern":".*","replace":""}`,
			item("keep"), "id", "keep"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, build(t, "regex_replace", tc.cfg), []transform.Item{tc.in})
			if got := get(out[0], tc.field); got != tc.want {
				t.Errorf("%s = %q, want %q", tc.field, got, tc.want)
			}
		})
	}
	t.Run("bounded by MaxText on a rune boundary", func(t *testing.T) {
		op := build(t, "regex_replace", `{"field":"title","pattern":"x*","replace":"é","all":true}`)
		c := transform.NewContext(context.Background(), t0, "p", "n", transform.Limits{MaxText: 101})
		out, err := op.Apply(c, [][]transform.Item{{item("1", title(strings.Repeat("a", 1000)))}})
		if err != nil {
			t.Fatal(err)
		}
		if got := out[0].Title; len(got) > 101 || !utf8.ValidString(got) || len(got) < 98 {
			t.Errorf("title of %d bytes (valid UTF-8: %v), want at most 101", len(got), utf8.ValidString(got))
		}
	})
	configErrors(t, "regex_replace", []struct{ name, cfg, field string }{
		{"not a string field", `{"field":"value","pattern":"a","replace":"b"}`, "field"},
		{"a list field", `{"field":"categories","pattern":"a","replace":"b"}`, "field"},
		{"read-only", `{"field":"fetched","pattern":"a","replace":"b"}`, "field"},
		{"unknown field", `{"field":"colour","pattern":"a","replace":"b"}`, "field"},
		{"no pattern", `{"field":"title","replace":"b"}`, "pattern"},
		{"bad pattern", `{"field":"title","pattern":"[a","replace":"b"}`, "pattern"},
		{"huge program", `{"field":"title","pattern":"(a{1,1000}){1,1000}","replace":"b"}`, "pattern"},
		{"replacement too long", `{"field":"title","pattern":"a","replace":"` + strings.Repeat("b", 5000) + `"}`, "replace"},
	})
}

// TestReplaceLikeRegexp checks that replacements read as regexp's Expand.
func TestReplaceLikeRegexp(t *testing.T) {
	cases := []struct{ pattern, replace, in string }{
		{`(\d+)C`, `$1 °C`, "21C 22C"},
		{`(?P<a>x)(?P<b>y)?`, `[$b$a${a}${b}$$$]`, "xyxzx"},
		{`(a)(b)?`, `$2$1$10$0${1}0`, "abab a"},
		{`(?P<n>a)|(?P<n>b)`, `<$n>`, "ab"},
		{`(x)`, `${1`, "x"},
		{`(x)`, `$01 $00 $x1`, "x"},
		{`\b`, `|`, "hi there"},
		{`(é)`, `${1}${é}$é`, "café"},
	}
	for _, tc := range cases {
		t.Run(tc.pattern+" "+tc.replace, func(t *testing.T) {
			checkReplace(t, tc.pattern, tc.replace, tc.in)
		})
	}
}

// checkReplace compares regex_replace with regexp's own replacement.
func checkReplace(t *testing.T, pattern, replace, in string) {
	t.Helper()
	re, err := transform.CompileRegex("pattern", pattern)
	if err != nil {
		return
	}
	for _, all := range []bool{true, false} {
		op := &regexReplaceOp{field: "title", re: re, repl: parseReplacement(re, replace), all: all}
		out, err := op.Apply(newCtx(), [][]transform.Item{{item("1", title(in))}})
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if all {
			want = re.ReplaceAllString(in, replace)
		} else if m := re.FindStringSubmatchIndex(in); m != nil {
			want = in[:m[0]] + string(re.ExpandString(nil, replace, in, m)) + in[m[1]:]
		} else {
			want = in
		}
		if len(want) > transform.DefaultLimits.MaxText || want == "" || in == "" {
			continue // truncated, or an empty title (no field)
		}
		if got := out[0].Title; got != want {
			t.Errorf("all=%v: %q ~ s/%s/%s/ = %q, regexp gives %q", all, in, pattern, replace, got, want)
		}
	}
}

func TestTemplate(t *testing.T) {
	obs := time.Date(2025, 3, 1, 14, 7, 0, 0, time.UTC)
	in := item("1", title("old"), value(21.46, "C"), cats("a", "b"), func(it *transform.Item) { it.Reading.Time = obs })
	cases := []struct {
		name, cfg string
		field     string
		want      string
	}{
		{"the example", `{"field":"title","template":"{sensor}: {value|%.1f} {unit} at {time|15:04}"}`, "title", "lab-1: 21.5 C at 14:07"},
		{"default field title", `{"template":"{unit}"}`, "title", "C"},
		{"plain values", `{"field":"summary","template":"{value} {categories} {time} {title}"}`, "summary", "21.46 a, b 2025-03-01T14:07:00Z old"},
		{"literal braces", `{"template":"{{ {unit} }}"}`, "title", "{ C }"},
		{"missing values are empty", `{"template":"[{author}]"}`, "title", "[]"},
		{"integer verbs", `{"template":"{value|%d} {value|%#x} {value|%05d}"}`, "title", "21 0x15 00021"},
		{"exponent and width", `{"template":"{value|%-8.2e}|{value|%g}"}`, "title", "2.15e+01|21.46"},
		{"named time format", `{"template":"{time|date} {published|kitchen} {time|unix}"}`, "title", "2025-03-01 11:59AM 1740838020"},
		{"spaces around names", `{"template":"{ unit | }"}`, "title", "C"},
		{"percent is literal", `{"template":"100% {unit}"}`, "title", "100% C"},
		{"into a reading field", `{"field":"sensor","template":"{sensor}-x"}`, "sensor", "lab-1-x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, build(t, "template", tc.cfg), []transform.Item{in})
			if got := get(out[0], tc.field); got != tc.want {
				t.Errorf("%s = %q, want %q", tc.field, got, tc.want)
			}
		})
	}
	// Kinds of text: plain values are escaped into HTML fields, HTML
	// fields become plain text in plain-text ones, and plain-text fields
	// hold no markup, however their parts were built.
	author := func(s string) opt { return func(it *transform.Item) { it.Author = s } }
	mixed := item("1", title("a<img"), author(" src=x onerror=alert(1)>"), summary("<p>Fish &amp; Chips &lt;b&gt;</p>"), value(4, "<5"))
	for _, tc := range []struct{ name, cfg, field, want string }{
		{"parts of a tag into a title", `{"template":"{title}{author}"}`, "title", "a"},
		{"plain text into a summary", `{"field":"summary","template":"<p>{title}{author} {unit} {summary}</p>"}`, "summary",
			"<p>a&lt;img src=x onerror=alert(1)&gt; &lt;5 <p>Fish &amp; Chips &lt;b&gt;</p></p>"},
		{"a summary into a title", `{"template":"{summary}: {value} {unit} & more"}`, "title", "Fish & Chips: 4 <5 & more"},
		{"an event handler into an author", `{"field":"author","template":"{value}\" onclick=\"alert(1)"}`, "author", `4" "alert(1)`},
		{"a tag written by the template", `{"template":"<b onclick=x>{value}</b> < 5"}`, "title", "4 < 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, build(t, "template", tc.cfg), []transform.Item{mixed})
			if got := get(out[0], tc.field); got != tc.want {
				t.Errorf("%s = %q, want %q", tc.field, got, tc.want)
			}
		})
	}
	t.Run("bounded by MaxText", func(t *testing.T) {
		op := build(t, "template", `{"template":"{summary}{summary}é{summary}"}`)
		c := transform.NewContext(context.Background(), t0, "p", "n", transform.Limits{MaxText: 4001})
		out, err := op.Apply(c, [][]transform.Item{{item("1", summary(strings.Repeat("é", 1000)))}})
		if err != nil {
			t.Fatal(err)
		}
		if got := out[0].Title; len(got) != 4000 || !utf8.ValidString(got) {
			t.Errorf("title of %d bytes, want 4000 of valid UTF-8", len(got))
		}
	})
	t.Run("an id is not emptied", func(t *testing.T) {
		out := run(t, build(t, "template", `{"field":"id","template":"{author}"}`), []transform.Item{in})
		if out[0].ID != "1" {
			t.Errorf("id %q, want 1", out[0].ID)
		}
	})
	configErrors(t, "template", []struct{ name, cfg, field string }{
		{"no template", `{"field":"title"}`, "template"},
		{"unknown placeholder field", `{"template":"{colour}"}`, "template"},
		{"empty placeholder", `{"template":"a {} b"}`, "template"},
		{"unclosed", `{"template":"a {title"}`, "template"},
		{"nested brace", `{"template":"a {ti{tle}"}`, "template"},
		{"stray closing brace", `{"template":"a } b"}`, "template"},
		{"format on a string field", `{"template":"{title|%s}"}`, "template"},
		{"bad number verb", `{"template":"{value|%s}"}`, "template"},
		{"verb with a star", `{"template":"{value|%*d}"}`, "template"},
		{"width too wide", `{"template":"{value|%100f}"}`, "template"},
		{"two verbs", `{"template":"{value|%f%f}"}`, "template"},
		{"text in the verb", `{"template":"{value|x%f}"}`, "template"},
		{"time layout with no time", `{"template":"{time|hello}"}`, "template"},
		{"too long", `{"template":"` + strings.Repeat("a", 4097) + `"}`, "template"},
		{"too many placeholders", `{"template":"` + strings.Repeat("{unit}", 65) + `"}`, "template"},
		{"target not a string field", `{"field":"value","template":"{unit}"}`, "field"},
		{"target read-only", `{"field":"fetched","template":"{unit}"}`, "field"},
		{"target unknown", `{"field":"colour","template":"{unit}"}`, "field"},
	})
}

func TestDateFormat(t *testing.T) {
	in := item("1", pub(time.Date(2025, 7, 1, 12, 30, 45, 0, time.UTC)), value(1, ""))
	cases := []struct {
		name, cfg string
		field     string
		want      string
	}{
		{"the example", `{"field":"published","format":"2006-01-02 15:04","tz":"Europe/Brussels","to":"title"}`, "title", "2025-07-01 14:30"},
		{"default rfc3339 UTC", `{"to":"summary"}`, "summary", "2025-07-01T12:30:45Z"},
		{"rfc3339 in a zone", `{"format":"rfc3339","tz":"America/New_York","to":"title"}`, "title", "2025-07-01T08:30:45-04:00"},
		{"rfc1123", `{"format":"rfc1123","to":"title"}`, "title", "Tue, 01 Jul 2025 12:30:45 UTC"},
		{"date", `{"format":"date","tz":"Asia/Tokyo","to":"title"}`, "title", "2025-07-01"},
		{"datetime", `{"format":"datetime","to":"title"}`, "title", "2025-07-01 12:30:45"},
		{"unix", `{"format":"unix","to":"title"}`, "title", "1751373045"},
		{"kitchen", `{"format":"kitchen","to":"title"}`, "title", "12:30PM"},
		{"reading time", `{"field":"time","format":"15:04:05","to":"unit"}`, "unit", "12:30:45"},
		{"missing field leaves the item", `{"field":"updated","to":"title"}`, "title", "<none>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, build(t, "date_format", tc.cfg), []transform.Item{in})
			if got := get(out[0], tc.field); got != tc.want {
				t.Errorf("%s = %q, want %q", tc.field, got, tc.want)
			}
		})
	}
	configErrors(t, "date_format", []struct{ name, cfg, field string }{
		{"no target", `{"field":"published"}`, "to"},
		{"not a time field", `{"field":"title","to":"summary"}`, "field"},
		{"unknown field", `{"field":"when","to":"summary"}`, "field"},
		{"target not a string", `{"to":"updated"}`, "to"},
		{"target read-only", `{"to":"feed"}`, "to"},
		{"layout without a time", `{"format":"hello","to":"title"}`, "format"},
		{"layout too long", `{"format":"` + strings.Repeat("2006", 17) + `","to":"title"}`, "format"},
		{"unknown zone", `{"tz":"Mars/Olympus","to":"title"}`, "tz"},
		{"zone name too long", `{"tz":"` + strings.Repeat("A", 65) + `","to":"title"}`, "tz"},
		{"local zone", `{"tz":"Local","to":"title"}`, "tz"},
		{"zone path", `{"tz":"../../etc/passwd","to":"title"}`, "tz"},
	})
}
