package aggregator

import (
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// stepOwner is an Owner by shards whose leases lapse and are renewed on
// the test's word, without firing Changed: the test reconciles itself.
// onLapsed, when set, runs once after a Lapsed call computed its answer
// (a change that comes between that answer and the caller's next step).
type stepOwner struct {
	mu       sync.Mutex
	shards   int
	owned    map[int]bool
	lapsed   map[int]bool
	tenure   map[int]uint64
	onLapsed func()
}

func newStepOwner(shards int) *stepOwner {
	o := &stepOwner{shards: shards, owned: map[int]bool{}, lapsed: map[int]bool{}, tenure: map[int]uint64{}}
	for s := range shards {
		o.owned[s] = true
		o.tenure[s] = 1
	}
	return o
}

func (o *stepOwner) OwnsFeed(id uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owned[cluster.ShardOf(cluster.KindFeed, id, o.shards)]
}

func (o *stepOwner) OwnsPipe(uint64) bool     { return true }
func (o *stepOwner) Changed() <-chan struct{} { return nil }
func (o *stepOwner) Shards() int              { return o.shards }

func (o *stepOwner) Owned() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.owned))
}

func (o *stepOwner) Tenure(s int) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.tenure[s]
}

func (o *stepOwner) Lapsed(s int) (uint64, bool) {
	o.mu.Lock()
	t, ok := o.tenure[s], o.lapsed[s]
	f := o.onLapsed
	o.onLapsed = nil
	o.mu.Unlock()
	if f != nil {
		f()
	}
	return t, ok
}

func (o *stepOwner) Holds() []cluster.Hold {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := make([]cluster.Hold, o.shards)
	for s := range h {
		h[s] = cluster.Hold{Owned: o.owned[s], Lapsed: o.lapsed[s], Tenure: o.tenure[s]}
	}
	return h
}

func (o *stepOwner) lapse(s int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.owned, s)
	o.lapsed[s] = true
}

func (o *stepOwner) renew(s int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.lapsed, s)
	o.owned[s] = true
}

// stepService is a clustered service, not running, over four shards of
// stepOwner with 16 feeds, loaded; feed is one of them, in shard.
func stepService(t *testing.T) (s *Service, o *stepOwner, feed uint64, shard int) {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for i := range 16 {
		f := storage.Feed{URL: "http://pub.test/f/" + strconv.Itoa(i) + ".rss", Kind: storage.KindRemote, Policy: "fixed-10m"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		feed = f.ID
	}
	o = newStepOwner(4)
	s, err = NewService(ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{}), Owner: o, Resync: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.sched.Waiting(int(feed)); !ok {
		t.Fatalf("feed %d not scheduled", feed)
	}
	return s, o, feed, cluster.ShardOf(cluster.KindFeed, feed, 4)
}

// grant takes feed id's turn from the scheduler, as a fetch slot does.
func grant(t *testing.T, s *Service, id uint64) {
	t.Helper()
	for _, g := range s.sched.AppendDueN(nil, time.Now().Add(time.Hour), 1<<10) {
		if uint64(g.ID) != id {
			_ = s.sched.Cancel(g.ID)
		}
	}
	if _, waiting := s.sched.Waiting(int(id)); waiting {
		t.Fatalf("feed %d not granted", id)
	}
}

// TestLapseExpeditesReportedLate: a feed whose put-off fetch is still
// being reported when its shard resumes (not waiting in the scheduler)
// is brought forward by the next reconcile, not left until the lapse's
// bound.
func TestLapseExpeditesReportedLate(t *testing.T) {
	s, o, id, sh := stepService(t)
	ctx := t.Context()
	o.lapse(sh)
	if _, err := s.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	l, parked := s.own.park.lapseOf(sh)
	if !parked {
		t.Fatalf("shard %d not parked", sh)
	}
	grant(t, s, id)
	obs, pd, ok := s.begin(ctx, id)
	if !ok || pd != nil {
		t.Fatalf("begin of a parked feed: pending %v, ok %v; want put off", pd, ok)
	}
	o.renew(sh)
	busy, err := s.reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !busy {
		t.Error("the resume left a put-off fetch being reported, and did not ask to reconcile again soon")
	}
	s.done(int(id), obs)
	if due, _ := s.sched.Waiting(int(id)); !due.Equal(l.since.Add(maxLapse)) {
		t.Fatalf("the put-off fetch reported at %v, want the lapse's bound %v", due, l.since.Add(maxLapse))
	}
	if _, err := s.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.sched.Waiting(int(id)); due.After(time.Now().Add(time.Minute)) {
		t.Errorf("after the next reconcile the fetch is at %v, want brought forward to now", time.Until(due).Round(time.Second))
	}
}

// TestLapsePutOffRacesResume: a fetch that comes due as its shard
// resumes, its lapse read before the resume's reconcile and its put-off
// noted after, is not put off to the lapse's bound (nothing would bring
// it forward): begin goes on with it, the guard as it was.
func TestLapsePutOffRacesResume(t *testing.T) {
	s, o, id, sh := stepService(t)
	ctx := t.Context()
	o.lapse(sh)
	if _, err := s.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, parked := s.own.park.lapseOf(sh); !parked {
		t.Fatalf("shard %d not parked", sh)
	}
	grant(t, s, id)
	g := s.guard(id)
	g.mu.Lock()
	override, slept := g.override, g.slept
	g.mu.Unlock()
	o.mu.Lock()
	o.onLapsed = func() {
		// The lease is renewed and a reconcile resumes the shard after
		// putOff read that it lapsed.
		o.renew(sh)
		if _, err := s.reconcile(ctx); err != nil {
			t.Error(err)
		}
	}
	o.mu.Unlock()
	if s.putOff(id, g) {
		t.Error("the fetch was put off after its shard resumed")
	}
	if _, parked := s.own.park.lapseOf(sh); parked {
		t.Fatal("the shard did not resume")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.override != override || g.slept != slept {
		t.Errorf("guard's override %v (slept %v) after the race, want %v (%v) as before", g.override.time(), g.slept, override.time(), slept)
	}
}
