package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// openStoreOn opens a Store whose connection goes to server i alone: its
// direct gets are answered by that server's replica of the stream.
func openStoreOn(t *testing.T, c *jstest.Cluster, i int) *sjs.Store {
	t.Helper()
	nc, err := nats.Connect(c.URLs()[i], nats.DontRandomize(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sjs.Open(ctx, js, sjs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestItemsReadYourWrites: on a 3-server cluster with a Store on each
// server, a page read right after a post of one or two readings is
// acknowledged holds the newest of them, whichever node reads it and by
// whichever order: by publish time, by arrival, within Since. A replica
// that lags the stream's leader (the reader's own, answering its direct
// gets) does not make the read miss it, nor do this node's own entries
// stored after its index's last sync. The misses were a few in a hundred
// reads; each kind of read is made 120 times.
func TestItemsReadYourWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-server cluster")
	}
	const posts = 180 // per batch size: 60 reads of each kind
	c := jstest.NewCluster(t, 3)
	var bes []*sjs.Backend
	for i := range 3 {
		be := sjs.NewBackend(openStoreOn(t, c, i), 0)
		t.Cleanup(func() { _ = be.Close() })
		bes = append(bes, be)
	}
	f := storage.Feed{Kind: storage.KindSensor, Slug: "ryw"}
	if err := bes[0].CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var hist []storage.Item
	for i := range 50 {
		hist = append(hist, storage.Item{ID: fmt.Sprintf("h%d", i), Title: "h", Published: t0.Add(time.Duration(i) * time.Second)})
	}
	if _, err := bes[0].AddItems(f.ID, hist); err != nil {
		t.Fatal(err)
	}
	for _, be := range bes { // every node's index synced once
		if _, err := be.Items(f.ID, storage.ItemQuery{Limit: 5, Order: storage.ByPublished}); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []struct {
		name string
		q    storage.ItemQuery
	}{
		{"by publish time", storage.ItemQuery{Limit: 10, Order: storage.ByPublished}},
		{"by arrival", storage.ItemQuery{Limit: 10}},
		{"within Since", storage.ItemQuery{Since: t0}},
	}
	for _, batch := range []int{1, 2} {
		miss := map[string]int{}
		for n := range posts {
			w := n % 3
			var its []storage.Item
			for j := range batch {
				id := fmt.Sprintf("r%d-%d-%d", batch, n, j)
				its = append(its, storage.Item{ID: id, Title: id, Published: t0.Add(time.Hour + time.Duration(batch*100000+n*10+j)*time.Second)})
			}
			added, err := bes[w].AddItems(f.ID, its)
			if err != nil || len(added) != batch {
				t.Fatalf("AddItems: %d added, %v", len(added), err)
			}
			// One read per post, right after it: readers and kinds rotate.
			r, k := (n/3)%3, kinds[(n/9)%3]
			q := k.q
			if !q.Since.IsZero() {
				q.Since = its[0].Published.Add(-100 * time.Second) // the last ten posts
			}
			got, err := bes[r].Items(f.ID, q)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, it := range got {
				found = found || it.ID == its[batch-1].ID
			}
			if !found {
				miss[fmt.Sprintf("%s, same node %v", k.name, w == r)]++
			}
		}
		for k, v := range miss {
			t.Errorf("posts of %d: %d reads %s missed the reading just acknowledged", batch, v, k)
		}
	}
}
