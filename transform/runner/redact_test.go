package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// A pipe that reads a feed by a URL with credentials shows it masked, and
// its definition read back from the API (masked) still names that feed.
func TestPipeMasksInputURLs(t *testing.T) {
	e := newEnv(t, schedule.NewVirtualClock(t0))
	const secret = "https://alice:hunter2@feeds.example.org/lab.rss"
	f := storage.Feed{Kind: storage.KindRemote, URL: secret, Policy: "auto"}
	if err := e.st.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	info, err := e.r.Create(context.Background(), hotPipe("hot", secret))
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.r.Get(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got)
	if strings.Contains(string(raw), "hunter2") || !strings.Contains(string(raw), "alice:xxxxx@feeds.example.org") {
		t.Fatalf("pipe info shows %s", raw)
	}
	// The masked definition, sent back, still reads the same feed.
	upd, err := e.r.Update(context.Background(), info.ID, got.Pipe)
	if err != nil {
		t.Fatal(err)
	}
	if len(upd.Inputs) != 1 || upd.Inputs[0].FeedID != f.ID {
		t.Errorf("inputs after the update: %+v", upd.Inputs)
	}
	if _, err := e.r.Preview(context.Background(), got.Pipe, 0); err != nil {
		t.Errorf("preview of the masked definition: %v", err)
	}
	// A masked URL that names no feed, or two, is no input.
	other := storage.Feed{Kind: storage.KindRemote, URL: "https://alice:other@feeds.example.org/lab.rss", Policy: "auto"}
	if err := e.st.CreateFeed(&other); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Preview(context.Background(), got.Pipe, 0); err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "other@") {
		t.Errorf("an ambiguous masked URL: %v", err)
	}
	// The stored pipe's masked definition, sent back once the mask is
	// ambiguous, still reads the feed it read, and stores its real URL.
	upd, err = e.r.Update(context.Background(), info.ID, got.Pipe)
	if err != nil {
		t.Fatal(err)
	}
	if len(upd.Inputs) != 1 || upd.Inputs[0].FeedID != f.ID {
		t.Errorf("inputs after an update with an ambiguous mask: %+v", upd.Inputs)
	}
	if sp, err := e.st.Pipe(info.ID); err != nil || !strings.Contains(string(sp.Def), "hunter2") {
		t.Errorf("stored definition: %s %v", sp.Def, err)
	}
	// A new pipe naming an ambiguous masked URL is refused: nothing is
	// subscribed to the masked URL itself.
	var subscribed []string
	r2, err := New(Options{Store: e.st, Clock: schedule.NewVirtualClock(t0), Subscribe: func(f storage.Feed) (storage.Feed, error) {
		subscribed = append(subscribed, f.URL)
		f.Kind = storage.KindRemote
		err := e.st.CreateFeed(&f)
		return f, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Create(context.Background(), hotPipe("hot2", "https://alice:xxxxx@feeds.example.org/lab.rss")); !errors.Is(err, ErrInputNotFound) {
		t.Errorf("create with an ambiguous masked URL: %v", err)
	}
	if len(subscribed) != 0 {
		t.Errorf("subscribed to %q", subscribed)
	}
	// An unknown URL with credentials of its own is subscribed as before.
	if _, err := r2.Create(context.Background(), hotPipe("hot3", "https://bob:pw@feeds.example.org/new.rss")); err != nil || len(subscribed) != 1 {
		t.Errorf("create with a new URL: %v, subscribed %q", err, subscribed)
	}
}

// The inputs a run reads from the store count against its byte budget
// before it runs: a preview or run over it fails naming the source.
func TestInputsByteBudget(t *testing.T) {
	st := newEnv(t, schedule.NewVirtualClock(t0)).st
	r, err := New(Options{Store: st, Clock: schedule.NewVirtualClock(t0), Limits: transform.Limits{MaxRunBytes: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	f := storage.Feed{Kind: storage.KindSensor, Slug: "big", Policy: "auto"}
	if err := st.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	var its []storage.Item
	for i := range 20 {
		its = append(its, storage.Item{ID: fmt.Sprint("i", i), Summary: strings.Repeat("x", 8<<10), Published: t0, Fetched: t0})
	}
	if _, err := st.AddItems(f.ID, its); err != nil {
		t.Fatal(err)
	}
	_, err = r.Preview(context.Background(), hotPipe("", "sensor/big"), 0)
	var ne *transform.NodeError
	if !errors.Is(err, transform.ErrByteLimit) || !errors.As(err, &ne) || ne.Node != "in0" || ne.Op != "source" {
		t.Errorf("preview over the budget: %v", err)
	}
}

// A saved pipe whose input gained more than a run may hold reads it a
// part per run, oldest first, and catches up: every item once, no run
// over the budget, never stuck failing on the same items.
func TestSavedPipeCatchesUpOnBacklog(t *testing.T) {
	st := newEnv(t, schedule.NewVirtualClock(t0)).st
	lim := transform.Limits{MaxRunBytes: 64 << 10}
	r, err := New(Options{Store: st, Clock: schedule.NewVirtualClock(t0), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	f := storage.Feed{Kind: storage.KindSensor, Slug: "big", Policy: "auto"}
	if err := st.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	add := func(from, n int) {
		var its []storage.Item
		for i := from; i < from+n; i++ {
			its = append(its, storage.Item{ID: fmt.Sprint("i", i), Summary: strings.Repeat("x", 8<<10), Published: t0, Fetched: t0})
		}
		if _, err := st.AddItems(f.ID, its); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 1)
	info, err := r.Create(context.Background(), hotPipe("big-hot", "sensor/big"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.RunNow(context.Background(), info.ID); err != nil || res.In != 1 {
		t.Fatalf("first run: %+v %v", res, err)
	}
	add(1, 20) // 20 × 8 KiB: more than half of the 64 KiB run budget
	total, runs := 0, 0
	for total < 20 && runs < 20 {
		res, err := r.RunNow(context.Background(), info.ID)
		if err != nil {
			t.Fatalf("run %d: %v", runs, err)
		}
		if res.In == 0 || res.In >= 20 {
			t.Fatalf("run %d read %d items, want a part of the backlog", runs, res.In)
		}
		total += res.In
		runs++
	}
	if total != 20 {
		t.Errorf("%d runs read %d items, want 20", runs, total)
	}
	if res, err := r.RunNow(context.Background(), info.ID); err != nil || res.In != 0 {
		t.Errorf("run after catching up: %+v %v", res, err)
	}
}
