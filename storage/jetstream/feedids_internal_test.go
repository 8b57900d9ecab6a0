package jetstream

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestFeedIDSetListingKeepsWatchedChanges checks the set's bookkeeping
// around a background listing: what the watch saw after the listing
// began stays in the set even when a merge (a resync's FeedIDs) ran
// meanwhile and the listing, paged, walked past the new key.
func TestFeedIDSetListingKeepsWatchedChanges(t *testing.T) {
	type note struct {
		id      uint64
		deleted bool
	}
	tests := []struct {
		name        string
		before      []uint64 // the set before the listing
		during      []note   // seen by the watch while the listing runs
		mergeDuring bool     // a FeedIDs call merges meanwhile
		listed      []uint64 // what the listing found
		ok          bool
		want        []uint64
	}{
		{
			name:   "created during, missed by the listing, merged meanwhile",
			before: []uint64{1, 2}, during: []note{{id: 5}}, mergeDuring: true,
			listed: []uint64{1, 2}, ok: true, want: []uint64{1, 2, 5},
		},
		{
			name:   "created during, missed, no merge",
			before: []uint64{1, 2}, during: []note{{id: 5}},
			listed: []uint64{1, 2}, ok: true, want: []uint64{1, 2, 5},
		},
		{
			name:   "deleted during, still found by the listing, merged meanwhile",
			before: []uint64{1, 2, 3}, during: []note{{id: 2, deleted: true}}, mergeDuring: true,
			listed: []uint64{1, 2, 3}, ok: true, want: []uint64{1, 3},
		},
		{
			name:   "created and found: once",
			before: []uint64{1}, during: []note{{id: 4}}, mergeDuring: true,
			listed: []uint64{1, 4}, ok: true, want: []uint64{1, 4},
		},
		{
			name:   "the listing replaces a stale set",
			before: []uint64{1, 2, 9}, listed: []uint64{1, 2, 3}, ok: true, want: []uint64{1, 2, 3},
		},
		{
			name:   "a failed listing keeps the set and what was watched",
			before: []uint64{1, 2}, during: []note{{id: 7}}, mergeDuring: true,
			ok: false, want: []uint64{1, 2, 7},
		},
	}
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &feedIDSet{ids: slices.Clone(tt.before)}
			x.beginListing()
			for _, n := range tt.during {
				x.note(n.id, n.deleted, time.Time{})
			}
			if tt.mergeDuring {
				x.mu.Lock()
				x.mergeLocked(x.ids)
				x.mu.Unlock()
			}
			x.endListing(slices.Clone(tt.listed), tt.ok, t0, 3)
			x.mu.Lock()
			x.mergeLocked(x.ids) // as the next FeedIDs does
			got, listedAt := slices.Clone(x.ids), x.listedAt
			x.mu.Unlock()
			if !slices.Equal(got, tt.want) {
				t.Fatalf("set = %v, want %v", got, tt.want)
			}
			if tt.ok != listedAt.Equal(t0) {
				t.Fatalf("listedAt = %v after a listing ok=%v", listedAt, tt.ok)
			}
			if x.listing || x.listAdded != nil || x.listDeleted != nil {
				t.Fatal("the listing's bookkeeping outlived it")
			}
		})
	}
}

// stubWatch stands for a running watch.
type stubWatch struct{}

func (stubWatch) Updates() <-chan jetstream.KeyValueEntry { return nil }
func (stubWatch) Stop() error                             { return nil }

// TestFeedIDSetWrittenSince: the set answers which feeds were written
// since a time from what its watch saw, once the watch has followed the
// bucket since then, and not for a time before its first write, nor one
// it forgot (past recentHorizon of its newest write), nor without a
// watch.
func TestFeedIDSetWrittenSince(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type write struct {
		id      uint64
		s       int // seconds after t0
		deleted bool
	}
	tests := []struct {
		name    string
		writes  []write
		noWatch bool
		since   int
		want    map[uint64]time.Time // nil: not answered
	}{
		{name: "no write seen yet", since: 0},
		{name: "since the first write", writes: []write{{id: 1, s: 10}, {id: 2, s: 20}, {id: 1, s: 30}}, since: 10,
			want: map[uint64]time.Time{1: at(30), 2: at(20)}},
		{name: "since a later time", writes: []write{{id: 1, s: 10}, {id: 2, s: 20}, {id: 3, s: 30, deleted: true}}, since: 15,
			want: map[uint64]time.Time{2: at(20), 3: at(30)}},
		{name: "before the first write", writes: []write{{id: 1, s: 10}}, since: 5},
		{name: "forgotten", writes: []write{{id: 1, s: 10}, {id: 2, s: 700}, {id: 3, s: 900}}, since: 100},
		{name: "within the horizon after forgetting", writes: []write{{id: 1, s: 10}, {id: 2, s: 700}, {id: 3, s: 900}}, since: 300,
			want: map[uint64]time.Time{2: at(700), 3: at(900)}},
		{name: "no watch", writes: []write{{id: 1, s: 10}}, noWatch: true, since: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &feedIDSet{watch: stubWatch{}}
			if tt.noWatch {
				x.watch = nil
			}
			for _, w := range tt.writes {
				x.note(w.id, w.deleted, at(w.s))
			}
			got, ok := x.writtenSince(at(tt.since))
			if ok != (tt.want != nil) || !maps.Equal(got, tt.want) {
				t.Errorf("writtenSince(+%ds) = %v, %v; want %v (nil: not answered)", tt.since, got, ok, tt.want)
			}
		})
	}
}
