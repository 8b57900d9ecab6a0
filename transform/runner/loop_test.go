package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// localEnv is newEnv with a runner that knows its server's URLs
// (http://slog.test/feeds/SLUG.rss is pipe/SLUG).
func localEnv(t *testing.T) *env {
	t.Helper()
	clock := schedule.NewVirtualClock(t0)
	st, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := New(Options{Store: st, Clock: clock,
		Local: func(raw string) (transform.Ref, bool) {
			slug, ok := strings.CutPrefix(raw, "http://slog.test/feeds/")
			slug, ok2 := strings.CutSuffix(slug, ".rss")
			return transform.Ref{Kind: "pipe", Key: slug}, ok && ok2
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	return &env{st: st, r: r, clock: clock}
}

// A source naming this server's own feed URL reads that feed; one naming
// the pipe's own output is refused, at creation and at an update.
func TestSourceOfOwnURL(t *testing.T) {
	ctx := context.Background()
	e := localEnv(t)
	lab := e.sensor(t, "lab-1")
	e.post(t, lab, t0.Add(-time.Minute), 25)
	first, err := e.r.Create(ctx, hotPipe("first", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.r.Create(ctx, hotPipe("second", "http://slog.test/feeds/first.rss"))
	if err != nil {
		t.Fatal(err)
	}
	if in := second.Inputs; len(in) != 1 || in[0].FeedID != first.FeedID || in[0].Kind != storage.KindPipe {
		t.Errorf("inputs %+v, want the first pipe's output feed %d", in, first.FeedID)
	}
	if _, err := e.st.FeedByURL("http://slog.test/feeds/first.rss"); !errors.Is(err, storage.ErrFeedNotFound) {
		t.Errorf("the server's own URL was subscribed: %v", err)
	}
	for _, tt := range []struct {
		name string
		do   func() error
	}{
		{"created reading itself", func() error {
			_, err := e.r.Create(ctx, hotPipe("loopy", "sensor/lab-1", "http://slog.test/feeds/loopy.rss"))
			return err
		}},
		{"updated to read itself", func() error {
			_, err := e.r.Update(ctx, first.ID, hotPipe("first", "http://slog.test/feeds/first.rss"))
			return err
		}},
		{"updated to read a pipe that reads it", func() error {
			_, err := e.r.Update(ctx, first.ID, hotPipe("first", "http://slog.test/feeds/second.rss"))
			return err
		}},
	} {
		if err := tt.do(); !errors.Is(err, transform.ErrInvalid) || !strings.Contains(err.Error(), "its own output") {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// An output item that is the pipe's own output come back through
// another slogfeed is dropped: read from RSS or JSON Feed its id ends
// with one of the pipe's output ids, read from Atom it holds the pipe's
// output feed id.
func TestOwnOutputComingBackDropped(t *testing.T) {
	ctx := context.Background()
	e := localEnv(t)
	remote := storage.Feed{Kind: storage.KindRemote, URL: "https://other.example/feeds/b.rss", Title: "b", Policy: "auto"}
	if err := e.st.CreateFeed(&remote); err != nil {
		t.Fatal(err)
	}
	p, err := e.r.Create(ctx, hotPipe("a", fmt.Sprint("feed/", remote.ID)))
	if err != nil {
		t.Fatal(err)
	}
	item := func(id string, v float64) storage.Item {
		return storage.Item{ID: id, Title: id, Published: t0, Fetched: t0, Reading: &storage.Reading{Value: v, Time: t0}}
	}
	run := func(its ...storage.Item) []string {
		t.Helper()
		if _, err := e.st.AddItems(remote.ID, its); err != nil {
			t.Fatal(err)
		}
		before := map[string]bool{}
		for _, it := range e.output(t, p.ID) {
			before[it.ID] = true
		}
		if _, err := e.r.RunNow(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, it := range e.output(t, p.ID) {
			if !before[it.ID] {
				ids = append(ids, it.ID)
			}
		}
		return ids
	}
	first := run(item("lab-2/1", 30))
	if len(first) != 1 {
		t.Fatalf("first run added %v", first)
	}
	// The other slogfeed's pipe read a's feed (its feed 9) and republished
	// a's item, from RSS and from Atom; and an item of its own.
	got := run(
		item("9:"+first[0], 31),
		item("tag:other.example,feeds/b:9:tag:slog.test,feeds/a:"+first[0], 32),
		item("lab-3/1", 33))
	if want := []string{fmt.Sprint(remote.ID, ":lab-3/1")}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("added %v, want %v", got, want)
	}
	// A runner started anew knows the pipe's outputs from the store.
	r2, err := New(Options{Store: e.st, Clock: e.clock, Logger: e.r.log})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Load(); err != nil {
		t.Fatal(err)
	}
	e.r = r2
	if got := run(item("9:"+got[0], 34), item("lab-4/1", 35)); len(got) != 1 || !strings.HasSuffix(got[0], "lab-4/1") {
		t.Errorf("after a restart: added %v", got)
	}
}

// An item a pipe takes twice from local feeds, directly and through
// another pipe, is not taken for its own output come back (only items
// from remote feeds can be).
func TestLocalFanInKept(t *testing.T) {
	ctx := context.Background()
	e := localEnv(t)
	lab := e.sensor(t, "lab-1")
	g, err := e.r.Create(ctx, hotPipe("g", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	// a reads a remote feed too: its items are the ones checked.
	remote := storage.Feed{Kind: storage.KindRemote, URL: "https://other.example/feeds/b.rss", Title: "b", Policy: "auto"}
	if err := e.st.CreateFeed(&remote); err != nil {
		t.Fatal(err)
	}
	a, err := e.r.Create(ctx, hotPipe("a", "sensor/lab-1", "pipe/g", fmt.Sprint("feed/", remote.ID)))
	if err != nil {
		t.Fatal(err)
	}
	e.post(t, lab, t0.Add(-time.Minute), 25)
	if _, err := e.r.RunNow(ctx, a.ID); err != nil { // a takes lab-1's item
		t.Fatal(err)
	}
	if _, err := e.r.RunNow(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.RunNow(ctx, a.ID); err != nil { // and g's copy of it
		t.Fatal(err)
	}
	if out := e.output(t, a.ID); len(out) != 2 {
		var ids []string
		for _, it := range out {
			ids = append(ids, it.ID)
		}
		t.Errorf("a's output %v, want lab-1's item and g's", ids)
	}
}

// A source URL with a fragment names the feed subscribed without it (the
// fragment is never fetched): after a restart, at an update and for a
// second pipe.
func TestSourceURLWithFragment(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, schedule.NewVirtualClock(t0))
	subscribe := func(f storage.Feed) (storage.Feed, error) {
		f.URL, _, _ = strings.Cut(f.URL, "#") // as the aggregator stores it
		f.Kind = storage.KindRemote
		err := e.st.CreateFeed(&f)
		return f, err
	}
	r, err := New(Options{Store: e.st, Clock: e.clock, Subscribe: subscribe})
	if err != nil {
		t.Fatal(err)
	}
	const url = "https://feeds.example.org/lab.rss#latest"
	p, err := r.Create(ctx, hotPipe("hot", url))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := New(Options{Store: e.st, Clock: e.clock, Subscribe: subscribe})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Load(); err != nil {
		t.Fatal(err)
	}
	if info, err := r2.Get(p.ID); err != nil || len(info.Inputs) != 1 || info.Inputs[0].FeedID != p.Inputs[0].FeedID {
		t.Fatalf("after a restart: %+v %v", info.Inputs, err)
	}
	if _, err := r2.Update(ctx, p.ID, hotPipe("hot", url)); err != nil {
		t.Errorf("update: %v", err)
	}
	if _, err := r2.Create(ctx, hotPipe("hot2", "https://feeds.example.org/lab.rss#other")); err != nil {
		t.Errorf("a second pipe: %v", err)
	}
}

// The check is on the inputs, before the operators: a pipe whose window
// makes new items of what it takes does not take its own outputs back
// either. An input id that merely equals one of the pipe's outputs (the
// feed numbers of two slogfeeds agreeing by chance) is kept.
func TestReturnedDroppedBeforeOperators(t *testing.T) {
	ctx := context.Background()
	e := localEnv(t)
	remote := storage.Feed{Kind: storage.KindRemote, URL: "https://other.example/feeds/b.rss", Title: "b", Policy: "auto"}
	if err := e.st.CreateFeed(&remote); err != nil {
		t.Fatal(err)
	}
	def := transform.Pipe{
		Nodes: []transform.Node{
			{ID: "in", Op: "source", Config: json.RawMessage(fmt.Sprintf(`{"feed":"feed/%d"}`, remote.ID))},
			{ID: "n", Op: "window", Config: json.RawMessage(`{"stat":"count","size":1000,"by":""}`)},
		},
		Edges:  []transform.Edge{{From: "in", To: "n"}},
		Output: transform.Output{Slug: "counted", From: "n"},
	}
	p, err := e.r.Create(ctx, def)
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	add := func(ids ...string) int {
		t.Helper()
		var its []storage.Item
		for _, id := range ids {
			at = at.Add(time.Second)
			its = append(its, storage.Item{ID: id, Title: id, Published: at, Fetched: at, Reading: &storage.Reading{Value: 1, Time: at}})
		}
		if _, err := e.st.AddItems(remote.ID, its); err != nil {
			t.Fatal(err)
		}
		res, err := e.r.RunNow(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		return res.Added
	}
	if n := add("lab-2/1"); n != 1 {
		t.Fatalf("first run added %d", n)
	}
	out := e.output(t, p.ID)
	own := out[0].ID
	// Back through the other slogfeed's pipe (its prefix, then ours), and
	// an item of the other slogfeed whose id equals ours by chance.
	if n := add("9:"+own, own); n != 1 {
		t.Errorf("added %d, want 1: the count of the item that equals an output by chance only", n)
	}
	got := e.output(t, p.ID)
	most := 0.0
	for _, it := range got {
		most = max(most, it.Reading.Value)
	}
	if len(got) != 2 || most != 2 {
		t.Errorf("%d outputs, counts up to %v: want the window to have counted 2, not taken its own output", len(got), most)
	}
}
