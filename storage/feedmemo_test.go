package storage

import (
	"reflect"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestFeedMemo: a write after Store.Feed uses the feed it decoded only
// while the record is unchanged; changes a caller makes to the feed it
// got do not reach the write; the write takes the entry out; the memo
// stays bounded.
func TestFeedMemo(t *testing.T) {
	tests := []struct {
		name string
		// between runs after Store.Feed and before the update.
		between   func(t *testing.T, s *Store, f *Feed)
		wantTitle string
	}{
		{"record unchanged", func(*testing.T, *Store, *Feed) {}, "original"},
		{"caller changes its copy", func(_ *testing.T, _ *Store, f *Feed) {
			f.Title, f.Category[0] = "changed by the caller", "x"
		}, "original"},
		{"record rewritten meanwhile", func(t *testing.T, s *Store, f *Feed) {
			err := s.db.Update(func(tx *bolt.Tx) error {
				g := *f
				g.Title = "rewritten"
				return putFeed(tx, &g)
			})
			if err != nil {
				t.Fatal(err)
			}
		}, "rewritten"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t)
			f := Feed{Kind: KindRemote, URL: "https://example.org/feed", Policy: "auto", Title: "original", Category: []string{"a", "b"}}
			if err := s.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			got, err := s.Feed(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			tc.between(t, s, &got)
			var old Feed
			upd, err := s.UpdateFeed(f.ID, func(x *Feed) error {
				old = cloneFeed(x)
				x.Polls++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if old.Title != tc.wantTitle || !reflect.DeepEqual(old.Category, []string{"a", "b"}) {
				t.Fatalf("the update saw title %q, category %q; want %q, [a b]", old.Title, old.Category, tc.wantTitle)
			}
			if _, ok := s.feedMemo.m[f.ID]; ok {
				t.Fatal("the update left the feed in the memo")
			}
			// What the update returned is what a fresh read decodes.
			fresh, err := s.Feed(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if upd.Polls != 1 || fresh.Polls != 1 || fresh.Title != tc.wantTitle {
				t.Fatalf("after the update: returned %+v, stored %+v", upd, fresh)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		var m feedMemo
		f := Feed{ID: 1}
		for id := range uint64(maxFeedMemo + 10) {
			m.put(id, []byte("{}"), &f)
			if len(m.m) > maxFeedMemo {
				t.Fatalf("%d entries, more than %d", len(m.m), maxFeedMemo)
			}
		}
		if _, ok := m.get(maxFeedMemo+9, []byte("{}"), false); !ok {
			t.Fatal("the newest entry is gone")
		}
	})
}
