package transform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// lateOp ignores the deadline: it waits for it, then returns its input.
type lateOp struct{}

func (lateOp) Apply(c *Context, in [][]Item) ([]Item, error) {
	<-c.Context().Done()
	return in[0], nil
}

func init() {
	Register(Spec{Name: "t_late", Family: FamilyPlugin, MinInputs: 1, MaxInputs: 1, Config: struct{}{},
		New: func(json.RawMessage) (Operator, error) { return lateOp{}, nil }})
}

func TestItemBytes(t *testing.T) {
	base := ItemBytes(&Item{})
	if base <= 0 {
		t.Fatalf("an empty item counts %d bytes", base)
	}
	it := Item{ID: "id", Title: "title", Summary: strings.Repeat("s", 1000), Categories: []string{"ab", "c"},
		Enclosures: []storage.Enclosure{{URL: "http://x/y", Type: "audio/mpeg"}},
		Reading:    &storage.Reading{Unit: "°C", Sensor: "lab-1"},
		Digest:     &storage.Digest{Field: "value", Items: []string{"a", "bc"}}}
	text := int64(len("id") + len("title") + 1000 + len("ab") + len("c") + len("http://x/y") + len("audio/mpeg") + len("°C") + len("lab-1") + len("value") + len("a") + len("bc"))
	fixed := 4*stringSize + enclosureSize + readingSize + digestSize
	if got := ItemBytes(&it); got != base+text+fixed {
		t.Errorf("ItemBytes = %d, want %d", got, base+text+fixed)
	}
}

func TestCutUTF8(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"abc", 0, ""}, {"abc", -1, ""},
		{"aé", 2, "a"}, {"aé", 3, "aé"}, {"a€b", 3, "a"}, {"a€b", 4, "a€"}, {"😀x", 3, ""},
	} {
		if got := CutUTF8(tt.s, tt.n); got != tt.want {
			t.Errorf("CutUTF8(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
	c := NewContext(context.Background(), time.Time{}, "p", "n", Limits{MaxRegexInput: 4})
	if got := c.RegexInput("abcé€"); got != "abc" {
		t.Errorf("RegexInput = %q", got)
	}
	if got := (*Context)(nil).RegexInput(strings.Repeat("x", DefaultLimits.MaxRegexInput+10)); len(got) != DefaultLimits.MaxRegexInput {
		t.Errorf("RegexInput without a context: %d bytes", len(got))
	}
}

// bigItems are n items of size bytes of summary.
func bigItems(n, size int) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = Item{FeedID: 1, ID: fmt.Sprint("i", i), Summary: strings.Repeat("x", size)}
	}
	return out
}

func TestRunByteBudget(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	src := node("a", "source", `{"feed":"sensor/a"}`)
	in := map[string][]Item{"a": bigItems(10, 1000)} // about 13 KB a node
	g0, err := Compile(chain(src), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	srcOut, _, err := g0.Run(context.Background(), now, in, false) // the source prefixes ids
	if err != nil {
		t.Fatal(err)
	}
	per := itemsBytes(srcOut)
	tests := []struct {
		name  string
		lim   Limits
		nodes []Node
		node  string // the node that fails, "" for none
		limit string
	}{
		{"within", Limits{MaxNodeBytes: per + 1, MaxRunBytes: 4*per + 1}, []Node{src, node("b", "t_concat", ""), node("c", "t_concat", ""), node("d", "t_concat", "")}, "", ""},
		{"a node over its budget", Limits{MaxNodeBytes: per - 1}, []Node{src, node("b", "t_concat", "")}, "a", "max_node_bytes"},
		{"the run over its budget", Limits{MaxNodeBytes: per, MaxRunBytes: 3*per + 1}, []Node{src, node("b", "t_concat", ""), node("c", "t_concat", ""), node("d", "t_concat", ""), node("e", "t_concat", "")}, "d", "max_run_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.node == "a" {
				tt.lim.MaxRunBytes = 1 << 30
			}
			g, err := Compile(chain(tt.nodes...), tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			for _, trace := range []bool{false, true} {
				_, pv, err := g.Run(context.Background(), now, in, trace)
				if tt.node == "" {
					if err != nil {
						t.Fatalf("trace %v: %v", trace, err)
					}
					continue
				}
				var ne *NodeError
				if !errors.Is(err, ErrByteLimit) || !errors.As(err, &ne) || ne.Node != tt.node || !strings.Contains(err.Error(), tt.limit) {
					t.Fatalf("trace %v: err = %v, want ErrByteLimit of node %s naming %s", trace, err, tt.node, tt.limit)
				}
				if trace {
					// The preview stops at the node over the budget.
					last := pv.Nodes[len(pv.Nodes)-1]
					if last.Node != tt.node || last.Error == "" || len(pv.Nodes) != len(tt.nodes)-countAfter(tt.nodes, tt.node) {
						t.Errorf("preview nodes %+v", pv.Nodes)
					}
				}
			}
		})
	}
}

func TestLoopByteBudget(t *testing.T) {
	g, err := Compile(chain(node("a", "source", `{"feed":"sensor/a"}`), node("l", "loop", `{"steps":[{"op":"t_upper","config":{"field":"summary"}}]}`)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	in := bigItems(10, 1000)
	c := NewContext(context.Background(), time.Time{}, "p", "l", Limits{MaxNodeBytes: itemsBytes(in) / 2})
	if _, err := g.byID["l"].op.Apply(c, [][]Item{in}); !errors.Is(err, ErrByteLimit) {
		t.Errorf("loop over its budget: %v", err)
	}
	c = NewContext(context.Background(), time.Time{}, "p", "l", Limits{MaxNodeBytes: itemsBytes(in)})
	if out, err := g.byID["l"].op.Apply(c, [][]Item{in}); err != nil || len(out) != len(in) {
		t.Errorf("loop within its budget: %d items, %v", len(out), err)
	}
}

// countAfter counts the nodes of a chain after id.
func countAfter(nodes []Node, id string) int {
	for i, n := range nodes {
		if n.ID == id {
			return len(nodes) - i - 1
		}
	}
	return 0
}

func TestGrow(t *testing.T) {
	c := NewContext(context.Background(), time.Time{}, "p", "n", Limits{MaxNodeBytes: 100})
	if err := c.Grow(60); err != nil {
		t.Fatal(err)
	}
	if err := c.Grow(40); err != nil {
		t.Fatal(err)
	}
	if err := c.Grow(1); !errors.Is(err, ErrByteLimit) || !strings.Contains(err.Error(), "max_node_bytes") {
		t.Errorf("Grow past the budget: %v", err)
	}
	if err := (*Context)(nil).Grow(1 << 40); err != nil {
		t.Errorf("Grow without a context: %v", err)
	}
}

// An operator that ignores the deadline still fails its run with
// ErrTimeLimit once it returns: a run over its time is never a success.
// In a bubble, so the deadline passes while the late operator waits, not
// while a busy machine runs the source.
func TestRunLateOperator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		g, err := Compile(chain(node("a", "source", `{"feed":"sensor/a"}`), node("late", "t_late", "")), Limits{RunTime: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = g.Run(context.Background(), now, map[string][]Item{"a": items(1, "x")}, false)
		var ne *NodeError
		if !errors.Is(err, ErrTimeLimit) || !errors.As(err, &ne) || ne.Node != "late" {
			t.Errorf("err = %v, want ErrTimeLimit of node late", err)
		}
	})
}

func TestPreviewBudget(t *testing.T) {
	list := bigItems(10, 1000)
	per := ItemBytes(&list[0])
	b := previewBudget{left: 3*per + per/2}
	shown, cut := b.head(list)
	if len(shown) != 3 || !cut {
		t.Errorf("first node: %d shown, cut %v", len(shown), cut)
	}
	shown, cut = b.head(list[:1])
	if len(shown) != 0 || !cut {
		t.Errorf("second node: %d shown, cut %v", len(shown), cut)
	}
	shown, cut = b.head(nil)
	if shown == nil || len(shown) != 0 || cut {
		t.Errorf("an empty node: %v, cut %v", shown, cut)
	}
}
