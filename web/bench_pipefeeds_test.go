package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web/publish"
)

// benchPipeItems is the size of the benchmarked feed: a full default
// document.
const benchPipeItems = DefaultPipeFeedLimit

// newBenchPipe returns a store with one pipe output feed, "bench", of n
// items like a pipe publishes them: readings (some with a position),
// digests and alerts with HTML summaries, a minute apart.
func newBenchPipe(b *testing.B, n int) *storage.Store {
	b.Helper()
	clock := &testClock{t: pipeT0}
	st, err := storage.Open(filepath.Join(b.TempDir(), "slogfeed.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f := storage.Feed{Kind: storage.KindPipe, Slug: "bench", Title: "Benchmark pipe", Policy: "pipe"}
	if err := st.CreateFeed(&f); err != nil {
		b.Fatal(err)
	}
	items := make([]storage.Item, 0, n)
	for i := range n {
		at := pipeItemsAt.Add(time.Duration(i) * time.Minute)
		rd := &storage.Reading{Value: 20 + float64(i%37)/8, Unit: "C", Sensor: fmt.Sprintf("lab-%d", i%4), Time: at.Add(-time.Second)}
		it := storage.Item{ID: fmt.Sprintf("%s/%s/%d", rd.Sensor, at.Format(time.RFC3339), i), Published: at, Reading: rd}
		switch i % 5 {
		case 1:
			rd.Lat, rd.Lon = ptr(50.81+float64(i)/1000), ptr(4.38)
		case 2:
			it.Reading = nil
			it.Digest = &storage.Digest{Field: "value", Count: 12, Sum: 258, Min: 20.5, Max: 22.75, From: at.Add(-time.Hour), To: at}
		case 3:
			it.Title = fmt.Sprintf("Alert: %s above 25 °C", rd.Sensor)
			it.Summary = `<p>Temperature <b>high</b> &amp; rising: <a href="https://lab.example.org/">lab</a></p>`
			it.Link = fmt.Sprintf("https://lab.example.org/alerts/%d", i)
		}
		if it.Reading != nil && it.Title == "" {
			it.Title = publish.ReadingTitle(*rd)
			it.Summary = publish.ReadingSummary(*rd)
		}
		items = append(items, it)
	}
	if added, err := st.AddItems(f.ID, items); err != nil || len(added) != n {
		b.Fatalf("%d added: %v", len(added), err)
	}
	return st
}

// BenchmarkPipeFeed compares serving a republished pipe feed (50 items,
// RSS) with net/http.FileServer serving the very same bytes from a file,
// at the handler (no network), for full responses and for 304s (our
// If-None-Match, the file server's If-Modified-Since). Each reports req/s.
func BenchmarkPipeFeed(b *testing.B) {
	st := newBenchPipe(b, benchPipeItems)
	now := pipeItemsAt.Add(benchPipeItems * time.Minute)
	ours := PipeFeedHandler(st, PipeFeedOptions{
		BaseURL: pipeBaseURL,
		Now:     func() time.Time { return now },
		Hints: func(storage.Feed, time.Time) runner.FeedHints {
			return runner.FeedHints{Next: now.Add(30 * time.Second)}
		},
	})
	first := pipeGet(ours, "GET", "/feeds/bench.rss", nil)
	if first.Code != 200 {
		b.Fatalf("status %d: %s", first.Code, first.Body)
	}
	doc, etag := first.Body.Bytes(), first.Header().Get("ETag")

	dir := b.TempDir()
	path := filepath.Join(dir, "bench.rss")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	files := http.FileServer(http.Dir(dir))

	cases := []struct {
		name   string
		h      http.Handler
		target string
		header [2]string
		code   int
	}{
		{"ours/full", ours, "/feeds/bench.rss", [2]string{}, 200},
		{"ours/304", ours, "/feeds/bench.rss", [2]string{"If-None-Match", etag}, 304},
		{"fileserver/full", files, "/bench.rss", [2]string{}, 200},
		{"fileserver/304", files, "/bench.rss", [2]string{"If-Modified-Since", fi.ModTime().UTC().Format(http.TimeFormat)}, 304},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", c.target, nil)
			if c.header[0] != "" {
				r.Header.Set(c.header[0], c.header[1])
			}
			w := httptest.NewRecorder()
			c.h.ServeHTTP(w, r)
			if w.Code != c.code || c.code == 200 && w.Body.Len() != len(doc) {
				b.Fatalf("status %d with %d bytes, want %d with %d", w.Code, w.Body.Len(), c.code, len(doc))
			}
			if c.code == 200 {
				b.SetBytes(int64(len(doc)))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				w := httptest.NewRecorder()
				c.h.ServeHTTP(w, r)
				if w.Code != c.code {
					b.Fatalf("status %d", w.Code)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
