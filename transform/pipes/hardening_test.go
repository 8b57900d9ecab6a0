package pipes

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

// clipCtx is a run whose regex operators look at the first n bytes of a
// field, and whose nodes may make nodeBytes of text.
func clipCtx(n int, nodeBytes int64) *transform.Context {
	return transform.NewContext(context.Background(), t0, "test-pipe", "node", transform.Limits{MaxRegexInput: n, MaxNodeBytes: nodeBytes})
}

// The regex operators match within the first Limits.MaxRegexInput bytes
// of a field (a bound on each item's work) and keep the rest as it is.
func TestRegexInputBound(t *testing.T) {
	long := strings.Repeat("ab ", 100) + "TAIL" // 304 bytes, the tail past 64
	t.Run("regex_replace", func(t *testing.T) {
		op := build(t, "regex_replace", `{"field":"summary","pattern":"ab|TAIL","replace":"x","all":true}`)
		out, err := op.Apply(clipCtx(64, 0), [][]transform.Item{{item("a", summary(long))}})
		if err != nil {
			t.Fatal(err)
		}
		s := out[0].Summary
		if !strings.HasPrefix(s, "x x x ") || !strings.HasSuffix(s, "ab TAIL") || strings.Count(s, "x") != 21 {
			t.Errorf("summary %q", s)
		}
	})
	t.Run("filter", func(t *testing.T) {
		op := build(t, "filter", `{"rules":[{"field":"summary","op":"matches","value":"TAIL"}]}`)
		for n, want := range map[int]int{64: 0, 1 << 10: 1} {
			out, err := op.Apply(clipCtx(n, 0), [][]transform.Item{{item("a", summary(long))}})
			if err != nil || len(out) != want {
				t.Errorf("input %d bytes: %d items, %v; want %d", n, len(out), err, want)
			}
		}
	})
	t.Run("split", func(t *testing.T) {
		op := build(t, "split", `{"field":"summary","pattern":"ab|TAIL","to":"title"}`)
		out, err := op.Apply(clipCtx(64, 0), [][]transform.Item{{item("a", summary(long))}})
		if err != nil || len(out) != 21 {
			t.Errorf("%d parts, %v; want the 21 in the first 64 bytes", len(out), err)
		}
	})
}

// A template multiplies its input: it stops at the node's byte budget.
func TestTemplateByteBudget(t *testing.T) {
	op := build(t, "template", `{"field":"title","template":"{summary}{summary}{summary}{summary}"}`)
	in := make([]transform.Item, 20)
	for i := range in {
		in[i] = item(string(rune('a'+i)), summary(strings.Repeat("s", 1000)))
	}
	if _, err := op.Apply(clipCtx(0, 40_000), [][]transform.Item{in}); !errors.Is(err, transform.ErrByteLimit) {
		t.Errorf("80 KB of titles under a 40 KB budget: %v", err)
	}
	if out, err := op.Apply(clipCtx(0, 100_000), [][]transform.Item{in}); err != nil || len(out[0].Title) != 4000 {
		t.Errorf("within the budget: %v", err)
	}
}

// stopAfter is a run's context that ends after n looks at it.
type stopAfter struct {
	context.Context
	n atomic.Int32
}

func (s *stopAfter) Err() error {
	if s.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// The regex operators look at the deadline before every item, not every
// 256: an item's match may take a good part of a second.
func TestRegexDeadlineEveryItem(t *testing.T) {
	for _, tt := range []struct{ op, cfg string }{
		{"regex_replace", `{"field":"title","pattern":"a","replace":"b"}`},
		{"filter", `{"rules":[{"field":"title","op":"matches","value":"a"}]}`},
		{"split", `{"field":"title","pattern":"a"}`},
	} {
		t.Run(tt.op, func(t *testing.T) {
			op := build(t, tt.op, tt.cfg)
			in := []transform.Item{item("1", title("a")), item("2", title("a")), item("3", title("a"))}
			ctx := &stopAfter{Context: context.Background()}
			ctx.n.Store(1) // the run ends after the first item
			_, err := op.Apply(transform.NewContext(ctx, t0, "test-pipe", "node", transform.Limits{}), [][]transform.Item{in})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a run ended after the first item: %v", err)
			}
		})
	}
}
