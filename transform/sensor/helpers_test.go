package sensor

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// at is t0 plus m minutes.
func at(m float64) time.Time { return t0.Add(time.Duration(m * float64(time.Minute))) }

// rd is an item carrying a reading of sensor observed at when.
func rd(id, sensor string, v float64, when time.Time) transform.Item {
	return transform.Item{
		FeedID:    1,
		ID:        id,
		GUID:      "guid-" + id,
		Title:     "reading " + id,
		Published: when.Add(time.Second),
		Reading:   &storage.Reading{Value: v, Unit: "C", Sensor: sensor, Time: when},
	}
}

// plain is an item without a reading.
func plain(id, title string) transform.Item {
	return transform.Item{FeedID: 1, ID: id, Title: title, Published: t0}
}

func ctxAt(now time.Time) *transform.Context {
	return transform.NewContext(context.Background(), now, "pipe", "node", transform.Limits{})
}

// build makes operator name from cfg, failing the test on an error.
func build(t *testing.T, name, cfg string) transform.Operator {
	t.Helper()
	spec, ok := transform.Lookup(name)
	if !ok {
		t.Fatalf("operator %q not registered", name)
	}
	op, err := spec.New(json.RawMessage(cfg))
	if err != nil {
		t.Fatalf("%s %s: %v", name, cfg, err)
	}
	return op
}

// buildErr builds operator name from cfg and returns the error.
func buildErr(name, cfg string) error {
	spec, ok := transform.Lookup(name)
	if !ok {
		return errors.New("not registered")
	}
	_, err := spec.New(json.RawMessage(cfg))
	return err
}

func apply(t *testing.T, op transform.Operator, c *transform.Context, items ...transform.Item) []transform.Item {
	t.Helper()
	out, err := op.Apply(c, [][]transform.Item{items})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return out
}

// reload saves op's state, sends it through JSON and loads it into a new
// operator built from the same configuration.
func reload(t *testing.T, op transform.Operator, name, cfg string) transform.Operator {
	t.Helper()
	st, ok := op.(transform.Stateful)
	if !ok {
		t.Fatalf("%s is not stateful", name)
	}
	raw, err := st.SaveState()
	if err != nil {
		t.Fatalf("SaveState: %v", err)
	}
	fresh := build(t, name, cfg)
	if raw == nil {
		return fresh
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatalf("marshal state: %v", err)
	}
	var back json.RawMessage
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal state: %v", err)
	}
	var v struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(back, &v); err != nil || v.V != 1 {
		t.Fatalf("state %s is not versioned 1", trunc(string(back), 80))
	}
	if err := fresh.(transform.Stateful).LoadState(back); err != nil {
		t.Fatalf("LoadState: %v", err)
	}
	return fresh
}

func ids(items []transform.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func titles(items []transform.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Title
	}
	return out
}

func values(items []transform.Item) []float64 {
	out := make([]float64, len(items))
	for i, it := range items {
		if it.Reading == nil {
			out[i] = math.NaN()
			continue
		}
		out[i] = it.Reading.Value
	}
	return out
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*math.Max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}

// wantField checks that err is a *transform.FieldError naming field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one for field %q", field)
	}
	var fe *transform.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FieldError", err, err)
	}
	if fe.Field != field {
		t.Fatalf("error %q names field %q, want %q", err, fe.Field, field)
	}
	if !errors.Is(err, transform.ErrInvalid) && !errors.Is(err, transform.ErrLimit) {
		t.Fatalf("error %q is neither ErrInvalid nor ErrLimit", err)
	}
}

// configErrors runs a table of bad configurations of op.
func configErrors(t *testing.T, op string, tests []struct{ cfg, field string }) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.cfg, func(t *testing.T) {
			wantField(t, buildErr(op, tt.cfg), tt.field)
		})
	}
}

// unchanged checks that Apply did not touch its input.
func unchanged(t *testing.T, before, after []transform.Item) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatal("Apply modified its input")
	}
}

// deepCopy copies items so a test can compare them after Apply.
func deepCopy(items []transform.Item) []transform.Item {
	out := slices.Clone(items)
	for i := range out {
		out[i] = transform.Clone(out[i])
	}
	return out
}
