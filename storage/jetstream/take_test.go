package jetstream_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// openNode opens a Store with shards and, when learn, the polling
// service's Learner installed, as a clustered node does.
func openNode(t testing.TB, c *jstest.Cluster, learn bool) *sjs.Store {
	t.Helper()
	st, _ := openStoreWith(t, c, sjs.Options{Shards: 8})
	if learn {
		st.SetLearner(aggregator.Learn)
	}
	return st
}

var takeT0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// pollFeed records poll p of feed id: a fetch with one new item every
// other poll, at a period that drifts, so the policy learns something.
func pollFeed(t testing.TB, st *sjs.Store, id uint64, p int) {
	t.Helper()
	at := takeT0.Add(time.Duration(p)*time.Minute + time.Duration(id%7)*time.Second)
	var its []storage.Item
	if p%2 == 0 {
		its = []storage.Item{{ID: "i" + strconv.Itoa(p), Title: "reading", Published: at.Add(-3 * time.Second)}}
	}
	_, err := st.RecordFetch(testCtx(t), id, its, storage.Observation{At: at, Status: 200}, func(f *storage.Feed, o *storage.Observation, added []storage.Item) error {
		o.Hit = len(added) > 0
		for _, it := range added {
			o.Published = append(o.Published, it.Published)
		}
		f.Polls++
		f.LastFetch = o.At
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// replayed is the state a replay of the feed's stored observations
// reaches, folding them one by one from a fresh state as Learn does.
func replayed(t *testing.T, st *sjs.Store, f storage.Feed) storage.PolicyState {
	t.Helper()
	obs, err := st.Observations(testCtx(t), f.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ps storage.PolicyState
	for _, o := range obs {
		next, ok := aggregator.Learn(&f, &ps, &o)
		if !ok {
			t.Fatalf("feed %d: policy %q keeps no state", f.ID, f.Policy)
		}
		ps = next
	}
	return ps
}

// taken collects what TakeFeedStates hands over.
type taken struct {
	feeds  map[uint64]storage.Feed
	states map[uint64]*storage.PolicyState
	obs    map[uint64][]storage.Observation
	bad    map[uint64]error // the records left out as unreadable
}

func take(t *testing.T, st *sjs.Store, ids []uint64, reached func(id uint64) *storage.PolicyState) (taken, sjs.TakeStats) {
	t.Helper()
	got := taken{feeds: map[uint64]storage.Feed{}, states: map[uint64]*storage.PolicyState{}, obs: map[uint64][]storage.Observation{}, bad: map[uint64]error{}}
	stats, err := st.TakeFeedStates(testCtx(t), ids, sjs.TakeFuncs{
		Feed: func(f storage.Feed, ps *storage.PolicyState) bool {
			if _, dup := got.feeds[f.ID]; dup {
				t.Errorf("feed %d handed over twice", f.ID)
			}
			got.feeds[f.ID] = f
			if ps != nil {
				c := *ps
				c.Policy = bytes.Clone(ps.Policy)
				got.states[f.ID] = &c
			}
			return ps == nil && f.Kind == storage.KindRemote
		},
		Obs:        func(id uint64, o storage.Observation) { got.obs[id] = append(got.obs[id], o) },
		Reached:    reached,
		Unreadable: func(id uint64, err error) { got.bad[id] = err },
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, stats
}

// TestTakeFeedStates: the records of polled feeds carry the policy state
// their observations taught, a takeover restores it without reading
// observations, and feeds whose records have none (stored by a node
// without a Learner) are replayed and get the state reached stored, so
// the next takeover restores them too.
func TestTakeFeedStates(t *testing.T) { testTakeFeedStates(t, jstest.NewServer(t)) }

// TestTakeFeedStatesOnCluster is TestTakeFeedStates on a 3-server
// cluster (R3): the batched reads may be answered by any replica.
func TestTakeFeedStatesOnCluster(t *testing.T) { testTakeFeedStates(t, jstest.NewCluster(t, 3)) }

func testTakeFeedStates(t *testing.T, c *jstest.Cluster) {
	learning := openNode(t, c, true)
	legacy := openNode(t, c, false)
	taker := openNode(t, c, true)
	ctx := testCtx(t)

	var stated, stateless, all []uint64
	for i := range 44 {
		f := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/" + strconv.Itoa(i), Policy: []string{"auto", "dpt-l", "fixed-5m"}[i%3]}
		if err := learning.CreateFeed(ctx, &f); err != nil {
			t.Fatal(err)
		}
		all = append(all, f.ID)
		writer := learning
		if i >= 24 {
			writer = legacy // a record without a state
			stateless = append(stateless, f.ID)
		} else {
			stated = append(stated, f.ID)
		}
		for p := range 3 + i%4 {
			pollFeed(t, writer, f.ID, p)
		}
	}
	sensor := storage.Feed{Kind: storage.KindSensor, Slug: "s1"}
	if err := learning.CreateFeed(ctx, &sensor); err != nil {
		t.Fatal(err)
	}
	gone := stated[3]
	if err := learning.DeleteFeed(ctx, gone); err != nil {
		t.Fatal(err)
	}
	ask := append(slices.Clone(all), sensor.ID, gone, 9999) // 9999 never existed

	// A poll that lands between the takeover's read and its store of a
	// replayed state keeps what it wrote: that state is not stored.
	raced := stateless[0]
	reached := func(id uint64) *storage.PolicyState {
		if id == raced {
			pollFeed(t, legacy, id, 100)
		}
		f, err := taker.Feed(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ps := replayed(t, taker, f) // for the raced feed, with the poll just made
		return &ps
	}
	got, stats := take(t, taker, ask, reached)
	wantRecords := len(all) - 1 + 1 // the deleted feed out, the sensor in
	if stats.Records != wantRecords || len(got.feeds) != wantRecords {
		t.Errorf("%d records read, %d handed over; want %d", stats.Records, len(got.feeds), wantRecords)
	}
	if _, ok := got.feeds[gone]; ok {
		t.Errorf("deleted feed %d handed over", gone)
	}
	if f := got.feeds[sensor.ID]; f.Kind != storage.KindSensor || got.states[sensor.ID] != nil {
		t.Errorf("sensor feed: %+v, state %v", f, got.states[sensor.ID])
	}
	for _, id := range stated {
		if id == gone {
			continue
		}
		f, err := taker.Feed(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if g := got.feeds[id]; g.URL != f.URL || g.Policy != f.Policy || g.Kind != f.Kind {
			t.Errorf("feed %d: handed %+v, record %+v", id, g, f)
		}
		want := replayed(t, taker, f)
		ps := got.states[id]
		if ps == nil {
			t.Errorf("feed %d: no state", id)
			continue
		}
		if !ps.Next.Equal(want.Next) || !ps.Last.Equal(want.Last) || !bytes.Equal(ps.Policy, want.Policy) {
			t.Errorf("feed %d (%s): state %v %v %x, a replay reaches %v %v %x", id, f.Policy, ps.Next, ps.Last, ps.Policy, want.Next, want.Last, want.Policy)
		}
		if len(got.obs[id]) != 0 {
			t.Errorf("feed %d: %d observations read although its state was restored", id, len(got.obs[id]))
		}
	}
	for _, id := range stateless {
		if got.states[id] != nil {
			t.Errorf("feed %d: a state, written by a node without a Learner", id)
		}
		obs, err := taker.Observations(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if id == raced {
			obs = obs[:len(obs)-1] // the poll made after the read
		}
		if len(got.obs[id]) != len(obs) || !got.obs[id][len(obs)-1].At.Equal(obs[len(obs)-1].At) {
			t.Errorf("feed %d: %d observations replayed, %d stored", id, len(got.obs[id]), len(obs))
		}
	}
	if stats.Restored != len(stated)-1 || stats.Replayed != len(stateless) || stats.Stored != len(stateless)-1 {
		t.Errorf("stats %+v; want %d restored, %d replayed, %d stored", stats, len(stated)-1, len(stateless), len(stateless)-1)
	}

	// The next takeover restores the replayed feeds, but the raced one.
	got, stats = take(t, taker, ask, nil)
	if stats.Restored != len(all)-2 || stats.Replayed != 1 { // all but the deleted and the raced feed
		t.Errorf("second takeover: %+v; want %d restored, 1 replayed", stats, len(all)-2)
	}
	for _, id := range stateless[1:] {
		f, err := taker.Feed(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := replayed(t, taker, f)
		if ps := got.states[id]; ps == nil || !ps.Next.Equal(want.Next) || !bytes.Equal(ps.Policy, want.Policy) {
			t.Errorf("feed %d: stored state %v, a replay reaches %v", id, ps, want)
		}
	}

	// A learning node's poll after that keeps the stored state current.
	pollFeed(t, learning, stateless[1], 101)
	f, err := taker.Feed(ctx, stateless[1])
	if err != nil {
		t.Fatal(err)
	}
	want := replayed(t, taker, f)
	got, _ = take(t, taker, []uint64{stateless[1]}, nil)
	if ps := got.states[stateless[1]]; ps == nil || !ps.Next.Equal(want.Next) || !bytes.Equal(ps.Policy, want.Policy) {
		t.Errorf("after a poll: state %v, a replay reaches %v", ps, want)
	}
}

// TestTakeFeedStatesLeavesOutUnreadable: a record or an observation that
// cannot be decoded is left out of a takeover and counted, and every
// other feed is handed over (a takeover that failed on it would be tried
// again and again, scheduling none of the shards' feeds). The feed with
// the bad record is not handed over; the feed with the bad observation is
// replayed from its others (a takeover of few feeds reads each one's
// observations alone, of many in one pass).
func TestTakeFeedStatesLeavesOutUnreadable(t *testing.T) {
	for _, n := range []int{4, 24} { // alone, and in one pass (perFeedObservations)
		t.Run(strconv.Itoa(n)+" feeds", func(t *testing.T) {
			c := jstest.NewServer(t)
			st, js := openStoreWith(t, c, sjs.Options{Shards: 8}) // no Learner: replayed
			ctx := testCtx(t)
			var ids []uint64
			for i := range n {
				f := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/u" + strconv.Itoa(i), Policy: "auto"}
				if err := st.CreateFeed(ctx, &f); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, f.ID)
				for p := range 4 {
					pollFeed(t, st, f.ID, p)
				}
			}
			badRec, badObs := ids[1], ids[2]
			defs, err := js.KeyValue(ctx, sjs.DefsBucket)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := defs.Put(ctx, "feed."+strconv.FormatUint(badRec, 10), []byte("{not a record")); err != nil {
				t.Fatal(err)
			}
			subj := "slogfeed.obs." + strconv.Itoa(cluster.ShardOf(cluster.KindFeed, badObs, 8)) + "." + strconv.FormatUint(badObs, 10)
			if _, err := js.Publish(ctx, subj, []byte("{not an observation")); err != nil {
				t.Fatal(err)
			}

			// Every replay "reaches" a state; the one that missed an
			// observation must not be stored.
			reached := func(id uint64) *storage.PolicyState {
				return &storage.PolicyState{Next: takeT0.Add(time.Hour), Policy: []byte{1, 2, 3}}
			}
			got, stats := take(t, st, ids, reached)
			if _, ok := got.feeds[badRec]; ok {
				t.Errorf("feed %d, whose record is unreadable, handed over", badRec)
			}
			if len(got.feeds) != n-1 || stats.Records != n-1 {
				t.Errorf("%d feeds handed over, %d records counted; want %d", len(got.feeds), stats.Records, n-1)
			}
			if stats.Unreadable != 2 || !errors.Is(stats.FirstUnreadable, storage.ErrCorrupt) {
				t.Errorf("unreadable %d (first: %v); want 2, ErrCorrupt", stats.Unreadable, stats.FirstUnreadable)
			}
			if len(got.bad) != 1 || !errors.Is(got.bad[badRec], storage.ErrCorrupt) {
				t.Errorf("records given as unreadable: %v, want feed %d's with ErrCorrupt", got.bad, badRec)
			}
			for _, id := range ids {
				want := 4
				switch id {
				case badRec:
					want = 0
				case badObs:
					if n <= 16 {
						want = 0 // read alone: the feed's read fails whole
					}
				}
				if len(got.obs[id]) != want {
					t.Errorf("feed %d: %d observations replayed, want %d", id, len(got.obs[id]), want)
				}
			}
			if stats.Stored != n-2 {
				t.Errorf("%d reached states stored, want %d (all but the unreadable record's and the partly replayed feed's)", stats.Stored, n-2)
			}
			if _, err := st.Feed(ctx, badRec); !errors.Is(err, storage.ErrCorrupt) {
				t.Errorf("the unreadable record read alone: %v, want ErrCorrupt", err)
			}
			again, _ := take(t, st, ids, nil)
			for _, id := range ids {
				switch _, has := again.states[id]; {
				case id == badRec:
				case id == badObs && has:
					t.Errorf("feed %d, replayed without an observation, restored from a stored state", id)
				case id != badObs && !has:
					t.Errorf("feed %d: no state stored by the first takeover", id)
				}
			}
		})
	}
}

// BenchmarkTakeFeedStates reads the records of learned feeds as a
// takeover does, on one server: one feed at a time (a feed queued from
// its shard's digest reads its record just before its first fetch) and
// 1,000 at once (one batched get of the background reads).
//
//	go test -run '^$' -bench BenchmarkTakeFeedStates -benchmem ./storage/jetstream/
func BenchmarkTakeFeedStates(b *testing.B) {
	st := openNode(b, jstest.NewServer(b), true)
	ctx := testCtx(b)
	ids := make([]uint64, 1000)
	for i := range ids {
		f := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/" + strconv.Itoa(i), Policy: "auto"}
		if err := st.CreateFeed(ctx, &f); err != nil {
			b.Fatal(err)
		}
		ids[i] = f.ID
		for p := range 2 {
			pollFeed(b, st, f.ID, p)
		}
	}
	for _, n := range []int{1, len(ids)} {
		b.Run(fmt.Sprintf("feeds=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			noReplay := sjs.TakeFuncs{Feed: func(storage.Feed, *storage.PolicyState) bool { return false }}
			for i := 0; b.Loop(); i++ {
				at := i * n % len(ids)
				stats, err := st.TakeFeedStates(ctx, ids[at:at+n], noReplay)
				if err != nil || stats.Restored != n {
					b.Fatalf("%+v, %v; want %d restored", stats, err, n)
				}
			}
		})
	}
}
