package aggregator_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// A burst of new subscriptions slower to fetch than the fetch slots
// allow (200 feeds on slow hosts, two slots, a second a fetch) does not
// stop the feeds already polled: a 10 s feed keeps being polled, a few
// seconds late at most, while the new feeds get their first fetches.
func TestNewFeedsDoNotStarvePolledOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		polls := map[string]int{}
		var last time.Time // the old feed's last poll
		var gap time.Duration
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/old.rss" {
				time.Sleep(time.Second) // a slow host
			}
			mu.Lock()
			polls[r.URL.Path]++
			if r.URL.Path == "/old.rss" {
				if !last.IsZero() {
					gap = max(gap, time.Since(last))
				}
				last = time.Now()
			}
			mu.Unlock()
			w.Header().Set("Content-Type", "application/rss+xml")
			_, _ = w.Write([]byte(`<rss version="2.0"><channel><title>t</title></channel></rss>`))
		})
		st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Scheduler: schedule.Config{Workers: 2},
			Fetcher: fetcher.New(fetcher.Options{Transport: handlerTransport{mux}})})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Subscribe(storage.Feed{URL: "http://pub.test/old.rss", Policy: "fixed-10s"}); err != nil {
			t.Fatal(err)
		}
		stop := runService(t, svc)
		defer stop()
		time.Sleep(30 * time.Second)
		for i := range 200 {
			if _, err := svc.Subscribe(storage.Feed{URL: fmt.Sprintf("http://pub.test/new-%d.rss", i), Policy: "fixed-1h"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		firsts := len(polls) - 1
		t.Logf("old feed: %d polls, longest gap %v; %d new feeds fetched", polls["/old.rss"], gap, firsts)
		if gap > 15*time.Second || firsts < 150 {
			t.Fatalf("old feed's longest gap %v, %d of 200 new feeds fetched: want ≤ 15 s and ≥ 150", gap, firsts)
		}
	})
}
