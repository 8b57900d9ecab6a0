package pipes

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// operators are the operators of this package.
var operators = []string{
	"union", "merge", "filter", "sort", "unique", "truncate", "tail", "count",
	"reverse", "rename", "set", "regex_replace", "template", "date_format", "split",
}

func TestRegistered(t *testing.T) {
	for _, name := range operators {
		t.Run(name, func(t *testing.T) {
			spec, ok := transform.Lookup(name)
			if !ok {
				t.Fatal("not registered")
			}
			if spec.Family != transform.FamilyPipes {
				t.Errorf("family %q, want pipes", spec.Family)
			}
			if spec.Doc == "" || spec.Config == nil {
				t.Error("no doc or config")
			}
			if reflect.TypeOf(spec.Config).Kind() != reflect.Struct {
				t.Errorf("config is a %T, want a struct value", spec.Config)
			}
			if spec.MinInputs != 1 {
				t.Errorf("MinInputs %d, want 1", spec.MinInputs)
			}
			if multi := name == "union" || name == "merge"; multi != (spec.MaxInputs < 0) || (!multi && spec.MaxInputs != 1) {
				t.Errorf("MaxInputs %d", spec.MaxInputs)
			}
			if !json.Valid([]byte(spec.Example)) {
				t.Fatalf("example %s is not JSON", spec.Example)
			}
			op, err := spec.New(json.RawMessage(spec.Example))
			if err != nil {
				t.Fatalf("example %s: %v", spec.Example, err)
			}
			if _, err := op.Apply(newCtx(), [][]transform.Item{richItems()}); err != nil {
				t.Errorf("example run: %v", err)
			}
		})
	}
}

// TestUnknownFields checks that every configuration is decoded strictly.
func TestUnknownFields(t *testing.T) {
	for _, name := range operators {
		t.Run(name, func(t *testing.T) {
			spec, _ := transform.Lookup(name)
			var cfg map[string]any
			if err := json.Unmarshal([]byte(spec.Example), &cfg); err != nil {
				t.Fatal(err)
			}
			cfg["no_such_option"] = 1
			raw, _ := json.Marshal(cfg)
			_, err := spec.New(raw)
			wantFieldError(t, err, "no_such_option")
		})
	}
	t.Run("trailing data", func(t *testing.T) {
		_, err := newOp("truncate", `{"count":1} {}`)
		wantFieldError(t, err, "")
	})
	t.Run("not an object", func(t *testing.T) {
		_, err := newOp("sort", `[1]`)
		wantFieldError(t, err, "")
	})
}

// richItems are items with every kind of field set, sharing nothing.
func richItems() []transform.Item {
	la, lo := 50.85, 4.35
	return []transform.Item{
		{
			FeedID: 7, ID: "r1", Seq: 3, GUID: "urn:r1", Link: "https://example.org/r1",
			Title: "Lab 21C", Summary: "t=21.5; h=40", Content: "<p>21C</p>", Author: "lab",
			Categories: []string{"Temperature", "Lab"},
			Enclosures: []storage.Enclosure{{URL: "https://example.org/r1.csv", Type: "text/csv", Length: 10}},
			Published:  t0.Add(-time.Hour), Updated: t0.Add(-50 * time.Minute), Fetched: t0,
			Reading: &storage.Reading{Value: 21.5, Unit: "C", Sensor: "lab-1", Time: t0.Add(-time.Hour), Lat: &la, Lon: &lo},
		},
		item("r2", title("Lab 19C"), summary("a;b"), value(19, "C"), cats("Temperature"), lat(10)),
		item("r3", title("news"), cats("x", "y", "z")),
		item("r4", title("Lab 21C"), value(21.5, "C")),
	}
}

// deepCopy returns a copy of items sharing nothing with them.
func deepCopy(items []transform.Item) []transform.Item {
	out := make([]transform.Item, len(items))
	for i, it := range items {
		out[i] = transform.Clone(it)
	}
	return out
}

// TestInputsNotMutated runs every operator over items and checks that
// the items are as they were.
func TestInputsNotMutated(t *testing.T) {
	configs := map[string][]string{
		"rename": {
			`{"mappings":[{"from":"value","to":"title"},{"from":"categories","to":"summary"},{"from":"lat","to":"lon"}]}`,
			`{"mappings":[{"from":"enclosure","to":"link"},{"from":"link","to":"enclosure","copy":true},{"from":"title","to":"categories"}]}`,
		},
		"set": {
			`{"field":"categories","value":["a"]}`, `{"field":"lat","value":null}`,
			`{"field":"enclosure","value":"https://example.org/x"}`, `{"field":"value","value":1}`,
		},
		"split": {
			`{"field":"categories"}`, `{"field":"summary","pattern":"\\d+","to":"value"}`,
			`{"field":"summary","separator":";","to":"categories"}`,
		},
		"unique":        {`{"field":"title","remember":3}`},
		"regex_replace": {`{"field":"enclosure","pattern":"csv","replace":"txt","all":true}`, `{"field":"unit","pattern":"C","replace":"K"}`},
		"template":      {`{"field":"enclosure","template":"{link}/{lat|%.2f}"}`},
		"date_format":   {`{"field":"time","format":"unix","to":"sensor"}`},
		"filter":        {`{"mode":"block","match":"any","rules":[{"field":"categories","op":"in","value":["x"]},{"field":"value","op":"lt","value":20}]}`},
		"sort":          {`{"by":[{"field":"categories","desc":true},{"field":"lat"}]}`},
	}
	for _, name := range operators {
		spec, _ := transform.Lookup(name)
		for _, cfg := range append([]string{spec.Example}, configs[name]...) {
			t.Run(name+" "+cfg, func(t *testing.T) {
				op := build(t, name, cfg)
				a, b := richItems(), richItems()[1:]
				wantA, wantB := deepCopy(a), deepCopy(b)
				in := [][]transform.Item{a}
				if spec.MaxInputs < 0 {
					in = append(in, b)
				}
				out, err := op.Apply(newCtx(), in)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, wantA) || !reflect.DeepEqual(b, wantB) {
					t.Errorf("inputs changed:\n got %+v\nwant %+v", a, wantA)
				}
				// Writing into the output must not reach the input either.
				for i := range out {
					out[i].Title = "changed"
				}
				if !reflect.DeepEqual(a, wantA) {
					t.Error("output items alias the input slice")
				}
			})
		}
	}
}

// TestDocExamples builds every example node of the package documentation.
func TestDocExamples(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var code strings.Builder
	for _, line := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(line, "//\t"); ok && strings.HasPrefix(strings.TrimSpace(rest), "{") || ok && strings.HasPrefix(rest, "    ") {
			code.WriteString(rest + "\n")
		}
	}
	dec := json.NewDecoder(strings.NewReader(code.String()))
	seen := map[string]bool{}
	for dec.More() {
		var n transform.Node
		if err := dec.Decode(&n); err != nil {
			t.Fatalf("example node: %v", err)
		}
		t.Run(n.ID, func(t *testing.T) {
			op := build(t, n.Op, string(n.Config))
			if _, err := op.Apply(newCtx(), [][]transform.Item{richItems()}); err != nil {
				t.Errorf("run: %v", err)
			}
		})
		seen[n.Op] = true
	}
	for _, name := range operators {
		if !seen[name] {
			t.Errorf("doc.go has no example node for %s", name)
		}
	}
}
