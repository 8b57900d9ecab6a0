package storage

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// droppedClock is a settable clock for the dropped-set tests.
type droppedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *droppedClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *droppedClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openDroppedStore(t *testing.T, path string, c *droppedClock) *Store {
	t.Helper()
	s, err := Open(path, Options{NoSync: true, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fetchListed records a poll of feed id bringing items (Fetched: now) as
// the aggregator does, its document listing listed items.
func fetchListed(t *testing.T, s *Store, id uint64, now time.Time, listed int, items ...Item) Fetched {
	t.Helper()
	for i := range items {
		items[i].Fetched = now
	}
	res, err := s.RecordFetch(id, items, Observation{At: now}, func(x *Feed, _ *Observation, _ []Item) error {
		x.Polls++
		x.Listed = listed
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func addedIDs(res Fetched) []string {
	out := []string{}
	for _, it := range res.Added {
		out = append(out, it.ID)
	}
	return out
}

// TestDroppedSetRefusesOnlyUndatedItems: the set of IDs retention dropped
// refuses only new items without a date of their own; an item dated by
// its publisher is judged by that date, as without the set.
func TestDroppedSetRefusesOnlyUndatedItems(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		retention Retention
		// poll returns the items of the i-th poll at now (i from 0) and
		// how many the document listed.
		poll  func(i int, now time.Time) ([]Item, int)
		polls int
		want  []string // added by the last poll
		held  []string // held after it
	}{
		{
			// One item updated in place with fresh dates of its own:
			// MaxAge drops it, the next document dates it within MaxAge.
			name: "dated-updated-in-place", retention: Retention{MaxAge: time.Hour}, polls: 13,
			poll: func(i int, now time.Time) ([]Item, int) {
				return []Item{{ID: "station-7/current", Title: fmt.Sprint("v", i), Published: now, Updated: now}}, 1
			},
			want: []string{}, held: []string{"station-7/current"},
		},
		{
			// A guid reissued for a new item dated newer than every kept.
			name: "dated-guid-reissued", retention: Retention{MaxItems: 2}, polls: 2,
			poll: func(i int, now time.Time) ([]Item, int) {
				first := Item{ID: "alert-1", Title: "a", Published: t0}
				if i == 1 {
					first = Item{ID: "alert-1", Title: "new alert", Published: now}
				}
				return []Item{first,
					{ID: "alert-2", Title: "b", Published: t0.Add(time.Minute)},
					{ID: "alert-3", Title: "c", Published: t0.Add(2 * time.Minute)}}, 3
			},
			want: []string{"alert-1"}, held: []string{"alert-1", "alert-3"},
		},
		{
			// The same without a date of its own: refused, the document
			// still lists it.
			name: "undated-still-listed", retention: Retention{MaxItems: 2}, polls: 2,
			poll: func(i int, now time.Time) ([]Item, int) {
				return []Item{{ID: "u1", Title: "a"}, {ID: "u2", Title: "b"}, {ID: "u3", Title: "c"}}, 3
			},
			want: []string{},
		},
		{
			// Marked undated by the aggregator (Published holds its
			// estimate): refused as well.
			name: "estimated-still-listed", retention: Retention{MaxItems: 2}, polls: 2,
			poll: func(i int, now time.Time) ([]Item, int) {
				var out []Item
				for j, id := range []string{"e1", "e2", "e3"} {
					out = append(out, Item{ID: id, Title: id, Published: now.Add(time.Duration(j) * time.Second), Undated: true})
				}
				return out, 3
			},
			want: []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &droppedClock{t: t0}
			s := openDroppedStore(t, filepath.Join(t.TempDir(), "s.db"), c)
			defer s.Close()
			f := Feed{Kind: KindRemote, URL: "http://pub.test/" + tc.name, Policy: "auto", Retention: tc.retention}
			if err := s.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			var res Fetched
			for i := range tc.polls {
				if i > 0 {
					c.add(10 * time.Minute)
				}
				items, listed := tc.poll(i, c.now())
				res = fetchListed(t, s, f.ID, c.now(), listed, items...)
			}
			if got := addedIDs(res); !slices.Equal(got, tc.want) {
				t.Errorf("the last poll added %v, want %v", got, tc.want)
			}
			for _, id := range tc.held {
				if _, err := s.Item(f.ID, id); err != nil {
					t.Errorf("item %s: %v", id, err)
				}
			}
		})
	}
}

// TestDroppedSetOnlyWhereDropsCanComeBack: a feed keeps a set of the IDs
// retention dropped only when a dropped item can come back: its documents
// list more items than MaxItems keeps, or it has MaxAge. A mature feed at
// the default retention whose document lists its newest 30 items keeps
// none, dated items or not.
func TestDroppedSetOnlyWhereDropsCanComeBack(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention Retention
		listed    int
		dated     bool
		wantSet   bool
	}{
		{"default-retention-dated", DefaultRetention, 30, true, false},
		{"default-retention-undated", DefaultRetention, 30, false, false},
		{"listing-more-than-kept", Retention{MaxItems: 20}, 30, false, true},
		{"max-age", Retention{MaxAge: time.Hour}, 30, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &droppedClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			s := openDroppedStore(t, filepath.Join(t.TempDir(), "s.db"), c)
			defer s.Close()
			f := Feed{Kind: KindRemote, URL: "http://pub.test/news", Policy: "auto", Retention: tc.retention}
			if err := s.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			for i := range 260 { // one new item a poll
				c.add(time.Minute)
				it := Item{ID: fmt.Sprint("n", i), Title: "t"}
				if tc.dated {
					it.Published = c.now()
				}
				fetchListed(t, s, f.ID, c.now(), tc.listed, it)
			}
			var size int
			if err := s.db.View(func(tx *bolt.Tx) error {
				size = len(tx.Bucket(bucketFeeds).Get(droppedKey(f.ID)))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			t.Logf("dropped set: %d bytes", size)
			if (size > 0) != tc.wantSet {
				t.Errorf("a dropped set of %d bytes; want one: %v", size, tc.wantSet)
			}
		})
	}
}

// TestDroppedIDsAdd: Add keeps each hash once at its newest drop, the
// newest Keep of them, and never keeps fewer than the set did.
func TestDroppedIDsAdd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      DroppedIDs
		add    []uint64
		keep   int
		want   []uint64
		wantKp int
	}{
		{"new set", DroppedIDs{}, []uint64{1, 2, 3}, 2, []uint64{2, 3}, 2},
		{"no set kept", DroppedIDs{}, []uint64{1}, 0, nil, 0},
		{"moves to the end", DroppedIDs{Hashes: []uint64{1, 2, 3}, Keep: 4}, []uint64{1, 4}, 4, []uint64{2, 3, 1, 4}, 4},
		{"repeated in one call", DroppedIDs{}, []uint64{5, 6, 5}, 3, []uint64{6, 5}, 3},
		{"keep does not shrink", DroppedIDs{Hashes: []uint64{1, 2}, Keep: 4}, []uint64{3}, 1, []uint64{1, 2, 3}, 4},
		{"keep 0 goes on at the set's keep", DroppedIDs{Hashes: []uint64{1, 2}, Keep: 2}, []uint64{3}, 0, []uint64{2, 3}, 2},
		{"keep grows", DroppedIDs{Hashes: []uint64{1, 2}, Keep: 2}, []uint64{3}, 3, []uint64{1, 2, 3}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.d.Add(tc.add, tc.keep)
			if !slices.Equal(got.Hashes, tc.want) || got.Keep != tc.wantKp {
				t.Errorf("Add = %v keep %d, want %v keep %d", got.Hashes, got.Keep, tc.want, tc.wantKp)
			}
			back, err := DecodeDroppedIDs(EncodeDroppedIDs(got))
			if err != nil || !slices.Equal(back.Hashes, got.Hashes) || len(got.Hashes) > 0 && back.Keep != got.Keep {
				t.Errorf("encoded and decoded: %v keep %d, %v", back.Hashes, back.Keep, err)
			}
		})
	}
}
