package aggregator_test

import (
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/internal/testlog"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// lapsingOwner is a shardOwner whose leases may lapse, as a lease node's
// do when its renewals time out: a lapsed shard is not owned, and
// Lapsed tells it with its tenure until it is renewed (owned again under
// the same tenure), claimed back (another tenure) or lost to another
// node.
type lapsingOwner struct {
	*shardOwner
	lapsed map[int]uint64 // under shardOwner.mu
	// onRead, when set, runs once at the next Holds or Lapsed call: after
	// Holds computed its answer, before Lapsed computes its own (a change
	// that comes between a reading of the owned shards and one of the
	// lapsed ones).
	onRead func()
}

func newLapsingOwner(shards int, owned ...int) *lapsingOwner {
	return &lapsingOwner{shardOwner: newShardOwner(shards, owned...), lapsed: map[int]uint64{}}
}

func (o *lapsingOwner) Lapsed(s int) (uint64, bool) {
	o.read()
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.lapsed[s]
	return t, ok
}

func (o *lapsingOwner) Holds() []cluster.Hold {
	o.mu.Lock()
	h := make([]cluster.Hold, o.shards)
	for s := range h {
		_, lapsed := o.lapsed[s]
		h[s] = cluster.Hold{Owned: o.owned[s], Lapsed: lapsed, Tenure: o.tenure[s]}
	}
	o.mu.Unlock()
	o.read()
	return h
}

// read runs onRead, once.
func (o *lapsingOwner) read() {
	o.mu.Lock()
	f := o.onRead
	o.onRead = nil
	o.mu.Unlock()
	if f != nil {
		f()
	}
}

// change applies f under the owner's lock and fires Changed.
func (o *lapsingOwner) change(f func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f()
	close(o.changed)
	o.changed = make(chan struct{})
}

// changeQuietly applies f under the owner's lock without firing Changed
// (yet): a change no reconcile has seen.
func (o *lapsingOwner) changeQuietly(f func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f()
}

// lapse makes owned shards lapsed.
func (o *lapsingOwner) lapse(shards ...int) {
	o.change(func() {
		for _, s := range shards {
			delete(o.owned, s)
			o.lapsed[s] = o.tenure[s]
		}
	})
}

// renew owns lapsed shards again under their tenure.
func (o *lapsingOwner) renew(shards ...int) {
	o.change(func() {
		for _, s := range shards {
			delete(o.lapsed, s)
			o.owned[s] = true
		}
	})
}

// lose gives lapsed shards to another node.
func (o *lapsingOwner) lose(shards ...int) {
	o.change(func() {
		for _, s := range shards {
			delete(o.lapsed, s)
		}
	})
}

// claimBack owns shards again under a new tenure (another node held them
// meanwhile, and this node's claim was answered).
func (o *lapsingOwner) claimBack(shards ...int) {
	o.change(func() { o.claimedBack(true, shards...) })
}

// claimedBack owns shards again after another node held them, through a
// claim of this node: newTenure as lease.Node counts every claim attempt,
// answered or not; without it, the shards keep the tenure they lapsed
// with, as a claim that landed unanswered (its write delivered by the
// watch, then renewed) left them when only answered claims counted.
// o.mu is held.
func (o *lapsingOwner) claimedBack(newTenure bool, shards ...int) {
	for _, s := range shards {
		delete(o.lapsed, s)
		o.owned[s] = true
		if newTenure {
			o.tenure[s]++
		}
	}
}

// claimBackUnanswered owns shards again through a claim that landed but
// whose answer timed out; newTenure as in claimedBack.
func (o *lapsingOwner) claimBackUnanswered(newTenure bool, shards ...int) {
	o.change(func() { o.claimedBack(newTenure, shards...) })
}

var _ cluster.Lapser = (*lapsingOwner)(nil)

// readCounter is a digestStore that counts the reads of feed records
// one by one (Feed), besides its batched reads (takes, asked).
type readCounter struct {
	*digestStore
	mu    sync.Mutex
	reads map[uint64]int
}

func (r *readCounter) Feed(id uint64) (storage.Feed, error) {
	r.mu.Lock()
	r.reads[id]++
	r.mu.Unlock()
	return r.digestStore.Feed(id)
}

// loadReads are the store's reads of feeds to load them: batched takes
// and digests read, feeds asked for.
func (r *readCounter) loadReads() (takes, asked int) {
	r.digestStore.mu.Lock()
	defer r.digestStore.mu.Unlock()
	for _, n := range r.asked {
		asked += n
	}
	return r.takes, asked
}

func (r *readCounter) feedReads() map[uint64]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.reads)
}

// gatedPub serves pub, and holds a fetch of path held until release is
// closed (a fetch under way).
type gatedPub struct {
	*countingFeeds
	held    string
	started chan struct{}
	release chan struct{}
}

func (g *gatedPub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == g.held {
		select {
		case <-g.started:
		default:
			close(g.started)
		}
		<-g.release
	}
	g.countingFeeds.ServeHTTP(w, r)
}

// lapseEnv is a clustered service over four shards, all owned, with 80
// feeds on fixed-10m policies whose records' states have them due at
// t0+70s (the even ones) or t0+5m (the odd ones).
type lapseEnv struct {
	t0    time.Time
	pub   *countingFeeds
	gate  *gatedPub
	store *readCounter
	owner *lapsingOwner
	svc   *aggregator.Service
	logs  *testlog.Buffer
	reg   *prometheus.Registry
	path  map[uint64]string
	due   map[uint64]time.Time
	shard map[int][]uint64 // feeds by shard
}

func newLapseEnv(t *testing.T) *lapseEnv {
	t.Helper()
	pub, st := pubAndStore(t)
	e := &lapseEnv{
		t0: time.Now(), pub: pub, path: map[uint64]string{}, due: map[uint64]time.Time{}, shard: map[int][]uint64{},
		store: &readCounter{digestStore: &digestStore{Store: st, states: map[uint64]storage.PolicyState{}}, reads: map[uint64]int{}},
		owner: newLapsingOwner(4, 0, 1, 2, 3),
		logs:  &testlog.Buffer{},
	}
	e.gate = &gatedPub{countingFeeds: pub, started: make(chan struct{}), release: make(chan struct{})}
	for i := range 80 {
		f := storage.Feed{URL: "http://pub.test/f/" + strconv.Itoa(i) + ".rss", Kind: storage.KindRemote, Policy: "fixed-10m"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		due := e.t0.Add(70 * time.Second)
		if i%2 == 1 {
			due = e.t0.Add(5 * time.Minute)
		}
		e.store.states[f.ID] = storage.PolicyState{Next: due, Last: due.Add(-10 * time.Minute)}
		e.path[f.ID], e.due[f.ID] = "/f/"+strconv.Itoa(i)+".rss", due
		sh := cluster.ShardOf(cluster.KindFeed, f.ID, 4)
		e.shard[sh] = append(e.shard[sh], f.ID)
	}
	var err error
	e.svc, err = aggregator.NewService(aggregator.ServiceOptions{
		Store:       e.store,
		Fetcher:     fetcher.New(fetcher.Options{Transport: handlerTransport{e.gate}}),
		Scheduler:   schedule.Config{Workers: 4},
		Owner:       e.owner,
		Resync:      -1, // only changes (and lapses running out) reconcile
		DigestEvery: 30 * time.Second,
		Logger:      slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.reg = prometheus.NewRegistry()
	e.svc.SetMetrics(aggregator.NewMetrics(e.reg, e.svc.Scheduler(), 0))
	if err := e.svc.Load(); err != nil {
		t.Fatal(err)
	}
	return e
}

// fetchesSince counts the fetches of the feeds of ids since at.
func (e *lapseEnv) fetchesSince(ids []uint64, at time.Time) int {
	n := 0
	for _, id := range ids {
		n += e.pub.since(e.path[id], at)
	}
	return n
}

// digestWritten is when shard sh's digest was last written.
func (e *lapseEnv) digestWritten(sh int) time.Time {
	e.store.digestStore.mu.Lock()
	defer e.store.digestStore.mu.Unlock()
	return e.store.digests[sh].Written
}

// sleepUntil sleeps until e.t0+d and waits for the service to settle.
func (e *lapseEnv) sleepUntil(d time.Duration) {
	time.Sleep(time.Until(e.t0.Add(d)))
	synctest.Wait()
}

// TestLapseResumesParkedFeeds: a shard whose lease lapses has its feeds
// parked: none is fetched or read while it lasts (one due meanwhile is
// put off), no digest of it is written, and the service still holds
// them; renewed under the same tenure, they resume without any read of
// the store, the fetches put off at once and the others at their
// learned times.
func TestLapseResumesParkedFeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newLapseEnv(t)
		close(e.gate.release)
		defer runService(t, e.svc)()
		e.sleepUntil(65 * time.Second)
		polled := e.svc.Scheduler().Len()
		if polled != 80 {
			t.Fatalf("%d feeds scheduled, want 80", polled)
		}
		takes, asked := e.store.loadReads()
		lapsedAt := time.Now()
		readsBefore := e.store.feedReads()
		e.owner.lapse(1, 2)
		parked := append(append([]uint64(nil), e.shard[1]...), e.shard[2]...)

		e.sleepUntil(95 * time.Second) // the fetches due at 70 s came due
		if n := e.fetchesSince(parked, lapsedAt); n != 0 {
			t.Errorf("%d fetches of parked feeds while their shards were lapsed", n)
		}
		reads := e.store.feedReads()
		for _, id := range parked {
			if reads[id] != readsBefore[id] {
				t.Errorf("feed %d: its record read %d times while parked", id, reads[id]-readsBefore[id])
			}
		}
		if at := e.digestWritten(1); !at.Before(lapsedAt) {
			t.Errorf("shard 1's digest written at %v, while it was lapsed", at.Sub(e.t0))
		}
		if at := e.digestWritten(0); !at.Equal(e.t0.Add(90 * time.Second)) {
			t.Errorf("shard 0's digest last written at %v, want 90 s", at.Sub(e.t0))
		}
		var others []uint64
		for _, sh := range []int{0, 3} {
			for _, id := range e.shard[sh] {
				if e.due[id].Equal(e.t0.Add(70 * time.Second)) {
					others = append(others, id)
				}
			}
		}
		if n := e.fetchesSince(others, lapsedAt); n != len(others) {
			t.Errorf("feeds of owned shards due at 70 s: %d fetches, want %d", n, len(others))
		}
		o := e.svc.Ownership()
		if o.Polled != 80 || o.Parked != len(parked) {
			t.Errorf("while lapsed: %+v, want 80 polled, %d parked", o, len(parked))
		}
		if got := gauges(t, e.reg)["slogfeed_owned_feeds_parked"]; got != float64(len(parked)) {
			t.Errorf("while lapsed: slogfeed_owned_feeds_parked %v, want %d", got, len(parked))
		}
		if !strings.Contains(e.logs.String(), "leases lapsed") {
			t.Errorf("no log line of the lapse:\n%s", e.logs.String())
		}

		renewed := time.Now()
		e.owner.renew(1, 2)
		e.sleepUntil(100 * time.Second)
		if gotTakes, gotAsked := e.store.loadReads(); gotTakes != takes || gotAsked != asked {
			t.Errorf("the resume read feeds: %d takes, %d feeds asked for; want none", gotTakes-takes, gotAsked-asked)
		}
		if o := e.svc.Ownership(); o.Polled != 80 || o.Parked != 0 || o.Lost != 0 {
			t.Errorf("after the resume: %+v, want 80 polled, none parked or lost", o)
		}
		if got := gauges(t, e.reg)["slogfeed_owned_feeds_parked"]; got != 0 {
			t.Errorf("after the resume: slogfeed_owned_feeds_parked %v, want 0", got)
		}
		e.sleepUntil(5*time.Minute + time.Second)
		e.pub.mu.Lock()
		for _, id := range parked {
			got := e.pub.polls[e.path[id]]
			due := e.due[id]
			switch {
			case len(got) == 0:
				t.Errorf("feed %d (due %v) not fetched", id, due.Sub(e.t0))
			case due.Before(renewed) && (got[0].Before(renewed) || got[0].After(renewed.Add(5*time.Second))):
				t.Errorf("feed %d, due during the lapse, fetched at %v; want promptly after the renewal at %v", id, got[0].Sub(e.t0), renewed.Sub(e.t0))
			case !due.Before(renewed) && !got[0].Equal(due):
				t.Errorf("feed %d fetched at %v, want at its learned time %v", id, got[0].Sub(e.t0), due.Sub(e.t0))
			}
		}
		e.pub.mu.Unlock()
		if gotTakes, gotAsked := e.store.loadReads(); gotTakes != takes || gotAsked != asked {
			t.Errorf("after the resume: %d takes, %d feeds asked for; want none", gotTakes-takes, gotAsked-asked)
		}
		if at := e.digestWritten(1); !at.After(renewed) {
			t.Errorf("shard 1's digest last written at %v, want after the renewal", at.Sub(e.t0))
		}
		if !strings.Contains(e.logs.String(), "parked feeds resume") {
			t.Errorf("no log line of the resume:\n%s", e.logs.String())
		}
	})
}

// TestLapseEnded: a lapse that ends otherwise than with a renewal under
// the same tenure drops the parked feeds, unfetched: another node holds
// the shard, the shard is claimed back under a new tenure (its feeds are
// read again, at what their records say now), or the lapse outlasts its
// bound.
func TestLapseEnded(t *testing.T) {
	tests := []struct {
		name string
		end  func(o *lapsingOwner)
		wait time.Duration // after the lapse, before the checks
		// reload: the shard is owned again and its feeds are read anew.
		reload bool
	}{
		{"another node holds the shard", func(o *lapsingOwner) { o.lose(1) }, 10 * time.Second, false},
		{"claimed back under another tenure", func(o *lapsingOwner) { o.claimBack(1) }, 10 * time.Second, true},
		{"claimed back, the claim unanswered", func(o *lapsingOwner) { o.claimBackUnanswered(true, 1) }, 10 * time.Second, true},
		{"the lapse outlasts its bound", func(*lapsingOwner) {}, 3 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newLapseEnv(t)
				close(e.gate.release)
				defer runService(t, e.svc)()
				e.sleepUntil(65 * time.Second)
				lapsedAt := time.Now()
				e.owner.lapse(1)
				e.sleepUntil(80 * time.Second)
				if o := e.svc.Ownership(); o.Polled != 80 || o.Parked != len(e.shard[1]) {
					t.Errorf("while lapsed: %+v, want 80 polled, %d parked", o, len(e.shard[1]))
				}
				takes, _ := e.store.loadReads()
				// Meanwhile another node polled the feeds.
				polled := e.t0.Add(8 * time.Minute)
				e.store.digestStore.mu.Lock()
				for _, id := range e.shard[1] {
					e.store.states[id] = storage.PolicyState{Next: polled, Last: e.t0.Add(75 * time.Second)}
				}
				e.store.digestStore.mu.Unlock()
				tt.end(e.owner)
				time.Sleep(tt.wait)
				synctest.Wait()
				want := 80 - len(e.shard[1])
				if tt.reload {
					want = 80
				}
				o := e.svc.Ownership()
				if o.Polled != want || o.Parked != 0 {
					t.Errorf("after the lapse ended: %+v, want %d polled, none parked", o, want)
				}
				if gotTakes, _ := e.store.loadReads(); (gotTakes > takes) != tt.reload {
					t.Errorf("%d takes after the lapse ended, reload %v", gotTakes-takes, tt.reload)
				}
				if !strings.Contains(e.logs.String(), "parked feeds are dropped") {
					t.Errorf("no log line of the dropped feeds:\n%s", e.logs.String())
				}
				e.sleepUntil(9 * time.Minute)
				for _, id := range e.shard[1] {
					got := e.fetchesSince([]uint64{id}, lapsedAt)
					switch {
					case !tt.reload && got != 0:
						t.Errorf("feed %d of a shard this node lost fetched %d times", id, got)
					case tt.reload:
						e.pub.mu.Lock()
						at := e.pub.polls[e.path[id]]
						e.pub.mu.Unlock()
						if len(at) == 0 || !at[len(at)-1].Equal(polled) {
							t.Errorf("feed %d fetched at %v, want at %v, what the other node's record says", id, at, polled.Sub(e.t0))
						}
					}
				}
			})
		})
	}
}

// TestLapseDuringFetch: a fetch under way when its shard lapses is
// completed and stored, as any poll whose lease runs out during its
// fetch; while lapsed, the feed goes on from that poll (its policy
// learned it: the next fetch is planned a period later) and nothing else
// is fetched; lost, the feed is dropped and neither fetched nor written
// again.
func TestLapseDuringFetch(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run("lost "+strconv.FormatBool(lost), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newLapseEnv(t)
				var held uint64
				for _, id := range e.shard[1] {
					if e.due[id].Equal(e.t0.Add(70 * time.Second)) {
						held = id
						break
					}
				}
				e.gate.held = e.path[held]
				defer runService(t, e.svc)()
				e.sleepUntil(70 * time.Second)
				<-e.gate.started // under way
				e.owner.lapse(1)
				e.sleepUntil(75 * time.Second)
				if o := e.svc.Ownership(); o.Polled != 80 || o.Parked != len(e.shard[1]) {
					t.Errorf("while lapsed: %+v, want 80 polled, %d parked", o, len(e.shard[1]))
				}
				if lost {
					e.owner.lose(1)
					e.sleepUntil(80 * time.Second)
				}
				close(e.gate.release)
				time.Sleep(time.Second) // the store's group commit
				synctest.Wait()
				f, err := e.store.Store.Feed(held)
				if err != nil {
					t.Fatal(err)
				}
				if f.Polls != 1 {
					t.Errorf("the fetch under way stored %d polls, want 1", f.Polls)
				}
				p, err := schedule.ByName(f.Policy, held)
				if err != nil {
					t.Fatal(err)
				}
				want := p.Next(schedule.Observation{At: f.LastFetch})
				next, scheduled := e.svc.NextFetch(held)
				switch {
				case lost && scheduled:
					t.Errorf("a feed of a lost shard scheduled here, next at %v", next.Sub(e.t0))
				case !lost && !next.Equal(want):
					t.Errorf("next fetch at %v (scheduled %v), want %v, the policy's after the poll at %v", next.Sub(e.t0), scheduled, want.Sub(e.t0), f.LastFetch.Sub(e.t0))
				}
				if !lost {
					e.owner.renew(1)
				}
				e.sleepUntil(11 * time.Minute)
				e.pub.mu.Lock()
				got := e.pub.polls[e.path[held]]
				e.pub.mu.Unlock()
				if lost {
					if len(got) != 1 {
						t.Errorf("fetched at %v after its shard was lost, want only the fetch under way", got)
					}
				} else if len(got) < 2 || got[1].Before(e.t0.Add(80*time.Second)) {
					t.Errorf("fetched at %v; want the fetch under way, and none while lapsed", got)
				}
				if f, err := e.store.Store.Feed(held); err != nil || f.Polls != int64(len(got)) {
					t.Errorf("record: %d polls (%v), want %d", f.Polls, err, len(got))
				}
			})
		})
	}
}

// TestLapseResumeRestsOnTenure: a shard owned again after another node
// held it, under the tenure it lapsed with (a lease that counted only
// answered claims, after one that landed unanswered), resumes its parked
// feeds as if nobody had: the service cannot tell, and it is Tenure's
// counting of every claim attempt that makes a resume safe.
func TestLapseResumeRestsOnTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newLapseEnv(t)
		close(e.gate.release)
		defer runService(t, e.svc)()
		e.sleepUntil(65 * time.Second)
		e.owner.lapse(1)
		e.sleepUntil(80 * time.Second)
		takes, _ := e.store.loadReads()
		e.owner.claimBackUnanswered(false, 1)
		e.sleepUntil(90 * time.Second)
		if o := e.svc.Ownership(); o.Polled != 80 || o.Parked != 0 || o.Lost != 0 {
			t.Errorf("after the claim back: %+v, want 80 polled, none parked or lost", o)
		}
		if got, _ := e.store.loadReads(); got != takes {
			t.Errorf("%d takes after the claim back under the same tenure, want none (resumed)", got-takes)
		}
		if !strings.Contains(e.logs.String(), "parked feeds resume") {
			t.Errorf("no log line of the resume:\n%s", e.logs.String())
		}
	})
}

// TestLapsePutOffOwnedUnderAnotherTenure: a parked feed whose fetch
// comes due once its shard is owned again under another tenure, before a
// reconcile saw it, is dropped there, neither fetched nor read (another
// node polled it meanwhile); the next reconcile ends the lapse and loads
// the shard's feeds anew.
func TestLapsePutOffOwnedUnderAnotherTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newLapseEnv(t)
		close(e.gate.release)
		defer runService(t, e.svc)()
		e.sleepUntil(65 * time.Second)
		lapsedAt := time.Now()
		e.owner.lapse(1)
		e.sleepUntil(66 * time.Second)
		if o := e.svc.Ownership(); o.Parked != len(e.shard[1]) {
			t.Fatalf("while lapsed: %+v, want %d parked", o, len(e.shard[1]))
		}
		readsBefore := e.store.feedReads()
		takes, _ := e.store.loadReads()
		e.owner.changeQuietly(func() { e.owner.claimedBack(true, 1) })
		e.sleepUntil(75 * time.Second) // the fetches due at 70 s came due
		var due, later []uint64
		for _, id := range e.shard[1] {
			if e.due[id].Equal(e.t0.Add(70 * time.Second)) {
				due = append(due, id)
			} else {
				later = append(later, id)
			}
		}
		if n := e.fetchesSince(e.shard[1], lapsedAt); n != 0 {
			t.Errorf("%d fetches of the shard's feeds under another tenure before a reconcile", n)
		}
		reads := e.store.feedReads()
		for _, id := range due {
			if _, ok := e.svc.NextFetch(id); ok {
				t.Errorf("feed %d, due under another tenure, still scheduled", id)
			}
			if reads[id] != readsBefore[id] {
				t.Errorf("feed %d: its record read %d times before it was dropped", id, reads[id]-readsBefore[id])
			}
		}
		for _, id := range later {
			if _, ok := e.svc.NextFetch(id); !ok {
				t.Errorf("feed %d, not due yet, dropped before a reconcile", id)
			}
		}
		if o := e.svc.Ownership(); o.Polled != 80-len(due) || o.Lost != len(due) {
			t.Errorf("after the fetches came due: %+v, want %d polled, %d lost", o, 80-len(due), len(due))
		}
		e.owner.change(func() {}) // Changed fires: a reconcile
		e.sleepUntil(80 * time.Second)
		if o := e.svc.Ownership(); o.Polled != 80 || o.Parked != 0 {
			t.Errorf("after the reconcile: %+v, want 80 polled, none parked", o)
		}
		if got, _ := e.store.loadReads(); got <= takes {
			t.Error("the shard's feeds were not loaded anew")
		}
		if !strings.Contains(e.logs.String(), "parked feeds are dropped") {
			t.Errorf("no log line of the dropped feeds:\n%s", e.logs.String())
		}
	})
}

// TestLapseDropsDeferredFeeds: feeds queued from their shard's digest
// whose records are not read yet are dropped, not parked, when the shard
// lapses (none is fetched), and loaded again when it resumes.
func TestLapseDropsDeferredFeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub, store, ids, _ := firstOwnerDied(t, 40)
		owner := newLapsingOwner(4)
		svc, err := aggregator.NewService(aggregator.ServiceOptions{
			Store:       store,
			Fetcher:     fetcher.New(fetcher.Options{Transport: handlerTransport{pub}}),
			Scheduler:   schedule.Config{Workers: 4},
			Owner:       owner,
			Resync:      -1,
			DigestEvery: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Load(); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		store.setGate(gate) // the records stay unread
		defer runService(t, svc)()
		time.Sleep(30 * time.Second)
		owner.change(func() {
			for s := range 4 {
				owner.owned[s] = true
				owner.tenure[s]++
			}
		})
		time.Sleep(time.Second)
		synctest.Wait()
		if o := svc.Ownership(); o.Deferred != 40 {
			t.Fatalf("records held back: %+v, want 40 deferred", o)
		}
		var inShard []uint64
		for _, id := range ids {
			if cluster.ShardOf(cluster.KindFeed, id, 4) == 1 {
				inShard = append(inShard, id)
			}
		}
		lapsedAt := time.Now()
		owner.lapse(1)
		time.Sleep(time.Second)
		synctest.Wait()
		if o := svc.Ownership(); o.Parked != 0 || o.Deferred != 40-len(inShard) || o.Polled != 40-len(inShard) {
			t.Errorf("lapsed: %+v, want none parked, %d deferred and polled", o, 40-len(inShard))
		}
		for _, id := range inShard {
			if _, ok := svc.NextFetch(id); ok {
				t.Errorf("deferred feed %d of the lapsed shard still scheduled", id)
			}
		}
		owner.renew(1)
		time.Sleep(time.Second)
		synctest.Wait()
		close(gate)
		time.Sleep(time.Second)
		synctest.Wait()
		if o := svc.Ownership(); o.Polled != 40 || o.Deferred != 0 || o.Parked != 0 || o.Loading() {
			t.Errorf("resumed: %+v, want 40 polled, none deferred or parked, loaded", o)
		}
		for _, id := range inShard {
			if _, ok := svc.NextFetch(id); !ok {
				t.Errorf("feed %d of the resumed shard not scheduled", id)
			}
		}
		for i, id := range ids {
			if cluster.ShardOf(cluster.KindFeed, id, 4) != 1 {
				continue
			}
			pub.mu.Lock()
			var during int
			for _, at := range pub.polls["/f/"+strconv.Itoa(i)+".rss"] {
				if !at.Before(lapsedAt) && at.Before(lapsedAt.Add(time.Second)) {
					during++
				}
			}
			pub.mu.Unlock()
			if during != 0 {
				t.Errorf("feed %d fetched %d times while its shard was lapsed", id, during)
			}
		}
	})
}

// TestLapseRenewedDuringReconcile: a lapsed shard renewed while a
// reconcile reads its Owner is either still parked or resumed by it,
// never taken for another node's (dropped, and loaded again).
func TestLapseRenewedDuringReconcile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newLapseEnv(t)
		close(e.gate.release)
		defer runService(t, e.svc)()
		e.sleepUntil(65 * time.Second)
		e.owner.lapse(1)
		e.sleepUntil(80 * time.Second)
		takes, _ := e.store.loadReads()
		e.owner.mu.Lock()
		e.owner.onRead = func() { e.owner.renew(1) }
		e.owner.mu.Unlock()
		e.owner.change(func() {}) // a reconcile, which reads the Owner
		e.sleepUntil(90 * time.Second)
		if o := e.svc.Ownership(); o.Polled != 80 || o.Parked != 0 || o.Lost != 0 {
			t.Errorf("after the renewal: %+v, want 80 polled, none parked or lost", o)
		}
		if got, _ := e.store.loadReads(); got != takes {
			t.Errorf("%d takes after a renewal, want none (resumed)", got-takes)
		}
		if strings.Contains(e.logs.String(), "parked feeds are dropped") {
			t.Errorf("parked feeds dropped at a renewal:\n%s", e.logs.String())
		}
	})
}
