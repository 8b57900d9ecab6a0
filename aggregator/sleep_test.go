package aggregator_test

import (
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// SetSleep: windows set after a fetch was planned skip it to their end;
// windows cleared or shortened then bring the feed back to its plan (not
// left waiting for the old end, days away), and a feed with no window
// near its plan keeps it.
func TestSetSleepReplans(t *testing.T) {
	tests := []struct {
		name  string
		later string        // the windows set after the first skip
		want  time.Duration // the next fetch after that, from the start
	}{
		{"cleared", "", 2 * time.Minute},
		{"shortened", "00:00-00:10", 10 * time.Minute},
		{"kept", "00:00-06:00", 6 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var polls atomic.Int64
				svc := emptyFeedService(t, 0, func(*http.Request) { polls.Add(1) })
				start := time.Now() // midnight UTC in the bubble
				f, err := svc.Subscribe(storage.Feed{URL: "http://pub.test/f.rss", Policy: "fixed-2m"})
				if err != nil {
					t.Fatal(err)
				}
				stop := runService(t, svc)
				defer stop()
				time.Sleep(time.Second)
				synctest.Wait()
				if polls.Load() != 1 {
					t.Fatalf("%d polls at the start, want 1", polls.Load())
				}
				setSleep := func(text string) {
					p, err := schedule.ParseSleep(text)
					if err != nil {
						t.Fatal(err)
					}
					svc.SetSleep(f.ID, p)
				}
				// Windows over the planned fetch (2 min): skipped to 06:00.
				setSleep("00:00-06:00")
				time.Sleep(3 * time.Minute)
				synctest.Wait()
				if next, _ := svc.NextFetch(f.ID); polls.Load() != 1 || !next.Equal(start.Add(6*time.Hour)) {
					t.Fatalf("inside the windows: %d polls, next %v; want 1, %v", polls.Load(), next.Sub(start), 6*time.Hour)
				}
				setSleep(tc.later)
				want := start.Add(tc.want)
				if !want.After(time.Now()) {
					// Due since: polled at once.
					time.Sleep(time.Second)
					synctest.Wait()
					if polls.Load() != 2 {
						t.Fatalf("%d polls a second after the windows went, want 2", polls.Load())
					}
					return
				}
				synctest.Wait()
				if next, _ := svc.NextFetch(f.ID); polls.Load() != 1 || !next.Equal(want) {
					t.Fatalf("%d polls, next fetch %v after the start; want 1, %v", polls.Load(), next.Sub(start), tc.want)
				}
			})
		})
	}
}

// emptyFeedService is a service on a fresh store with workers fetch
// slots (0: the default) whose feeds all answer an empty RSS document,
// each request seen by seen first (it may take its time: a slow host).
func emptyFeedService(t *testing.T, workers int, seen func(*http.Request)) *aggregator.Service {
	t.Helper()
	pub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write([]byte(`<rss version="2.0"><channel><title>t</title></channel></rss>`))
	})
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Scheduler: schedule.Config{Workers: workers},
		Fetcher: fetcher.New(fetcher.Options{Transport: handlerTransport{pub}})})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
