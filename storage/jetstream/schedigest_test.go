package jetstream_test

import (
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

var _ storage.ScheduleDigester = (*sjs.Backend)(nil)

// digestOf is a digest of n feeds of shard, IDs 64 apart, due within
// the hour after written.
func digestOf(shard, n int, written time.Time) storage.ScheduleDigest {
	d := storage.ScheduleDigest{Shard: shard, Written: written, Parts: 1}
	for i := range n {
		d.Entries = append(d.Entries, storage.DigestEntry{
			ID: uint64(1 + 64*i), Next: written.Add(time.Duration(i%3600) * time.Second),
			Host: "sensors.example", Weight: 1,
		})
	}
	return d
}

// TestScheduleDigests: a shard's digest written by one node is read
// whole by another, in parts when it is larger than a message; a later,
// shorter writing replaces it (the longer one's parts left behind are
// not read with it); shards without a digest are left out, and a value
// that is not a digest leaves its shard out, not the others.
func TestScheduleDigests(t *testing.T) {
	c := jstest.NewServer(t)
	ctx := testCtx(t)
	writer, js := openStore(t, c)
	reader, _ := openStore(t, c)
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

	big := digestOf(3, 250_000, at) // about 1.5 MB: two parts at least
	small := digestOf(5, 10, at)
	for _, d := range []storage.ScheduleDigest{big, small} {
		if err := writer.PutScheduleDigest(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := js.KeyValue(ctx, sjs.DigestBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "shard.3.1"); err != nil {
		t.Fatalf("a 250,000-feed digest in one part? %v", err)
	}
	check := func(name string, shards []int, want ...storage.ScheduleDigest) {
		t.Helper()
		got, err := reader.ScheduleDigests(ctx, shards)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d digests, want %d", name, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Shard != w.Shard || !g.Written.Equal(w.Written) || len(g.Entries) != len(w.Entries) {
				t.Fatalf("%s: shard %d written %v with %d entries, want shard %d written %v with %d", name,
					g.Shard, g.Written, len(g.Entries), w.Shard, w.Written, len(w.Entries))
			}
			if !slices.EqualFunc(g.Entries, w.Entries, func(a, b storage.DigestEntry) bool {
				return a.ID == b.ID && a.Next.Equal(b.Next) && a.Host == b.Host && a.Weight == b.Weight
			}) {
				t.Fatalf("%s: shard %d's entries differ", name, w.Shard)
			}
		}
	}
	check("written", []int{1, 3, 5, 7}, big, small)

	later := digestOf(3, 1_000, at.Add(30*time.Second))
	if err := writer.PutScheduleDigest(ctx, later); err != nil {
		t.Fatal(err)
	}
	check("rewritten shorter", []int{3, 5}, later, small)

	if _, err := kv.Put(ctx, "shard.5.0", []byte("not a digest")); err != nil {
		t.Fatal(err)
	}
	check("one shard's value garbled", []int{3, 5}, later)

	// Through the Backend, as the aggregator calls it.
	b := sjs.NewBackend(reader, 0)
	t.Cleanup(func() { _ = b.Close() })
	got, err := b.ScheduleDigests([]int{3})
	if err != nil || len(got) != 1 || len(got[0].Entries) != 1_000 {
		t.Fatalf("Backend.ScheduleDigests: %d digests, %v", len(got), err)
	}
}
