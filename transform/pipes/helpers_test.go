package pipes

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// t0 is the time of the test runs.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// opt sets something on a test item.
type opt func(*transform.Item)

// item returns a test item with id, published at t0 - 1m, and opts.
func item(id string, opts ...opt) transform.Item {
	it := transform.Item{FeedID: 1, ID: id, Published: t0.Add(-time.Minute), Fetched: t0}
	for _, o := range opts {
		o(&it)
	}
	return it
}

func title(s string) opt   { return func(it *transform.Item) { it.Title = s } }
func summary(s string) opt { return func(it *transform.Item) { it.Summary = s } }
func guid(s string) opt    { return func(it *transform.Item) { it.GUID = s } }
func pub(t time.Time) opt  { return func(it *transform.Item) { it.Published = t } }
func cats(c ...string) opt { return func(it *transform.Item) { it.Categories = c } }

// value gives the item a reading of v in unit observed at its publish time.
func value(v float64, unit string) opt {
	return func(it *transform.Item) {
		it.Reading = &storage.Reading{Value: v, Unit: unit, Sensor: "lab-1", Time: it.Published}
	}
}

func lat(v float64) opt {
	return func(it *transform.Item) {
		if it.Reading == nil {
			it.Reading = &storage.Reading{Time: it.Published}
		}
		it.Reading.Lat = &v
	}
}

// newCtx returns the context of a test run at t0.
func newCtx() *transform.Context {
	return transform.NewContext(context.Background(), t0, "test-pipe", "node", transform.Limits{})
}

// build makes operator name from cfg, failing the test on an error.
func build(t testing.TB, name, cfg string) transform.Operator {
	t.Helper()
	op, err := newOp(name, cfg)
	if err != nil {
		t.Fatalf("%s %s: %v", name, cfg, err)
	}
	return op
}

// newOp makes operator name from cfg.
func newOp(name, cfg string) (transform.Operator, error) {
	spec, ok := transform.Lookup(name)
	if !ok {
		return nil, errors.New("operator " + name + " not registered")
	}
	return spec.New(json.RawMessage(cfg))
}

// run applies op to the inputs at t0, failing the test on an error.
func run(t testing.TB, op transform.Operator, in ...[]transform.Item) []transform.Item {
	t.Helper()
	out, err := op.Apply(newCtx(), in)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return out
}

// ids returns the ids of items.
func ids(items []transform.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// wantFieldError checks that err is a *transform.FieldError naming field.
func wantFieldError(t testing.TB, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one about %q", field)
	}
	var fe *transform.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FieldError", err, err)
	}
	if fe.Field != field {
		t.Fatalf("error names field %q, want %q: %v", fe.Field, field, err)
	}
	if !errors.Is(err, transform.ErrInvalid) && !errors.Is(err, transform.ErrLimit) {
		t.Fatalf("error %v is neither ErrInvalid nor ErrLimit", err)
	}
}

// configErrors runs table cases of bad configurations of operator name.
func configErrors(t *testing.T, name string, cases []struct{ name, cfg, field string }) {
	t.Helper()
	for _, tc := range cases {
		t.Run("config/"+tc.name, func(t *testing.T) {
			_, err := newOp(name, tc.cfg)
			wantFieldError(t, err, tc.field)
		})
	}
}
