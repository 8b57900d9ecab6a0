package expr

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

var now = time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)

func ptr(f float64) *float64 { return &f }

// sample is a sensor reading item with most fields set.
func sample() transform.Item {
	return transform.Item{
		FeedID:     7,
		ID:         "lab-1/42",
		Title:      "Lab 1 reading",
		Summary:    "<p>warm</p>",
		Link:       "https://example.org/lab-1/42",
		Author:     "lab",
		Categories: []string{"lab", "temperature"},
		Published:  now.Add(-30 * time.Minute),
		Fetched:    now.Add(-29 * time.Minute),
		Reading: &storage.Reading{
			Value: 25.5, Unit: "C", Sensor: "lab-1", Time: now.Add(-31 * time.Minute),
			Lat: ptr(48.5), Lon: ptr(2.25),
		},
	}
}

func ctx(lim transform.Limits) *transform.Context {
	return transform.NewContext(context.Background(), now, "pipe", "node", lim)
}

func TestEval(t *testing.T) {
	bare := transform.Item{ID: "bare", Title: "no reading"}
	tests := []struct {
		name string
		src  string
		want Kind
		item transform.Item
		out  any
	}{
		{"comparison", `value > 25 && sensor.startsWith("lab")`, Bool, sample(), true},
		{"int equals double", `value == 25.5 && feed == 7`, Bool, sample(), true},
		{"int literal on the left", `7 == feed && 100 > value`, Bool, sample(), true},
		{"mixed arithmetic", `value * 2 + 1`, Number, sample(), 52.0},
		{"int arithmetic", `7 / 2`, Number, sample(), 3.0},
		{"widening in several rounds", `(value * 2 + 1) == 52 && 1 + 2 * value - 1 == 51`, Bool, sample(), true},
		{"widening in a comprehension", `[1, 2].map(x, x * value)`, Any, sample(), []string{"25.5", "51"}},
		{"uint with double", `2u * value`, Number, sample(), 51.0},
		{"int minus double", `30 - value`, Number, sample(), 4.5},
		{"conditional mixing int and double", `value > 100 ? 1 : value`, Number, sample(), 25.5},
		{"fahrenheit", `value * 1.8 + 32`, Number, sample(), 77.9},
		{"string", `sensor + ": " + string(value) + " " + unit`, String, sample(), "lab-1: 25.5 C"},
		{"time comparison with now", `published > now - duration("1h") && time < published`, Bool, sample(), true},
		{"time result", `published + duration("30m")`, Time, sample(), now},
		{"now", `now`, Any, sample(), now},
		{"list membership", `"lab" in categories && !("x" in categories)`, Bool, sample(), true},
		{"list comprehension", `categories.exists(c, c.startsWith("temp"))`, Bool, sample(), true},
		{"list result", `categories.map(c, c.upperAscii())`, Any, sample(), []string{"LAB", "TEMPERATURE"}},
		{"list of numbers as text", `[1, 2.5, value]`, Any, sample(), []string{"1", "2.5", "25.5"}},
		{"split with limit", `link.split("/", 4)`, Any, sample(), []string{"https:", "", "example.org", "lab-1/42"}},
		{"replace", `title.replace(" ", "_")`, String, sample(), "Lab_1_reading"},
		{"replace n", `title.replace(" ", "_", 1)`, String, sample(), "Lab_1 reading"},
		{"lowerAscii", `title.lowerAscii()`, Any, sample(), "lab 1 reading"},
		{"math", `math.greatest(value, 30) + math.least([1, 2]) + math.abs(-2) + math.floor(1.5)`, Number, sample(), 34.0},
		{"round", `math.round(value)`, Number, sample(), 26.0},
		{"regex literal", `title.matches("^Lab [0-9]+")`, Bool, sample(), true},
		{"fixed zone", `time.getHours("+02:00")`, Number, sample(), 13.0},
		{"UTC zone", `time.getHours("UTC")`, Number, sample(), 11.0},
		{"hours default UTC", `time.getHours()`, Number, sample(), 11.0},
		{"present", `present("value") && present("lat") && !present("updated") && !present("content")`, Bool, sample(), true},
		{"present category alias", `present("category")`, Bool, sample(), true},
		{"missing reading is zero", `value == 0 && unit == "" && lat == 0.0`, Bool, bare, true},
		{"missing reading not present", `present("value") || present("sensor")`, Bool, bare, false},
		{"missing time is zero", `time < timestamp("1970-01-01T00:00:00Z")`, Bool, bare, true},
		{"missing list is empty", `size(categories) == 0`, Bool, bare, true},
		{"null", `null`, Any, sample(), nil},
		{"bool any", `true`, Any, sample(), true},
		{"dyn number", `dyn(value)`, Number, sample(), 25.5},
		{"format", `"%s is %.1f".format([sensor, value])`, String, sample(), "lab-1 is 25.5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile("expr", tc.src, tc.want)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tc.src, err)
			}
			it := tc.item
			got, err := p.Eval(ctx(transform.Limits{}), &it)
			if err != nil {
				t.Fatalf("Eval(%q): %v", tc.src, err)
			}
			if tm, ok := tc.out.(time.Time); ok {
				g, ok := got.(time.Time)
				if !ok || !g.Equal(tm) {
					t.Fatalf("Eval(%q) = %#v, want %v", tc.src, got, tm)
				}
				return
			}
			if f, ok := tc.out.(float64); ok {
				g, ok := got.(float64)
				if !ok || g-f > 1e-9 || f-g > 1e-9 {
					t.Fatalf("Eval(%q) = %#v, want %v", tc.src, got, f)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.out) {
				t.Fatalf("Eval(%q) = %#v, want %#v", tc.src, got, tc.out)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      Kind
		msg       string
	}{
		{"division by zero", `int(feed) / 0 > 1`, Bool, "division by zero"},
		{"bad int", `int(title) > 1`, Bool, "type conversion error"},
		{"dyn of the wrong kind", `dyn(title)`, Bool, "gives a string, want a bool"},
		{"infinite", `value / 0.0`, Number, "not a finite number"},
		{"list index", `categories[5] == "x"`, Bool, "index"},
		{"map result", `dyn({"a": 1})`, Any, "gives a map"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile("expr", tc.src, tc.want)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tc.src, err)
			}
			it := sample()
			_, err = p.Eval(ctx(transform.Limits{}), &it)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Eval(%q) error = %v, want one containing %q", tc.src, err, tc.msg)
			}
			if IsFatal(err) {
				t.Fatalf("Eval(%q) error %v is fatal", tc.src, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      Kind
		msg       string // in the message
		limit     bool   // wraps transform.ErrLimit
	}{
		{"empty", "  ", Bool, "empty", false},
		{"syntax", `value >`, Bool, "column 8: syntax error: unexpected end of expression", false},
		{"undeclared", `value > limit`, Bool, "column 9: undeclared reference to 'limit'", false},
		{"second line", "value > 1 &&\n  foo", Bool, "line 2, column 3: undeclared reference to 'foo'", false},
		{"not bool", `value + 1`, Bool, "gives a number (double), want a bool", false},
		{"not number", `title`, Number, "gives a string, want a number", false},
		{"not time", `title`, Time, "gives a string, want a timestamp", false},
		{"not string", `value`, String, "want a string", false},
		{"map", `{"a": 1}`, Any, "want any value", false},
		{"duration", `duration("1h")`, Any, "a duration", false},
		{"bad overload", `title * 2`, Any, "no matching overload", false},
		{"modulo of double", `value % 2`, Any, "no matching overload", false},
		{"modulo after widening", `(value + 1) % 2`, Any, "column 13: found no matching overload for '_%_' applied to '(double, int)'", false},
		{"present without quotes", `present(value)`, Bool, `present("value")`, false},
		{"present unknown field", `present("nope")`, Bool, `unknown item field "nope"`, false},
		{"regex variable", `title.matches(sensor)`, Bool, "column 15: matches() takes its pattern as a string literal", false},
		{"regex global form", `matches(title, sensor)`, Bool, "string literal", false},
		{"bad regex", `title.matches("(")`, Bool, "bad regex", false},
		{"huge regex", `title.matches("` + strings.Repeat("a", 600) + `")`, Bool, "regex is 600 bytes", true},
		{"regex program", `title.matches("(ab|cd|ef){1,1000}")`, Bool, "instructions", true},
		{"named zone", `time.getHours("Europe/Paris") > 1`, Bool, `literal "UTC" or offset`, false},
		{"zone variable", `time.getHours(unit) > 1`, Bool, `literal "UTC" or offset`, false},
		{"bad duration literal", `duration("1 hour")`, Any, "duration", false},
		{"deep parentheses", strings.Repeat("(", 40) + "1" + strings.Repeat(")", 40), Any, "nested deeper than 32", true},
		{"long chain", strings.Repeat("value + ", 40) + "1", Any, "nested deeper than 32", true},
		{"deep lists", strings.Repeat("[", 200) + strings.Repeat("]", 200), Any, "nested deeper", true},
		{"comprehension nesting", `[1].all(a, [1].all(b, [1].all(c, [1].all(d, a == d))))`, Bool, "comprehension exceeds nesting limit", true},
		{"too long", `value > 1 || ` + strings.Repeat(" ", transform.DefaultLimits.MaxExpr), Bool, "expression is 2061 bytes, at most 2048", true},
		{"certain cost overrun", costly(50), Bool, "costs at least", true},
		{"hidden variable", `@present_value`, Bool, "syntax error", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile("where.expr", tc.src, tc.want)
			if err == nil {
				t.Fatalf("Compile(%.60q) = %v, want an error", tc.src, p.Source())
			}
			var fe *transform.FieldError
			if !errors.As(err, &fe) || fe.Field != "where.expr" {
				t.Fatalf("Compile(%.60q) error %v (%T) is not a FieldError for where.expr", tc.src, err, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Compile(%.60q) error = %q, want one containing %q", tc.src, err, tc.msg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			if got := errors.Is(err, transform.ErrLimit); got != tc.limit {
				t.Fatalf("errors.Is(%v, ErrLimit) = %v, want %v", err, got, tc.limit)
			}
			if !tc.limit && !errors.Is(err, transform.ErrInvalid) {
				t.Fatalf("errors.Is(%v, ErrInvalid) = false", err)
			}
		})
	}
}

// costly is three nested comprehensions over literal lists of n
// numbers: about n³ iterations whatever the item.
func costly(n int) string {
	nums := make([]string, n)
	for i := range nums {
		nums[i] = fmt.Sprint(i)
	}
	l := "[" + strings.Join(nums, ",") + "]"
	return l + ".map(x, " + l + ".map(y, " + l + ".map(z, x + y + z))).size() > 0"
}

func TestMaxExprBoundary(t *testing.T) {
	max := transform.DefaultLimits.MaxExpr
	ok := "true" + strings.Repeat(" ", max-len("true"))
	if _, err := Compile("expr", ok, Bool); err != nil {
		t.Fatalf("an expression of exactly %d bytes: %v", max, err)
	}
	_, err := Compile("expr", ok+" ", Bool)
	if !errors.Is(err, transform.ErrLimit) {
		t.Fatalf("an expression of %d bytes: %v, want ErrLimit", max+1, err)
	}
}

func TestCostLimit(t *testing.T) {
	long := sample()
	long.Title = strings.Repeat("ab ", 3000)
	long.Content = strings.Repeat("x", 1<<20)
	tests := []struct {
		name string
		src  string
		lim  uint64
	}{
		{"nested comprehension over a split", `title.split(" ").map(x, title.split(" ").map(y, x + y)).size() > 0`, 1000},
		{"nested literal lists", `[1,2,3,4,5,6,7,8,9,10].map(x, [1,2,3,4,5,6,7,8,9,10].map(y, [1,2,3,4,5,6,7,8,9,10].map(z, x*y*z))).size() > 0`, 500},
		{"default limit", `title.split(" ").map(x, title.split(" ").map(y, x + y)).size() > 0`, 0},
		{"scan of a long text", `content.contains("y")`, 0},
		{"replace that would explode", `content.replace("", content).size() > 0`, 1 << 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile("expr", tc.src, Bool)
			if err != nil {
				t.Fatal(err)
			}
			it := long
			_, err = p.Eval(ctx(transform.Limits{ExprCost: tc.lim}), &it)
			if !errors.Is(err, transform.ErrCostLimit) {
				t.Fatalf("Eval = %v, want ErrCostLimit", err)
			}
			if !IsFatal(err) {
				t.Fatalf("IsFatal(%v) = false", err)
			}
		})
	}
	// The same program within a larger budget succeeds: the limit is the
	// run's, not the program's.
	p, err := Compile("expr", tests[1].src, Bool)
	if err != nil {
		t.Fatal(err)
	}
	it := sample()
	if v, err := p.Eval(ctx(transform.Limits{ExprCost: 1 << 20}), &it); err != nil || v != true {
		t.Fatalf("Eval within a large budget = %v, %v", v, err)
	}
}

func TestTimeLimit(t *testing.T) {
	c, cancel := context.WithDeadline(context.Background(), now) // long past
	defer cancel()
	tc := transform.NewContext(c, now, "pipe", "node", transform.Limits{})
	for _, src := range []string{`value > 1`, `title.split("").all(c, c != "z")`} {
		p, err := Compile("expr", src, Bool)
		if err != nil {
			t.Fatal(err)
		}
		it := sample()
		_, err = p.Eval(tc, &it)
		if !errors.Is(err, transform.ErrTimeLimit) || !IsFatal(err) {
			t.Fatalf("Eval(%q) after the deadline = %v, want ErrTimeLimit", src, err)
		}
	}
}

func TestConcurrentEval(t *testing.T) {
	p, err := Compile("expr", `categories.exists(c, c == "lab") && value > 1`, Bool)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ctx(transform.Limits{ExprCost: uint64(1000 + g%12)})
			for range 50 {
				it := sample()
				v, err := p.Eval(c, &it)
				if err != nil || v != true {
					errs <- fmt.Errorf("Eval = %v, %v", v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestEstimatedCost(t *testing.T) {
	p, err := Compile("expr", `title.contains("x")`, Bool)
	if err != nil {
		t.Fatal(err)
	}
	min, max, ok := p.EstimatedCost()
	if !ok || min > max || max < storage.MaxTitleLen/10 {
		t.Fatalf("EstimatedCost = %d, %d, %v", min, max, ok)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Any: "any value", Bool: "a bool", Number: "a number", String: "a string", Time: "a timestamp", Kind(99): "Kind(99)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}

// TestDocExamples compiles and runs the examples of the package
// documentation.
func TestDocExamples(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want Kind
	}{
		{`present("value") && value > 25`, Bool},
		{`present("updated") ? updated : published`, Time},
		{`published > now - duration("24h")`, Bool},
		{`time.getHours() >= 8 && time.getDayOfWeek() != 0`, Bool},
		{`time.getHours("+02:00") >= 8 && time.getMinutes("-05:30") >= 0`, Bool},
		{`time.getFullYear() + time.getMonth() + time.getDayOfMonth() + time.getDate() + time.getDayOfYear() + time.getSeconds() + time.getMilliseconds()`, Number},
		{`categories.exists(c, c == "alert") || categories.exists_one(c, c == "lab") || categories.filter(c, c != "").size() > 0`, Bool},
		{`has({"a": 1}.a)`, Bool},
		{`"%s: %.1f".format([sensor, value])`, String},
		{`title.charAt(0) + string(title.indexOf("a") + title.lastIndexOf("a")) + title.trim() + title.reverse() + strings.quote(title)`, Any},
		{`categories.join(", ") + r"raw\n" + 'text' + title.substring(1) + title.substring(1, 2)`, String},
		{`math.abs(-1) + math.ceil(1.5) + math.floor(1.5) + math.round(1.5) + math.trunc(1.5) + math.sign(-2.0) + math.sqrt(4.0)`, Number},
		{`math.isNaN(value) || math.isInf(value) || !math.isFinite(value) || math.bitAnd(3, 1) == 1`, Bool},
		{`int(value) % 2 == 1 || 7 / 2 == 3 || 3u > 2u`, Bool},
		{`value > 100 ? 0 : value`, Number},
		{`type(value) == double && bytes("x") == b"x" && bool("true") && uint(3) == 3u && double("2.5") == 2.5`, Bool},
	} {
		t.Run(tc.src, func(t *testing.T) {
			p, err := Compile("expr", tc.src, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			it := sample()
			if _, err := p.Eval(ctx(transform.Limits{}), &it); err != nil {
				t.Fatal(err)
			}
		})
	}
}
