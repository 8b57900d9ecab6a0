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
			s.NoteUnstored(f.ID, "could not be stored", since)
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
