package aggregator_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"text/template"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Items without dates that a document lists beyond the feed's retention
// stay dropped when the service restarts: the first poll after the
// restart reads every item of the document (the service has not seen it
// before), dates the undated ones by the fetch, and the store refuses
// those retention dropped. Items new to the document are stored, whether
// the document lists its items newest or oldest first.
func TestDroppedUndatedItemsStayDroppedAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		format       string // testdata/dropped/undated.<format>
		kept, listed int
		oldestFirst  bool
	}{
		{name: "rss", format: "rss", kept: 20, listed: 30},
		{name: "atom", format: "atom", kept: 20, listed: 30},
		{name: "json", format: "json", kept: 20, listed: 30},
		{name: "rss-oldest-first", format: "rss", kept: 20, listed: 30, oldestFirst: true},
		{name: "json-few-kept", format: "json", kept: 5, listed: 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := template.Must(template.ParseFiles(filepath.Join("testdata", "dropped", "undated."+tc.format)))
			synctest.Test(t, func(t *testing.T) {
				testDroppedAfterRestart(t, tmpl, tc.format, tc.kept, tc.listed, tc.oldestFirst)
			})
		})
	}
}

func testDroppedAfterRestart(t *testing.T, tmpl *template.Template, format string, kept, listed int, oldestFirst bool) {
	path := filepath.Join(t.TempDir(), "s.db")
	open := func() *storage.Store {
		st, err := storage.Open(path, storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	start := time.Now()
	// The document lists the newest listed readings, a new one each
	// minute.
	var mu sync.Mutex
	var top int
	doc := func() []byte {
		mu.Lock()
		top = listed + int(time.Since(start)/time.Minute)
		ids := make([]int, 0, listed)
		for id := top; id > top-listed; id-- {
			ids = append(ids, id)
		}
		mu.Unlock()
		if oldestFirst {
			slices.Reverse(ids)
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, ids); err != nil {
			t.Error(err)
		}
		return b.Bytes()
	}
	pub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", map[string]string{"json": "application/feed+json", "rss": "application/rss+xml", "atom": "application/atom+xml"}[format])
		_, _ = w.Write(doc())
	})
	itemID := func(id int) string {
		if format == "atom" {
			return fmt.Sprint("urn:example:gauge:", id)
		}
		return fmt.Sprint("gauge-", id)
	}
	// run polls the feed every minute for d with a service of its own
	// (subscribing it first when sub).
	run := func(st *storage.Store, d time.Duration, sub bool) storage.Feed {
		svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Scheduler: schedule.Config{Workers: 1},
			Fetcher: fetcher.New(fetcher.Options{Transport: handlerTransport{pub}})})
		if err != nil {
			t.Fatal(err)
		}
		var f storage.Feed
		if !sub {
			if err := svc.Load(); err != nil {
				t.Fatal(err)
			}
		}
		if sub {
			if f, err = svc.Subscribe(storage.Feed{URL: "https://sensors.example.org/gauge." + format, Policy: "fixed-1m",
				Retention: storage.Retention{MaxItems: kept}}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- svc.Run(ctx) }()
		time.Sleep(d)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return f
	}
	st := open()
	f := run(st, 4*time.Minute+30*time.Second, true)
	mu.Lock()
	before := top
	mu.Unlock()
	stored := func(st *storage.Store, id int) bool {
		_, err := st.Item(f.ID, itemID(id))
		return err == nil
	}
	var dropped []int // listed by the last document before the restart, not stored
	for id := before - listed + 1; id <= before; id++ {
		if !stored(st, id) {
			dropped = append(dropped, id)
		}
	}
	if len(dropped) < listed-kept {
		t.Fatalf("before the restart, %d of the %d items listed are not stored, want the %d retention dropped or more", len(dropped), listed, listed-kept)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = open()
	defer st.Close()
	run(st, 3*time.Minute+30*time.Second, false)
	mu.Lock()
	after := top
	mu.Unlock()
	back := 0
	for _, id := range dropped {
		if stored(st, id) {
			back++
		}
	}
	if back > 0 {
		t.Errorf("%d of the %d items retention dropped were stored again after the restart", back, len(dropped))
	}
	if after-before < 3 {
		t.Fatalf("%d items new after the restart, want 3 or more", after-before)
	}
	for id := before + 1; id <= after; id++ {
		if !stored(st, id) {
			t.Errorf("item %s, new after the restart, not stored", itemID(id))
		}
	}
	if err := st.Check(); err != nil {
		t.Error(err)
	}
}
