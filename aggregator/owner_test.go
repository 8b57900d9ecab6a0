package aggregator_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// fakeOwner is a cluster.Owner whose owned feeds the test sets. set
// closes the Changed channel (a claim or a release); setSilently does not
// (a lease that lapsed before the node noticed).
type fakeOwner struct {
	mu      sync.Mutex
	feeds   map[uint64]bool
	changed chan struct{}
}

func newFakeOwner(ids ...uint64) *fakeOwner {
	o := &fakeOwner{changed: make(chan struct{})}
	o.setSilently(ids...)
	return o
}

func (o *fakeOwner) OwnsFeed(id uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.feeds[id]
}

func (o *fakeOwner) OwnsPipe(uint64) bool { return true }

func (o *fakeOwner) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

func (o *fakeOwner) setSilently(ids ...uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.feeds = map[uint64]bool{}
	for _, id := range ids {
		o.feeds[id] = true
	}
}

func (o *fakeOwner) set(ids ...uint64) {
	o.setSilently(ids...)
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.changed)
	o.changed = make(chan struct{})
}

// countingFeeds serves /f/{n}.rss, a feed with a new item every period
// (a minute when zero), and counts the fetches of each.
type countingFeeds struct {
	start  time.Time
	period time.Duration
	mu     sync.Mutex
	polls  map[string][]time.Time
	ua     map[string]string
}

func (c *countingFeeds) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := c.period
	if p == 0 {
		p = time.Minute
	}
	n := int(time.Since(c.start) / p)
	c.mu.Lock()
	c.polls[r.URL.Path] = append(c.polls[r.URL.Path], time.Now())
	c.ua[r.URL.Path] = r.Header.Get("User-Agent")
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/rss+xml")
	_, _ = w.Write([]byte(pushDoc(c.start.Add(time.Duration(n)*p), fmt.Sprint("i", n), fmt.Sprint("i", n-1))))
}

// since counts the fetches of path at or after t.
func (c *countingFeeds) since(path string, t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, at := range c.polls[path] {
		if !at.Before(t) {
			n++
		}
	}
	return n
}

// TestServiceFollowsOwner: a clustered service polls only the feeds its
// Owner gives it, takes up feeds it comes to own and drops those it loses
// (at a change, at a fetch that finds the lease gone, at a resync), and
// picks up feeds other nodes created or deleted.
func TestServiceFollowsOwner(t *testing.T) {
	type env struct {
		st    *storage.Store
		svc   *aggregator.Service
		owner *fakeOwner
		ids   []uint64 // feeds /f/0.rss … /f/3.rss
	}
	tests := []struct {
		name  string
		owned []int // indices into ids owned at Load
		// resync is ServiceOptions.Resync (negative: never, so that
		// only the fetch's own check can drop a feed).
		resync time.Duration
		// act runs at 2 min 30 s; it returns the feeds that must be
		// polled after 5 min more, and those that must not be.
		act func(t *testing.T, e *env) (polled, idle []string)
	}{
		{
			name:  "load schedules owned feeds only",
			owned: []int{0, 1},
			act: func(t *testing.T, e *env) ([]string, []string) {
				return []string{"/f/0.rss", "/f/1.rss"}, []string{"/f/2.rss", "/f/3.rss"}
			},
		},
		{
			name:  "a change gains and loses feeds",
			owned: []int{0, 1},
			act: func(t *testing.T, e *env) ([]string, []string) {
				e.owner.set(e.ids[0], e.ids[2])
				return []string{"/f/0.rss", "/f/2.rss"}, []string{"/f/1.rss", "/f/3.rss"}
			},
		},
		{
			name:   "a fetch re-checks a lease that lapsed unannounced",
			owned:  []int{0, 1},
			resync: -1,
			act: func(t *testing.T, e *env) ([]string, []string) {
				e.owner.setSilently(e.ids[0])
				return []string{"/f/0.rss"}, []string{"/f/1.rss", "/f/2.rss", "/f/3.rss"}
			},
		},
		{
			name:   "a fetch drops a feed another node deleted",
			owned:  []int{0, 1},
			resync: -1,
			act: func(t *testing.T, e *env) ([]string, []string) {
				if err := e.st.DeleteFeed(e.ids[1]); err != nil {
					t.Fatal(err)
				}
				return []string{"/f/0.rss"}, []string{"/f/1.rss"}
			},
		},
		{
			name:  "resync picks up a feed another node created and drops one it deleted",
			owned: []int{0, 1, 2, 3},
			act: func(t *testing.T, e *env) ([]string, []string) {
				f := storage.Feed{URL: "http://pub.test/f/new.rss", Kind: storage.KindRemote, Policy: "fixed-1m"}
				if err := e.st.CreateFeed(&f); err != nil {
					t.Fatal(err)
				}
				if err := e.st.DeleteFeed(e.ids[3]); err != nil {
					t.Fatal(err)
				}
				e.owner.setSilently(e.ids[0], e.ids[1], e.ids[2], f.ID)
				return []string{"/f/0.rss", "/f/1.rss", "/f/2.rss", "/f/new.rss"}, []string{"/f/3.rss"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pub := &countingFeeds{start: time.Now(), polls: map[string][]time.Time{}, ua: map[string]string{}}
				st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				e := &env{st: st}
				for i := range 4 {
					f := storage.Feed{URL: "http://pub.test/f/" + strconv.Itoa(i) + ".rss", Kind: storage.KindRemote, Policy: "fixed-1m"}
					if err := st.CreateFeed(&f); err != nil {
						t.Fatal(err)
					}
					e.ids = append(e.ids, f.ID)
				}
				var owned []uint64
				for _, i := range tt.owned {
					owned = append(owned, e.ids[i])
				}
				e.owner = newFakeOwner(owned...)
				e.svc, err = aggregator.NewService(aggregator.ServiceOptions{
					Store:     st,
					Fetcher:   aggregator.NewFetcher(aggregator.FetchOptions{Transport: handlerTransport{pub}, UserAgent: aggregator.UserAgent("test", "n1")}),
					Scheduler: schedule.Config{Workers: 2},
					Owner:     e.owner,
					Resync:    tt.resync,
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := e.svc.Load(); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- e.svc.Run(ctx) }()

				time.Sleep(2*time.Minute + 30*time.Second)
				polled, idle := tt.act(t, e)
				// A resync comes within DefaultResync.
				time.Sleep(aggregator.DefaultResync)
				from := time.Now()
				time.Sleep(5 * time.Minute)
				for _, p := range polled {
					if n := pub.since(p, from); n < 4 {
						t.Errorf("%s polled %d times in 5 min with fixed-1m, want ≥ 4", p, n)
					}
					if ua := pub.ua[p]; ua != "slogfeed/test (node n1; +https://slogfeed.org)" {
						t.Errorf("%s fetched with User-Agent %q", p, ua)
					}
				}
				for _, p := range idle {
					if n := pub.since(p, from); n != 0 {
						t.Errorf("%s polled %d times by a node that does not own it", p, n)
					}
				}
				if got, want := e.svc.Scheduler().Len(), len(polled); got != want {
					t.Errorf("%d feeds scheduled, want %d", got, want)
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestTakeoverResumesLearnedPrediction: a feed a node comes to own is
// scheduled at the prediction its stored observations give (as a restart
// would), not at a cold start.
func TestTakeoverResumesLearnedPrediction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &countingFeeds{start: time.Now(), period: 10 * time.Minute, polls: map[string][]time.Time{}, ua: map[string]string{}}
		st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		newService := func(owner *fakeOwner) *aggregator.Service {
			opt := aggregator.ServiceOptions{
				Store:     st,
				Fetcher:   aggregator.NewFetcher(aggregator.FetchOptions{Transport: handlerTransport{pub}}),
				Scheduler: schedule.Config{Workers: 2},
			}
			if owner != nil {
				opt.Owner = owner
			}
			svc, err := aggregator.NewService(opt)
			if err != nil {
				t.Fatal(err)
			}
			return svc
		}
		// A first node learns the feed's 10-minute period over four
		// hours, then dies half a period after its last poll; 20 s later
		// another node takes the feed over.
		first := newService(nil)
		f, stop := subscribeAndRun(t, first, "http://pub.test/f/0.rss", "auto")
		time.Sleep(4*time.Hour + 5*time.Minute)
		stop()
		time.Sleep(20 * time.Second)
		restarted := newService(nil)
		if err := restarted.Load(); err != nil {
			t.Fatal(err)
		}
		want, ok := restarted.NextFetch(f.ID)
		if !ok || !want.After(time.Now()) {
			t.Fatalf("replayed next fetch %v (%v), want one ahead of now", want, ok)
		}
		owner := newFakeOwner()
		next := newService(owner)
		if err := next.Load(); err != nil {
			t.Fatal(err)
		}
		if _, ok := next.NextFetch(f.ID); ok {
			t.Fatal("a feed the node does not own is scheduled")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- next.Run(ctx) }()
		owner.set(f.ID)
		synctest.Wait()
		got, ok := next.NextFetch(f.ID)
		if !ok || !got.Equal(want) {
			t.Errorf("taken-over feed next fetched at %v (%v), want the learned prediction %v (now %v)", got, ok, want, time.Now())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
