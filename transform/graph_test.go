package transform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// Test operators: registered once for this package's tests.
type upperOp struct{ field string }

func (u upperOp) Apply(c *Context, in [][]Item) ([]Item, error) {
	var out []Item
	for _, b := range in {
		for _, it := range b {
			it = Clone(it)
			v, _ := Get(&it, u.field)
			if err := Set(&it, u.field, strings.ToUpper(AsString(v))); err != nil {
				return nil, err
			}
			out = append(out, it)
		}
	}
	return out, nil
}

type concatOp struct{}

func (concatOp) Apply(c *Context, in [][]Item) ([]Item, error) {
	var out []Item
	for _, b := range in {
		out = append(out, b...)
	}
	return out, nil
}

type panicOp struct{}

func (panicOp) Apply(*Context, [][]Item) ([]Item, error) { panic("boom") }

type slowOp struct{}

func (slowOp) Apply(c *Context, in [][]Item) ([]Item, error) {
	for {
		if err := c.Err(); err != nil {
			return nil, err
		}
	}
}

// counterOp counts the items it saw across runs.
type counterOp struct{ N int }

func (o *counterOp) Apply(c *Context, in [][]Item) ([]Item, error) {
	for _, b := range in {
		o.N += len(b)
	}
	it := Item{ID: c.DeriveID(fmt.Sprint(o.N)), Reading: &storage.Reading{Value: float64(o.N)}}
	return []Item{it}, nil
}
func (o *counterOp) SaveState() (json.RawMessage, error) { return json.Marshal(o.N) }
func (o *counterOp) LoadState(b json.RawMessage) error   { return json.Unmarshal(b, &o.N) }

type upperConfig struct {
	Field string `json:"field" doc:"the field to upper-case" required:"true"`
}

func init() {
	Register(Spec{Name: "t_upper", Family: FamilyPlugin, MinInputs: 1, MaxInputs: 1, Config: upperConfig{}, Example: `{"field":"title"}`,
		New: func(raw json.RawMessage) (Operator, error) {
			cfg, err := Decode[upperConfig](raw)
			if err != nil {
				return nil, err
			}
			if err := CheckField("field", cfg.Field, true); err != nil {
				return nil, err
			}
			return upperOp{cfg.Field}, nil
		}})
	Register(Spec{Name: "t_concat", Family: FamilyPlugin, MinInputs: 1, MaxInputs: -1, Config: struct{}{},
		New: func(json.RawMessage) (Operator, error) { return concatOp{}, nil }})
	Register(Spec{Name: "t_two", Family: FamilyPlugin, MinInputs: 2, MaxInputs: 2, Config: struct{}{},
		New: func(json.RawMessage) (Operator, error) { return concatOp{}, nil }})
	Register(Spec{Name: "t_panic", Family: FamilyPlugin, MinInputs: 1, MaxInputs: 1, Config: struct{}{},
		New: func(json.RawMessage) (Operator, error) { return panicOp{}, nil }})
	Register(Spec{Name: "t_slow", Family: FamilyPlugin, MinInputs: 1, MaxInputs: 1, Config: struct{}{},
		New: func(json.RawMessage) (Operator, error) { return slowOp{}, nil }})
	Register(Spec{Name: "t_counter", Family: FamilyPlugin, MinInputs: 1, MaxInputs: -1, Config: struct{}{},
		New: func(json.RawMessage) (Operator, error) { return &counterOp{}, nil }})
}

func node(id, op, cfg string) Node {
	n := Node{ID: id, Op: op}
	if cfg != "" {
		n.Config = json.RawMessage(cfg)
	}
	return n
}

func chain(nodes ...Node) Pipe {
	p := Pipe{Nodes: nodes, Output: Output{Slug: "out"}}
	for i := 1; i < len(nodes); i++ {
		p.Edges = append(p.Edges, Edge{From: nodes[i-1].ID, To: nodes[i].ID})
	}
	return p
}

func TestCompileErrors(t *testing.T) {
	src := node("a", "source", `{"feed":"sensor/lab-1"}`)
	src2 := node("b", "source", `{"feed":"sensor/lab-2"}`)
	tests := []struct {
		name      string
		pipe      Pipe
		node      string // the node the first detail names ("" for the pipe)
		field     string // and its field
		wantLimit bool
	}{
		{"no nodes", Pipe{Output: Output{Slug: "x"}}, "", "nodes", false},
		{"unknown op", chain(src, node("u", "nope", "")), "u", "op", false},
		{"unknown config field", chain(src, node("u", "t_upper", `{"field":"title","colour":1}`)), "u", "colour", false},
		{"wrong config type", chain(src, node("u", "t_upper", `{"field":3}`)), "u", "field", false},
		{"config not an object", chain(src, node("u", "t_upper", `[1]`)), "u", "config", false},
		{"unknown item field", chain(src, node("u", "t_upper", `{"field":"colour"}`)), "u", "field", false},
		{"read-only item field", chain(src, node("u", "t_upper", `{"field":"fetched"}`)), "u", "field", false},
		{"bad source ref", chain(node("a", "source", `{"feed":"bogus"}`)), "a", "feed", false},
		{"bad backlog", chain(node("a", "source", `{"feed":"sensor/x","backlog":-1}`)), "a", "backlog", false},
		{"bad node id", chain(node("a b", "source", `{"feed":"sensor/x"}`)), "", "nodes[0].id", false},
		{"duplicate node id", Pipe{Nodes: []Node{src, node("a", "t_concat", "")}, Output: Output{Slug: "x", From: "a"}}, "", "nodes[1].id", false},
		{"dangling edge", Pipe{Nodes: []Node{src}, Edges: []Edge{{From: "a", To: "zz"}}, Output: Output{Slug: "x"}}, "", "edges[0].to", false},
		{"self edge", Pipe{Nodes: []Node{src, node("u", "t_concat", "")}, Edges: []Edge{{From: "a", To: "u"}, {From: "u", To: "u"}}, Output: Output{Slug: "x", From: "u"}}, "", "edges[1]", false},
		{"duplicate edge", Pipe{Nodes: []Node{src, node("u", "t_concat", "")}, Edges: []Edge{{From: "a", To: "u"}, {From: "a", To: "u"}}, Output: Output{Slug: "x"}}, "", "edges[1]", false},
		{"cycle", Pipe{Nodes: []Node{src, node("u", "t_concat", ""), node("v", "t_concat", "")},
			Edges: []Edge{{From: "a", To: "u"}, {From: "u", To: "v"}, {From: "v", To: "u"}}, Output: Output{Slug: "x", From: "v"}}, "", "edges", false},
		{"edge into source", Pipe{Nodes: []Node{src, src2}, Edges: []Edge{{From: "a", To: "b"}}, Output: Output{Slug: "x"}}, "b", "", false},
		{"too few inputs", chain(src, node("two", "t_two", "")), "two", "", false},
		{"no input", Pipe{Nodes: []Node{src, node("u", "t_concat", "")}, Output: Output{Slug: "x", From: "u"}}, "u", "", false},
		{"no source", Pipe{Nodes: []Node{node("u", "t_concat", "")}, Output: Output{Slug: "x"}}, "u", "", false},
		{"two sinks", Pipe{Nodes: []Node{src, src2}, Output: Output{Slug: "x"}}, "", "output.from", false},
		{"unknown output node", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x", From: "q"}}, "", "output.from", false},
		{"missing slug", Pipe{Nodes: []Node{src}}, "", "output.slug", false},
		{"bad slug", Pipe{Nodes: []Node{src}, Output: Output{Slug: "Bad Slug"}}, "", "output.slug", false},
		{"bad format", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x", Formats: []string{"rss", "csv"}}}, "", "output.formats[1]", false},
		{"bad retention", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x", Retention: storage.Retention{MaxItems: -3}}}, "", "output.retention.max_items", false},
		{"unknown trigger", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x"}, Trigger: Trigger{On: "sometimes"}}, "", "trigger.on", false},
		{"bad cron", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x"}, Trigger: Trigger{On: "cron", Cron: "every tuesday"}}, "", "trigger.cron", false},
		{"cron that never fires", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x"}, Trigger: Trigger{On: "cron", Cron: "0 0 31 2 *"}}, "", "trigger.cron", false},
		{"cron zone without expression", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x"}, Trigger: Trigger{On: "cron", Cron: "TZ=Europe/Paris"}}, "", "trigger.cron", false},
		{"cron long zone without expression", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x"}, Trigger: Trigger{On: "cron", Cron: "CRON_TZ=UTC"}}, "", "trigger.cron", false},
		{"mdpt m too big", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x"}, Trigger: Trigger{On: "mdpt", M: 2}}, "", "trigger.m", false},
		{"m without mdpt", Pipe{Nodes: []Node{src}, Output: Output{Slug: "x"}, Trigger: Trigger{M: 2}}, "", "trigger.m", false},
		{"loop with unknown step", chain(src, node("l", "loop", `{"steps":[{"op":"nope"}]}`)), "l", "steps[0].op", false},
		{"loop with stateful step", chain(src, node("l", "loop", `{"steps":[{"op":"t_counter"}]}`)), "l", "steps[0].op", false},
		{"loop with bad step config", chain(src, node("l", "loop", `{"steps":[{"op":"t_upper","config":{"field":"nope"}}]}`)), "l", "steps[0].config.field", false},
		{"loop too deep", chain(src, node("l", "loop", `{"steps":[{"op":"loop","config":{"steps":[{"op":"loop","config":{"steps":[{"op":"loop","config":{"steps":[{"op":"t_concat"}]}}]}}]}}]}`)), "l", "", true},
		{"too many nodes", func() Pipe {
			p := Pipe{Output: Output{Slug: "x"}}
			for i := range 100 {
				p.Nodes = append(p.Nodes, node(fmt.Sprint("n", i), "source", `{"feed":"sensor/x"}`))
			}
			return p
		}(), "", "nodes", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.pipe, Limits{})
			if err == nil {
				t.Fatal("Compile succeeded")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if tt.wantLimit != errors.Is(err, ErrLimit) {
				t.Errorf("errors.Is(ErrLimit) = %v, want %v: %v", !tt.wantLimit, tt.wantLimit, err)
			}
			ds := Details(err)
			if len(ds) == 0 {
				t.Fatalf("no details for %v", err)
			}
			found := false
			for _, d := range ds {
				if d.Node == tt.node && (tt.field == "" || strings.HasPrefix(d.Field, tt.field)) {
					found = true
				}
			}
			if !found {
				t.Errorf("no detail names node %q field %q: %+v", tt.node, tt.field, ds)
			}
		})
	}
}

func TestCompileReportsEveryProblem(t *testing.T) {
	p := Pipe{
		Nodes: []Node{node("a", "source", `{"feed":"x"}`), node("u", "nope", ""), node("v", "t_upper", `{"field":"zz"}`)},
		Edges: []Edge{{From: "a", To: "v"}, {From: "a", To: "q"}},
	}
	_, err := Compile(p, Limits{})
	ds := Details(err)
	want := map[string]bool{"a/feed": false, "u/op": false, "v/field": false, "/edges[1].to": false, "/output.slug": false}
	for _, d := range ds {
		want[d.Node+"/"+d.Field] = true
	}
	for k, ok := range want {
		if !ok {
			t.Errorf("missing problem %s in %+v", k, ds)
		}
	}
}

func items(feed uint64, titles ...string) []Item {
	out := make([]Item, len(titles))
	for i, s := range titles {
		out[i] = Item{FeedID: feed, ID: fmt.Sprint("i", i), Title: s, Seq: uint64(i + 1)}
	}
	return out
}

func TestRun(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	p := Pipe{
		Nodes: []Node{
			node("a", "source", `{"feed":"sensor/a"}`),
			node("b", "source", `{"feed":"sensor/b"}`),
			node("up", "t_upper", `{"field":"title"}`),
			node("all", "t_concat", ""),
			node("unused", "t_upper", `{"field":"summary"}`),
		},
		Edges:  []Edge{{From: "a", To: "up"}, {From: "up", To: "all"}, {From: "b", To: "all"}, {From: "b", To: "unused"}},
		Output: Output{Slug: "x", From: "all"},
	}
	g, err := Compile(p, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string][]Item{"a": items(1, "x", "y"), "b": items(2, "z")}
	orig := fmt.Sprint(in)
	out, pv, err := g.Run(context.Background(), now, in, false)
	if err != nil {
		t.Fatal(err)
	}
	if pv != nil {
		t.Error("preview without trace")
	}
	var got []string
	for _, it := range out {
		got = append(got, it.ID+"="+it.Title)
	}
	if want := "1:i0=X 1:i1=Y 2:i0=z"; strings.Join(got, " ") != want {
		t.Errorf("output %q, want %q", strings.Join(got, " "), want)
	}
	if fmt.Sprint(in) != orig {
		t.Error("Run changed its input items")
	}
	t.Run("trace runs every node", func(t *testing.T) {
		_, pv, err := g.Run(context.Background(), now, in, true)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, n := range pv.Nodes {
			nodes = append(nodes, fmt.Sprintf("%s:%d", n.Node, n.Count))
		}
		if want := "a:2 b:1 up:2 all:3 unused:1"; strings.Join(nodes, " ") != want {
			t.Errorf("preview nodes %q, want %q", strings.Join(nodes, " "), want)
		}
		if len(pv.Output) != 3 {
			t.Errorf("preview output %d items, want 3", len(pv.Output))
		}
	})
	t.Run("sources in definition order", func(t *testing.T) {
		s := g.Sources()
		if len(s) != 2 || s[0].Node != "a" || s[1].Ref.String() != "sensor/b" || s[0].Backlog != DefaultBacklog {
			t.Errorf("Sources() = %+v", s)
		}
	})
}

func TestRunFailures(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	src := node("a", "source", `{"feed":"sensor/a"}`)
	in := map[string][]Item{"a": items(1, "x")}
	t.Run("panic is an error of its node", func(t *testing.T) {
		g, err := Compile(chain(src, node("p", "t_panic", ""), node("u", "t_upper", `{"field":"title"}`)), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = g.Run(context.Background(), now, in, false)
		var ne *NodeError
		var pe *PanicError
		if !errors.As(err, &ne) || ne.Node != "p" || !errors.As(err, &pe) {
			t.Fatalf("err = %v, want a PanicError of node p", err)
		}
		_, pv, err := g.Run(context.Background(), now, in, true)
		if err == nil || pv == nil || pv.Error == "" || pv.Nodes[2].Error == "" || pv.Nodes[0].Count != 1 {
			t.Errorf("trace of a failing run: err %v, preview %+v", err, pv)
		}
	})
	t.Run("time limit ends a run", func(t *testing.T) {
		g, err := Compile(chain(src, node("s", "t_slow", "")), Limits{RunTime: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = g.Run(context.Background(), now, in, false)
		if !errors.Is(err, ErrTimeLimit) {
			t.Fatalf("err = %v, want ErrTimeLimit", err)
		}
	})
	t.Run("item limit", func(t *testing.T) {
		g, err := Compile(chain(src, node("u", "t_concat", "")), Limits{MaxItems: 2})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = g.Run(context.Background(), now, map[string][]Item{"a": items(1, "x", "y", "z")}, false)
		if !errors.Is(err, ErrLimit) {
			t.Fatalf("err = %v, want ErrLimit", err)
		}
	})
}

func TestState(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	p := chain(node("a", "source", `{"feed":"sensor/a"}`), node("c", "t_counter", ""))
	g, err := Compile(p, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Run(context.Background(), now, map[string][]Item{"a": items(1, "x", "y")}, false); err != nil {
		t.Fatal(err)
	}
	st, err := g.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := Compile(p, Limits{})
	if errs := g2.LoadState(st); len(errs) > 0 {
		t.Fatal(errs)
	}
	out, _, err := g2.Run(context.Background(), now, map[string][]Item{"a": items(1, "z")}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Reading.Value != 3 {
		t.Fatalf("counter after restore = %+v, want 3", out)
	}
	g3, _ := Compile(p, Limits{})
	errs := g3.LoadState(map[string]json.RawMessage{"c": json.RawMessage(`"garbage"`)})
	if len(errs) != 1 {
		t.Fatalf("garbage state: %v", errs)
	}
	out, _, _ = g3.Run(context.Background(), now, map[string][]Item{"a": items(1, "z")}, false)
	if out[0].Reading.Value != 1 {
		t.Errorf("after garbage state the counter restarts: got %v", out[0].Reading.Value)
	}
}

func TestLoop(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	p := chain(node("a", "source", `{"feed":"sensor/a"}`),
		node("l", "loop", `{"steps":[{"op":"t_upper","config":{"field":"title"}},{"op":"loop","config":{"steps":[{"op":"t_upper","config":{"field":"summary"}}]}}]}`))
	g, err := Compile(p, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	in := items(1, "a", "b")
	in[1].Summary = "s"
	out, _, err := g.Run(context.Background(), now, map[string][]Item{"a": in}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Title != "A" || out[1].Title != "B" || out[1].Summary != "S" {
		t.Errorf("loop output %+v", out)
	}
}

func TestCatalogue(t *testing.T) {
	var found bool
	for _, op := range Catalogue() {
		if !json.Valid(op.Schema) || !json.Valid(op.Example) {
			t.Errorf("%s: invalid schema or example", op.Name)
		}
		if op.Name == "t_upper" {
			found = true
			var s struct {
				Type       string `json:"type"`
				Properties map[string]struct {
					Type        string `json:"type"`
					Description string `json:"description"`
				} `json:"properties"`
				Required []string `json:"required"`
			}
			if err := json.Unmarshal(op.Schema, &s); err != nil {
				t.Fatal(err)
			}
			f := s.Properties["field"]
			if s.Type != "object" || f.Type != "string" || f.Description == "" || len(s.Required) != 1 {
				t.Errorf("schema of t_upper: %s", op.Schema)
			}
		}
		if op.Name == "source" && !strings.Contains(string(op.Schema), `"backlog"`) {
			t.Errorf("source schema lacks backlog: %s", op.Schema)
		}
	}
	if !found {
		t.Error("t_upper not in the catalogue")
	}
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"sensor/lab-1", "sensor/lab-1", true},
		{"pipe/regional.mean", "pipe/regional.mean", true},
		{"feed/12", "feed/12", true},
		{"https://example.org/feed.xml", "https://example.org/feed.xml", true},
		{"HTTPS://example.org/Feed.xml", "https://example.org/Feed.xml", true},
		{"feed/0", "", false},
		{"feed/x", "", false},
		{"pipe/Upper", "", false},
		{"sensor/", "", false},
		{"thing/1", "", false},
		{"", "", false},
		{"http://", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRef(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok %v", err, tt.ok)
			}
			if tt.ok && r.String() != tt.want {
				t.Errorf("String() = %q, want %q", r.String(), tt.want)
			}
		})
	}
}

func FuzzCompile(f *testing.F) {
	seeds := []string{
		`{"nodes":[{"id":"a","op":"source","config":{"feed":"sensor/x"}}],"output":{"slug":"x"}}`,
		`{"nodes":[{"id":"a","op":"source","config":{"feed":"sensor/x"}},{"id":"l","op":"loop","config":{"steps":[{"op":"t_upper","config":{"field":"title"}}]}}],"edges":[{"from":"a","to":"l"}],"output":{"slug":"x"},"trigger":{"on":"cron","cron":"@every 1m"}}`,
		`{"nodes":[{"id":"a","op":"source"},{"id":"b","op":"t_two"}],"edges":[{"from":"a","to":"b"},{"from":"b","to":"a"}]}`,
		`{"nodes":[{"id":"a","op":"source","config":{"feed":"sensor/x"}}],"output":{"slug":"x"},"trigger":{"on":"cron","cron":"TZ=Europe/Paris"}}`,
		`{"nodes":[{"id":"a","op":"source","config":{"feed":"sensor/x"}}],"output":{"slug":"x"},"trigger":{"on":"cron","cron":"CRON_TZ=UTC"}}`,
		`{"nodes":[{"id":"a","op":"source","config":{"feed":"sensor/x"}}],"output":{"slug":"x"},"trigger":{"on":"cron","cron":"CRON_TZ=America/New_York 0 8 * * *"}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Pipe
		if json.Unmarshal(data, &p) != nil {
			return
		}
		g, err := Compile(p, Limits{RunTime: time.Second})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Compile error %v is not ErrInvalid", err)
			}
			if len(Details(err)) == 0 {
				t.Fatalf("no details: %v", err)
			}
			return
		}
		in := map[string][]Item{}
		for _, s := range g.Sources() {
			in[s.Node] = items(1, "x", "y")
		}
		_, _, _ = g.Run(context.Background(), now, in, true)
	})
}

// A cycle's error names the nodes on it, not those downstream of it.
func TestCycleErrorNamesTheCycle(t *testing.T) {
	src := node("a", "source", `{"feed":"sensor/x"}`)
	p := Pipe{
		Nodes:  []Node{src, node("b", "t_concat", ""), node("c", "t_concat", ""), node("d", "t_concat", ""), node("e", "t_concat", "")},
		Edges:  []Edge{{From: "a", To: "b"}, {From: "b", To: "c"}, {From: "c", To: "b"}, {From: "c", To: "d"}, {From: "d", To: "e"}},
		Output: Output{Slug: "x", From: "e"},
	}
	_, err := Compile(p, Limits{})
	if err == nil || !strings.Contains(err.Error(), "cycle through b, c") || strings.Contains(err.Error(), "b, c, d") {
		t.Errorf("error %v, want the cycle through b, c only", err)
	}
}

// A source refused for its configuration or its id is reported as such,
// not also as a pipe without a source.
func TestBadSourceNotMissing(t *testing.T) {
	tests := []struct {
		name string
		node Node
	}{
		{"bad config", Node{ID: "a", Op: "source", Config: json.RawMessage(`{"feed": "nowhere/x"}`)}},
		{"bad id", Node{ID: "a b", Op: "source", Config: json.RawMessage(`{"feed": "sensor/lab-1"}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(Pipe{Nodes: []Node{tt.node}, Output: Output{Slug: "x"}}, Limits{})
			if err == nil || strings.Contains(err.Error(), "needs at least one") {
				t.Fatalf("Compile: %v; want the source's own error alone", err)
			}
		})
	}
	if _, err := Compile(Pipe{Nodes: []Node{{ID: "u", Op: "union"}}, Output: Output{Slug: "x"}}, Limits{}); err == nil || !strings.Contains(err.Error(), "needs at least one") {
		t.Fatalf("Compile without a source: %v", err)
	}
}
