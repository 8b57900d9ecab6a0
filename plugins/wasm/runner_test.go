package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/runner"
)

// pipeEnv is a store and a pipe runner.
type pipeEnv struct {
	st *storage.Store
	r  *runner.Runner
}

func newPipeEnv(t *testing.T) *pipeEnv {
	t.Helper()
	clock := schedule.NewVirtualClock(t0)
	st, err := storage.Open(filepath.Join(t.TempDir(), "p.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := runner.New(runner.Options{Store: st, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	return &pipeEnv{st: st, r: r}
}

// post stores readings of sensor f at one-minute steps from at.
func (e *pipeEnv) post(t *testing.T, f storage.Feed, at time.Time, vs ...float64) {
	t.Helper()
	var its []storage.Item
	for i, v := range vs {
		ts := at.Add(time.Duration(i) * time.Minute)
		its = append(its, storage.Item{ID: fmt.Sprintf("%s/%d", f.Slug, ts.Unix()), Title: fmt.Sprint(v), Published: ts, Fetched: ts,
			Reading: &storage.Reading{Value: v, Unit: "C", Sensor: f.Slug, Time: ts}})
	}
	if _, err := e.st.AddItems(f.ID, its); err != nil {
		t.Fatal(err)
	}
}

// output returns the values of pipe id's output feed, oldest first.
func (e *pipeEnv) output(t *testing.T, id uint64) []float64 {
	t.Helper()
	in, err := e.r.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	its, err := e.st.Items(in.FeedID, storage.ItemQuery{Order: storage.ByArrivalAsc})
	if err != nil {
		t.Fatal(err)
	}
	return values(its)
}

// wasmPipe reads sensor/lab-1 through one "wasm" node configured with cfg.
func wasmPipe(slug string, cfg json.RawMessage) transform.Pipe {
	return transform.Pipe{
		Nodes: []transform.Node{
			{ID: "in", Op: "source", Config: json.RawMessage(`{"feed":"sensor/lab-1"}`)},
			{ID: "w", Op: "wasm", Config: cfg},
		},
		Edges:  []transform.Edge{{From: "in", To: "w"}},
		Output: transform.Output{Slug: slug},
	}
}

// Real pipes run WebAssembly operators from the module library; a pipe
// whose module loops forever fails its runs with a time-limit error while
// the other pipes carry on, and works again once its definition is fixed.
func TestPipesWithModules(t *testing.T) {
	lib := &memLibrary{}
	useLibrary(t, lib)
	lib.put("despike", wat(t, "examples/despike.wat"))
	lib.put("c-to-f", wat(t, "examples/c_to_f.wat"))
	e := newPipeEnv(t)
	lab := storage.Feed{Kind: storage.KindSensor, Slug: "lab-1", Title: "lab-1", Policy: "auto"}
	if err := e.st.CreateFeed(&lab); err != nil {
		t.Fatal(err)
	}
	e.post(t, lab, t0.Add(-time.Hour), 20, 21, 80, 22)
	ctx := context.Background()

	clean, err := e.r.Create(ctx, wasmPipe("lab-clean", json.RawMessage(`{"module":"despike","params":[5]}`)))
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := e.r.Create(ctx, wasmPipe("lab-stuck", inline(wat(t, "testdata/evil.wat"), `"params":[1],"time_limit":"200ms"`)))
	if err != nil {
		t.Fatal(err)
	}

	if res, err := e.r.RunNow(ctx, clean.ID); err != nil || res.In != 4 || res.Added != 3 {
		t.Fatalf("despike run: %+v, %v", res, err)
	}
	if got := e.output(t, clean.ID); !slices.Equal(got, []float64{20, 21, 22}) {
		t.Errorf("despiked output %v", got)
	}

	_, err = e.r.RunNow(ctx, stuck.ID)
	if !errors.Is(err, transform.ErrTimeLimit) {
		t.Fatalf("looping module: %v", err)
	}
	if in, _ := e.r.Get(stuck.ID); !strings.Contains(in.LastError, "time limit") || !strings.Contains(in.LastError, `node "w" (wasm)`) || in.Items != 0 {
		t.Errorf("after the loop: last error %q, %d items", in.LastError, in.Items)
	}

	// The other pipe carries on with new readings.
	e.post(t, lab, t0, 23, 90)
	if res, err := e.r.RunNow(ctx, clean.ID); err != nil || res.In != 2 || res.Added != 1 {
		t.Fatalf("despike after the failure: %+v, %v", res, err)
	}
	// The module's state (the last kept value, 23) carries over: a
	// spike at the start of a run is dropped too.
	e.post(t, lab, t0.Add(time.Hour), 91, 24)
	if res, err := e.r.RunNow(ctx, clean.ID); err != nil || res.In != 2 || res.Added != 1 {
		t.Fatalf("despike of a lone spike: %+v, %v", res, err)
	}
	if got := e.output(t, clean.ID); !slices.Equal(got, []float64{20, 21, 22, 23, 24}) {
		t.Errorf("despiked output %v", got)
	}

	// Fixed, the stuck pipe processes every reading it had not.
	if _, err := e.r.Update(ctx, stuck.ID, wasmPipe("lab-stuck", json.RawMessage(`{"module":"c-to-f","unit":"F"}`))); err != nil {
		t.Fatal(err)
	}
	if res, err := e.r.RunNow(ctx, stuck.ID); err != nil || res.Added != 8 {
		t.Fatalf("fixed pipe: %+v, %v", res, err)
	}
	if got := e.output(t, stuck.ID); !slices.EqualFunc(got, []float64{68, 69.8, 176, 71.6, 73.4, 194, 195.8, 75.2}, near) {
		t.Errorf("converted output %v", got)
	}
	if in, _ := e.r.Get(stuck.ID); in.LastError != "" {
		t.Errorf("last error kept: %q", in.LastError)
	}
}

// near reports whether a and b are equal but for rounding.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }
