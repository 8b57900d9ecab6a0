package sensor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// extract looks at the first Limits.MaxRegexInput bytes of a field.
func TestExtractInputBound(t *testing.T) {
	spec, ok := transform.Lookup("extract")
	if !ok {
		t.Fatal("extract not registered")
	}
	op, err := spec.New([]byte(`{"field":"title","regex":"T=(\\d+)"}`))
	if err != nil {
		t.Fatal(err)
	}
	in := []transform.Item{{ID: "a", Title: strings.Repeat("x", 100) + "T=21"}}
	for n, want := range map[int]int{64: 0, 1 << 10: 1} {
		c := transform.NewContext(context.Background(), time.Time{}, "p", "e", transform.Limits{MaxRegexInput: n})
		out, err := op.Apply(c, [][]transform.Item{in})
		if err != nil || len(out) != want {
			t.Errorf("input %d bytes: %d items, %v; want %d", n, len(out), err, want)
		}
	}
}
