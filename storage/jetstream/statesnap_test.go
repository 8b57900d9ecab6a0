package jetstream_test

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

var _ storage.StateSnapshotter = (*sjs.Backend)(nil)

// snapshotOf is a snapshot of n feeds of shard, IDs 64 apart, each with
// a state of size bytes.
func snapshotOf(shard, n, size int, written time.Time) storage.StateSnapshot {
	d := storage.StateSnapshot{Shard: shard, Written: written, Parts: 1}
	for i := range n {
		d.Entries = append(d.Entries, storage.StateEntry{
			ID: uint64(1 + 64*i), Policy: "auto", Respect: i%2 == 0,
			Last: written.Add(-time.Duration(i) * time.Second), State: bytes.Repeat([]byte{byte(i)}, size),
		})
	}
	return d
}

// TestStateSnapshots: a shard's snapshot written by one node is read
// whole by another, in parts when it is larger than a message; a later,
// shorter writing replaces it; a shard without one, or with a part that
// is not a snapshot, is left out, not the others.
func TestStateSnapshots(t *testing.T) {
	c := jstest.NewServer(t)
	ctx := testCtx(t)
	writer, js := openStore(t, c)
	reader, _ := openStore(t, c)
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

	big := snapshotOf(3, 4000, 600, at) // about 2.4 MB: three parts at least
	small := snapshotOf(5, 10, 600, at)
	broken := snapshotOf(6, 4000, 600, at)
	for _, d := range []storage.StateSnapshot{big, small, broken} {
		if err := writer.PutStateSnapshot(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := js.KeyValue(ctx, sjs.DigestBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "state.3.2"); err != nil {
		t.Fatalf("a 2.4 MB snapshot in fewer than three parts? %v", err)
	}
	if _, err := kv.Put(ctx, "state.6.1", []byte("not a snapshot")); err != nil {
		t.Fatal(err)
	}
	check := func(name string, want ...storage.StateSnapshot) {
		t.Helper()
		got, err := reader.StateSnapshots(ctx, []int{1, 3, 5, 6})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		slices.SortFunc(got, func(a, b storage.StateSnapshot) int { return a.Shard - b.Shard })
		if len(got) != len(want) {
			t.Fatalf("%s: %d snapshots, want %d", name, len(got), len(want))
		}
		for i := range want {
			w := want[i]
			if got[i].Shard != w.Shard || !got[i].Written.Equal(w.Written) || len(got[i].Entries) != len(w.Entries) {
				t.Fatalf("%s: shard %d written %v with %d entries, want shard %d written %v with %d", name,
					got[i].Shard, got[i].Written, len(got[i].Entries), w.Shard, w.Written, len(w.Entries))
			}
			for j, e := range got[i].Entries {
				e.Last = e.Last.In(time.UTC)
				if !reflect.DeepEqual(e, w.Entries[j]) {
					t.Fatalf("%s: shard %d entry %d: %+v, want %+v", name, w.Shard, j, e, w.Entries[j])
				}
			}
		}
	}
	check("first writing", big, small)

	later := snapshotOf(3, 20, 600, at.Add(5*time.Minute))
	if err := writer.PutStateSnapshot(ctx, later); err != nil {
		t.Fatal(err)
	}
	check("a shorter writing", later, small)
}

// TestFeedsWrittenSince: the feeds whose records were created, written
// or deleted at or after a time, each with its newest write, and none
// written only before; a Backend whose feed-ID watch followed the bucket
// since then answers the same from what it saw.
func TestFeedsWrittenSince(t *testing.T) {
	c := jstest.NewCluster(t, 3)
	ctx := testCtx(t)
	st, _ := openStore(t, c)
	watcher, _ := openStore(t, c)
	b := sjs.NewBackend(watcher, 0)
	t.Cleanup(func() { b.Close() })
	if _, err := b.FeedIDs(); err != nil { // starts the watch
		t.Fatal(err)
	}
	var ids []uint64
	for i := range 6 {
		f := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/w" + strconv.Itoa(i), Policy: "auto"}
		if err := st.CreateFeed(ctx, &f); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	got, err := st.FeedsWrittenSince(ctx, time.Now().Add(time.Hour))
	if err != nil || len(got) != 0 {
		t.Fatalf("written in the next hour: %v, %v; want none", got, err)
	}
	time.Sleep(20 * time.Millisecond)
	since := time.Now()
	time.Sleep(20 * time.Millisecond)
	pollFeed(t, st, ids[1], 0)
	pollFeed(t, st, ids[3], 0)
	pollFeed(t, st, ids[3], 1)
	if err := st.DeleteFeed(ctx, ids[4]); err != nil {
		t.Fatal(err)
	}
	f := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/new", Policy: "auto"}
	if err := st.CreateFeed(ctx, &f); err != nil {
		t.Fatal(err)
	}
	got, err = st.FeedsWrittenSince(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{ids[1], ids[3], ids[4], f.ID}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
		t.Errorf("written since: %v, want %v", keys, want)
	}
	for id, at := range got {
		if at.Before(since) || at.After(time.Now()) {
			t.Errorf("feed %d written at %v, not between %v and now", id, at, since)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		seen, err := b.FeedsWrittenSince(since)
		if err != nil {
			t.Fatal(err)
		}
		if maps.Equal(seen, got) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Backend's watch answers %v, the stream %v", seen, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	all, err := st.FeedsWrittenSince(ctx, time.Time{})
	if err != nil || len(all) != 7 {
		t.Errorf("written since the zero time: %d feeds, %v; want 7", len(all), err)
	}
}
