package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// TestParseHubs: the WebSub hubs and self link of RSS (atom:link under any
// prefix), Atom and JSON Feed documents, resolved, filtered and bounded.
func TestParseHubs(t *testing.T) {
	rss := func(ns, links string) string {
		return `<?xml version="1.0"?><rss version="2.0"` + ns + `><channel><title>t</title>` + links +
			`<item><title>a</title><guid>a</guid></item></channel></rss>`
	}
	const atomNS = ` xmlns:atom="http://www.w3.org/2005/Atom"`
	tests := []struct {
		name     string
		doc      string
		base     string
		wantHubs []string
		wantSelf string
	}{
		{
			name:     "rss atom:link",
			doc:      rss(atomNS, `<atom:link rel="hub" href="https://hub.test/"/><atom:link rel="self" href="https://pub.test/f.rss"/>`),
			wantHubs: []string{"https://hub.test/"},
			wantSelf: "https://pub.test/f.rss",
		},
		{
			name:     "rss other prefix",
			doc:      rss(` xmlns:a10="http://www.w3.org/2005/Atom"`, `<a10:link rel="self" href="https://pub.test/f.rss"/><a10:link rel="hub" href="https://hub.test/h"/>`),
			wantHubs: []string{"https://hub.test/h"},
			wantSelf: "https://pub.test/f.rss",
		},
		{
			name:     "rss relative links",
			doc:      rss(atomNS, `<atom:link rel="hub" href="/websub/hub"/><atom:link rel="self" href="f.rss"/>`),
			base:     "http://pub.test/feeds/x.rss",
			wantHubs: []string{"http://pub.test/websub/hub"},
			wantSelf: "http://pub.test/feeds/f.rss",
		},
		{
			name:     "rss without hub",
			doc:      rss(atomNS, `<atom:link rel="self" href="https://pub.test/f.rss"/>`),
			wantSelf: "https://pub.test/f.rss",
		},
		{
			name: "rss hostile hubs dropped, duplicates once, at most MaxHubs",
			doc: rss(atomNS, `<atom:link rel="hub" href="javascript:alert(1)"/><atom:link rel="hub" href="ftp://hub.test/"/>`+
				`<atom:link rel="hub" href="https://user:pw@hub.test/"/><atom:link rel="hub" href="https://h1.test/"/>`+
				`<atom:link rel="hub" href="https://h1.test/"/><atom:link rel="hub" href="https://h2.test/"/>`+
				`<atom:link rel="hub" href="https://h3.test/"/><atom:link rel="hub" href="https://h4.test/"/><atom:link rel="hub" href="https://h5.test/"/>`),
			wantHubs: []string{"https://h1.test/", "https://h2.test/", "https://h3.test/", "https://h4.test/"},
		},
		{
			name: "atom",
			doc: `<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>urn:x</id>` +
				`<link rel="alternate" href="https://pub.test/"/><link rel="hub" href="https://hub.test/"/><link rel="self" href="https://pub.test/f.atom"/>` +
				`<entry><title>a</title><id>urn:a</id><updated>2026-01-01T00:00:00Z</updated></entry></feed>`,
			wantHubs: []string{"https://hub.test/"},
			wantSelf: "https://pub.test/f.atom",
		},
		{
			name:     "json feed",
			doc:      `{"version":"https://jsonfeed.org/version/1.1","title":"t","feed_url":"https://pub.test/f.json","hubs":[{"type":"rssCloud","url":"https://cloud.test/"},{"type":"WebSub","url":"https://hub.test/"}],"items":[{"id":"a","title":"a"}]}`,
			wantHubs: []string{"https://hub.test/"},
			wantSelf: "https://pub.test/f.json",
		},
		{
			name:     "json feed with a bad hubs member",
			doc:      `{"version":"https://jsonfeed.org/version/1.1","title":"t","hubs":"nope","items":[{"id":"a","title":"a"}]}`,
			wantHubs: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parser.Parse([]byte(tt.doc), "", parser.Options{BaseURL: tt.base})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Hubs, tt.wantHubs) || p.Self != tt.wantSelf {
				t.Fatalf("hubs %q self %q, want %q and %q", p.Hubs, p.Self, tt.wantHubs, tt.wantSelf)
			}
			if len(p.Items) != 1 {
				t.Fatalf("%d items, want 1: the links must not disturb the items", len(p.Items))
			}
		})
	}
}

func TestPushFallback(t *testing.T) {
	tests := []struct {
		period, want time.Duration
	}{
		{0, 5 * time.Minute},
		{-time.Second, 5 * time.Minute},
		{30 * time.Second, 5 * time.Minute},
		{2 * time.Minute, 8 * time.Minute},
		{10 * time.Minute, 40 * time.Minute},
		{15 * time.Minute, time.Hour},
		{48 * time.Hour, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.period.String(), func(t *testing.T) {
			if got := aggregator.PushFallback(tt.period); got != tt.want {
				t.Fatalf("PushFallback(%v) = %v, want %v", tt.period, got, tt.want)
			}
		})
	}
}

// pushDoc is an RSS document of items named by ids, one minute apart,
// the first dated at newest.
func pushDoc(newest time.Time, ids ...string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>p</title>` +
		`<atom:link rel="hub" href="http://hub.test/websub/hub"/><atom:link rel="self" href="http://pub.test/f.rss"/>`)
	for i, id := range ids {
		fmt.Fprintf(&b, "<item><title>%s</title><guid>%s</guid><pubDate>%s</pubDate></item>", id, id, newest.Add(-time.Duration(i)*time.Minute).UTC().Format(time.RFC1123Z))
	}
	b.WriteString("</channel></rss>")
	return b.String()
}

// TestIngest: a pushed document is stored as a poll would store it (new
// items only, publish times from Slogfeed-Phase, an observation, the
// feed's counters, OnNewItems) without touching the poll state; bad
// pushes fail with the error naming why.
func TestIngest(t *testing.T) {
	start := time.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("/f.rss", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write([]byte(pushDoc(start.Add(-time.Minute), "a", "b")))
	})
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	var notified []string
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:   st,
		Fetcher: fetcher.New(fetcher.Options{Transport: handlerTransport{mux}, MaxBody: 64 << 10}),
		OnNewItems: func(f storage.Feed, items []storage.Item) {
			mu.Lock()
			defer mu.Unlock()
			for _, it := range items {
				notified = append(notified, it.ID)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Subscribe(storage.Feed{URL: "http://pub.test/f.rss"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.FetchNow(t.Context(), f.ID); err != nil {
		t.Fatal(err)
	}
	sensor := storage.Feed{Kind: storage.KindSensor, Slug: "s", Policy: "auto"}
	if err := st.CreateFeed(&sensor); err != nil {
		t.Fatal(err)
	}
	received := time.Now().Add(10 * time.Minute) // a push ten minutes later
	phase := 2 * time.Second

	tests := []struct {
		name      string
		feed      uint64
		body      string
		header    http.Header
		wantAdded int
		wantErr   error
	}{
		{"new item", f.ID, pushDoc(received.Add(-phase), "c", "a", "b"),
			http.Header{"Content-Type": {"application/rss+xml"}, "Slogfeed-Phase": {"2.000"}}, 1, nil},
		{"same again", f.ID, pushDoc(received.Add(-phase), "c", "a", "b"),
			http.Header{"Content-Type": {"application/rss+xml"}}, 0, nil},
		{"unknown feed", 999, pushDoc(received, "x"), nil, 0, storage.ErrFeedNotFound},
		{"sensor feed", sensor.ID, pushDoc(received, "x"), nil, 0, aggregator.ErrNotRemote},
		{"too large", f.ID, strings.Repeat(" ", 65<<10), nil, 0, fetcher.ErrTooLarge},
		{"html", f.ID, "<!doctype html><html><body>hi</body></html>", http.Header{"Content-Type": {"text/html"}}, 0, parser.ErrNotFeed},
		{"malformed", f.ID, `<rss version="2.0"><channel><item>`, nil, 0, parser.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := svc.Ingest(t.Context(), tt.feed, []byte(tt.body), tt.header, received)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if n != tt.wantAdded {
				t.Fatalf("%d added, want %d", n, tt.wantAdded)
			}
		})
	}

	got, err := st.Feed(f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Polls != 1 || got.Hits != 1 || got.Items != 3 || !got.LastHit.Equal(received) || got.LastError != "" {
		t.Fatalf("feed after pushes: polls %d hits %d items %d last hit %v error %q; want 1 poll, 1 hit, 3 items, last hit %v, no error",
			got.Polls, got.Hits, got.Items, got.LastHit, got.LastError, received)
	}
	it, err := st.Item(f.ID, "c")
	if err != nil {
		t.Fatalf("pushed item not stored: %v", err)
	}
	if !it.Fetched.Equal(received) {
		t.Fatalf("pushed item fetched %v, want %v", it.Fetched, received)
	}
	obs, err := st.Observations(f.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 3 {
		t.Fatalf("%d observations, want 3 (the poll and two pushes)", len(obs))
	}
	push := obs[1]
	if !push.Hit || len(push.Published) != 1 || !push.Published[0].Equal(received.Add(-phase).Truncate(time.Second)) && !push.Published[0].Equal(received.Add(-phase)) {
		t.Fatalf("push observation %+v, want a hit published at received − phase", push)
	}
	if obs[2].Hit {
		t.Fatalf("the repeated push is a hit: %+v", obs[2])
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(notified, []string{"b", "a", "c"}) {
		t.Fatalf("OnNewItems heard of %q, want b, a (the poll, oldest first) then c (the push)", notified)
	}
}

// TestSetPushed: a pushed feed's polls become fallback checks at least
// PushFallback apart; the end of the push brings polling back at once;
// watchers hear of every poll (with the document's hub and self link) and
// of the unsubscription.
func TestSetPushed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		mux := http.NewServeMux()
		mux.HandleFunc("/f.rss", func(w http.ResponseWriter, r *http.Request) {
			// A new item every 30 s.
			n := int(time.Since(start) / (30 * time.Second))
			w.Header().Set("Content-Type", "application/rss+xml")
			_, _ = w.Write([]byte(pushDoc(start.Add(time.Duration(n)*30*time.Second), fmt.Sprint("i", n), fmt.Sprint("i", n-1))))
		})
		st, svc := newMuxService(t, mux)
		var mu sync.Mutex
		var fetches []aggregator.Fetched
		var removed []uint64
		svc.Watch(aggregator.Watcher{
			Fetched: func(ev aggregator.Fetched) { mu.Lock(); fetches = append(fetches, ev); mu.Unlock() },
			Removed: func(id uint64) { mu.Lock(); removed = append(removed, id); mu.Unlock() },
		})
		f, stop := subscribeAndRun(t, svc, "http://pub.test/f.rss", "fixed-1m")
		polls := func() int64 {
			x, err := st.Feed(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			return x.Polls
		}

		time.Sleep(5*time.Minute + 30*time.Second) // between two polls of the grid
		if n := polls(); n < 4 {
			t.Fatalf("%d polls in 5 min with fixed-1m", n)
		}
		if svc.SetPushed(999, time.Now().Add(time.Hour)) {
			t.Fatal("SetPushed of an unknown feed reported true")
		}
		until := time.Now().Add(24 * time.Hour)
		if !svc.SetPushed(f.ID, until) || !svc.Pushed(f.ID).Equal(until) {
			t.Fatalf("SetPushed: Pushed = %v, want %v", svc.Pushed(f.ID), until)
		}
		time.Sleep(time.Minute) // the poll already planned happens
		before := polls()
		time.Sleep(3*time.Minute + 30*time.Second) // less than PushFallbackMin after it
		if n := polls(); n != before {
			t.Fatalf("%d polls within 4 min of a pushed feed's last poll, want none", n-before)
		}
		time.Sleep(90 * time.Second)
		if n := polls(); n != before+1 {
			t.Fatalf("%d fallback polls 5 min after the last poll, want 1", n-before)
		}
		svc.SetPushed(f.ID, time.Time{})
		time.Sleep(time.Second)
		if n := polls(); n != before+2 {
			t.Fatalf("%d polls a second after the push ended, want one more at once", n-before-1)
		}
		time.Sleep(3 * time.Minute)
		if n := polls(); n < before+4 {
			t.Fatalf("%d polls in 3 min after the push ended, want fixed-1m polling back", n-before-2)
		}

		if err := svc.Unsubscribe(f.ID); err != nil {
			t.Fatal(err)
		}
		stop()
		mu.Lock()
		defer mu.Unlock()
		if len(fetches) < 5 {
			t.Fatalf("watchers heard of %d polls", len(fetches))
		}
		for _, ev := range fetches {
			if ev.Feed.ID != f.ID || ev.NotModified || !slices.Equal(ev.Hubs, []string{"http://hub.test/websub/hub"}) || ev.Self != "http://pub.test/f.rss" {
				t.Fatalf("Fetched event %+v: want feed %d with its hub and self link", ev, f.ID)
			}
		}
		if !slices.Equal(removed, []uint64{f.ID}) {
			t.Fatalf("Removed heard of %v, want [%d]", removed, f.ID)
		}
	})
}

// newMuxService returns a store in t.TempDir() and a service of two
// workers fetching from mux.
func newMuxService(t *testing.T, mux http.Handler) (*storage.Store, *aggregator.Service) {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:     st,
		Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{mux}}),
		Scheduler: schedule.Config{Workers: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, svc
}

// subscribeAndRun subscribes svc to url on policy and runs it until stop,
// which fails the test if Run does.
func subscribeAndRun(t *testing.T, svc *aggregator.Service, url, policy string) (storage.Feed, func()) {
	t.Helper()
	f, err := svc.Subscribe(storage.Feed{URL: url, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	return f, func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// PlannedFetch: when a fetch's items are expected to be stored, which a
// pipe plans its own updates from.
func TestPlannedFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		hold := make(chan struct{})
		var held atomic.Bool
		mux := http.NewServeMux()
		mux.HandleFunc("/f.rss", func(w http.ResponseWriter, r *http.Request) {
			if held.Load() {
				<-hold
			}
			time.Sleep(2 * time.Second) // each fetch takes 2 s
			n := int(time.Since(start) / time.Minute)
			w.Header().Set("Content-Type", "application/rss+xml")
			_, _ = w.Write([]byte(pushDoc(start.Add(time.Duration(n)*time.Minute), fmt.Sprint("i", n), fmt.Sprint("i", n-1))))
		})
		_, svc := newMuxService(t, mux)
		if _, ok := svc.PlannedFetch(999, time.Now()); ok {
			t.Error("a plan for a feed the service does not know")
		}
		f, stop := subscribeAndRun(t, svc, "http://pub.test/f.rss", "fixed-1m")

		time.Sleep(3*time.Minute + 30*time.Second)
		next, ok := svc.NextFetch(f.ID)
		if !ok || !next.After(time.Now()) {
			t.Fatalf("next fetch %v (%v), want one ahead", next, ok)
		}
		// Twice the 2 s the fetches took.
		if got, ok := svc.PlannedFetch(f.ID, time.Now()); !ok || !got.Equal(next.Add(4*time.Second)) {
			t.Errorf("planned %v (%v), want the next fetch %v + 4 s", got, ok, next)
		}
		// A fetch under way: planned from now.
		held.Store(true)
		time.Sleep(time.Until(next) + time.Second)
		synctest.Wait()
		if got, ok := svc.PlannedFetch(f.ID, time.Now()); !ok || !got.Equal(time.Now().Add(4*time.Second)) {
			t.Errorf("planned during a fetch %v (%v), want now + 4 s", got, ok)
		}
		held.Store(false)
		close(hold)
		time.Sleep(30 * time.Second)
		// A pushed feed's items come from its hub, not from fetches.
		svc.SetPushed(f.ID, time.Now().Add(time.Hour))
		if got, ok := svc.PlannedFetch(f.ID, time.Now()); ok {
			t.Errorf("planned %v for a pushed feed", got)
		}
		stop()
	})
}

// TestPushedSkipWaitsOneFallback: a fetch planned before a hub began
// pushing the feed is skipped, and the next poll comes one fallback
// interval after the last poll, not one after the skipped fetch.
func TestPushedSkipWaitsOneFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mux := http.NewServeMux()
		mux.HandleFunc("/f.rss", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/rss+xml")
			_, _ = w.Write([]byte(pushDoc(time.Now().Add(-time.Minute), "a", "b")))
		})
		st, svc := newMuxService(t, mux)
		f, stop := subscribeAndRun(t, svc, "http://pub.test/f.rss", "fixed-1m")
		defer stop()
		time.Sleep(5*time.Minute + 30*time.Second) // between two polls of the grid
		if !svc.SetPushed(f.ID, time.Now().Add(24*time.Hour)) {
			t.Fatal("SetPushed failed")
		}
		time.Sleep(time.Minute) // the fetch planned at 6 min is skipped
		x, err := st.Feed(f.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := x.LastFetch.Add(aggregator.PushFallback(0))
		if next, _ := svc.NextFetch(f.ID); !next.Equal(want) {
			t.Fatalf("next fetch %v after the last poll, want %v (one fallback interval)",
				next.Sub(x.LastFetch), want.Sub(x.LastFetch))
		}
	})
}
