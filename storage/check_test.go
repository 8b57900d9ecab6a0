package storage

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Check finds each kind of broken invariant, so that tests relying on it
// (the fuzz target above all) would notice a store bug.
func TestCheckDetectsBrokenInvariants(t *testing.T) {
	feedData := func(tx *bolt.Tx) *feedBuckets {
		fb, err := openFeedBuckets(tx, 1)
		if err != nil || fb == nil {
			t.Fatalf("feed 1's data: %v", err)
		}
		return fb
	}
	tests := []struct {
		name    string
		corrupt func(tx *bolt.Tx) error
	}{
		{"id index entry missing", func(tx *bolt.Tx) error { return feedData(tx).ids.Delete([]byte("a")) }},
		{"id index points elsewhere", func(tx *bolt.Tx) error { return feedData(tx).ids.Put([]byte("a"), u64(2)) }},
		{"item record missing", func(tx *bolt.Tx) error { return feedData(tx).items.Delete(u64(1)) }},
		{"item record garbage", func(tx *bolt.Tx) error { return feedData(tx).items.Put(u64(1), []byte("{")) }},
		{"published entry missing", func(tx *bolt.Tx) error {
			pub := feedData(tx).pub
			k, _ := pub.Cursor().First()
			return pub.Delete(bytes.Clone(k))
		}},
		{"published entry extra", func(tx *bolt.Tx) error {
			return feedData(tx).pub.Put(pubKey(t0, 99), []byte("zz"))
		}},
		{"count wrong", func(tx *bolt.Tx) error { return feedData(tx).setCount(7) }},
		{"feed record garbage", func(tx *bolt.Tx) error { return tx.Bucket(bucketFeeds).Put(u64(1), []byte("nope")) }},
		{"feed not indexed", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketFeedURL).Delete([]byte("https://example.org/feed"))
		}},
		{"index entry without feed", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketFeedSlug).Put([]byte("sensor/ghost"), u64(9))
		}},
		{"data of no feed", func(tx *bolt.Tx) error { return createFeedBuckets(tx, 9) }},
		{"feed without data", func(tx *bolt.Tx) error { return tx.Bucket(bucketItemCount).Delete(u64(1)) }},
		{"item of no feed", func(tx *bolt.Tx) error { return newView(tx.Bucket(bucketItemIDs), 9).Put([]byte("x"), u64(1)) }},
		{"item record of no feed", func(tx *bolt.Tx) error { return tx.Bucket(bucketItems).Put(u64(99), []byte("{}")) }},
		{"item listed twice", func(tx *bolt.Tx) error { return newView(tx.Bucket(bucketItemSeqs), 9).Put(u64(1), []byte{}) }},
		{"observation of no feed", func(tx *bolt.Tx) error { return newView(tx.Bucket(bucketObs), 9).Put(u64(1), []byte("{}")) }},
		{"bad count key", func(tx *bolt.Tx) error { return tx.Bucket(bucketItemCount).Put([]byte("x"), u64(1)) }},
		{"feed data left in the old layout", func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket(legacyFeedData)
			return err
		}},
		{"schema version wrong", func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte{1}) }},
		{"item seq above the last", func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyItemSeq, u64(1)) }},
		{"observation tail garbage", func(tx *bolt.Tx) error { return tx.Bucket(bucketFeeds).Put(tailKey(1), []byte{5, '{'}) }},
		{"observation tail not JSON", func(tx *bolt.Tx) error { return tx.Bucket(bucketFeeds).Put(tailKey(1), []byte{1, '{'}) }},
		{"observation tail empty", func(tx *bolt.Tx) error { return tx.Bucket(bucketFeeds).Put(tailKey(1), []byte{}) }},
		{"observation tail of no feed", func(tx *bolt.Tx) error { return tx.Bucket(bucketFeeds).Put(tailKey(9), []byte{2, '{', '}'}) }},
		{"stray key among feeds", func(tx *bolt.Tx) error { return tx.Bucket(bucketFeeds).Put([]byte("x"), []byte("{}")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "slogfeed.db"), Options{NoSync: true, Now: newClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			f := createRemote(t, s, "https://example.org/feed", Retention{})
			if _, err := s.AddItems(f.ID, []Item{{ID: "a", Published: t0}, {ID: "b"}}); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(); err != nil {
				t.Fatalf("Check before breaking: %v", err)
			}
			if err := s.db.Update(tt.corrupt); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Check = %v, want ErrCorrupt", err)
			} else {
				t.Log(err)
			}
		})
	}
}

// viewLen counts the entries of a feed's range.
func viewLen(v view) int {
	n := 0
	_ = v.ForEach(func(_, _ []byte) error { n++; return nil })
	return n
}
