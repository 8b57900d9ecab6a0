package aggregator_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// countingStore is a storage.Store that counts the reads of observations.
type countingStore struct {
	*storage.Store
	obsReads atomic.Int64
}

func (c *countingStore) Observations(id uint64, limit int) ([]storage.Observation, error) {
	c.obsReads.Add(1)
	return c.Store.Observations(id, limit)
}

// replayOnly hides the policy states of a store: a service on it
// replays every feed's observations, as before states were kept.
type replayOnly struct{ aggregator.Store }

// loadFleet fills st with n remote feeds, each with a history of polls
// of a publisher of its own period (5 to 59 minutes), every fourth poll
// a miss, one in ten a fetch error, the newest a few periods before now.
func loadFleet(t testing.TB, st *storage.Store, n, polls int, now time.Time) []uint64 {
	t.Helper()
	ids := make([]uint64, n)
	policies := []string{"auto", "auto", "auto", "dpt-l", "dpt-a", "fixed-15m", "miniflux"}
	for i := range n {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://s%d.example/f.rss", i), Policy: policies[i%len(policies)]}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		ids[i] = f.ID
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, id := range ids {
		wg.Go(func() { // concurrent writers share group commits
			p := time.Duration(5+i%55) * time.Minute
			start := now.Add(-time.Duration(polls)*p - time.Duration(i%7)*p/3)
			for k := range polls {
				pub := start.Add(time.Duration(k) * p).Add(time.Duration(i%13) * time.Second)
				o := storage.Observation{At: pub.Add(3 * time.Second), Hit: k%4 != 3, Status: 200}
				if k%10 == 9 {
					o = storage.Observation{At: o.At, Err: "connection refused"}
				} else if o.Hit {
					o.Published = []time.Time{pub}
				}
				if err := st.AddObservation(id, o); err != nil {
					errs <- err
					return
				}
			}
		})
		if i%64 == 63 {
			wg.Wait()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

func newLoadService(t testing.TB, st aggregator.Store) *aggregator.Service {
	t.Helper()
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// nextFetches returns the next fetch of each of ids.
func nextFetches(t testing.TB, svc *aggregator.Service, ids []uint64) []time.Time {
	t.Helper()
	out := make([]time.Time, len(ids))
	for i, id := range ids {
		at, ok := svc.NextFetch(id)
		if !ok {
			t.Fatalf("feed %d is not scheduled", id)
		}
		out[i] = at
	}
	return out
}

// TestRestartRestoresStatesWithoutObservations: a restarted service
// schedules every feed at the prediction a replay of its observations
// gives, reading no observation for the feeds whose policy keeps a state.
// A store written before states were kept (no learner) replays once and
// stores the states its replays reached; the start after that reads no
// observation either.
func TestRestartRestoresStatesWithoutObservations(t *testing.T) {
	const feeds, polls = 1400, 8
	tests := []struct {
		name    string
		learned bool // the history was written with the service's learner
	}{
		{"states kept with every poll", true},
		{"a store from before states: the migration", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				if tt.learned {
					st.SetLearner(aggregator.Learn)
				}
				ids := loadFleet(t, st, feeds, polls, time.Now())
				st.SetLearner(nil)

				want := nextFetches(t, func() *aggregator.Service {
					svc := newLoadService(t, replayOnly{st})
					if err := svc.Load(); err != nil {
						t.Fatal(err)
					}
					return svc
				}(), ids)

				// Policies without a state (miniflux) replay at every start.
				stateless := 0
				for i := range ids {
					if i%7 == 6 {
						stateless++
					}
				}
				starts := []int{stateless, stateless}
				if !tt.learned {
					starts[0] = feeds
				}
				for i, wantReads := range starts {
					began := time.Now()
					cs := &countingStore{Store: st}
					svc := newLoadService(t, cs)
					if err := svc.Load(); err != nil {
						t.Fatal(err)
					}
					if got := cs.obsReads.Load(); got != int64(wantReads) {
						t.Errorf("start %d: %d feeds' observations read, want %d", i+1, got, wantReads)
					}
					if p := svc.LoadProgress(); p.Loading || p.Done != feeds || p.Total != feeds || p.Replayed != wantReads {
						t.Errorf("start %d: progress %+v", i+1, p)
					}
					got := nextFetches(t, svc, ids)
					loaded := time.Now()
					for k := range ids {
						// A feed already due is due at its load: at
						// most the load's duration apart.
						due := !want[k].After(began) && !got[k].After(loaded)
						if !got[k].Equal(want[k]) && !due {
							t.Fatalf("start %d: feed %d (%d) next fetched at %v, a replay says %v", i+1, ids[k], k, got[k], want[k])
						}
					}
				}
			})
		})
	}
}

// TestLoadInBackgroundPolls: with the service running, a background
// load schedules the feeds while the first polls are under way, and
// every due feed is polled once it is loaded.
func TestLoadInBackgroundPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		st.SetLearner(aggregator.Learn)
		const feeds = 700
		// Two days without a poll: every feed is due.
		loadFleet(t, st, feeds, 6, time.Now().Add(-48*time.Hour))
		pub := &hostCounter{pub: &countingFeeds{start: time.Now(), period: 10 * time.Minute, polls: map[string][]time.Time{}, ua: map[string]string{}}, hosts: map[string]int{}}
		gate := make(chan struct{})
		svc, err := aggregator.NewService(aggregator.ServiceOptions{
			Store:     st,
			Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{gatedHandler{pub, gate}}}),
			Scheduler: schedule.Config{Workers: 4},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		run := make(chan error, 1)
		go func() { run <- svc.Run(ctx) }()
		loaded := svc.LoadInBackground(ctx)
		// The first polls wait at the gate; the load goes on meanwhile.
		synctest.Wait()
		if err := <-loaded; err != nil {
			t.Fatal(err)
		}
		if p := svc.LoadProgress(); p.Loading || p.Done != feeds || p.Total != feeds {
			t.Fatalf("after the load: %+v", p)
		}
		close(gate)
		time.Sleep(time.Second) // the polls' writes linger for their group commits
		pub.mu.Lock()
		polled := len(pub.hosts)
		pub.mu.Unlock()
		if polled != feeds {
			t.Fatalf("%d feeds polled, want all %d (all due)", polled, feeds)
		}
		cancel()
		if err := <-run; err != nil {
			t.Fatal(err)
		}
	})
}

// hostCounter counts the requests to each host.
type hostCounter struct {
	pub   *countingFeeds
	mu    sync.Mutex
	hosts map[string]int
}

func (h *hostCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.hosts[r.Host]++
	h.mu.Unlock()
	h.pub.ServeHTTP(w, r)
}

// gatedHandler holds every request until gate is closed.
type gatedHandler struct {
	h    http.Handler
	gate chan struct{}
}

func (g gatedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	<-g.gate
	g.h.ServeHTTP(w, r)
}
