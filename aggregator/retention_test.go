package aggregator_test

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Items past a feed's age limit go although the feed adds nothing more:
// the service applies age limits every RetentionSweep. A feed without an
// age limit keeps its items.
func TestAgeLimitAppliedWithoutNewItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		aged := storage.Feed{Kind: storage.KindSensor, Slug: "aged", Title: "aged", Policy: "auto",
			Retention: storage.Retention{MaxAge: time.Hour}}
		kept := storage.Feed{Kind: storage.KindSensor, Slug: "kept", Title: "kept", Policy: "auto"}
		for _, f := range []*storage.Feed{&aged, &kept} {
			if err := st.CreateFeed(f); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if _, err := st.AddItems(f.ID, []storage.Item{
				{ID: "old", Published: now.Add(-50 * time.Minute), Fetched: now},
				{ID: "new", Published: now.Add(-10 * time.Minute), Fetched: now},
			}); err != nil {
				t.Fatal(err)
			}
		}
		svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Scheduler: schedule.Config{Workers: 1},
			Fetcher: fetcher.New(fetcher.Options{})})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- svc.Run(ctx) }()
		count := func(f storage.Feed) int {
			n, err := st.CountItems(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		// 20 minutes on, the older item is past the hour: the sweep at
		// 10 minutes left it, the one at 20 removes it.
		time.Sleep(aggregator.RetentionSweep + time.Second)
		synctest.Wait()
		if n := count(aged); n != 2 {
			t.Errorf("after %v: %d items, want 2", aggregator.RetentionSweep, n)
		}
		time.Sleep(aggregator.RetentionSweep)
		synctest.Wait()
		if n := count(aged); n != 1 {
			t.Errorf("after %v: %d items, want 1 (the older one past the hour)", 2*aggregator.RetentionSweep, n)
		}
		time.Sleep(6 * aggregator.RetentionSweep)
		synctest.Wait()
		if n, m := count(aged), count(kept); n != 0 || m != 2 {
			t.Errorf("after %v: %d items of the aged feed (want 0), %d of the other (want 2)", 8*aggregator.RetentionSweep, n, m)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
