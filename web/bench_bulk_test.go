package web_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

var bulkFeeds = flag.Int("bulk.feeds", 20_000, "feeds BenchmarkBulkSubscribe subscribes")

// BenchmarkBulkSubscribe subscribes -bulk.feeds feeds through POST
// /api/v1/feeds/bulk in requests of 1,000, as `slogfeed import` sends
// them, into a durable store (fsync, as serve runs): feeds/s, and the
// time 10^6 would take at that rate.
//
//	go test -run '^$' -bench BenchmarkBulkSubscribe -benchtime 1x ./web/ -args -bulk.feeds 100000
func BenchmarkBulkSubscribe(b *testing.B) {
	for b.Loop() {
		st, err := storage.Open(filepath.Join(b.TempDir(), "bulk.db"), storage.Options{})
		if err != nil {
			b.Fatal(err)
		}
		svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{})})
		if err != nil {
			b.Fatal(err)
		}
		h := web.New(web.Options{Store: st, Aggregator: svc})
		start := time.Now()
		for at := 0; at < *bulkFeeds; at += 1000 {
			var req struct {
				Feeds []map[string]string `json:"feeds"`
			}
			for i := at; i < min(at+1000, *bulkFeeds); i++ {
				req.Feeds = append(req.Feeds, map[string]string{"url": fmt.Sprintf("https://station-%d.example.org/%d.rss", i%977, i)})
			}
			body, _ := json.Marshal(req)
			r := httptest.NewRequest("POST", "/api/v1/feeds/bulk", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			var out web.BulkResponse
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil || out.Added != len(req.Feeds) {
				b.Fatalf("%d %.300s", rec.Code, rec.Body)
			}
		}
		took := time.Since(start)
		rate := float64(*bulkFeeds) / took.Seconds()
		b.ReportMetric(rate, "feeds/s")
		b.ReportMetric(1e6/rate, "s/million")
		st.Close()
	}
}
