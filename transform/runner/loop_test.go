package runner

import (
	"context"
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
// (http://slog.test/feeds/SLUG.rss is pipe/SLUG) and the ids its output
// feeds republish under (tag:slog.test,feeds/SLUG).
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
		OutputID: func(f storage.Feed) string { return "tag:slog.test,feeds/" + f.Slug },
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
// another slogfeed (its id holds the pipe's output id) is dropped.
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
	// The other slogfeed republished one of a's items (its entry id holds
	// a's) and one of its own.
	its := []storage.Item{
		{ID: "tag:other.example,feeds/b:9:tag:slog.test,feeds/a:3:lab-1/7", Title: "back", Published: t0, Fetched: t0,
			Reading: &storage.Reading{Value: 30, Time: t0}},
		{ID: "tag:other.example,feeds/b:9:lab-2/1", Title: "new", Published: t0, Fetched: t0,
			Reading: &storage.Reading{Value: 31, Time: t0}},
	}
	if _, err := e.st.AddItems(remote.ID, its); err != nil {
		t.Fatal(err)
	}
	res, err := e.r.RunNow(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := e.output(t, p.ID)
	if res.Added != 1 || len(out) != 1 || out[0].Title != "new" {
		t.Errorf("run %+v, output %+v: want only the item that is not a's own", res, out)
	}
}
