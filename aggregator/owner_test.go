package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
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

// pubAndStore returns a countingFeeds publishing from now and a store
// in t's temporary directory, closed when t ends.
func pubAndStore(t *testing.T) (*countingFeeds, *storage.Store) {
	t.Helper()
	pub := &countingFeeds{start: time.Now(), polls: map[string][]time.Time{}, ua: map[string]string{}}
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return pub, st
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
				pub, st := pubAndStore(t)
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
				var err error
				e.svc, err = aggregator.NewService(aggregator.ServiceOptions{
					Store:     st,
					Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{pub}, UserAgent: fetcher.UserAgent("test", "n1")}),
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
				Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{pub}}),
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
		// The service loads the feeds of a change once the claims
		// settle (600 ms without another, at most 3 s).
		time.Sleep(3 * time.Second)
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

// lossyLoader is a store whose StateLoader answers as a pass that went
// wrong would: the first calls fail, or leave out some wanted feeds (a
// pass that ended early, a feed written after it began).
type lossyLoader struct {
	aggregator.Store
	loader storage.StateLoader
	mu     sync.Mutex
	armed  bool // from arm on, calls are counted and fail or miss
	calls  int
	fail   int // calls that fail
	miss   int // feeds the first successful call leaves out
	// deleted feeds FeedIDs still lists
	deleted []uint64
}

func (l *lossyLoader) arm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = true
}

func (l *lossyLoader) FeedStates(want func(uint64) bool, obsLimit int) (map[uint64]*storage.FeedState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.armed {
		return l.loader.FeedStates(want, obsLimit)
	}
	l.calls++
	if l.calls <= l.fail {
		return nil, fmt.Errorf("feed states: observations: %w", errors.New("nats: no responders available for request"))
	}
	out, err := l.loader.FeedStates(want, obsLimit)
	if err != nil || l.calls > l.fail+1 {
		return out, err
	}
	for id := range out {
		if l.miss == 0 {
			break
		}
		if out[id].Feed.Kind == storage.KindRemote {
			delete(out, id)
			l.miss--
		}
	}
	return out, nil
}

// FeedIDs lists the stored feeds and, as a JetStream listing does, the
// deleted ones.
func (l *lossyLoader) FeedIDs() ([]uint64, error) {
	feeds, err := l.Feeds()
	if err != nil {
		return nil, err
	}
	ids := slices.Clone(l.deleted)
	for _, f := range feeds {
		ids = append(ids, f.ID)
	}
	slices.Sort(ids)
	return ids, nil
}

// lossyStreamer offers the same answers as a storage.StateStreamer.
type lossyStreamer struct{ *lossyLoader }

func (l lossyStreamer) StreamFeedStates(want func(uint64) bool, feed func(storage.Feed) bool, obs func(uint64, storage.Observation)) error {
	states, err := l.FeedStates(want, 0)
	if err != nil {
		return err
	}
	ids := make([]uint64, 0, len(states))
	for id := range states {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var keep []uint64
	for _, id := range ids {
		if feed(states[id].Feed) {
			keep = append(keep, id)
		}
	}
	for _, id := range keep {
		for _, o := range states[id].Observations {
			obs(id, o)
		}
	}
	return nil
}

func (l *lossyLoader) loads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// TestTakeoverLoadsInPasses: the feeds of shards a node comes to own are
// loaded with one StateLoader call, and every one of them is scheduled
// within seconds of the change even when that load fails or leaves feeds
// out (before, such feeds waited for the next Resync and longer: taken-over
// feeds were left unscheduled in process-level kill runs). A sensor's
// feed among them is never polled nor loaded again.
func TestTakeoverLoadsInPasses(t *testing.T) {
	const feeds = 40
	tests := []struct {
		name       string
		fail, miss int
		deleted    int // feeds deleted before the change (still listed)
	}{
		{name: "twenty deleted feeds still listed are read once", deleted: 20},
		{name: "the load returns every feed"},
		{name: "the load leaves three feeds out", miss: 3},
		{name: "the load leaves out half the feeds", miss: 20},
		{name: "the load fails twice (no responders)", fail: 2},
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name + "/StateLoader"
			if stream {
				name = tt.name + "/StateStreamer"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { takeover(t, stream, feeds, tt.fail, tt.miss, tt.deleted) })
			})
		}
	}
}

// takeover runs a case of TestTakeoverLoadsInPasses.
func takeover(t *testing.T, stream bool, feeds, fail, miss, deleted int) {
	pub, st := pubAndStore(t)
	var ids []uint64
	for i := range feeds {
		f := storage.Feed{URL: "http://pub.test/f/" + strconv.Itoa(i) + ".rss", Kind: storage.KindRemote, Policy: "fixed-1m"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	sensor := storage.Feed{Kind: storage.KindSensor, Slug: "lab", Policy: "auto"}
	if err := st.CreateFeed(&sensor); err != nil {
		t.Fatal(err)
	}
	lossy := &lossyLoader{Store: st, loader: st, fail: fail, miss: miss}
	var store aggregator.Store = lossy
	if stream {
		store = lossyStreamer{lossy}
	}
	for _, id := range ids[feeds-deleted:] {
		if err := st.DeleteFeed(id); err != nil {
			t.Fatal(err)
		}
		lossy.deleted = append(lossy.deleted, id)
	}
	owner := newFakeOwner()
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:     store,
		Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{pub}}),
		Scheduler: schedule.Config{Workers: 2},
		Owner:     owner,
		Resync:    -1, // never: only the change and its retries load
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	time.Sleep(time.Minute)
	lossy.arm()
	changed := time.Now()
	owner.set(append(slices.Clone(ids), sensor.ID)...)
	// Settling (≤ 3 s), then a retry a second after each
	// failed or incomplete load.
	time.Sleep(3*time.Second + time.Duration(fail+1)*time.Second)
	synctest.Wait()
	live := feeds - deleted
	if got := svc.Scheduler().Len(); got != live {
		t.Fatalf("%d feeds scheduled %v after the change, want %d", got, time.Since(changed), live)
	}
	after := lossy.loads()
	if got, want := after, fail+1; got != want {
		t.Errorf("%d FeedStates calls for the change, want %d", got, want)
	}
	time.Sleep(3 * time.Minute)
	for i := range live {
		if n := pub.since("/f/"+strconv.Itoa(i)+".rss", changed); n < 3 {
			t.Errorf("feed %d polled %d times in 3 min with fixed-1m, want ≥ 3", i, n)
		}
	}
	if n := lossy.loads(); n != after {
		t.Errorf("%d more FeedStates calls with nothing to take (the sensor's feed loaded again?)", n-after)
	}
	if _, ok := svc.NextFetch(sensor.ID); ok {
		t.Error("the sensor's feed is scheduled")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// racingStore lets the cluster's listing find a subscription's feed
// between its creation and its scheduling.
type racingStore struct {
	aggregator.Store
	between func()
}

func (r racingStore) CreateFeed(f *storage.Feed) error {
	if err := r.Store.CreateFeed(f); err != nil {
		return err
	}
	r.between()
	return nil
}

// TestSubscribeRacesListing: a subscription whose feed the node's
// listing found and scheduled first succeeds, keeps the feed, and the
// feed is polled by one guard.
func TestSubscribeRacesListing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub, st := pubAndStore(t)
		owner := newShardOwner(1, 0) // owns every feed
		store := racingStore{Store: st}
		store.between = func() {
			owner.set(0) // a change: the service lists the store's feeds
			time.Sleep(time.Second)
			synctest.Wait()
		}
		svc := digestService(t, store, pub, owner) // a store without digests
		defer runService(t, svc)()
		synctest.Wait()
		f, err := svc.Subscribe(storage.Feed{URL: "http://pub.test/f/0.rss", Policy: "fixed-10m"})
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		if _, err := st.Feed(f.ID); err != nil {
			t.Fatalf("the subscribed feed: %v", err)
		}
		if got := svc.Ownership(); got.Polled != 1 || got.Taken != 1 {
			t.Errorf("ownership %+v, want the feed polled, taken by the listing", got)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := pub.since("/f/0.rss", time.Time{}); n != 1 {
			t.Errorf("%d fetches in the first minute, want 1", n)
		}
	})
}
