package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/internal/testlog"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// shardOwner is a cluster.Owner by shards, as a lease node is: it owns
// the feeds of the shards the test gives it, each with a tenure counting
// the times it came to own it.
type shardOwner struct {
	mu      sync.Mutex
	shards  int
	owned   map[int]bool
	tenure  map[int]uint64
	changed chan struct{}
}

func newShardOwner(shards int, owned ...int) *shardOwner {
	o := &shardOwner{shards: shards, changed: make(chan struct{}), owned: map[int]bool{}, tenure: map[int]uint64{}}
	for _, s := range owned {
		o.owned[s] = true
		o.tenure[s]++
	}
	return o
}

func (o *shardOwner) Tenure(s int) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.tenure[s]
}

func (o *shardOwner) OwnsFeed(id uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owned[cluster.ShardOf(cluster.KindFeed, id, o.shards)]
}

func (o *shardOwner) OwnsPipe(uint64) bool { return true }

func (o *shardOwner) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

func (o *shardOwner) Shards() int { return o.shards }

func (o *shardOwner) Owned() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.owned))
}

func (o *shardOwner) set(owned ...int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	was := o.owned
	o.owned = map[int]bool{}
	for _, s := range owned {
		o.owned[s] = true
		if !was[s] {
			o.tenure[s]++
		}
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// digestStore is a bbolt store that keeps schedule digests in memory and
// hands over records with their policy states as storage/jetstream's
// Backend does. While gate is set, each TakeFeedStates waits for it to
// be closed. edit, when set, changes the digests read.
type digestStore struct {
	*storage.Store
	mu      sync.Mutex
	digests map[int]storage.ScheduleDigest
	gate    chan struct{}
	edit    func(e *storage.DigestEntry) bool // false: leave the entry out
	takes   int                               // TakeFeedStates calls
	asked   map[uint64]int                    // feeds asked for by TakeFeedStates
	// failBatches fails that many TakeFeedStates calls of more than
	// one feed.
	failBatches int
	// badState, when set, is a feed whose policy state TakeFeedStates
	// hands over as bytes no policy reads.
	badState uint64
	// snapshots keeps the state snapshots written; snapshotted makes
	// StateSnapshots read them (else it reads none, as a store without
	// any), snapshotErr and writtenErr fail StateSnapshots and
	// FeedsWrittenSince.
	snapshots               map[int]storage.StateSnapshot
	snapshotted             bool
	snapshotErr, writtenErr error
	// badRecords are feeds whose records cannot be decoded: Feed fails
	// with storage.ErrCorrupt, TakeFeedStates gives them to unreadable
	// (as storage/jetstream's does).
	badRecords map[uint64]bool
	// states, when set, are the policy states TakeFeedStates hands over
	// for the feeds it holds; while readGate is set, TakeFeedStates
	// reads the records, then waits for readGate to be closed before it
	// hands them over.
	states   map[uint64]storage.PolicyState
	readGate chan struct{}
}

func (d *digestStore) Feed(id uint64) (storage.Feed, error) {
	d.mu.Lock()
	bad := d.badRecords[id]
	d.mu.Unlock()
	if bad {
		return storage.Feed{}, fmt.Errorf("feed %d: %w: unexpected end of JSON input", id, storage.ErrCorrupt)
	}
	return d.Store.Feed(id)
}

func (d *digestStore) PutScheduleDigest(dg storage.ScheduleDigest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.digests == nil {
		d.digests = map[int]storage.ScheduleDigest{}
	}
	dg.Entries = slices.Clone(dg.Entries)
	d.digests[dg.Shard] = dg
	return nil
}

func (d *digestStore) ScheduleDigests(shards []int) ([]storage.ScheduleDigest, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []storage.ScheduleDigest
	for _, s := range shards {
		dg, ok := d.digests[s]
		if !ok {
			continue
		}
		var entries []storage.DigestEntry
		for _, e := range dg.Entries {
			if d.edit == nil || d.edit(&e) {
				entries = append(entries, e)
			}
		}
		dg.Entries = entries
		out = append(out, dg)
	}
	return out, nil
}

func (d *digestStore) TakeFeedStates(_ context.Context, ids []uint64, feed func(storage.Feed, *storage.PolicyState) bool, obs func(uint64, storage.Observation), _ func(uint64) *storage.PolicyState, unreadable func(uint64, error)) error {
	d.mu.Lock()
	gate := d.gate
	d.takes++
	if d.asked == nil {
		d.asked = map[uint64]int{}
	}
	for _, id := range ids {
		d.asked[id]++
	}
	d.mu.Unlock()
	if gate != nil {
		<-gate
	}
	d.mu.Lock()
	fail := len(ids) > 1 && d.failBatches > 0
	if fail {
		d.failBatches--
	}
	d.mu.Unlock()
	if fail {
		return errors.New("records unavailable")
	}
	d.mu.Lock()
	bad, badRecords, readGate := d.badState, d.badRecords, d.readGate
	states := maps.Clone(d.states)
	d.mu.Unlock()
	if readGate != nil {
		type read struct {
			f  storage.Feed
			st *storage.PolicyState
		}
		var reads []read
		err := d.FeedsWithStates(ids, func(f storage.Feed, st *storage.PolicyState) error {
			if ps, ok := states[f.ID]; ok {
				st = &ps
			}
			reads = append(reads, read{f, st})
			return nil
		})
		if err != nil {
			return err
		}
		<-readGate
		for _, r := range reads {
			feed(r.f, r.st)
		}
		return nil
	}
	return d.FeedsWithStates(ids, func(f storage.Feed, st *storage.PolicyState) error {
		if ps, ok := states[f.ID]; ok {
			st = &ps
		}
		if badRecords[f.ID] {
			unreadable(f.ID, fmt.Errorf("feed %d: %w: unexpected end of JSON input", f.ID, storage.ErrCorrupt))
			return nil
		}
		if st != nil && f.ID == bad {
			st = &storage.PolicyState{Next: st.Next, Last: st.Last, Policy: []byte{0xff, 0xff, 0xff}}
		}
		if !feed(f, st) {
			return nil
		}
		observed, err := d.Observations(f.ID, 0)
		if err != nil {
			return err
		}
		for _, o := range observed {
			obs(f.ID, o)
		}
		return nil
	})
}

func (d *digestStore) PutStateSnapshot(sn storage.StateSnapshot) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.snapshots == nil {
		d.snapshots = map[int]storage.StateSnapshot{}
	}
	d.snapshots[sn.Shard] = sn
	return nil
}

func (d *digestStore) StateSnapshots(shards []int) ([]storage.StateSnapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.snapshotErr != nil {
		return nil, d.snapshotErr
	}
	var out []storage.StateSnapshot
	for _, sh := range shards {
		if sn, ok := d.snapshots[sh]; ok && d.snapshotted {
			out = append(out, sn)
		}
	}
	return out, nil
}

// FeedsWrittenSince takes a record as written at its last fetch or its
// last edit (Updated), whichever is later.
func (d *digestStore) FeedsWrittenSince(t time.Time) (map[uint64]time.Time, error) {
	d.mu.Lock()
	err := d.writtenErr
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	feeds, err := d.Feeds()
	if err != nil {
		return nil, err
	}
	out := map[uint64]time.Time{}
	for _, f := range feeds {
		at := f.LastFetch
		if f.Updated.After(at) {
			at = f.Updated
		}
		if !at.Before(t) {
			out[f.ID] = at
		}
	}
	return out, nil
}

func (d *digestStore) setGate(gate chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gate = gate
}

// digestService is a clustered service on store with owner, writing its
// digests every minute, fetching from pub; logs, when given, are its
// log's destination.
func digestService(t *testing.T, store aggregator.Store, pub *countingFeeds, owner *shardOwner, logs ...io.Writer) *aggregator.Service {
	t.Helper()
	var logger *slog.Logger
	if len(logs) > 0 {
		logger = slog.New(slog.NewTextHandler(logs[0], &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:       store,
		Fetcher:     fetcher.New(fetcher.Options{Transport: handlerTransport{pub}}),
		Scheduler:   schedule.Config{Workers: 4},
		Owner:       owner,
		Resync:      -1,
		DigestEvery: time.Minute,
		Logger:      logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// runService runs svc until the returned stop is called.
func runService(t *testing.T, svc *aggregator.Service) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestTakeoverFromDigest: a node that comes to own shards queues their
// feeds from the shards' schedule digests before it reads a record, at
// the times the old owner had them, and then fetches each feed once, when
// its record's learned prediction says, whether the digest was exact,
// older than the feed's last poll, later than its record, or missing
// entries.
func TestTakeoverFromDigest(t *testing.T) {
	cases := []struct {
		name string
		// edit changes each digest entry read (nil: exact).
		edit func(e *storage.DigestEntry) bool
		// gated holds the records back until the feeds are checked
		// queued: every feed the digests list is queued before any
		// record is read.
		gated bool
		// deferred is how many feeds are queued from the digests.
		deferred int
	}{
		{name: "exact, records held back", gated: true, deferred: 40},
		{name: "exact", deferred: 40},
		{name: "older than the last poll", deferred: 40,
			edit: func(e *storage.DigestEntry) bool { e.Next = e.Next.Add(-8 * time.Minute); return true }},
		{name: "older, records held back", gated: true, deferred: 40,
			edit: func(e *storage.DigestEntry) bool { e.Next = e.Next.Add(-8 * time.Minute); return true }},
		{name: "later than the record", deferred: 40,
			edit: func(e *storage.DigestEntry) bool { e.Next = e.Next.Add(20 * time.Minute); return true }},
		{name: "half the entries missing", deferred: 20,
			edit: func(e *storage.DigestEntry) bool { return e.ID%2 == 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { takeoverFromDigest(t, tc.edit, tc.gated, tc.deferred) })
		})
	}
}

func takeoverFromDigest(t *testing.T, edit func(e *storage.DigestEntry) bool, gated bool, deferred int) {
	pub, store, ids, want := firstOwnerDied(t, 40)
	store.mu.Lock()
	store.edit = edit
	store.mu.Unlock()
	owner := newShardOwner(4)
	second := digestService(t, store, pub, owner)
	if err := second.Load(); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	if gated {
		store.setGate(gate)
	}
	stopSecond := runService(t, second)
	defer stopSecond()
	time.Sleep(30 * time.Second) // 26 min
	took := time.Now()
	owner.set(0, 1, 2, 3)
	time.Sleep(time.Second) // the claims settle in 600 ms
	synctest.Wait()
	// Feeds due before the takeover was settled are fetched at once.
	settled := took.Add(time.Second)
	if gated {
		got := second.Ownership()
		if got.Pending != 40-deferred || got.Deferred != deferred || !got.Loading() {
			t.Errorf("records held back: %+v, want %d deferred, %d pending", got, deferred, 40-deferred)
		}
		listed, err := store.ScheduleDigests([]int{0, 1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, dg := range listed {
			for _, e := range dg.Entries {
				n++
				next, ok := second.NextFetch(e.ID)
				if !ok || (e.Next.After(settled) && !next.Equal(e.Next)) || (!e.Next.After(settled) && next.After(settled)) {
					t.Errorf("feed %d queued at %v (%v) before its record was read, want its digest's %v", e.ID, next, ok, e.Next)
				}
			}
		}
		if n != deferred {
			t.Errorf("%d digest entries, want %d", n, deferred)
		}
		close(gate)
		synctest.Wait()
	}
	got := second.Ownership()
	if got.Pending != 0 || got.Deferred != 0 || got.Loading() || got.Polled != 40 || got.Taken != 40 {
		t.Errorf("after the records were read: %+v, want 40 polled, none deferred or pending", got)
	}
	time.Sleep(10 * time.Minute)
	synctest.Wait()
	for i, id := range ids {
		fetchedOnce(t, pub, "/f/"+strconv.Itoa(i)+".rss", id, took, settled, want[id])
	}
}

// fetchedOnce checks that feed id (at path of pub) was fetched once
// after took, a takeover settled at settled: at learned, its learned
// next fetch, or at once (by settled) when that was before settled.
func fetchedOnce(t *testing.T, pub *countingFeeds, path string, id uint64, took, settled, learned time.Time) {
	t.Helper()
	// Up to the learned time, or to the takeover for feeds due before
	// it (their next fetch is a period later).
	until := settled
	if learned.After(settled) {
		until = learned
	}
	until = until.Add(time.Second)
	pub.mu.Lock()
	var polls []time.Time
	for _, at := range pub.polls[path] {
		if !at.Before(took) && !at.After(until) {
			polls = append(polls, at)
		}
	}
	pub.mu.Unlock()
	switch {
	case len(polls) != 1:
		t.Errorf("feed %d fetched at %v after the takeover, want once (learned %v)", id, polls, learned)
	case learned.After(settled) && !polls[0].Equal(learned):
		t.Errorf("feed %d fetched at %v, want its learned %v", id, polls[0], learned)
	case !learned.After(settled) && polls[0].After(settled):
		t.Errorf("feed %d fetched at %v, want at once (due %v before the takeover)", id, polls[0], learned)
	}
}

// TestDigestsOfLoadedShardsOnly: a node writes the digests of the shards
// whose feeds it has scheduled, not of shards it came to own and is still
// loading (their earlier owner's digest is what a next takeover needs);
// a feed whose host is longer than most still has its shard's digest
// written.
func TestDigestsOfLoadedShardsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, owner, shardOf, earlier, stop := ownsTwoOfFour(t, "http://"+strings.Repeat("s", 300)+".test/f/0.rss")
		defer stop()
		written, count := store.digestOf, func(sh int) int { return feedsIn(shardOf, sh) }
		for _, sh := range []int{0, 1} {
			if at, n := written(sh); at.IsZero() || n != count(sh) {
				t.Errorf("shard %d: digest written %v with %d feeds, want its %d", sh, at, n, count(sh))
			}
		}
		// Shards 2 and 3 come; their records are held back.
		gate := make(chan struct{})
		store.setGate(gate)
		owner.set(0, 1, 2, 3)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		for _, sh := range []int{2, 3} {
			if at, n := written(sh); !at.Equal(earlier) || n != count(sh) {
				t.Errorf("shard %d while loading: digest written %v with %d feeds, want the earlier owner's of %v", sh, at, n, earlier)
			}
		}
		writtenOnceLoaded(t, store, shardOf, gate, earlier.Add(2*time.Minute))
	})
}

// ownsTwoOfFour starts a service owning shards 0 and 1 of 4 over 40
// remote feeds of fixed 10-minute periods (at pub.test/f/<i>.rss, the
// first at first when given), whose shards 2 and 3 have an earlier
// owner's digests, every feed due in 5 minutes, and runs it for a minute
// (it writes its digests once). It returns the store, the owner, each
// feed's shard, when the earlier digests were written, and the
// service's stop.
func ownsTwoOfFour(t *testing.T, first string) (store *digestStore, owner *shardOwner, shardOf map[uint64]int, earlier time.Time, stop func()) {
	t.Helper()
	pub, st := pubAndStore(t)
	store = &digestStore{Store: st}
	owner = newShardOwner(4, 0, 1)
	svc := digestService(t, store, pub, owner)
	shardOf = map[uint64]int{}
	for i := range 40 {
		url := "http://pub.test/f/" + strconv.Itoa(i) + ".rss"
		if i == 0 && first != "" {
			url = first
		}
		f := storage.Feed{URL: url, Kind: storage.KindRemote, Policy: "fixed-10m"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		shardOf[f.ID] = cluster.ShardOf(cluster.KindFeed, f.ID, 4)
	}
	earlier = time.Now().Add(-time.Minute)
	for _, sh := range []int{2, 3} {
		dg := storage.ScheduleDigest{Shard: sh, Written: earlier, Parts: 1}
		for _, id := range slices.Sorted(maps.Keys(shardOf)) {
			if shardOf[id] == sh {
				dg.Entries = append(dg.Entries, storage.DigestEntry{ID: id, Next: time.Now().Add(5 * time.Minute), Weight: 1})
			}
		}
		if err := store.PutScheduleDigest(dg); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Load(); err != nil {
		t.Fatal(err)
	}
	stop = runService(t, svc)
	time.Sleep(time.Minute + time.Second)
	synctest.Wait()
	return store, owner, shardOf, earlier, stop
}

// writtenOnceLoaded closes gate (the records held back), lets a minute
// pass and checks that each shard's digest was written after since with
// every feed of the shard.
func writtenOnceLoaded(t *testing.T, store *digestStore, shardOf map[uint64]int, gate chan struct{}, since time.Time) {
	t.Helper()
	close(gate)
	time.Sleep(time.Minute)
	synctest.Wait()
	for sh := range 4 {
		if at, n := store.digestOf(sh); !at.After(since) || n != feedsIn(shardOf, sh) {
			t.Errorf("shard %d once loaded: digest written %v with %d feeds, want a new one of %d", sh, at, n, feedsIn(shardOf, sh))
		}
	}
}

// feedsIn counts the feeds of shardOf in shard sh.
func feedsIn(shardOf map[uint64]int, sh int) int {
	n := 0
	for _, s := range shardOf {
		if s == sh {
			n++
		}
	}
	return n
}

// digestOf tells when the digest of shard sh was written and how many
// feeds it lists.
func (d *digestStore) digestOf(sh int) (time.Time, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.digests[sh].Written, len(d.digests[sh].Entries)
}

// firstOwnerDied: a node owning every shard of 4 polls n feeds (fixed
// 10-minute periods, at pub.test/f/<i>.rss) from 0, writing its digests
// every minute, and dies at 25 min 30 s; it returns the feeds' IDs and
// their next fetches as the node had them.
func firstOwnerDied(t *testing.T, n int) (pub *countingFeeds, store *digestStore, ids []uint64, want map[uint64]time.Time) {
	t.Helper()
	pub, st := pubAndStore(t)
	pub.period = 10 * time.Minute
	store = &digestStore{Store: st}
	first := digestService(t, store, pub, newShardOwner(4, 0, 1, 2, 3))
	for i := range n {
		f, err := first.Subscribe(storage.Feed{URL: "http://pub.test/f/" + strconv.Itoa(i) + ".rss", Policy: "fixed-10m"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	stop := runService(t, first)
	time.Sleep(25*time.Minute + 30*time.Second)
	synctest.Wait()
	want = map[uint64]time.Time{}
	for _, id := range ids {
		next, ok := first.NextFetch(id)
		if !ok {
			t.Fatalf("feed %d not scheduled on the first node", id)
		}
		want[id] = next
	}
	stop()
	return pub, store, ids, want
}

// TestTakeoverQueuesWhileReading: a second change of the owned shards
// queues its feeds from their digests at once, while the records of the
// first change's feeds are still being read; once they are read every
// feed is fetched once, at its learned time.
func TestTakeoverQueuesWhileReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub, store, ids, want := firstOwnerDied(t, 80)
		path := map[uint64]string{}
		for i, id := range ids {
			path[id] = "/f/" + strconv.Itoa(i) + ".rss"
		}
		owner := newShardOwner(4)
		second := digestService(t, store, pub, owner)
		if err := second.Load(); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		store.setGate(gate)
		defer runService(t, second)()
		time.Sleep(30 * time.Second)
		took := time.Now()
		// Each feed of shards is queued at its digest's time, or due at
		// once when that was before its change settled.
		queued := func(settled time.Time, shards ...int) (n int) {
			listed, err := store.ScheduleDigests(shards)
			if err != nil {
				t.Fatal(err)
			}
			for _, dg := range listed {
				for _, e := range dg.Entries {
					n++
					next, ok := second.NextFetch(e.ID)
					if !ok || (e.Next.After(settled) && !next.Equal(e.Next)) || (!e.Next.After(settled) && next.After(settled)) {
						t.Errorf("feed %d of shard %d queued at %v (%v), want its digest's %v", e.ID, dg.Shard, next, ok, e.Next)
					}
				}
			}
			return n
		}
		// Two changes, the second while the first's records are held
		// back.
		owner.set(0, 1)
		time.Sleep(time.Second)
		synctest.Wait()
		n := queued(time.Now(), 0, 1)
		if got := second.Ownership(); got.Deferred != n || !got.Loading() {
			t.Errorf("first change, records held back: %+v, want %d deferred", got, n)
		}
		owner.set(0, 1, 2, 3)
		time.Sleep(time.Second)
		synctest.Wait()
		if n += queued(time.Now(), 2, 3); n != 80 {
			t.Errorf("%d digest entries, want 80", n)
		}
		if got := second.Ownership(); got.Deferred != 80 || !got.Loading() {
			t.Errorf("second change, records held back: %+v, want 80 deferred", got)
		}
		close(gate)
		synctest.Wait()
		if got := second.Ownership(); got.Deferred != 0 || got.Pending != 0 || got.Loading() || got.Polled != 80 {
			t.Errorf("after the records were read: %+v, want 80 polled, none deferred or pending", got)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		// The gate opened 2 s after the first change: feeds due before
		// are fetched then, reading their records first.
		opened := took.Add(2 * time.Second)
		for id, p := range path {
			fetchedOnce(t, pub, p, id, took, opened, want[id])
		}
	})
}

// TestTakeoverLoadedAfterFetchReads: while the background reads of the
// records keep failing, each deferred feed reads its own before its
// fetch, is fetched once at its learned time, and the change is reported
// loaded once the last has, without a resync.
func TestTakeoverLoadedAfterFetchReads(t *testing.T) {
	testTakeoverBackgroundFailures(t, 1<<30, false)
}

// TestTakeoverReadsAgainAfterFailures: background reads that fail are
// tried again after growing pauses (5, 10, 20 s), and once one succeeds
// every state is read, long before the feeds come due.
func TestTakeoverReadsAgainAfterFailures(t *testing.T) {
	testTakeoverBackgroundFailures(t, 3, true)
}

// takeOverAll starts a second node on store, fetching from pub, that
// comes to own every shard 30 s after it starts (Resync -1: only the
// change and its retries read). It returns the node, when the shards
// changed, and the node's stop. logs, when given, is its log.
func takeOverAll(t *testing.T, store *digestStore, pub *countingFeeds, logs ...io.Writer) (second *aggregator.Service, took time.Time, stop func()) {
	t.Helper()
	owner := newShardOwner(4)
	second = digestService(t, store, pub, owner, logs...)
	if err := second.Load(); err != nil {
		t.Fatal(err)
	}
	stop = runService(t, second)
	time.Sleep(30 * time.Second)
	took = time.Now()
	owner.set(0, 1, 2, 3)
	return second, took, stop
}

// fetchedSince lists the fetches of path after t0.
func fetchedSince(pub *countingFeeds, path string, t0 time.Time) []time.Time {
	pub.mu.Lock()
	defer pub.mu.Unlock()
	var out []time.Time
	for _, at := range pub.polls[path] {
		if at.After(t0) {
			out = append(out, at)
		}
	}
	return out
}

// allFetchedOnce checks that every feed of ids (those of firstOwnerDied,
// want their learned times) but those at the indexes skip was fetched
// once after a takeover at took, at its learned time or, due before, at
// once.
func allFetchedOnce(t *testing.T, pub *countingFeeds, ids []uint64, want map[uint64]time.Time, took time.Time, skip ...int) {
	t.Helper()
	for i, id := range ids {
		if !slices.Contains(skip, i) {
			fetchedOnce(t, pub, "/f/"+strconv.Itoa(i)+".rss", id, took, took.Add(2*time.Second), want[id])
		}
	}
}

func testTakeoverBackgroundFailures(t *testing.T, failures int, recovers bool) {
	synctest.Test(t, func(t *testing.T) {
		pub, store, ids, want := firstOwnerDied(t, 40)
		store.mu.Lock()
		store.failBatches = failures
		store.mu.Unlock()
		second, took, stop := takeOverAll(t, store, pub)
		defer stop()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := second.Ownership(); got.Deferred == 0 || !got.Loading() {
			t.Fatalf("background reads failing: %+v, want feeds deferred and the change loading", got)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		got := second.Ownership()
		switch {
		case recovers && (got.Deferred != 0 || got.Loading() || got.Loaded.After(took.Add(40*time.Second))):
			t.Errorf("a minute after the change, the reads working again after 35 s: %+v, want every state read", got)
		case !recovers && !got.Loading():
			t.Errorf("a minute after the change, reads failing: %+v, want it loading", got)
		}
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		if got := second.Ownership(); got.Deferred != 0 || got.Loading() || got.Loaded.IsZero() || got.Polled != 40 {
			t.Errorf("after every feed came due: %+v, want the change loaded, none deferred", got)
		}
		allFetchedOnce(t, pub, ids, want, took)
	})
}

// TestTakeoverDropsFeedsDeletedSinceDigest: a feed its shard's digest
// lists but deleted (on another node) before its record was read is
// dropped when the background read finds no record, so the change is
// loaded then, not when the feed would have come due; it is not fetched.
func TestTakeoverDropsFeedsDeletedSinceDigest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub, store, ids, want := firstOwnerDied(t, 40)
		second, took, stop := takeOverAll(t, store, pub)
		defer stop()
		// The records are held back from the change's load on (it
		// starts once the change has settled).
		gate := make(chan struct{})
		store.setGate(gate)
		time.Sleep(time.Second)
		synctest.Wait()
		// The feed queued last from its digest, minutes after the
		// takeover.
		last, lastAt := -1, time.Time{}
		for i, id := range ids {
			if at, ok := second.NextFetch(id); ok && at.After(lastAt) {
				last, lastAt = i, at
			}
		}
		if last < 0 || !lastAt.After(took.Add(time.Minute)) {
			t.Fatalf("no feed queued later than a minute after the takeover (the last at %v)", lastAt)
		}
		gone := ids[last]
		if got := second.Ownership(); got.Deferred != 40 {
			t.Fatalf("records held back: %+v, want 40 deferred", got)
		}
		if err := store.DeleteFeed(gone); err != nil {
			t.Fatal(err)
		}
		close(gate)
		synctest.Wait()
		if got := second.Ownership(); got.Deferred != 0 || got.Loading() || got.Polled != 39 {
			t.Errorf("after the records were read: %+v, want 39 polled, none deferred, the change loaded", got)
		}
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		after := fetchedSince(pub, "/f/"+strconv.Itoa(last)+".rss", took)
		if len(after) != 0 {
			t.Errorf("deleted feed %d fetched at %v after the takeover", gone, after)
		}
		allFetchedOnce(t, pub, ids, want, took, last)
	})
}

// TestTakeoverFetchReadOfUnknownPolicy: a feed queued from its digest
// whose record, read just before its fetch (the background reads
// failing), names a policy this version lacks is dropped, not fetched,
// and does not hold the change back; the others are fetched once.
func TestTakeoverFetchReadOfUnknownPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub, store, ids, want := firstOwnerDied(t, 40)
		odd := ids[0]
		if _, err := store.UpdateFeed(odd, func(f *storage.Feed) error {
			f.Policy = "from-a-later-version"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		store.mu.Lock()
		store.failBatches = 1 << 30
		store.mu.Unlock()
		second, took, stop := takeOverAll(t, store, pub)
		defer stop()
		time.Sleep(12 * time.Minute)
		synctest.Wait()
		if got := second.Ownership(); got.Deferred != 0 || got.Loading() || got.Polled != 39 {
			t.Errorf("after every feed came due: %+v, want 39 polled, the change loaded", got)
		}
		after := fetchedSince(pub, "/f/0.rss", took)
		if len(after) != 0 {
			t.Errorf("feed %d, its policy unknown, fetched at %v", odd, after)
		}
		allFetchedOnce(t, pub, ids, want, took, 0)
	})
}

// TestTakeoverReplaysUnreadableState: a record whose policy state this
// version cannot restore is replayed from the feed's observations, with
// one warning for the take, and the feed is fetched once at its learned
// time like the others.
func TestTakeoverReplaysUnreadableState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub, store, ids, want := firstOwnerDied(t, 40)
		store.mu.Lock()
		store.edit = func(*storage.DigestEntry) bool { return false } // no digest: the records are read
		store.badState = ids[3]
		store.mu.Unlock()
		var logs testlog.Buffer
		second, took, stop := takeOverAll(t, store, pub, &logs)
		defer stop()
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		if got := second.Ownership(); got.Loading() || got.Polled != 40 || got.Failed != 0 {
			t.Errorf("after the takeover: %+v, want 40 polled, none failed", got)
		}
		warned := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "policy states this version cannot restore") {
				warned++
				if !strings.Contains(line, "feeds=1 ") || !strings.Contains(line, "feed "+strconv.FormatUint(ids[3], 10)+":") {
					t.Errorf("warning %q does not count one feed and name feed %d", line, ids[3])
				}
			}
		}
		if warned != 1 {
			t.Errorf("%d warnings of unreadable states, want 1; log:\n%s", warned, logs.String())
		}
		allFetchedOnce(t, pub, ids, want, took)
	})
}

// TestTakeoverUnreadableRecord: a feed queued from its digest whose
// record cannot be decoded does not hold the takeover back, whether the
// background read leaves it out or, that read failing, the feed's own
// read before its fetch finds it unreadable (logged); without digests
// the take counts such feeds failed, however many (more than maxAlone,
// the feeds it reads one by one, too). They are not fetched, and the
// others are fetched once at their learned times.
func TestTakeoverUnreadableRecord(t *testing.T) {
	tests := []struct {
		name string
		// background: the background reads work; digest: the shards'
		// digests are read (else every record is read by the take).
		background, digest bool
		feeds, bad         int // bad: the first feeds' records are unreadable
		wantLog            string
		wantFailed         int
	}{
		{name: "read in the background", background: true, digest: true, feeds: 40, bad: 1},
		{name: "read before its fetch", digest: true, feeds: 40, bad: 1, wantLog: "cannot read the record of a feed queued from a schedule digest"},
		{name: "read by the take", background: true, feeds: 40, bad: 1, wantLog: "cannot read the records of feeds this node came to own", wantFailed: 1},
		{name: "many read by the take", background: true, feeds: 300, bad: 260, wantLog: "cannot read the records of feeds this node came to own", wantFailed: 260},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pub, store, ids, want := firstOwnerDied(t, tt.feeds)
				store.mu.Lock()
				store.badRecords = map[uint64]bool{}
				var skip []int
				for i := range tt.bad {
					store.badRecords[ids[i]] = true
					skip = append(skip, i)
				}
				if !tt.background {
					store.failBatches = 1 << 30
				}
				if !tt.digest {
					store.edit = func(*storage.DigestEntry) bool { return false }
				}
				store.mu.Unlock()
				var logs testlog.Buffer
				second, took, stop := takeOverAll(t, store, pub, &logs)
				defer stop()
				time.Sleep(12 * time.Minute)
				synctest.Wait()
				if got := second.Ownership(); got.Deferred != 0 || got.Loading() || got.Polled != tt.feeds-tt.bad || got.Failed != tt.wantFailed {
					t.Errorf("after the takeover: %+v, want %d polled, %d failed, the change loaded", got, tt.feeds-tt.bad, tt.wantFailed)
				}
				for i := range tt.bad {
					if after := fetchedSince(pub, "/f/"+strconv.Itoa(i)+".rss", took); len(after) != 0 {
						t.Errorf("feed %d, its record unreadable, fetched at %v", ids[i], after)
					}
				}
				if tt.wantLog != "" && !strings.Contains(logs.String(), tt.wantLog) {
					t.Errorf("no error %q logged for the unreadable records; log:\n%s", tt.wantLog, logs.String())
				}
				allFetchedOnce(t, pub, ids, want, took, skip...)
			})
		})
	}
}

// TestTakeoverFromSnapshots: a node taking shards over gives each feed
// its policy from its shard's state snapshot at once when the feed's
// record was not written since a digest interval (here a minute, more
// than 30 s) before the snapshot, and reads the
// records of the others (deferred: here those reads fail, so each is
// read just before its fetch); every feed is fetched once, at its
// learned time. A snapshot the store cannot read, or writes since it
// the store cannot tell, leave every feed to its record; a feed edited
// since its snapshot reads its record. (A feed due as its shard is taken
// may read its record before its fetch, while the snapshot is read.)
func TestTakeoverFromSnapshots(t *testing.T) {
	tests := []struct {
		name                    string
		snapshotErr, writtenErr error
		edit                    bool // the first feed is edited after the first node died
		none                    bool // no feed restored from a snapshot
	}{
		{name: "snapshots"},
		{name: "a feed edited since", edit: true},
		{name: "snapshots unreadable", snapshotErr: errors.New("bucket unavailable"), none: true},
		{name: "writes since unknown", writtenErr: errors.New("stream unavailable"), none: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pub, store, ids, want := firstOwnerDied(t, 40)
				if tt.edit {
					if _, err := store.UpdateFeed(ids[0], func(f *storage.Feed) error {
						f.Title, f.Updated = "edited", time.Now()
						return nil
					}); err != nil {
						t.Fatal(err)
					}
				}
				store.mu.Lock()
				store.snapshotted, store.snapshotErr, store.writtenErr = true, tt.snapshotErr, tt.writtenErr
				store.failBatches = 1 << 30 // deferred feeds read their records before their fetches
				snaps := maps.Clone(store.snapshots)
				store.asked = nil
				store.mu.Unlock()
				// Which feeds the snapshots can give their policies.
				fromSnapshot := map[uint64]bool{}
				for i, id := range ids {
					f, err := store.Feed(id)
					if err != nil {
						t.Fatal(err)
					}
					sn, ok := snaps[cluster.ShardOf(cluster.KindFeed, id, 4)]
					if !ok || tt.none || (tt.edit && i == 0) {
						continue
					}
					listed := slices.ContainsFunc(sn.Entries, func(e storage.StateEntry) bool { return e.ID == id })
					// The margin is the digests' interval here (a minute),
					// longer than snapshotMargin.
					if listed && f.LastFetch.Before(sn.Written.Add(-time.Minute)) {
						fromSnapshot[id] = true
					}
				}
				if !tt.none && (len(fromSnapshot) == 0 || len(fromSnapshot) == len(ids)) {
					t.Fatalf("%d of %d feeds restorable from the snapshots (%d shards): the test needs both kinds", len(fromSnapshot), len(ids), len(snaps))
				}
				second, took, stop := takeOverAll(t, store, pub)
				defer stop()
				// A snapshot older than the interval (5 min) and 30 s is
				// not used.
				for id := range fromSnapshot {
					if sn := snaps[cluster.ShardOf(cluster.KindFeed, id, 4)]; sn.Written.Before(took.Add(-5*time.Minute - 30*time.Second)) {
						delete(fromSnapshot, id)
					}
				}
				time.Sleep(12 * time.Minute)
				synctest.Wait()
				if got := second.Ownership(); got.Polled != len(ids) || got.Deferred != 0 || got.Loading() {
					t.Errorf("12 minutes after the takeover: %+v, want %d polled, every state read and the change loaded", got, len(ids))
				}
				store.mu.Lock()
				for _, id := range ids {
					// A feed due as its shard is taken may read its record
					// before its fetch, before the snapshot is read.
					dueAtOnce := !want[id].After(took.Add(5 * time.Second))
					switch asked := store.asked[id]; {
					case fromSnapshot[id] && asked > 0 && !dueAtOnce:
						t.Errorf("feed %d: its record read %d times, want none (its snapshot entry is usable)", id, asked)
					case !fromSnapshot[id] && asked == 0:
						t.Errorf("feed %d: its record never read, want it read (its snapshot entry is not usable)", id)
					}
				}
				store.mu.Unlock()
				allFetchedOnce(t, pub, ids, want, took)
			})
		})
	}
}

// TestDigestOfRegainedShardWaitsForItsLoad: a shard lost while feeds of
// other shards wait for their records, and owned again, is not written
// to its digest until its feeds are scheduled anew: the digest this node
// wrote before the loss stays, as the earlier owner's does while a
// takeover loads.
func TestDigestOfRegainedShardWaitsForItsLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Shards 2 and 3 have an earlier owner's digests: their feeds
		// are queued from them and wait for their records.
		store, owner, shardOf, _, stop := ownsTwoOfFour(t, "")
		defer stop()
		written, count := store.digestOf, func(sh int) int { return feedsIn(shardOf, sh) }
		if at, n := written(1); at.IsZero() || n != count(1) {
			t.Fatalf("shard 1: digest written %v with %d feeds, want its %d", at, n, count(1))
		}
		gate := make(chan struct{})
		store.setGate(gate)
		owner.set(0, 1, 2, 3)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		owner.set(0, 2, 3) // shard 1 lost while 2 and 3 load
		time.Sleep(10 * time.Second)
		synctest.Wait()
		before, _ := written(1)
		owner.set(0, 1, 2, 3) // and owned again: its feeds wait too
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if at, n := written(1); !at.Equal(before) {
			t.Errorf("shard 1 owned again, while loading: digest written %v with %d feeds, want the one of %v", at, n, before)
		}
		if at, _ := written(0); !at.After(before) {
			t.Errorf("shard 0 (loaded throughout): digest last written %v, want after %v", at, before)
		}
		writtenOnceLoaded(t, store, shardOf, gate, before.Add(2*time.Minute))
	})
}

// TestRecordReadWhileShardLostIsReadAgain: records read before their
// shard was lost and owned again (another node polled its feeds
// meanwhile) are not installed: the feeds are read again and scheduled
// at what the newer records say. Whether the shard's feeds are read by
// the take itself (no digest) or queued from the shard's digest and read
// in the background, and whether a reconcile saw the shard lost (the
// loss lasted seconds) or not (lost and owned again at once).
func TestRecordReadWhileShardLostIsReadAgain(t *testing.T) {
	tests := []struct {
		name   string
		digest bool          // shard 1 has a digest: its feeds are deferred
		lost   time.Duration // how long shard 1 is lost
	}{
		{"read by the take", false, 5 * time.Second},
		{"read by the take, lost and owned again at once", false, 0},
		{"queued from the digest", true, 5 * time.Second},
		{"queued from the digest, lost and owned again at once", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pub, st := pubAndStore(t)
				store := &digestStore{Store: st, states: map[uint64]storage.PolicyState{}}
				owner := newShardOwner(4, 0)
				svc := digestService(t, store, pub, owner)
				t0 := time.Now()
				dg := storage.ScheduleDigest{Shard: 1, Written: t0.Add(-time.Minute), Parts: 1}
				var inShard1 []uint64
				path := map[uint64]string{}
				for i := range 80 {
					f := storage.Feed{URL: "http://pub.test/f/" + strconv.Itoa(i) + ".rss", Kind: storage.KindRemote, Policy: "fixed-10m"}
					if err := st.CreateFeed(&f); err != nil {
						t.Fatal(err)
					}
					store.states[f.ID] = storage.PolicyState{Next: t0.Add(5 * time.Minute), Last: t0.Add(-5 * time.Minute)}
					path[f.ID] = "/f/" + strconv.Itoa(i) + ".rss"
					if cluster.ShardOf(cluster.KindFeed, f.ID, 4) == 1 {
						inShard1 = append(inShard1, f.ID)
						dg.Entries = append(dg.Entries, storage.DigestEntry{ID: f.ID, Next: t0.Add(5 * time.Minute), Weight: 1})
					}
				}
				if len(inShard1) <= 16 { // perFeedTake: more are deferred
					t.Fatalf("%d feeds in shard 1, want more than 16", len(inShard1))
				}
				if tt.digest {
					if err := store.PutScheduleDigest(dg); err != nil {
						t.Fatal(err)
					}
				}
				if err := svc.Load(); err != nil {
					t.Fatal(err)
				}
				defer runService(t, svc)()
				time.Sleep(time.Second)
				synctest.Wait()

				// Shard 1 comes; its records are read, then held back
				// while it is lost, polled by another node and owned
				// again.
				gate := make(chan struct{})
				store.mu.Lock()
				store.readGate = gate
				store.mu.Unlock()
				owner.set(0, 1)
				time.Sleep(5 * time.Second)
				synctest.Wait()
				owner.set(0)
				polled := t0.Add(7 * time.Minute)
				store.mu.Lock()
				for _, id := range inShard1 {
					store.states[id] = storage.PolicyState{Next: polled, Last: t0.Add(2 * time.Second)}
				}
				store.readGate = nil
				store.mu.Unlock()
				time.Sleep(tt.lost)
				synctest.Wait()
				owner.set(0, 1)
				close(gate)
				time.Sleep(10 * time.Second)
				synctest.Wait()
				if o := svc.Ownership(); o.Pending != 0 || o.Deferred != 0 || o.Loading() {
					t.Errorf("ownership %+v: want loaded, nothing pending or deferred", o)
				}
				time.Sleep(polled.Add(30 * time.Second).Sub(time.Now()))
				synctest.Wait()
				pub.mu.Lock()
				defer pub.mu.Unlock()
				for _, id := range inShard1 {
					if got := pub.polls[path[id]]; len(got) == 0 || !got[0].Equal(polled) {
						t.Errorf("feed %d fetched at %v, want first at %v, the record the other node wrote", id, got, polled)
					}
				}
			})
		})
	}
}
