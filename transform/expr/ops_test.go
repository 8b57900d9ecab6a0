package expr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

func build(t *testing.T, op, cfg string) transform.Operator {
	t.Helper()
	spec, ok := transform.Lookup(op)
	if !ok {
		t.Fatalf("operator %q not registered", op)
	}
	o, err := spec.New(json.RawMessage(cfg))
	if err != nil {
		t.Fatalf("%s %s: %v", op, cfg, err)
	}
	return o
}

func reading(id string, value float64, sensor string, cats ...string) transform.Item {
	return transform.Item{
		ID: id, Title: id, Categories: cats, Published: now.Add(-time.Hour),
		Reading: &storage.Reading{Value: value, Sensor: sensor, Unit: "C", Time: now.Add(-time.Hour)},
	}
}

// dump writes items deeply (readings and coordinates included).
func dump(t *testing.T, items []transform.Item) string {
	t.Helper()
	b, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ids(items []transform.Item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

func TestSpecs(t *testing.T) {
	for _, name := range []string{"where", "compute"} {
		t.Run(name, func(t *testing.T) {
			spec, ok := transform.Lookup(name)
			if !ok {
				t.Fatalf("%q not registered", name)
			}
			if spec.Family != transform.FamilyExpr || spec.Doc == "" || spec.MinInputs != 1 || spec.MaxInputs != 1 {
				t.Fatalf("spec %+v", spec)
			}
			if _, err := spec.New(json.RawMessage(spec.Example)); err != nil {
				t.Fatalf("example %s: %v", spec.Example, err)
			}
		})
	}
}

func TestWhere(t *testing.T) {
	old := reading("old", 30, "lab-2")
	old.Published = now.Add(-48 * time.Hour)
	noReading := transform.Item{ID: "text", Title: "a post", Published: now}
	in := []transform.Item{
		reading("a", 20, "lab-1", "x"),
		reading("b", 26, "lab-1", "urgent"),
		reading("c", 27, "field-3"),
		old,
		noReading,
	}
	tests := []struct {
		name string
		cfg  string
		want []string
	}{
		{"example", `{"expr":"value > 25 && sensor.startsWith(\"lab\")"}`, []string{"b", "old"}},
		{"int literal against a double", `{"expr":"value == 26"}`, []string{"b"}},
		{"missing fields are zero", `{"expr":"value == 0"}`, []string{"text"}},
		{"present", `{"expr":"!present(\"value\")"}`, []string{"text"}},
		{"time with now", `{"expr":"published > now - duration(\"24h\")"}`, []string{"a", "b", "c", "text"}},
		{"list", `{"expr":"\"urgent\" in categories || categories.exists(c, c == \"x\")"}`, []string{"a", "b"}},
		{"regex", `{"expr":"sensor.matches(\"^lab-[0-9]$\")"}`, []string{"a", "b", "old"}},
		{"nothing", `{"expr":"false"}`, []string{}},
		{"on_error drop", `{"expr":"int(title) > 0","on_error":"drop"}`, []string{}},
		{"on_error keep", `{"expr":"100 / int(value) > 4","on_error":"keep"}`, []string{"a", "text"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := build(t, "where", tc.cfg)
			before := dump(t, in)
			out, err := op.Apply(ctx(transform.Limits{}), [][]transform.Item{in})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(out); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
			if after := dump(t, in); after != before {
				t.Fatal("the input items changed")
			}
		})
	}
}

func TestWhereRunErrors(t *testing.T) {
	in := []transform.Item{reading("ok", 5, "s"), reading("zero", 0, "s")}
	long := reading("long", 1, "s")
	long.Title = strings.Repeat("ab ", 2000)
	tests := []struct {
		name string
		cfg  string
		lim  transform.Limits
		in   []transform.Item
		is   error  // wrapped, when not nil
		msg  string // in the message
	}{
		{"fail names the item", `{"expr":"10 / int(value) > 1"}`, transform.Limits{}, in, nil, `item "zero": division by zero`},
		{"explicit fail", `{"expr":"10 / int(value) > 1","on_error":"fail"}`, transform.Limits{}, in, nil, `item "zero"`},
		{"cost overrun fails despite drop", `{"expr":"title.split(\" \").map(x, title.split(\" \").map(y, x)).size() > 0","on_error":"drop"}`,
			transform.Limits{ExprCost: 500}, []transform.Item{long}, transform.ErrCostLimit, `item "long"`},
		{"cost overrun fails despite keep", `{"expr":"title.split(\" \").exists(w, w == \"z\")","on_error":"keep"}`,
			transform.Limits{ExprCost: 100}, []transform.Item{long}, transform.ErrCostLimit, `item "long"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := build(t, "where", tc.cfg)
			_, err := op.Apply(ctx(tc.lim), [][]transform.Item{tc.in})
			var ne *transform.NodeError
			if !errors.As(err, &ne) || ne.Node != "node" || ne.Op != "where" {
				t.Fatalf("Apply error %v (%T), want a NodeError of node %q", err, err, "node")
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Apply error %q, want one containing %q", err, tc.msg)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("Apply error %v does not wrap %v", err, tc.is)
			}
		})
	}
}

func TestDeadline(t *testing.T) {
	c, cancel := context.WithDeadline(context.Background(), now)
	defer cancel()
	tc := transform.NewContext(c, now, "pipe", "node", transform.Limits{})
	in := [][]transform.Item{{reading("a", 1, "s")}}
	for _, cfg := range []struct{ op, cfg string }{
		{"where", `{"expr":"true","on_error":"keep"}`},
		{"compute", `{"set":{"title":"\"x\""},"on_error":"drop"}`},
	} {
		t.Run(cfg.op, func(t *testing.T) {
			_, err := build(t, cfg.op, cfg.cfg).Apply(tc, in)
			if !errors.Is(err, transform.ErrTimeLimit) {
				t.Fatalf("Apply after the deadline = %v, want ErrTimeLimit", err)
			}
		})
	}
}

func TestCompute(t *testing.T) {
	base := reading("a", 25, "lab-1", "x")
	base.Reading.Lat = ptr(10)
	noReading := transform.Item{ID: "text", Title: "a post", Summary: "s", Published: now.Add(-time.Hour)}
	tests := []struct {
		name  string
		cfg   string
		in    transform.Item
		check func(t *testing.T, it transform.Item)
	}{
		{"example", `{"set":{"value":"value * 1.8 + 32","unit":"\"F\"","title":"sensor + \": \" + string(value)"}}`, base,
			func(t *testing.T, it transform.Item) {
				if it.Reading.Value != 77 || it.Reading.Unit != "F" || it.Title != "lab-1: 25" {
					t.Fatalf("got value %v unit %q title %q", it.Reading.Value, it.Reading.Unit, it.Title)
				}
			}},
		{"all see the input", `{"set":{"value":"value + 1","title":"string(value)","unit":"title"}}`, base,
			func(t *testing.T, it transform.Item) {
				if it.Reading.Value != 26 || it.Title != "25" || it.Reading.Unit != "a" {
					t.Fatalf("got value %v title %q unit %q", it.Reading.Value, it.Title, it.Reading.Unit)
				}
			}},
		{"times", `{"set":{"updated":"now","published":"published + duration(\"1h\")"}}`, base,
			func(t *testing.T, it transform.Item) {
				if !it.Updated.Equal(now) || !it.Published.Equal(now) {
					t.Fatalf("got updated %v published %v", it.Updated, it.Published)
				}
			}},
		{"list", `{"set":{"categories":"categories + [\"hot\"]"}}`, base,
			func(t *testing.T, it transform.Item) {
				if !reflect.DeepEqual(it.Categories, []string{"x", "hot"}) {
					t.Fatalf("got categories %q", it.Categories)
				}
			}},
		{"string into a list", `{"set":{"category":"sensor"}}`, base,
			func(t *testing.T, it transform.Item) {
				if !reflect.DeepEqual(it.Categories, []string{"lab-1"}) {
					t.Fatalf("got categories %q", it.Categories)
				}
			}},
		{"number into text", `{"set":{"summary":"value / 2"}}`, base,
			func(t *testing.T, it transform.Item) {
				if it.Summary != "12.5" {
					t.Fatalf("got summary %q", it.Summary)
				}
			}},
		{"null clears", `{"set":{"summary":"null"}}`, noReading,
			func(t *testing.T, it transform.Item) {
				if it.Summary != "" {
					t.Fatalf("got summary %q", it.Summary)
				}
			}},
		{"missing reading", `{"set":{"value":"present(\"value\") ? value : 1","sensor":"\"virtual\""}}`, noReading,
			func(t *testing.T, it transform.Item) {
				if it.Reading == nil || it.Reading.Value != 1 || it.Reading.Sensor != "virtual" || !it.Reading.Time.Equal(it.Published) {
					t.Fatalf("got reading %+v", it.Reading)
				}
			}},
		{"coordinates", `{"set":{"lat":"lat + 1","lon":"-lat"}}`, base,
			func(t *testing.T, it transform.Item) {
				if *it.Reading.Lat != 11 || *it.Reading.Lon != -10 {
					t.Fatalf("got lat %v lon %v", *it.Reading.Lat, *it.Reading.Lon)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := build(t, "compute", tc.cfg)
			in := []transform.Item{tc.in}
			before := dump(t, in)
			out, err := op.Apply(ctx(transform.Limits{}), [][]transform.Item{in})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0].ID != tc.in.ID {
				t.Fatalf("out = %v, want the item %q", ids(out), tc.in.ID)
			}
			tc.check(t, out[0])
			if after := dump(t, in); after != before {
				t.Fatalf("the input changed:\n%s\n%s", before, after)
			}
		})
	}
}

func TestComputeRunErrors(t *testing.T) {
	in := []transform.Item{reading("ok", 5, "s"), reading("far", 95, "s")}
	tests := []struct {
		name string
		cfg  string
		want []string // kept ids, when no error
		msg  string   // in the error, when one
	}{
		{"set error names field and item", `{"set":{"lat":"value"}}`, nil, `item "far": set.lat: lat 95 outside [-90, 90]`},
		{"first failing field in name order", `{"set":{"lon":"value * 10","lat":"value"}}`, nil, `item "far": set.lat:`},
		{"eval error", `{"set":{"title":"string(10 / int(value - 5))"}}`, nil, `item "ok": set.title: division by zero`},
		{"drop", `{"set":{"lat":"value"},"on_error":"drop"}`, []string{"ok"}, ""},
		{"keep", `{"set":{"lat":"value"},"on_error":"keep"}`, []string{"ok", "far"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := build(t, "compute", tc.cfg)
			out, err := op.Apply(ctx(transform.Limits{}), [][]transform.Item{in})
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := ids(out); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("out %v, want %v", got, tc.want)
				}
				if tc.name == "keep" && out[1].Reading.Lat != nil {
					t.Fatal("a kept item was changed")
				}
				return
			}
			var ne *transform.NodeError
			if !errors.As(err, &ne) || ne.Op != "compute" || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Apply error %v, want a NodeError containing %q", err, tc.msg)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	many := map[string]string{}
	for _, f := range transform.Fields {
		if !f.ReadOnly {
			many[f.Name] = "null"
		}
	}
	for i := 0; len(many) <= MaxAssignments; i++ {
		many[fmt.Sprintf("x%d", i)] = "1"
	}
	manyJSON, _ := json.Marshal(map[string]any{"set": many})
	tests := []struct {
		name, op, cfg string
		field         string
		limit         bool
	}{
		{"where without expr", "where", `{}`, "expr", false},
		{"where bad expr", "where", `{"expr":"value >"}`, "expr", false},
		{"where not bool", "where", `{"expr":"value"}`, "expr", false},
		{"where too long", "where", `{"expr":"` + strings.Repeat("1", 3000) + `"}`, "expr", true},
		{"where bad on_error", "where", `{"expr":"true","on_error":"ignore"}`, "on_error", false},
		{"where unknown field", "where", `{"expr":"true","exp":"x"}`, "exp", false},
		{"where wrong type", "where", `{"expr":true}`, "expr", false},
		{"compute empty", "compute", `{"set":{}}`, "set", false},
		{"compute missing", "compute", `{}`, "set", false},
		{"compute bad expression", "compute", `{"set":{"value":"1","title":"sensor +"}}`, "set.title", false},
		{"compute wrong type", "compute", `{"set":{"value":"title"}}`, "set.value", false},
		{"compute time from string", "compute", `{"set":{"published":"\"2024-01-01\""}}`, "set.published", false},
		{"compute unknown field", "compute", `{"set":{"colour":"\"red\""}}`, "set.colour", false},
		{"compute read-only field", "compute", `{"set":{"fetched":"now"}}`, "set.fetched", false},
		{"compute field twice", "compute", `{"set":{"category":"title","categories":"title"}}`, "set.category", false},
		{"compute too many", "compute", string(manyJSON), "set", true},
		{"compute bad on_error", "compute", `{"set":{"title":"\"x\""},"on_error":"skip"}`, "on_error", false},
		{"compute regex", "compute", `{"set":{"title":"string(title.matches(sensor))"}}`, "set.title", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, _ := transform.Lookup(tc.op)
			_, err := spec.New(json.RawMessage(tc.cfg))
			var fe *transform.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("New(%.80s) error %v, want a FieldError for %q", tc.cfg, err, tc.field)
			}
			if got := errors.Is(err, transform.ErrLimit); got != tc.limit {
				t.Fatalf("errors.Is(%v, ErrLimit) = %v, want %v", err, got, tc.limit)
			}
		})
	}
}
