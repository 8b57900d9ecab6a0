package jetstream_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// TestConcurrentCreatesOnTwoNodes: a bulk subscription runs many
// CreateFeed calls side by side on each of two nodes (each call within the
// backend's call timeout, as the HTTP API makes them); every one succeeds,
// with IDs no other feed has, and a node opened afterwards (a restart)
// gives IDs above all of them.
func TestConcurrentCreatesOnTwoNodes(t *testing.T) {
	c := jstest.NewCluster(t, 3)
	a, _ := openStore(t, c)
	b, _ := openStore(t, c)
	const workers, each = 32, 8
	nodes := []*sjs.Backend{sjs.NewBackend(a, 0), sjs.NewBackend(b, 0)}
	var (
		mu   sync.Mutex
		seen = map[uint64]string{}
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	for n, be := range nodes {
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://feeds.example/%d/%d/%d.xml", n, w, i), Policy: "auto"}
					err := be.CreateFeed(&f)
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else if prev, dup := seen[f.ID]; dup {
						errs = append(errs, fmt.Errorf("ID %d given to %s and %s", f.ID, prev, f.URL))
					} else {
						seen[f.ID] = f.URL
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d creates in %s", len(nodes)*workers*each, time.Since(start).Round(time.Millisecond))
	for i, err := range errs {
		if i == 5 {
			t.Errorf("... %d errors in all", len(errs))
			break
		}
		t.Error(err)
	}
	if want := len(nodes) * workers * each; len(seen) != want {
		t.Fatalf("%d feeds created, want %d", len(seen), want)
	}
	var highest uint64
	for id := range seen {
		highest = max(highest, id)
	}
	restarted, _ := openStore(t, c)
	f := storage.Feed{Kind: storage.KindSensor, Slug: "after-restart"}
	if err := restarted.CreateFeed(testCtx(t), &f); err != nil || f.ID <= highest {
		t.Fatalf("after a restart: ID %d, %v; want one above %d", f.ID, err, highest)
	}
}
