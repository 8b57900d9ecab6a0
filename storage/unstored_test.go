package storage

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestUnstoredUntilStored: a feed noted as failing to store its polls
// reads with that error (records, lists, summaries) until a poll of it
// is stored; the record never holds it.
func TestUnstoredUntilStored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(s *Store, id uint64) error // the poll that is stored
	}{
		{"fetch stored", func(s *Store, id uint64) error {
			_, err := s.RecordFetch(id, nil, Observation{At: time.Now()}, func(*Feed, *Observation, []Item) error { return nil })
			return err
		}},
		{"fetch error stored", func(s *Store, id uint64) error {
			_, err := s.RecordPoll(id, Observation{At: time.Now(), Err: "boom"}, func(f *Feed) error { f.LastError = "boom"; return nil })
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			f := Feed{Kind: KindRemote, URL: "http://pub.test/u", Policy: "auto"}
			if err := s.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			s.NoteUnstored(f.ID, "could not be stored", since, time.Now().Add(time.Hour))
			erroring := func() (e bool) {
				_ = s.EachFeedSummary(func(x *FeedSummary) bool { e = e || x.ID == f.ID && x.Erroring; return true })
				return e
			}
			got, err := s.Feed(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			byURL, _ := s.FeedByURL(f.URL)
			all, _ := s.Feeds()
			if got.LastError != "could not be stored" || !got.LastErrorAt.Equal(since) || byURL.LastError != got.LastError ||
				len(all) != 1 || all[0].LastError != got.LastError || !erroring() {
				t.Errorf("noted: Feed %q at %v, FeedByURL %q, Feeds %v, erroring %v", got.LastError, got.LastErrorAt, byURL.LastError, all, erroring())
			}
			if err := s.db.View(func(tx *bolt.Tx) error {
				rec, err := getFeed(tx, f.ID)
				if err == nil && rec.LastError != "" {
					t.Errorf("the record holds the error %q", rec.LastError)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := tc.store(s, f.ID); err != nil {
				t.Fatal(err)
			}
			got, _ = s.Feed(f.ID)
			if got.LastError == "could not be stored" || erroring() != (got.LastError != "") {
				t.Errorf("after a poll was stored: error %q, erroring %v; want the record's", got.LastError, erroring())
			}
		})
	}
}

// TestUnstoredNoteGoes: a note does not outlive its feed, nor the time
// the service set it for (it sets it again at every failed poll).
func TestUnstoredNoteGoes(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		then func(t *testing.T, s *Store, c *droppedClock, id uint64)
	}{
		{"feed deleted", func(t *testing.T, s *Store, _ *droppedClock, id uint64) {
			if err := s.DeleteFeed(id); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired", func(t *testing.T, s *Store, c *droppedClock, id uint64) {
			c.add(2 * time.Minute)
			if got, err := s.Feed(id); err != nil || got.LastError != "" {
				t.Errorf("after the note's time: error %q, %v", got.LastError, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &droppedClock{t: t0}
			s := openDroppedStore(t, filepath.Join(t.TempDir(), "s.db"), c)
			defer s.Close()
			f := Feed{Kind: KindRemote, URL: "http://pub.test/gone", Policy: "auto"}
			if err := s.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			s.NoteUnstored(f.ID, "the last poll was fetched but could not be stored", t0, t0.Add(time.Minute))
			if got, _ := s.Feed(f.ID); got.LastError == "" {
				t.Fatal("the note does not show")
			}
			tc.then(t, s, c, f.ID)
			if s.unstored.Has(f.ID, c.now()) {
				t.Errorf("the note of feed %d is still in force", f.ID)
			}
		})
	}
}
