package storage

import (
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
	}
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
				return putFeed(tx, &f)
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
				if calls != b.wantCalls {
					t.Fatalf("the update function ran %d times, want %d", calls, b.wantCalls)
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
