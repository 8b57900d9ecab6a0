package jetstream_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// fakeNow is a settable clock for Options.Now.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeNow) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// listings reads slogfeed_jetstream_feed_id_listings_total from reg.
func listings(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "slogfeed_jetstream_feed_id_listings_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no slogfeed_jetstream_feed_id_listings_total")
	return 0
}

// TestFeedIDsFollowsTheBucket: a node's FeedIDs lists the defs bucket's
// keys once, then answers from the set its watch keeps current: feeds
// another node creates appear and feeds it deletes go, without another
// listing, and polls (a record write each) change nothing. It lists again
// when DefaultIDRelist has passed and ReconnectRelist after its
// connection reconnected (at once when the watch ended with it).
func TestFeedIDsFollowsTheBucket(t *testing.T) {
	c := jstest.NewServer(t)
	ctx := testCtx(t)
	writer, _ := openStore(t, c)
	clock := &fakeNow{t: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	reader, rjs := openStoreWith(t, c, sjs.Options{Metrics: sjs.NewMetrics(reg), Now: clock.Now})
	b := sjs.NewBackend(reader, 0)
	t.Cleanup(func() { _ = b.Close() })

	created := 0
	create := func(n int) []uint64 {
		var ids []uint64
		for range n {
			created++
			f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("http://127.0.0.1:1/%d.xml", created)}
			if err := writer.CreateFeed(ctx, &f); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, f.ID)
		}
		return ids
	}
	// eventually waits until FeedIDs answers want (the watch is
	// asynchronous), failing after 10 s.
	eventually := func(step string, want []uint64) {
		t.Helper()
		var got []uint64
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			var err error
			if got, err = b.FeedIDs(); err != nil {
				t.Fatalf("%s: FeedIDs: %v", step, err)
			}
			if slices.Equal(got, want) {
				return
			}
		}
		t.Fatalf("%s: FeedIDs = %v, want %v", step, got, want)
	}

	first := create(3)
	eventually("listed", first)
	if n := listings(t, reg); n != 1 {
		t.Fatalf("listings after the first FeedIDs = %v, want 1", n)
	}

	more := create(2)
	all := append(slices.Clone(first), more...)
	eventually("created on another node", all)
	for range 3 {
		if _, err := writer.RecordPoll(ctx, first[0], storage.Observation{At: clock.Now()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := writer.DeleteFeed(ctx, first[1]); err != nil {
		t.Fatal(err)
	}
	left := slices.DeleteFunc(slices.Clone(all), func(id uint64) bool { return id == first[1] })
	eventually("deleted on another node", left)
	if n := listings(t, reg); n != 1 {
		t.Fatalf("listings while the watch runs = %v, want 1", n)
	}

	// The backstop: a listing again after DefaultIDRelist. A deleted
	// feed's key keeps its delete marker, so the listing may name it.
	// It runs in the background: FeedIDs answers from the set at once.
	clock.Add(sjs.DefaultIDRelist)
	got, err := b.FeedIDs()
	if err != nil || !slices.Equal(got, left) {
		t.Fatalf("FeedIDs while the backstop lists = %v, %v; want %v at once", got, err, left)
	}
	for deadline := time.Now().Add(10 * time.Second); listings(t, reg) != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("listings after DefaultIDRelist = %v, want 2", listings(t, reg))
		}
	}
	if got, err = b.FeedIDs(); err != nil {
		t.Fatal(err)
	}
	for _, id := range left {
		if !slices.Contains(got, id) {
			t.Fatalf("after the relist FeedIDs = %v, lacks %d", got, id)
		}
	}

	// A reconnect: the set is listed again, and the new watch follows.
	c.Stop(0)
	c.Restart(0)
	nc := rjs.Conn()
	for deadline := time.Now().Add(20 * time.Second); nc.Status() != nats.CONNECTED || nc.Stats().Reconnects == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("reader did not reconnect: %v", nc.Status())
		}
	}
	last := create(1)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err = b.FeedIDs()
		if err == nil && slices.Contains(got, last[0]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a reconnect FeedIDs = %v, %v; want it to hold %d", got, err, last[0])
		}
	}
	// The watch's ordered consumer resumed after the restart: no
	// listing yet (a takeover's reads are not made to share the
	// servers with one); ReconnectRelist after the reconnect was seen,
	// one in the background.
	if n := listings(t, reg); n != 2 {
		t.Fatalf("listings right after a reconnect = %v, want 2 (none until ReconnectRelist)", n)
	}
	clock.Add(sjs.ReconnectRelist)
	if _, err := b.FeedIDs(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); listings(t, reg) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("listings after a reconnect = %v, want at least 3", listings(t, reg))
		}
	}
}
