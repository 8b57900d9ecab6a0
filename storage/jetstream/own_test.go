package jetstream_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// fakeOwner is a cluster.Owner whose one answer (all feeds or none) a
// test changes, closing Changed as the lease node does.
type fakeOwner struct {
	mu      sync.Mutex
	owns    bool
	changed chan struct{}
}

func newFakeOwner() *fakeOwner { return &fakeOwner{owns: true, changed: make(chan struct{})} }

func (o *fakeOwner) OwnsFeed(uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owns
}

func (o *fakeOwner) OwnsPipe(id uint64) bool { return o.OwnsFeed(id) }

func (o *fakeOwner) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

func (o *fakeOwner) set(owns bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owns = owns
	close(o.changed)
	o.changed = make(chan struct{})
}

// pollReads returns slogfeed_jetstream_poll_reads_total by read.
func pollReads(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "slogfeed_jetstream_poll_reads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// rawEdit sets the title of feed id's record straight in the bucket, as
// a node whose announcement is lost would: no Store hears of it.
func rawEdit(t *testing.T, ctx context.Context, js jetstream.JetStream, id uint64, title string) {
	t.Helper()
	kv, err := js.KeyValue(ctx, sjs.DefsBucket)
	if err != nil {
		t.Fatal(err)
	}
	key := "feed." + strconv.FormatUint(id, 10)
	e, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(recordJSON(t, e.Value()), &rec); err != nil {
		t.Fatal(err)
	}
	rec["title"] = title
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, key, data, e.Revision()); err != nil {
		t.Fatal(err)
	}
}

// reconnect makes js's connection reconnect and waits until it has.
func reconnect(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	nc := js.Conn()
	back := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(back)
	before := nc.Stats().Reconnects
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	for nc.Stats().Reconnects == before || !nc.IsConnected() {
		select {
		case <-back:
		case <-ctx.Done():
			t.Fatalf("not reconnected: %v", ctx.Err())
		}
	}
}

// TestOwnedFeedCopies: a node that owns a feed polls it from the record
// and item index it wrote itself, reading nothing when nothing changed;
// an edit made elsewhere in between (announced or not) is never lost,
// a deleted feed is not written back, and a node that lost the feed's
// shard (even if it claimed it again since), changed its shard count or
// reconnected (the announcements sent meanwhile are lost) reads the
// record instead of using its copy.
func TestOwnedFeedCopies(t *testing.T) {
	type env struct {
		ctx   context.Context
		js    jetstream.JetStream
		a, b  *sjs.Store
		owner *fakeOwner
		id    uint64
	}
	tests := []struct {
		name    string
		between func(t *testing.T, e env)
		// feedTitle is the title a's Feed must answer after between:
		// "" means a's copy (the title before any edit).
		feedTitle string
		title     string // the title stored after a's poll
		readsNone bool   // a's poll reads nothing
		gone      bool   // the feed was deleted: a's poll fails
	}{
		{name: "nothing changed", between: func(*testing.T, env) {}, readsNone: true},
		{name: "edited on another node, announced", title: "edited",
			between: func(t *testing.T, e env) {
				if _, err := e.b.UpdateFeed(e.ctx, e.id, func(f *storage.Feed) error { f.Title = "edited"; return nil }); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "edited, announcement lost", title: "edited",
			between: func(t *testing.T, e env) { rawEdit(t, e.ctx, e.js, e.id, "edited") }},
		{name: "edited while disconnected, reconnected", feedTitle: "edited", title: "edited",
			between: func(t *testing.T, e env) {
				rawEdit(t, e.ctx, e.js, e.id, "edited")
				reconnect(t, e.ctx, e.js)
			}},
		{name: "shard lost", feedTitle: "edited", title: "edited",
			between: func(t *testing.T, e env) {
				e.owner.set(false)
				rawEdit(t, e.ctx, e.js, e.id, "edited")
			}},
		{name: "shard lost and claimed again", feedTitle: "edited", title: "edited",
			between: func(t *testing.T, e env) {
				e.owner.set(false)
				rawEdit(t, e.ctx, e.js, e.id, "edited")
				e.owner.set(true)
			}},
		{name: "shard count changed", feedTitle: "edited", title: "edited",
			between: func(t *testing.T, e env) {
				rawEdit(t, e.ctx, e.js, e.id, "edited")
				e.a.SetShards(16)
			}},
		{name: "deleted on another node", gone: true,
			between: func(t *testing.T, e env) {
				if err := e.b.DeleteFeed(e.ctx, e.id); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := jstest.NewServer(t)
			js, err := jetstream.New(c.Connect(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t)
			reg := prometheus.NewRegistry()
			a, err := sjs.Open(ctx, js, sjs.Options{Metrics: sjs.NewMetrics(reg), Shards: 8})
			if err != nil {
				t.Fatal(err)
			}
			owner := newFakeOwner()
			if err := a.SetOwner(owner); err != nil {
				t.Fatal(err)
			}
			b, _ := openStoreWith(t, c, sjs.Options{Shards: 8})
			f := storage.Feed{Kind: storage.KindRemote, URL: "http://example.com/own.xml", Title: "first", Policy: "fixed-1m"}
			if err := b.CreateFeed(ctx, &f); err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
			doc := items("o", 1)
			poll := func() (storage.Fetched, error) {
				t.Helper()
				if _, err := a.Feed(ctx, f.ID); err != nil {
					return storage.Fetched{}, err
				}
				if _, err := a.HasItems(ctx, f.ID, []string{"o-0"}); err != nil {
					return storage.Fetched{}, err
				}
				got, err := a.RecordFetch(ctx, f.ID, doc, storage.Observation{At: at, Status: 200},
					func(f *storage.Feed, o *storage.Observation, added []storage.Item) error {
						f.Polls++
						f.Items += int64(len(added))
						return nil
					})
				at = at.Add(time.Minute)
				return got, err
			}
			if got, err := poll(); err != nil || len(got.Added) != 1 {
				t.Fatalf("first poll: %+v, %v", got, err)
			}
			tt.between(t, env{ctx: ctx, js: js, a: a, b: b, owner: owner, id: f.ID})

			if tt.feedTitle != "" {
				got, err := a.Feed(ctx, f.ID)
				if err != nil || got.Title != tt.feedTitle {
					t.Fatalf("Feed = %q, %v; want %q read from the stream, not the copy", got.Title, err, tt.feedTitle)
				}
			}
			before := pollReads(t, reg)
			got, err := poll()
			reads := pollReads(t, reg)
			if tt.gone {
				if !errors.Is(err, storage.ErrFeedNotFound) {
					t.Fatalf("poll of a deleted feed = %+v, %v; want ErrFeedNotFound", got.Feed, err)
				}
				if _, err := b.Feed(ctx, f.ID); !errors.Is(err, storage.ErrFeedNotFound) {
					t.Fatalf("the deleted feed was written back: %v", err)
				}
				return
			}
			if err != nil || len(got.Added) != 0 || got.Feed.Polls != 2 || got.Feed.Items != 1 {
				t.Fatalf("second poll: %+v, %v; want 2 polls, 1 item", got.Feed, err)
			}
			none := reads["record"] == before["record"] && reads["items"] == before["items"]
			if none != tt.readsNone {
				t.Fatalf("second poll: reads %v → %v; want none: %v", before, reads, tt.readsNone)
			}
			want := tt.title
			if want == "" {
				want = "first"
			}
			stored, err := b.Feed(ctx, f.ID)
			if err != nil || stored.Title != want || stored.Polls != 2 || stored.Items != 1 {
				t.Fatalf("stored %q, %d polls, %d items, %v; want %q, 2, 1", stored.Title, stored.Polls, stored.Items, err, want)
			}
			if obs, err := b.Observations(ctx, f.ID, 0); tt.name != "shard count changed" && (err != nil || len(obs) != 2) {
				t.Fatalf("%d observations, %v; want 2", len(obs), err)
			}
		})
	}
}

// TestOwnedItemsBound: an owned feed's quiet poll reads no item IDs back
// while its index fits in Options.OwnedItems; a feed whose index is
// larger is polled as one the node does not own (it reads the items
// subject's last sequence) and still stores each item once. A negative
// bound is refused.
func TestOwnedItemsBound(t *testing.T) {
	c := jstest.NewServer(t)
	ctx := testCtx(t)
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sjs.Open(ctx, js, sjs.Options{OwnedItems: -1}); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("Open with OwnedItems -1: %v; want ErrInvalid", err)
	}
	tests := []struct {
		name       string
		ownedItems int
		readsItems bool // the quiet poll reads the items subject
	}{
		{name: "default", ownedItems: 0},
		{name: "index fits exactly", ownedItems: 3},
		{name: "index beyond the bound", ownedItems: 2, readsItems: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			var clock atomic.Int64 // polls a minute apart, beyond the trust in a recent sync
			clock.Store(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC).UnixNano())
			now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
			a, err := sjs.Open(ctx, js, sjs.Options{Metrics: sjs.NewMetrics(reg), Shards: 8, OwnedItems: tt.ownedItems, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.SetOwner(newFakeOwner()); err != nil {
				t.Fatal(err)
			}
			f := storage.Feed{Kind: storage.KindRemote, URL: "http://example.com/bound-" + strconv.Itoa(i) + ".xml", Policy: "fixed-1m"}
			if err := a.CreateFeed(ctx, &f); err != nil {
				t.Fatal(err)
			}
			doc := items("b", 3)
			poll := func() storage.Fetched {
				t.Helper()
				got, err := a.RecordFetch(ctx, f.ID, doc, storage.Observation{At: now(), Status: 200},
					func(f *storage.Feed, o *storage.Observation, added []storage.Item) error {
						f.Items += int64(len(added))
						return nil
					})
				if err != nil {
					t.Fatal(err)
				}
				clock.Add(int64(time.Minute))
				return got
			}
			if got := poll(); len(got.Added) != 3 {
				t.Fatalf("first poll added %d items, want 3", len(got.Added))
			}
			poll() // syncs the index the first poll's publishes left behind
			before := pollReads(t, reg)
			got := poll()
			reads := pollReads(t, reg)
			if len(got.Added) != 0 || got.Feed.Items != 3 {
				t.Fatalf("quiet poll added %d, feed has %d items; want 0, 3", len(got.Added), got.Feed.Items)
			}
			if read := reads["items"] != before["items"]; read != tt.readsItems {
				t.Fatalf("quiet poll: reads %v → %v; want items read: %v", before, reads, tt.readsItems)
			}
		})
	}
}

var _ sjs.TenuredOwner = (*tenuredFake)(nil)

// tenuredFake is a TenuredOwner of 8 shards whose holds a test sets,
// closing Changed at each change as the lease node does.
type tenuredFake struct {
	mu      sync.Mutex
	holds   [8]cluster.Hold
	changed chan struct{}
}

func newTenuredFake() *tenuredFake {
	o := &tenuredFake{changed: make(chan struct{})}
	for sh := range o.holds {
		o.holds[sh] = cluster.Hold{Owned: true, Tenure: 1}
	}
	return o
}

func (o *tenuredFake) OwnsFeed(id uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.holds[cluster.ShardOf(cluster.KindFeed, id, 8)].Owned
}

func (o *tenuredFake) OwnsPipe(uint64) bool { return false }
func (o *tenuredFake) Shards() int          { return 8 }

func (o *tenuredFake) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

func (o *tenuredFake) Tenure(sh int) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.holds[sh].Tenure
}

func (o *tenuredFake) Lapsed(sh int) (uint64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.holds[sh].Tenure, o.holds[sh].Lapsed
}

func (o *tenuredFake) Holds() []cluster.Hold {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.holds[:])
}

// set changes shard sh's hold by fn and closes Changed.
func (o *tenuredFake) set(sh int, fn func(h *cluster.Hold)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fn(&o.holds[sh])
	close(o.changed)
	o.changed = make(chan struct{})
}

// TestOwnedCopiesByTenure: with a TenuredOwner, the copies of an owned
// feed's record and item index hold while its shard's tenure does: a
// shard gained or lost elsewhere, or the feed's shard lapsed and renewed
// in the same tenure (no other node held it meanwhile), leave the next
// poll reading nothing, even after polls of other feeds and a read of
// the feed during the lapse; a shard claimed again (a new tenure) or one
// another node holds has its copies read again, so an edit made
// meanwhile is kept, and so has a shard that lapsed while the
// connection was down (an edit's announcement lost with it).
func TestOwnedCopiesByTenure(t *testing.T) {
	lapse := func(h *cluster.Hold) { h.Owned, h.Lapsed = false, true }
	renew := func(h *cluster.Hold) { h.Owned, h.Lapsed = true, false }
	claim := func(h *cluster.Hold) { h.Owned, h.Lapsed = true, false; h.Tenure++ }
	lose := func(h *cluster.Hold) { h.Owned, h.Lapsed = false, false }
	type env struct {
		ctx          context.Context
		js           jetstream.JetStream
		owner        *tenuredFake
		id           uint64
		sh, other    int
		pollOther    func()
		pollNew      func() // a first poll of a new feed of another shard: its index is trusted anew
		readFeedHere func()
	}
	tests := []struct {
		name      string
		between   func(t *testing.T, e env)
		readsNone bool // the feed's next poll reads nothing
		// recordOnly: the feed's next poll reads its record, not its
		// item index (a reconnect ends the copies of records alone).
		recordOnly bool
		title      string // the title Feed answers before that poll and stored after it; "" for the first
	}{
		{name: "nothing changed", between: func(*testing.T, env) {}, readsNone: true},
		{name: "another shard gained", readsNone: true, between: func(t *testing.T, e env) {
			e.owner.set(e.other, lose)
			e.pollOther()
			e.owner.set(e.other, claim)
			e.pollOther()
		}},
		{name: "lapsed and renewed", readsNone: true, between: func(t *testing.T, e env) {
			e.owner.set(e.sh, lapse)
			e.pollOther()
			e.pollNew()
			e.readFeedHere()
			e.owner.set(e.sh, renew)
		}},
		{name: "lapsed, then claimed again", title: "edited", between: func(t *testing.T, e env) {
			e.owner.set(e.sh, lapse)
			rawEdit(t, e.ctx, e.js, e.id, "edited")
			e.pollOther()
			e.owner.set(e.sh, claim)
		}},
		{name: "lapsed, another holder, claimed again", title: "edited", between: func(t *testing.T, e env) {
			e.owner.set(e.sh, lapse)
			e.owner.set(e.sh, lose)
			rawEdit(t, e.ctx, e.js, e.id, "edited")
			e.pollOther()
			e.owner.set(e.sh, claim)
		}},
		{name: "reconnected", recordOnly: true, between: func(t *testing.T, e env) {
			reconnect(t, e.ctx, e.js)
		}},
		{name: "lapsed, edited, reconnected, renewed", title: "edited", recordOnly: true, between: func(t *testing.T, e env) {
			e.owner.set(e.sh, lapse)
			rawEdit(t, e.ctx, e.js, e.id, "edited")
			reconnect(t, e.ctx, e.js)
			e.owner.set(e.sh, renew)
		}},
		{name: "lost and claimed again", title: "edited", between: func(t *testing.T, e env) {
			e.owner.set(e.sh, lose)
			rawEdit(t, e.ctx, e.js, e.id, "edited")
			e.owner.set(e.sh, claim)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			reg := prometheus.NewRegistry()
			// The clock moves a minute a poll: no read is recent enough to
			// stand for the next poll's.
			var clock atomic.Int64
			clock.Store(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC).UnixNano())
			now := func() time.Time { return time.Unix(0, clock.Load()) }
			a, js := openStoreWith(t, jstest.NewServer(t), sjs.Options{Metrics: sjs.NewMetrics(reg), Shards: 8, Now: now})
			owner := newTenuredFake()
			if err := a.SetOwner(owner); err != nil {
				t.Fatal(err)
			}
			// Feeds of another shard than the first's.
			created := 0
			newFeed := func() storage.Feed {
				for {
					created++
					f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("http://example.com/own%d.xml", created), Title: "first", Policy: "fixed-1m"}
					if err := a.CreateFeed(ctx, &f); err != nil {
						t.Fatal(err)
					}
					if created == 1 || cluster.ShardOf(cluster.KindFeed, f.ID, 8) != cluster.ShardOf(cluster.KindFeed, 1, 8) {
						return f
					}
				}
			}
			feeds := []storage.Feed{newFeed(), newFeed()}
			if feeds[0].ID != 1 {
				t.Fatalf("first feed %d, want 1", feeds[0].ID)
			}
			poll := func(f storage.Feed) (storage.Fetched, error) {
				clock.Add(int64(time.Minute))
				return a.RecordFetch(ctx, f.ID, items(fmt.Sprint(f.ID), 1), storage.Observation{At: now(), Status: 200},
					func(f *storage.Feed, o *storage.Observation, added []storage.Item) error {
						f.Polls++
						f.Items += int64(len(added))
						return nil
					})
			}
			for _, f := range feeds {
				if got, err := poll(f); err != nil || len(got.Added) != 1 {
					t.Fatalf("first poll: %+v, %v", got, err)
				}
			}
			f := feeds[0]
			tt.between(t, env{
				ctx: ctx, js: js, owner: owner, id: f.ID,
				sh: cluster.ShardOf(cluster.KindFeed, f.ID, 8), other: cluster.ShardOf(cluster.KindFeed, feeds[1].ID, 8),
				pollOther: func() {
					if _, err := poll(feeds[1]); err != nil {
						t.Fatal(err)
					}
				},
				pollNew: func() {
					if got, err := poll(newFeed()); err != nil || len(got.Added) != 1 {
						t.Fatalf("poll of a new feed: %+v, %v", got, err)
					}
				},
				readFeedHere: func() {
					if _, err := a.Feed(ctx, f.ID); err != nil {
						t.Fatal(err)
					}
				},
			})
			// Feed answers from a copy that holds without a compare-and-set
			// behind it: one of an ended tenure must not be used.
			want := cmp.Or(tt.title, "first")
			if got, err := a.Feed(ctx, f.ID); err != nil || got.Title != want {
				t.Fatalf("Feed = %q, %v; want %q", got.Title, err, want)
			}
			before := pollReads(t, reg)
			got, err := poll(f)
			reads := pollReads(t, reg)
			if err != nil || len(got.Added) != 0 || got.Feed.Polls != 2 || got.Feed.Items != 1 {
				t.Fatalf("second poll: %+v, %v; want 2 polls, 1 item", got.Feed, err)
			}
			none := reads["record"] == before["record"] && reads["items"] == before["items"]
			if none != tt.readsNone {
				t.Fatalf("second poll: reads %v → %v; want none: %v", before, reads, tt.readsNone)
			}
			if recordOnly := reads["record"] > before["record"] && reads["items"] == before["items"]; tt.recordOnly && !recordOnly {
				t.Fatalf("second poll: reads %v → %v; want the record's alone", before, reads)
			}
			stored, err := a.Feed(ctx, f.ID)
			if err != nil || stored.Title != want || stored.Polls != 2 {
				t.Fatalf("stored %q, %d polls, %v; want %q, 2", stored.Title, stored.Polls, err, want)
			}
		})
	}
}
