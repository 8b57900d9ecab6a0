package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// openStore opens a Store on its own connection to c, as one node would.
func openStore(t testing.TB, c *jstest.Cluster) (*sjs.Store, jetstream.JetStream) {
	t.Helper()
	return openStoreWith(t, c, sjs.Options{})
}

// openStoreWith is openStore with options.
func openStoreWith(t testing.TB, c *jstest.Cluster, opt sjs.Options) (*sjs.Store, jetstream.JetStream) {
	t.Helper()
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sjs.Open(ctx, js, opt)
	if err != nil {
		t.Fatal(err)
	}
	return st, js
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func items(prefix string, n int) []storage.Item {
	out := make([]storage.Item, n)
	for i := range out {
		out[i] = storage.Item{ID: fmt.Sprintf("%s-%d", prefix, i), Title: "reading " + strconv.Itoa(i),
			Published: time.Date(2026, 11, 25, 12, i, 0, 0, time.UTC)}
	}
	return out
}

func ids(its []storage.Item) string {
	var s []string
	for _, it := range its {
		s = append(s, it.ID)
	}
	return strings.Join(s, ",")
}

func TestAddItemsStoresEachItemOnce(t *testing.T) {
	c := jstest.NewServer(t)
	st, _ := openStore(t, c)
	ctx := testCtx(t)
	added, err := st.AddItems(ctx, 7, items("a", 3), storage.Retention{})
	if err != nil || len(added) != 3 {
		t.Fatalf("AddItems = %d added, %v", len(added), err)
	}
	for i := 1; i < len(added); i++ {
		if added[i].Seq <= added[i-1].Seq || added[i].FeedID != 7 || added[i].Fetched.IsZero() {
			t.Fatalf("added %+v", added)
		}
	}
	// The re-poll finds the same three and one new item.
	again, err := st.AddItems(ctx, 7, items("a", 4), storage.Retention{})
	if err != nil || ids(again) != "a-3" {
		t.Fatalf("re-poll added %q, %v; want only a-3", ids(again), err)
	}
	if n, err := st.CountItems(ctx, 7); err != nil || n != 4 {
		t.Fatalf("CountItems = %d, %v", n, err)
	}
	// Another feed's item of the same ID is its own.
	if other, err := st.AddItems(ctx, 8, items("a", 1), storage.Retention{}); err != nil || len(other) != 1 {
		t.Fatalf("feed 8: %d added, %v", len(other), err)
	}
	got, err := st.Items(ctx, 7, 0, 10)
	if err != nil || ids(got) != "a-0,a-1,a-2,a-3" {
		t.Fatalf("Items = %q, %v", ids(got), err)
	}
	if got[3].Seq != again[0].Seq || got[0].Title != "reading 0" {
		t.Fatalf("Items = %+v", got)
	}
	after, err := st.Items(ctx, 7, got[1].Seq, 1)
	if err != nil || ids(after) != "a-2" {
		t.Fatalf("Items after %d, limit 1 = %q, %v", got[1].Seq, ids(after), err)
	}
	if none, err := st.Items(ctx, 99, 0, 10); err != nil || len(none) != 0 {
		t.Fatalf("Items of an empty feed = %v, %v", none, err)
	}
}

func TestAddItemsRefusesBadItemsKeepsOthers(t *testing.T) {
	c := jstest.NewServer(t)
	st, _ := openStore(t, c)
	ctx := testCtx(t)
	in := items("b", 3)
	in[0].ID = ""
	in[2].Content = strings.Repeat("x", 2<<20)
	added, err := st.AddItems(ctx, 1, in, storage.Retention{})
	if ids(added) != "b-1" {
		t.Fatalf("added %q", ids(added))
	}
	var ie *storage.ItemError
	if !errors.Is(err, storage.ErrInvalid) || !errors.As(err, &ie) {
		t.Fatalf("err = %v, want ItemErrors wrapping ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), "item 0") && ie.Index != 0 {
		t.Errorf("first refused item index %d", ie.Index)
	}
}

// TestAddItemsRetention: MaxItems keeps the newest by publish time,
// MaxAge refuses items published before it and gives the others a
// message TTL counted from their publish time (no Reducer).
func TestAddItemsRetention(t *testing.T) {
	c := jstest.NewServer(t)
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	now := time.Date(2026, 11, 25, 12, 30, 0, 0, time.UTC) // items are published 12:00-12:05
	st, err := sjs.Open(ctx, js, sjs.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ret := storage.Retention{MaxItems: 3, MaxAge: 31 * time.Minute}
	in := items("r", 6)
	in[0].Published = now.Add(-time.Hour) // past MaxAge: refused
	in[1].Published = now                 // newest, arrives early
	added, err := st.AddItems(ctx, 5, in, ret)
	if err != nil || ids(added) != "r-1,r-4,r-5" {
		t.Fatalf("added %q, %v; want r-1,r-4,r-5", ids(added), err)
	}
	got, err := st.Items(ctx, 5, 0, 10)
	if err != nil || ids(got) != "r-1,r-4,r-5" {
		t.Fatalf("after retention Items = %q, %v", ids(got), err)
	}
	s, err := js.Stream(ctx, sjs.ItemsStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		item storage.Item
		ttl  string
	}{{got[0], "31m0s"}, {got[2], "6m0s"}} { // r-5 was published at 12:05
		m, err := s.GetMsg(ctx, c.item.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if ttl := m.Header.Get(jetstream.MsgTTLHeader); ttl != c.ttl {
			t.Errorf("%s stored with TTL %q, want %q (headers %v)", c.item.ID, ttl, c.ttl, m.Header)
		}
	}
	// A late item older than the 3 kept is not stored.
	if again, err := st.AddItems(ctx, 5, []storage.Item{{ID: "late", Published: now.Add(-29 * time.Minute)}}, ret); err != nil || len(again) != 0 {
		t.Fatalf("a late item older than those kept was added: %q, %v", ids(again), err)
	}
}

// TestOverlapPollOnTwoNodes: two nodes (own connections) store the same
// poll's items at once on a 3-server cluster, as at a takeover; every item
// is stored once, in an R3 stream.
func TestOverlapPollOnTwoNodes(t *testing.T) {
	c := jstest.NewCluster(t, 3)
	a, js := openStore(t, c)
	b, _ := openStore(t, c)
	ctx := testCtx(t)
	s, err := js.Stream(ctx, sjs.ItemsStream)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("items stream has %d replicas, want 3", r)
	}
	batch := items("o", 50)
	var wg sync.WaitGroup
	var na, nb int
	var ea, eb error
	wg.Go(func() { got, err := a.AddItems(ctx, 3, batch, storage.Retention{}); na, ea = len(got), err })
	wg.Go(func() { got, err := b.AddItems(ctx, 3, batch, storage.Retention{}); nb, eb = len(got), err })
	wg.Wait()
	if ea != nil || eb != nil {
		t.Fatal(ea, eb)
	}
	if na+nb != len(batch) {
		t.Errorf("nodes report %d + %d items added, want %d in all", na, nb, len(batch))
	}
	if n, err := a.CountItems(ctx, 3); err != nil || n != len(batch) {
		t.Fatalf("CountItems = %d, %v; want %d", n, err, len(batch))
	}
}

func TestFeeds(t *testing.T) {
	c := jstest.NewServer(t)
	st, _ := openStore(t, c)
	ctx := testCtx(t)
	if none, err := st.Feeds(ctx); err != nil || len(none) != 0 {
		t.Fatalf("Feeds of an empty store = %v, %v", none, err)
	}
	r := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/feed.xml", Title: "r", Policy: "auto"}
	if err := st.CreateFeed(ctx, &r); err != nil || r.ID != 1 || r.Created.IsZero() {
		t.Fatalf("CreateFeed = %v, %+v", err, r)
	}
	dup := storage.Feed{Kind: storage.KindRemote, URL: r.URL}
	if err := st.CreateFeed(ctx, &dup); !errors.Is(err, storage.ErrFeedExists) {
		t.Fatalf("same URL again: %v", err)
	}
	sensor := storage.Feed{Kind: storage.KindSensor, Slug: "air-1"}
	if err := st.CreateFeed(ctx, &sensor); err != nil || sensor.ID <= r.ID {
		t.Fatalf("CreateFeed sensor = %v, id %d", err, sensor.ID)
	}
	if err := st.CreateFeed(ctx, &storage.Feed{Kind: storage.KindSensor}); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("sensor without slug: %v", err)
	}
	all, err := st.Feeds(ctx)
	if err != nil || len(all) != 2 || all[0].ID != r.ID || all[1].Slug != "air-1" {
		t.Fatalf("Feeds = %+v, %v", all, err)
	}
	up, err := st.UpdateFeed(ctx, r.ID, func(f *storage.Feed) error { f.Title = "renamed"; return nil })
	if err != nil || up.Title != "renamed" {
		t.Fatalf("UpdateFeed = %+v, %v", up, err)
	}
	if _, err := st.UpdateFeed(ctx, r.ID, func(f *storage.Feed) error { f.URL = "http://127.0.0.1:1/other"; return nil }); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("URL change: %v", err)
	}
	boom := errors.New("boom")
	if _, err := st.UpdateFeed(ctx, r.ID, func(*storage.Feed) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	if _, err := st.AddItems(ctx, r.ID, items("d", 2), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteFeed(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Feed(ctx, r.ID); !errors.Is(err, storage.ErrFeedNotFound) {
		t.Fatalf("deleted feed: %v", err)
	}
	if n, err := st.CountItems(ctx, r.ID); err != nil || n != 0 {
		t.Fatalf("deleted feed keeps %d items, %v", n, err)
	}
	again := storage.Feed{Kind: storage.KindRemote, URL: r.URL}
	if err := st.CreateFeed(ctx, &again); err != nil || again.ID == r.ID {
		t.Fatalf("re-create after delete = %v, id %d", err, again.ID)
	}
}

// TestUpdateFeedConcurrentNodes: two nodes update one feed at once; the
// compare-and-set loop loses no update.
func TestUpdateFeedConcurrentNodes(t *testing.T) {
	c := jstest.NewServer(t)
	a, _ := openStore(t, c)
	b, _ := openStore(t, c)
	ctx := testCtx(t)
	f := storage.Feed{Kind: storage.KindSensor, Slug: "s"}
	if err := a.CreateFeed(ctx, &f); err != nil {
		t.Fatal(err)
	}
	const each = 15
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for _, st := range []*sjs.Store{a, b} {
		wg.Go(func() {
			for range each {
				if _, err := st.UpdateFeed(ctx, f.ID, func(f *storage.Feed) error { f.Polls++; return nil }); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := b.Feed(ctx, f.ID)
	if err != nil || got.Polls != 2*each {
		t.Fatalf("Polls = %d, %v; want %d", got.Polls, err, 2*each)
	}
}

// TestRecordPollStateMovesToNextOwner: the state one node writes with a
// poll is what another node reads; a retried observation is kept once.
func TestRecordPollStateMovesToNextOwner(t *testing.T) {
	c := jstest.NewServer(t)
	a, _ := openStore(t, c)
	b, _ := openStore(t, c)
	ctx := testCtx(t)
	f := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/s.xml", Policy: "auto"}
	if err := a.CreateFeed(ctx, &f); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	next := at.Add(5 * time.Minute)
	obs := storage.Observation{At: at, Hit: true, Published: []time.Time{at.Add(-3 * time.Second)}, Status: 200}
	for range 2 { // the second is a retry of the same poll
		if _, err := a.RecordPoll(ctx, f.ID, obs, func(f *storage.Feed) error { f.NextFetch = next; f.Polls = 1; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	later := obs
	later.At, later.Hit = at.Add(5*time.Minute), false
	if _, err := a.RecordPoll(ctx, f.ID, later, nil); err != nil {
		t.Fatal(err)
	}
	got, err := b.Feed(ctx, f.ID)
	if err != nil || !got.NextFetch.Equal(next) || got.Polls != 1 {
		t.Fatalf("the next owner reads %+v, %v", got, err)
	}
	all, err := b.Observations(ctx, f.ID, 0)
	if err != nil || len(all) != 2 || !all[0].At.Equal(at) || all[1].Hit {
		t.Fatalf("Observations = %+v, %v", all, err)
	}
	last, err := b.Observations(ctx, f.ID, 1)
	if err != nil || len(last) != 1 || !last[0].At.Equal(later.At) {
		t.Fatalf("newest observation = %+v, %v", last, err)
	}
	if _, err := a.RecordPoll(ctx, 999, obs, nil); !errors.Is(err, storage.ErrFeedNotFound) {
		t.Fatalf("RecordPoll of a missing feed: %v", err)
	}
}

// TestFeedStatesMatchesPerFeedReads: the state FeedStates loads in its
// passes (records, then the wanted feeds' observations) is what a KV get
// and Observations per feed answer; deleted and unwanted feeds are left
// out, and obsLimit keeps the newest.
func TestFeedStatesMatchesPerFeedReads(t *testing.T) {
	c := jstest.NewServer(t)
	a, _ := openStore(t, c)
	b, _ := openStore(t, c)
	ctx := testCtx(t)
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var ids []uint64
	for i := range 24 {
		f := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/" + strconv.Itoa(i), Policy: "auto"}
		if err := a.CreateFeed(ctx, &f); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
		for p := range i % 5 { // feed i has i%5 observations
			o := storage.Observation{At: at.Add(time.Duration(p) * time.Minute), Hit: p%2 == 0, Status: 200}
			if _, err := a.RecordPoll(ctx, f.ID, o, func(f *storage.Feed) error { f.Polls++; f.NextFetch = o.At.Add(time.Minute); return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.DeleteFeed(ctx, ids[23]); err != nil {
		t.Fatal(err)
	}
	odd := func(id uint64) bool { return id%2 == 1 }
	for _, c := range []struct {
		name  string
		want  func(uint64) bool
		limit int
	}{
		{"every-feed", nil, 0}, // one pass over the observations
		{"odd-ids", odd, 0},    // 12 feeds: read one by one
		{"newest-2", nil, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := b.FeedStates(ctx, c.want, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, id := range ids[:23] {
				if c.want != nil && !c.want(id) {
					continue
				}
				n++
				f, err := b.Feed(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				obs, err := b.Observations(ctx, id, c.limit)
				if err != nil {
					t.Fatal(err)
				}
				st := got[id]
				if st == nil {
					t.Fatalf("feed %d missing", id)
				}
				if st.Feed.Polls != f.Polls || !st.Feed.NextFetch.Equal(f.NextFetch) || st.Feed.URL != f.URL {
					t.Errorf("feed %d: state %+v, record %+v", id, st.Feed, f)
				}
				if fmt.Sprint(st.Observations) != fmt.Sprint(obs) {
					t.Errorf("feed %d: observations %v, want %v", id, st.Observations, obs)
				}
			}
			if len(got) != n {
				t.Errorf("FeedStates has %d feeds, want %d (deleted and unwanted left out)", len(got), n)
			}
		})
	}
}

// TestMetrics: one feed created, one poll recorded, one batch of items
// stored: the KV writes and publishes are counted.
func TestMetrics(t *testing.T) {
	c := jstest.NewServer(t)
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	reg := prometheus.NewRegistry()
	st, err := sjs.Open(ctx, js, sjs.Options{Metrics: sjs.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	f := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/m.xml"}
	if err := st.CreateFeed(ctx, &f); err != nil {
		t.Fatal(err)
	}
	dup := f
	if err := st.CreateFeed(ctx, &dup); !errors.Is(err, storage.ErrFeedExists) {
		t.Fatal(err)
	}
	if _, err := st.RecordPoll(ctx, f.ID, storage.Observation{At: time.Unix(1, 0)}, func(f *storage.Feed) error { f.Polls++; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddItems(ctx, f.ID, items("m", 2), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetValue()
			}
			if h := m.GetHistogram(); h != nil {
				got[key] = float64(h.GetSampleCount())
			} else {
				got[key] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{
		// seq.feed twice (two creates), feed.1 once, then the poll's update
		"slogfeed_jetstream_kv_writes_total," + sjs.DefsBucket + ",ok":        4,
		"slogfeed_jetstream_kv_writes_total," + sjs.IndexBucket + ",ok":       1,
		"slogfeed_jetstream_kv_writes_total," + sjs.IndexBucket + ",conflict": 1,
		"slogfeed_jetstream_publish_seconds,items":                            1,
		"slogfeed_jetstream_publish_seconds,observation":                      1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// publishes is how many AddItems calls of this registry's store published
// anything.
func publishes(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "slogfeed_jetstream_publish_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == "items" {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// TestKnownItemsAreNotPublished: a node that takes a feed over reads the
// item IDs the feed has and publishes none of them again, so they stay
// stored once after the stream's duplicate window too; items another node
// adds later are picked up, and items retention removed do not come back.
func TestKnownItemsAreNotPublished(t *testing.T) {
	c := jstest.NewServer(t)
	a, _ := openStore(t, c)
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	reg := prometheus.NewRegistry()
	b, err := sjs.Open(ctx, js, sjs.Options{Metrics: sjs.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddItems(ctx, 4, items("k", 3), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.AddItems(ctx, 4, items("k", 3), storage.Retention{}); err != nil || len(got) != 0 {
		t.Fatalf("the next owner re-added %q, %v", ids(got), err)
	}
	if n := publishes(t, reg); n != 0 {
		t.Fatalf("the next owner published %d times for known items", n)
	}
	// a adds two more; b learns them from the stream, not from memory.
	if _, err := a.AddItems(ctx, 4, items("k", 5), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.AddItems(ctx, 4, items("k", 6), storage.Retention{}); err != nil || ids(got) != "k-5" {
		t.Fatalf("b added %q, %v; want k-5", ids(got), err)
	}
	if n := publishes(t, reg); n != 1 {
		t.Fatalf("b published %d times, want 1", n)
	}
	// Retention drops the oldest; they do not come back as new.
	if _, err := b.AddItems(ctx, 4, items("k", 7), storage.Retention{MaxItems: 2}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.AddItems(ctx, 4, items("k", 7), storage.Retention{MaxItems: 2}); err != nil || len(got) != 0 {
		t.Fatalf("items beyond retention came back: %q, %v", ids(got), err)
	}
	if n, err := b.CountItems(ctx, 4); err != nil || n != 2 {
		t.Fatalf("CountItems = %d, %v; want 2", n, err)
	}
	// A deleted feed forgets its items.
	f := storage.Feed{Kind: storage.KindSensor, Slug: "k"}
	if err := b.CreateFeed(ctx, &f); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddItems(ctx, f.ID, items("z", 2), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteFeed(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := b.CountItems(ctx, f.ID); err != nil || n != 0 {
		t.Fatalf("deleted feed has %d items, %v", n, err)
	}
}

// outputsOf is a deterministic pipe run: one output per input.
func outputsOf(in []storage.Item) []storage.Item {
	out := make([]storage.Item, len(in))
	for i, it := range in {
		out[i] = storage.Item{ID: "out-" + it.ID, Title: "from " + it.ID}
	}
	return out
}

// TestPipeResumesOnAnotherNode: a pipe reads its inputs through a durable
// consumer. Node a commits one batch, then fetches and stores the outputs
// of a second batch but dies before acknowledging it; node b gets that
// batch again once a's hold lapses, and its rerun emits nothing twice.
func TestPipeResumesOnAnotherNode(t *testing.T) {
	c := jstest.NewCluster(t, 3)
	open := func() *sjs.Store {
		js, err := jetstream.New(c.Connect(t))
		if err != nil {
			t.Fatal(err)
		}
		st, err := sjs.Open(testCtx(t), js, sjs.Options{PipeAckWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	a, b := open(), open()
	ctx := testCtx(t)
	const pipe, in1, in2, out = 9, 1, 2, 100
	if _, err := a.AddItems(ctx, in1, items("x", 3), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddItems(ctx, in2, items("y", 2), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddItems(ctx, 3, items("other", 2), storage.Retention{}); err != nil { // not an input
		t.Fatal(err)
	}
	if err := a.PipeInputs(ctx, pipe, []uint64{in1, in2}); err != nil {
		t.Fatal(err)
	}
	if err := a.PipeInputs(ctx, pipe, nil); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("pipe without inputs: %v", err)
	}
	first, err := a.NextPipeBatch(ctx, pipe, 2)
	if err != nil || ids(first.Items) != "x-0,x-1" {
		t.Fatalf("first batch %q, %v", ids(first.Items), err)
	}
	if _, err := a.CommitPipeBatch(ctx, first, out, outputsOf(first.Items), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	second, err := a.NextPipeBatch(ctx, pipe, 10)
	if err != nil || ids(second.Items) != "x-2,y-0,y-1" {
		t.Fatalf("second batch %q, %v", ids(second.Items), err)
	}
	// a stores the outputs and dies before acknowledging.
	if _, err := a.AddItems(ctx, out, outputsOf(second.Items), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	var again *sjs.PipeBatch
	died := time.Now()
	deadline := died.Add(15 * time.Second)
	for {
		if again, err = b.NextPipeBatch(ctx, pipe, 10); err != nil {
			t.Fatal(err)
		}
		if len(again.Items) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ids(again.Items) != "x-2,y-0,y-1" {
		t.Fatalf("b got %q, want the unacknowledged x-2,y-0,y-1", ids(again.Items))
	}
	t.Logf("b got the unacknowledged batch %s after a died", time.Since(died).Round(time.Millisecond))
	added, err := b.CommitPipeBatch(ctx, again, out, outputsOf(again.Items), storage.Retention{})
	if err != nil || len(added) != 0 {
		t.Fatalf("the rerun emitted %q again, %v", ids(added), err)
	}
	if rest, err := b.NextPipeBatch(ctx, pipe, 10); err != nil || len(rest.Items) != 0 {
		t.Fatalf("inputs left after commit: %q, %v", ids(rest.Items), err)
	}
	got, err := b.Items(ctx, out, 0, 100)
	if err != nil || ids(got) != "out-x-0,out-x-1,out-x-2,out-y-0,out-y-1" {
		t.Fatalf("pipe output %q, %v", ids(got), err)
	}
	if err := b.DeletePipeInputs(ctx, pipe); err != nil {
		t.Fatal(err)
	}
	if _, err := b.NextPipeBatch(ctx, pipe, 1); err == nil {
		t.Fatal("batch from a deleted pipe consumer")
	}
}

// TestReadsLeaveNoConsumers: polls of a feed written by two nodes catch up
// with each other's items by direct gets, without a consumer, and the
// consumers of reads are deleted once read, not left for their 10 s
// inactivity threshold (JetStream allows 1,000 per stream by default).
func TestReadsLeaveNoConsumers(t *testing.T) {
	c := jstest.NewServer(t)
	a, js := openStore(t, c)
	b, _ := openStore(t, c)
	ctx := testCtx(t)
	stream, err := js.Stream(ctx, sjs.ItemsStream)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	var stored int
	for i := range 10 {
		st := a
		if i%2 == 1 {
			st = b
		}
		in := items("p"+strconv.Itoa(i), 2)
		if i > 0 {
			in = append(in, items("p"+strconv.Itoa(i-1), 2)...) // the other node's last poll again
		}
		added, err := st.AddItems(ctx, 3, in, storage.Retention{})
		if err != nil {
			t.Fatal(err)
		}
		stored += len(added)
	}
	if stored != 20 {
		t.Errorf("stored %d items, want 20 (each once)", stored)
	}
	if n := consumers(); n != 0 {
		t.Errorf("%d consumers after polls, want none", n)
	}
	for range 20 {
		if _, err := a.Items(ctx, 3, 0, 100); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second) // below the 10 s inactivity threshold
	for consumers() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d read consumers left after 5 s", consumers())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHasItemsAndQuietPolls: HasItems answers from the item IDs a node
// learns from the stream (another node's additions included), and a
// fetch whose document holds only known items publishes no items
// message while its observation and counters are stored.
func TestHasItemsAndQuietPolls(t *testing.T) {
	c := jstest.NewServer(t)
	a, _ := openStore(t, c)
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	reg := prometheus.NewRegistry()
	b, err := sjs.Open(ctx, js, sjs.Options{Metrics: sjs.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	f := storage.Feed{Kind: storage.KindRemote, URL: "http://example.com/quiet.xml", Policy: "fixed-1m"}
	if err := a.CreateFeed(ctx, &f); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddItems(ctx, f.ID, items("q", 2), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ids  []string
		want []bool
	}{
		{[]string{"q-0", "q-1"}, []bool{true, true}},
		{[]string{"q-2", "q-1", ""}, []bool{false, true, false}},
		{[]string{strings.Repeat("x", storage.MaxIDLen+1)}, []bool{false}},
		{nil, []bool{}},
	}
	for _, tt := range tests {
		got, err := b.HasItems(ctx, f.ID, tt.ids)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("HasItems(%q) = %v, %v; want %v", tt.ids, got, err, tt.want)
		}
	}
	bump := func(f *storage.Feed, o *storage.Observation, added []storage.Item) error {
		f.Polls++
		f.Items += int64(len(added))
		return nil
	}
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	got, err := b.RecordFetch(ctx, f.ID, items("q", 2), storage.Observation{At: at, Status: 200}, bump)
	if err != nil || len(got.Added) != 0 || got.Feed.Polls != 1 {
		t.Fatalf("quiet poll: %+v, %v", got, err)
	}
	if n := publishes(t, reg); n != 0 {
		t.Fatalf("a poll of known items published %d items messages", n)
	}
	got, err = b.RecordFetch(ctx, f.ID, items("q", 3), storage.Observation{At: at.Add(time.Minute), Status: 200}, bump)
	if err != nil || ids(got.Added) != "q-2" || got.Feed.Polls != 2 || got.Feed.Items != 1 {
		t.Fatalf("poll with one new item: added %q, %+v, %v", ids(got.Added), got.Feed, err)
	}
	if n := publishes(t, reg); n != 1 {
		t.Fatalf("a poll with one new item published %d times, want 1", n)
	}
	if obs, err := a.Observations(ctx, f.ID, 0); err != nil || len(obs) != 2 {
		t.Fatalf("observations = %d, %v; want both polls", len(obs), err)
	}
	if has, err := a.HasItems(ctx, f.ID, []string{"q-2"}); err != nil || !has[0] {
		t.Fatalf("node a does not see q-2: %v, %v", has, err)
	}
}

// TestFetchAfterConcurrentEdit: a node reads a feed, another node edits
// it, then the first stores a fetch from its earlier read: the edit is
// kept and the fetch is counted.
func TestFetchAfterConcurrentEdit(t *testing.T) {
	c := jstest.NewServer(t)
	a, _ := openStore(t, c)
	b, _ := openStore(t, c)
	ctx := testCtx(t)
	f := storage.Feed{Kind: storage.KindRemote, URL: "http://example.com/edit.xml", Policy: "fixed-1m"}
	if err := a.CreateFeed(ctx, &f); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Feed(ctx, f.ID); err != nil { // the aggregator's read before its fetch
		t.Fatal(err)
	}
	if _, err := b.UpdateFeed(ctx, f.ID, func(f *storage.Feed) error { f.Title = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := a.RecordFetch(ctx, f.ID, nil, storage.Observation{At: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC), Status: 304},
		func(f *storage.Feed, o *storage.Observation, added []storage.Item) error { f.Polls++; return nil })
	if err != nil || got.Feed.Title != "renamed" || got.Feed.Polls != 1 {
		t.Fatalf("RecordFetch = %+v, %v; want the edit kept and one poll", got.Feed, err)
	}
	if cur, err := b.Feed(ctx, f.ID); err != nil || cur.Title != "renamed" || cur.Polls != 1 {
		t.Fatalf("stored %+v, %v", cur, err)
	}
}

// TestGroupedFetches: fetches of many feeds stored at once share groups
// (or go alone, with a negative window); each is counted once, each
// observation is stored, and a concurrent edit of one record is kept.
func TestGroupedFetches(t *testing.T) {
	for _, window := range []time.Duration{-1, 0, 20 * time.Millisecond} {
		t.Run(fmt.Sprint(window), func(t *testing.T) {
			c := jstest.NewServer(t)
			js, err := jetstream.New(c.Connect(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t)
			st, err := sjs.Open(ctx, js, sjs.Options{GroupWindow: window})
			if err != nil {
				t.Fatal(err)
			}
			const feeds, polls = 24, 3
			ids := make([]uint64, feeds)
			for i := range ids {
				f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("http://example.com/%d.xml", i), Policy: "fixed-1m"}
				if err := st.CreateFeed(ctx, &f); err != nil {
					t.Fatal(err)
				}
				ids[i] = f.ID
			}
			at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
			var wg sync.WaitGroup
			errs := make(chan error, feeds*polls+1)
			for i, id := range ids {
				wg.Go(func() {
					for p := range polls {
						if _, err := st.Feed(ctx, id); err != nil {
							errs <- err
							return
						}
						its := items(fmt.Sprintf("f%d", i), p+1)
						_, err := st.RecordFetch(ctx, id, its, storage.Observation{At: at.Add(time.Duration(p) * time.Minute), Status: 200},
							func(f *storage.Feed, o *storage.Observation, added []storage.Item) error {
								f.Polls++
								f.Items += int64(len(added))
								return nil
							})
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Go(func() {
				if _, err := st.UpdateFeed(ctx, ids[0], func(f *storage.Feed) error { f.Title = "edited"; return nil }); err != nil {
					errs <- err
				}
			})
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for _, id := range ids {
				f, err := st.Feed(ctx, id)
				if err != nil || f.Polls != polls || f.Items != polls {
					t.Fatalf("feed %d: %d polls, %d items, %v; want %d and %d", id, f.Polls, f.Items, err, polls, polls)
				}
				if obs, err := st.Observations(ctx, id, 0); err != nil || len(obs) != polls {
					t.Fatalf("feed %d: %d observations, %v", id, len(obs), err)
				}
				if id == ids[0] && f.Title != "edited" {
					t.Fatalf("the concurrent edit was lost: %+v", f)
				}
			}
		})
	}
}

// TestOneNewItemNeedsNoReadBack: a poll that adds one item publishes it
// expecting the subject's last sequence, so the next poll's index is
// complete without reading the item back; when another writer got in
// between, the item is still stored once and the index learns both.
func TestOneNewItemNeedsNoReadBack(t *testing.T) {
	c := jstest.NewServer(t)
	a, _ := openStore(t, c)
	b, _ := openStore(t, c)
	ctx := testCtx(t)
	f := storage.Feed{Kind: storage.KindRemote, URL: "http://example.com/one.xml", Policy: "fixed-1m"}
	if err := a.CreateFeed(ctx, &f); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	poll := func(st *sjs.Store, its []storage.Item) []storage.Item {
		t.Helper()
		got, err := st.RecordFetch(ctx, f.ID, its, storage.Observation{At: at, Status: 200},
			func(f *storage.Feed, o *storage.Observation, added []storage.Item) error { f.Polls++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Minute)
		return got.Added
	}
	for i := range 3 {
		if _, err := a.HasItems(ctx, f.ID, nil); err != nil {
			t.Fatal(err)
		}
		if added := poll(a, items("n", i+1)); len(added) != 1 {
			t.Fatalf("poll %d added %q", i, ids(added))
		}
	}
	// a syncs for its next poll; b adds n-3 behind its back; a's single
	// new item expects a stale sequence, falls back, and is stored once.
	if _, err := a.HasItems(ctx, f.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddItems(ctx, f.ID, items("n", 4), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	more := append(items("n", 3), storage.Item{ID: "n-x", Title: "x", Published: time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC)})
	if added := poll(a, more); ids(added) != "n-x" {
		t.Fatalf("a added %q; want n-x", ids(added))
	}
	has, err := a.HasItems(ctx, f.ID, []string{"n-0", "n-2", "n-3", "n-x", "n-9"})
	if err != nil || !slices.Equal(has, []bool{true, true, true, true, false}) {
		t.Fatalf("HasItems = %v, %v", has, err)
	}
	if n, err := b.CountItems(ctx, f.ID); err != nil || n != 5 {
		t.Fatalf("CountItems = %d, %v; want 5", n, err)
	}
}

// TestObservationsByShard: a store given the cluster's shard count
// publishes observations on their shard's subjects, and reads them with
// those published before it had one (one node grown into a cluster): in
// order, per feed and in a load of many feeds; deleting a feed purges
// both.
func TestObservationsByShard(t *testing.T) {
	c := jstest.NewServer(t)
	before, js := openStore(t, c)
	ctx := testCtx(t)
	const feeds = 80
	var ids []uint64
	for i := range feeds {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("http://example.com/s%d.xml", i), Policy: "fixed-1m"}
		if err := before.CreateFeed(ctx, &f); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	poll := func(st *sjs.Store, id uint64, k int) {
		t.Helper()
		if _, err := st.RecordPoll(ctx, id, storage.Observation{At: at.Add(time.Duration(k) * time.Minute), Status: 304}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		poll(before, id, 0)
	}
	after, err := sjs.Open(ctx, js, sjs.Options{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		poll(after, id, 1)
		poll(after, id, 2)
	}
	stream, err := js.Stream(ctx, sjs.ObsStream)
	if err != nil {
		t.Fatal(err)
	}
	for filter, want := range map[string]int{"slogfeed.obs.*": feeds, "slogfeed.obs.*.*": feeds} {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil || len(info.State.Subjects) != want {
			t.Fatalf("%s: %d subjects, %v; want %d", filter, len(info.State.Subjects), err, want)
		}
	}
	for _, id := range ids[:3] {
		obs, err := after.Observations(ctx, id, 0)
		if err != nil || len(obs) != 3 || !obs[0].At.Equal(at) || !obs[2].At.Equal(at.Add(2*time.Minute)) {
			t.Fatalf("feed %d: %d observations %v, %v", id, len(obs), obs, err)
		}
		if last, err := after.Observations(ctx, id, 1); err != nil || len(last) != 1 || !last[0].At.Equal(at.Add(2*time.Minute)) {
			t.Fatalf("feed %d: newest %v, %v", id, last, err)
		}
	}
	// A load of the feeds of one shard (more than are read one by one).
	want := func(id uint64) bool {
		return cluster.ShardOf(cluster.KindFeed, id, 4) == cluster.ShardOf(cluster.KindFeed, ids[0], 4)
	}
	states, err := after.FeedStates(ctx, nil, 0)
	if err != nil || len(states) != feeds {
		t.Fatalf("FeedStates: %d, %v", len(states), err)
	}
	for id, st := range states {
		if len(st.Observations) != 3 {
			t.Fatalf("feed %d: %d observations in a load", id, len(st.Observations))
		}
	}
	n := 0
	err = after.StreamFeedStates(ctx, want, func(storage.Feed) bool { return true }, func(id uint64, o storage.Observation) {
		if !want(id) {
			t.Errorf("feed %d of another shard", id)
		}
		n++
	})
	if err != nil || n == 0 || n%3 != 0 {
		t.Fatalf("StreamFeedStates: %d observations, %v", n, err)
	}
	if err := after.DeleteFeed(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if obs, err := after.Observations(ctx, ids[0], 0); err != nil || len(obs) != 0 {
		t.Fatalf("deleted feed has %d observations, %v", len(obs), err)
	}
}

// TestCountWithoutLeader: while the items stream has no leader (two of
// three servers down), the server left answers an info request from its
// own replica, which may lag the stream. CountItems and LastSeq take no
// such answer: they fail with an error the backend calls unavailability
// (a 503, asked again) rather than count from a replica.
func TestCountWithoutLeader(t *testing.T) {
	c := jstest.NewCluster(t, 3)
	st, js := openStore(t, c)
	ctx := testCtx(t)
	if _, err := st.AddItems(ctx, 3, items("l", 5), storage.Retention{}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.CountItems(ctx, 3); err != nil || n != 5 {
		t.Fatalf("CountItems = %d, %v; want 5", n, err)
	}
	// A replica answers for a leaderless group only once its server has
	// run JetStream for 10 s.
	time.Sleep(11 * time.Second)
	c.Stop(1)
	c.Stop(2)
	b := sjs.NewBackend(st, 2*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("the items stream kept a leader for 30 s with two of three servers down")
		}
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := js.Stream(rctx, sjs.ItemsStream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = s.Info(rctx)
		}
		cancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader == "" {
			break // answered by the replica left, without a leader
		}
		time.Sleep(200 * time.Millisecond)
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := st.CountItems(rctx, 3); err == nil || !b.Unavailable(err) {
		t.Errorf("CountItems without a leader = %d, %v; want an unavailable error", n, err)
	}
	if seq, err := b.LastSeq(); err == nil || !b.Unavailable(err) {
		t.Errorf("LastSeq without a leader = %d, %v; want an unavailable error", seq, err)
	}
}
