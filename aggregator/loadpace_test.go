package aggregator_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Feeds never polled when the service loads (a bulk import cut short by a
// restart) have their first fetches paced at FirstFetchRate; a feed
// polled before resumes its own schedule.
func TestLoadPacesFeedsNeverPolled(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := schedule.NewVirtualClock(t0)
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 1000
	for i := range n {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://h%d.example/feed.rss", i%40), Policy: "auto"}
		f.URL += fmt.Sprint("?n=", i)
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Clock: clock,
		Scheduler: schedule.Config{Workers: 1}, Fetcher: fetcher.New(fetcher.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	atOnce := 0
	for id := 1; id <= n; id++ {
		due, _, _, ok := svc.Scheduler().Placement(id)
		if !ok {
			t.Fatalf("feed %d not scheduled", id)
		}
		if !due.After(t0) {
			atOnce++
		}
		if due.After(last) {
			last = due
		}
	}
	want := time.Duration(float64(n-1) / aggregator.FirstFetchRate * float64(time.Second))
	if atOnce > 1 || last.Sub(t0) < want-time.Millisecond || last.Sub(t0) > want+time.Second {
		t.Errorf("%d of %d feeds due at once, the last in %v: want one, the last in %v", atOnce, n, last.Sub(t0), want)
	}
}
