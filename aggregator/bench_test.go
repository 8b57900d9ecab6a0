package aggregator_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// benchFeeds is how many loopback feeds of benchItems items one iteration
// fetches.
const (
	benchFeeds = 1000
	benchItems = 20
)

// benchServer serves /f/{i}: benchItems RSS items whose guids change with
// the round, so that every 200 carries 20 new items; it answers 304 to an
// If-None-Match of the current round's ETag.
func benchServer(round *atomic.Int64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := strings.TrimPrefix(r.URL.Path, "/f/")
		rd := round.Load()
		etag := fmt.Sprintf(`"%s-%d"`, i, rd)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, `<?xml version="1.0"?><rss version="2.0"><channel><title>feed %s</title><link>http://127.0.0.1/</link><description>bench</description>`, i)
		now := time.Now().UTC()
		for k := 0; k < benchItems; k++ {
			fmt.Fprintf(&b, `<item><title>reading %d</title><link>http://127.0.0.1/f/%s/%d</link><guid isPermaLink="false">%s-%d-%d</guid><pubDate>%s</pubDate><description>value %d.%d C</description></item>`,
				k, i, k, i, rd, k, now.Add(-time.Duration(k)*time.Minute).Format(time.RFC1123Z), k, k)
		}
		b.WriteString(`</channel></rss>`)
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Header().Set("ETag", etag)
		_, _ = io.WriteString(w, b.String())
	}))
}

// BenchmarkIngest measures fetch + parse + store of 1,000 loopback feeds of
// 20 items, for 200 responses (20 new items each) and for 304s, through the
// aggregator's real path (Service.FetchNow: conditional GET, parse,
// sanitise, deduplicate, store items, observation and feed counters in
// bbolt with fsync), beside a bare Go HTTP client loop over the same URLs
// in the same run. Each sub-benchmark reports feeds/s; divide the two for
// the ratio.
func BenchmarkIngest(b *testing.B) {
	var round atomic.Int64
	srv := benchServer(&round)
	defer srv.Close()
	urls := make([]string, benchFeeds)
	for i := range urls {
		urls[i] = srv.URL + "/f/" + strconv.Itoa(i)
	}

	for _, mode := range []string{"200", "304"} {
		b.Run("slogfeed/"+mode, func(b *testing.B) {
			st, err := storage.Open(filepath.Join(b.TempDir(), "bench.db"), storage.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			fetcher := aggregator.NewFetcher(aggregator.FetchOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
			svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher, Scheduler: schedule.Config{}})
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]uint64, len(urls))
			for i, u := range urls {
				f, err := svc.Subscribe(storage.Feed{URL: u})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = f.ID
			}
			ctx := context.Background()
			// Prime validators for the 304 run.
			for _, id := range ids {
				if _, err := svc.FetchNow(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				if mode == "200" {
					round.Add(1)
				}
				for _, id := range ids {
					o, err := svc.FetchNow(ctx, id)
					if err != nil || o.Err != "" {
						b.Fatalf("feed %d: %v %s", id, err, o.Err)
					}
					if mode == "200" && len(o.Published) != benchItems {
						b.Fatalf("feed %d: %d new items, want %d", id, len(o.Published), benchItems)
					}
				}
			}
			b.ReportMetric(float64(b.N*benchFeeds)/b.Elapsed().Seconds(), "feeds/s")
		})
		b.Run("bare-client/"+mode, func(b *testing.B) {
			client := &http.Client{Timeout: 30 * time.Second}
			etags := make([]string, len(urls))
			for i, u := range urls {
				resp, err := client.Get(u)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				etags[i] = resp.Header.Get("ETag")
			}
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				for i, u := range urls {
					req, _ := http.NewRequest(http.MethodGet, u, nil)
					if mode == "304" {
						req.Header.Set("If-None-Match", etags[i])
					}
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			b.ReportMetric(float64(b.N*benchFeeds)/b.Elapsed().Seconds(), "feeds/s")
		})
	}
}
