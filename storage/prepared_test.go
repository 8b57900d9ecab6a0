package storage

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestPreparedFeedUpdate: a poll's write worked out before its
// transaction (RecordPoll, RecordFetch with no item to add) stores what
// the same write worked out inside it stores, and is not used when the
// record changed in between.
func TestPreparedFeedUpdate(t *testing.T) {
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	writes := []struct {
		name  string
		write func(s *Store, id uint64, calls *int) (Feed, error)
	}{
		{"RecordPoll", func(s *Store, id uint64, calls *int) (Feed, error) {
			return s.RecordPoll(id, Observation{At: at, Err: "boom"}, func(x *Feed) error {
				*calls++
				x.Polls++
				x.LastFetch, x.LastError, x.ErrorCount = at, "boom", x.ErrorCount+1
				return nil
			})
		}},
		{"RecordFetch", func(s *Store, id uint64, calls *int) (Feed, error) {
			r, err := s.RecordFetch(id, nil, Observation{At: at, Status: 304}, func(x *Feed, o *Observation, added []Item) error {
				*calls++
				o.Hit = len(added) > 0
				x.Polls++
				x.LastFetch, x.ETag = at, `"v2"`
				return nil
			})
			return r.Feed, err
		}},
		{"RecordFetch with new items", func(s *Store, id uint64, calls *int) (Feed, error) {
			return recordItems(s, id, calls, at, "a", "b")
		}},
	}
	// An item already stored is not added again: what fn worked out
	// before the transaction, expecting it to be, is not used.
	writes = append(writes, struct {
		name  string
		write func(s *Store, id uint64, calls *int) (Feed, error)
	}{"RecordFetch with a stored item", func(s *Store, id uint64, calls *int) (Feed, error) {
		if _, err := s.AddItems(id, []Item{{ID: "a", Title: "a", Published: at}}); err != nil {
			return Feed{}, err
		}
		return recordItems(s, id, calls, at, "a", "b")
	}})
	// before runs between the memo's read and the write: nothing, or a
	// change of the record the prepared update was worked out from.
	befores := []struct {
		name      string
		memo      bool // Store.Feed read the feed first
		between   func(t *testing.T, s *Store, id uint64)
		wantTitle string
		wantCalls int // 1: worked out once, before or in the transaction
	}{
		{"no memo entry", false, func(*testing.T, *Store, uint64) {}, "original", 1},
		{"memo entry, record unchanged", true, func(*testing.T, *Store, uint64) {}, "original", 1},
		{"memo entry, record rewritten meanwhile", true, func(t *testing.T, s *Store, id uint64) {
			err := s.db.Update(func(tx *bolt.Tx) error {
				f, err := getFeed(tx, id)
				if err != nil {
					return err
				}
				f.Title = "rewritten"
				return s.putFeed(tx, &f)
			})
			if err != nil {
				t.Fatal(err)
			}
		}, "rewritten", 2},
	}
	for _, w := range writes {
		for _, b := range befores {
			t.Run(w.name+"/"+b.name, func(t *testing.T) {
				s := openTest(t)
				f := Feed{Kind: KindRemote, URL: "https://example.org/feed", Policy: "auto", Title: "original", Category: []string{"a"}}
				if err := s.CreateFeed(&f); err != nil {
					t.Fatal(err)
				}
				if b.memo {
					if _, err := s.Feed(f.ID); err != nil {
						t.Fatal(err)
					}
				} else {
					s.feedMemo.mu.Lock()
					delete(s.feedMemo.m, f.ID)
					s.feedMemo.mu.Unlock()
				}
				b.between(t, s, f.ID)
				calls := 0
				got, err := w.write(s, f.ID, &calls)
				if err != nil {
					t.Fatal(err)
				}
				want := b.wantCalls
				if w.name == "RecordFetch with a stored item" && b.memo {
					want = 2
				}
				if calls != want {
					t.Fatalf("the update function ran %d times, want %d", calls, want)
				}
				s.feedMemo.mu.Lock()
				s.feedMemo.m = nil // read what is stored
				s.feedMemo.mu.Unlock()
				stored, err := s.Feed(f.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, stored) {
					t.Fatalf("the write returned\n%+v\nbut stored\n%+v", got, stored)
				}
				if stored.Title != b.wantTitle || stored.Polls != 1 || !stored.LastFetch.Equal(at) {
					t.Fatalf("stored title %q, polls %d, last fetch %v; want %q, 1, %v", stored.Title, stored.Polls, stored.LastFetch, b.wantTitle, at)
				}
				obs, err := s.Observations(f.ID, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(obs) != 1 || !obs[0].At.Equal(at) {
					t.Fatalf("observations %+v, want the one at %v", obs, at)
				}
			})
		}
	}
}

// recordItems records a fetch of feed id that brings items with these
// IDs; fn counts its calls and keeps what it was given.
func recordItems(s *Store, id uint64, calls *int, at time.Time, ids ...string) (Feed, error) {
	var items []Item
	for _, i := range ids {
		items = append(items, Item{ID: i, Title: i, Published: at.Add(-time.Minute)})
	}
	r, err := s.RecordFetch(id, items, Observation{At: at, Status: 200}, func(x *Feed, o *Observation, added []Item) error {
		*calls++
		o.Hit = len(added) > 0
		o.Published = nil
		for _, it := range added {
			o.Published = append(o.Published, it.Published)
		}
		x.Polls++
		x.LastFetch = at
		x.Items += int64(len(added))
		return nil
	})
	if err != nil {
		return Feed{}, err
	}
	if got := len(r.Added); got == 0 || len(r.Observation.Published) != got || int64(got) != r.Feed.Items {
		return Feed{}, fmt.Errorf("%d items added, observation %+v, feed counts %d items", got, r.Observation, r.Feed.Items)
	}
	return r.Feed, nil
}
