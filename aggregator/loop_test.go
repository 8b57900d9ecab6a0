package aggregator_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// gatedStore is a store whose poll writes (RecordFetch) are stored by the
// real store and then held until the test lets them return, one receive
// on gate each: a group commit whose fsyncs last as long as the test
// wants.
type gatedStore struct {
	*storage.Store
	gate chan struct{}

	mu       sync.Mutex
	stored   []uint64 // feeds whose write the store has committed
	released []uint64 // feeds whose write has returned to the service
}

func (g *gatedStore) RecordFetch(id uint64, items []storage.Item, o storage.Observation, fn func(*storage.Feed, *storage.Observation, []storage.Item) error) (storage.Fetched, error) {
	rec, err := g.Store.RecordFetch(id, items, o, fn)
	g.mu.Lock()
	g.stored = append(g.stored, id)
	g.mu.Unlock()
	<-g.gate
	g.mu.Lock()
	g.released = append(g.released, id)
	g.mu.Unlock()
	return rec, err
}

func (g *gatedStore) counts() (stored, released int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.stored), len(g.released)
}

func (g *gatedStore) wasReleased(id uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Contains(g.released, id)
}

// slowPublisher serves /f/{i} as a one-item RSS document after a second
// of (fake) time, counting the requests and the most in progress at once.
type slowPublisher struct {
	mu       sync.Mutex
	requests int
	active   int
	peak     int
}

func (p *slowPublisher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests++
	p.active++
	p.peak = max(p.peak, p.active)
	p.mu.Unlock()
	time.Sleep(time.Second)
	p.mu.Lock()
	p.active--
	p.mu.Unlock()
	i := strings.TrimPrefix(r.URL.Path, "/f/")
	w.Header().Set("Content-Type", "application/rss+xml")
	fmt.Fprintf(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>f%s</title><link>http://pub.test/</link><description>d</description><item><title>r</title><guid>%s-1</guid><pubDate>Mon, 05 Jan 2026 10:00:00 +0000</pubDate></item></channel></rss>`, i, i)
}

func (p *slowPublisher) stats() (requests, peak int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, p.peak
}

// pipelineEnv is a service over a gatedStore and a slowPublisher, inside
// a synctest bubble.
type pipelineEnv struct {
	svc     *aggregator.Service
	st      *gatedStore
	pub     *slowPublisher
	ids     []uint64
	mu      sync.Mutex
	fetched []uint64 // Fetched events, in order
	newIt   []uint64 // OnNewItems calls, in order
}

func newPipelineEnv(t *testing.T, workers, pending, feeds int) *pipelineEnv {
	t.Helper()
	// The test holds and releases the writes itself and counts what is
	// stored at instants when the bubble's clock stands still: a group
	// commit lingering for more writes would wait on that clock, so the
	// store commits each group at once (the linger has its own test,
	// storage.TestCommitLinger).
	inner, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true, CommitLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	e := &pipelineEnv{st: &gatedStore{Store: inner, gate: make(chan struct{})}, pub: &slowPublisher{}}
	e.svc, err = aggregator.NewService(aggregator.ServiceOptions{
		Store:         e.st,
		Fetcher:       fetcher.New(fetcher.Options{Transport: handlerTransport{e.pub}}),
		Scheduler:     schedule.Config{Workers: workers},
		PendingWrites: pending,
		OnNewItems: func(f storage.Feed, _ []storage.Item) {
			if !e.st.wasReleased(f.ID) {
				t.Errorf("feed %d: OnNewItems before its write returned", f.ID)
			}
			e.mu.Lock()
			e.newIt = append(e.newIt, f.ID)
			e.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Watch(aggregator.Watcher{Fetched: func(ev aggregator.Fetched) {
		if !e.st.wasReleased(ev.Feed.ID) {
			t.Errorf("feed %d: Fetched before its write returned", ev.Feed.ID)
		}
		e.mu.Lock()
		e.fetched = append(e.fetched, ev.Feed.ID)
		e.mu.Unlock()
	}})
	for i := range feeds {
		f, err := e.svc.Subscribe(storage.Feed{URL: fmt.Sprintf("http://pub.test/f/%d", i), Policy: "fixed-1h"})
		if err != nil {
			t.Fatal(err)
		}
		e.ids = append(e.ids, f.ID)
	}
	return e
}

func (e *pipelineEnv) reported() (fetched, newItems int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.fetched), len(e.newIt)
}

// check compares what the service did so far with what is expected:
// feeds fetched, writes stored, polls completed (reported to watchers
// and to OnNewItems).
func (e *pipelineEnv) check(t *testing.T, fetched, completed int) {
	t.Helper()
	requests, _ := e.pub.stats()
	stored, released := e.st.counts()
	events, newItems := e.reported()
	if requests != fetched || stored != fetched {
		t.Errorf("%d requests, %d writes stored; want %d of each", requests, stored, fetched)
	}
	if released != completed || events != completed || newItems != completed {
		t.Errorf("%d writes returned, %d Fetched events, %d OnNewItems; want %d of each", released, events, newItems, completed)
	}
}

// TestPipelinedLoop: the live loop's fetch slots do not wait for the
// writes. While every write is held (a long group commit), the Workers
// slots go on fetching until Workers + PendingWrites polls are in flight,
// never more than Workers fetches at once; no poll is reported, and no
// feed is planned again, before its write returns; each write that
// returns lets one more feed be fetched; at shutdown Run waits for the
// pending writes.
func TestPipelinedLoop(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		workers, pending, feeds int
	}{
		{"one slot", 1, 2, 5},
		{"two slots", 2, 3, 8},
		{"more room than feeds", 4, 8, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newPipelineEnv(t, tc.workers, tc.pending, tc.feeds)
				start := time.Now()
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- e.svc.Run(ctx) }()

				// The fetch slots run ahead of the held writes, each
				// fetch a second long: in ⌈in flight / slots⌉ seconds
				// every poll that may be in flight is fetched, and no
				// more later.
				inFlight := min(tc.feeds, tc.workers+tc.pending)
				time.Sleep(time.Duration((inFlight+tc.workers-1)/tc.workers) * time.Second)
				synctest.Wait()
				e.check(t, inFlight, 0)
				time.Sleep(time.Minute)
				synctest.Wait()
				e.check(t, inFlight, 0)
				if got := e.svc.Scheduler().InFlight(); got != inFlight {
					t.Errorf("%d polls in flight for the scheduler, want %d", got, inFlight)
				}
				if _, peak := e.pub.stats(); peak != min(tc.workers, tc.feeds) {
					t.Errorf("%d fetches at once, want %d (the fetch slots)", peak, min(tc.workers, tc.feeds))
				}
				for _, id := range e.ids {
					if next, _ := e.svc.NextFetch(id); next.After(start) {
						t.Errorf("feed %d planned for %v before its poll completed", id, next)
					}
				}

				// Each write that returns completes its poll and frees
				// room for one more fetch.
				completed := 0
				for completed < tc.feeds {
					e.st.gate <- struct{}{}
					completed++
					time.Sleep(time.Second) // a fetch, when one starts
					synctest.Wait()
					fetched := min(tc.feeds, tc.workers+tc.pending+completed)
					e.check(t, fetched, completed)
					if got, want := e.svc.Scheduler().InFlight(), fetched-completed; got != want {
						t.Errorf("%d polls in flight for the scheduler, want %d", got, want)
					}
				}
				for _, id := range e.ids {
					if next, _ := e.svc.NextFetch(id); !next.After(start) {
						t.Errorf("feed %d: next fetch %v, want one after its poll", id, next)
					}
				}

				// Shutdown drains the pending writes: fetch every feed
				// again, hold the writes, cancel.
				now := time.Now()
				for _, id := range e.ids {
					if !e.svc.Expedite(id, now) {
						t.Fatalf("feed %d could not be brought forward", id)
					}
				}
				time.Sleep(time.Duration((inFlight+tc.workers-1)/tc.workers) * time.Second)
				synctest.Wait()
				if stored, _ := e.st.counts(); stored != tc.feeds+inFlight {
					t.Errorf("%d writes stored, want %d", stored, tc.feeds+inFlight)
				}
				cancel()
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("Run returned (%v) with writes pending", err)
				default:
				}
				stored, released := e.st.counts()
				for range stored - released {
					e.st.gate <- struct{}{}
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if events, _ := e.reported(); events != stored {
					t.Errorf("%d polls completed of %d stored", events, stored)
				}
				if n := e.svc.Scheduler().InFlight(); n != 0 {
					t.Errorf("%d polls in flight after Run", n)
				}
			})
		})
	}
}

// TestPollCompletesAfterCommit: whichever way a poll runs (the live loop
// or FetchNow), nothing reports it before its write has returned from the
// store: not the watchers, not OnNewItems, not the scheduler (the feed's
// next fetch), not FetchNow's caller.
func TestPollCompletesAfterCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		poll func(ctx context.Context, e *pipelineEnv) (done <-chan struct{})
	}{
		{"live loop", func(ctx context.Context, e *pipelineEnv) <-chan struct{} {
			go func() { _ = e.svc.Run(ctx) }()
			return nil // the loop runs on; completion shows in the events
		}},
		{"FetchNow", func(ctx context.Context, e *pipelineEnv) <-chan struct{} {
			done := make(chan struct{})
			go func() {
				_, _ = e.svc.FetchNow(ctx, e.ids[0])
				close(done)
			}()
			return done
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newPipelineEnv(t, 2, 4, 1)
				start := time.Now()
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				answered := tc.poll(ctx, e)
				time.Sleep(time.Second) // the fetch
				synctest.Wait()
				e.check(t, 1, 0)
				if next, _ := e.svc.NextFetch(e.ids[0]); next.After(start) {
					t.Errorf("next fetch planned (%v) before the write returned", next)
				}
				if answered != nil {
					select {
					case <-answered:
						t.Fatal("FetchNow answered before the write returned")
					default:
					}
				}
				e.st.gate <- struct{}{}
				synctest.Wait()
				e.check(t, 1, 1)
				if answered != nil {
					<-answered
					return
				}
				if next, _ := e.svc.NextFetch(e.ids[0]); !next.After(start) {
					t.Errorf("next fetch %v after the poll completed, want one after %v", next, start)
				}
				cancel()
				synctest.Wait()
			})
		})
	}
}
