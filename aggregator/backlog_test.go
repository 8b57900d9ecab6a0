package aggregator_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
		svc := emptyFeedService(t, 2, func(r *http.Request) {
			if r.URL.Path != "/old.rss" {
				time.Sleep(time.Second) // a slow host
			}
			mu.Lock()
			defer mu.Unlock()
			polls[r.URL.Path]++
			if r.URL.Path == "/old.rss" {
				if !last.IsZero() {
					gap = max(gap, time.Since(last))
				}
				last = time.Now()
			}
		})
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
