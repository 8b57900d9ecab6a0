package pack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// MATCH looks at the first Limits.MaxRegexInput bytes of a field, and at
// the deadline before every item.
func TestMatchInputBound(t *testing.T) {
	spec, ok := transform.Lookup("MATCH")
	if !ok {
		t.Fatal("MATCH not registered")
	}
	op, err := spec.New([]byte(`{"field":"summary","pattern":"TAIL"}`))
	if err != nil {
		t.Fatal(err)
	}
	in := []transform.Item{{ID: "a", Summary: strings.Repeat("x", 100) + "TAIL"}}
	for n, want := range map[int]int{64: 0, 1 << 10: 1} {
		c := transform.NewContext(context.Background(), time.Time{}, "p", "m", transform.Limits{MaxRegexInput: n})
		out, err := op.Apply(c, [][]transform.Item{in})
		if err != nil || len(out) != want {
			t.Errorf("input %d bytes: %d items, %v; want %d", n, len(out), err, want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := transform.NewContext(ctx, time.Time{}, "p", "m", transform.Limits{})
	if _, err := op.Apply(c, [][]transform.Item{in}); err == nil {
		t.Error("MATCH ran after the run ended")
	}
}
