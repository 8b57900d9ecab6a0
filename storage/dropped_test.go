package storage

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
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
