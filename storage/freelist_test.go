package storage

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// freelistPages counts the pages of db holding its free list.
func freelistPages(t *testing.T, db *bolt.DB) int {
	t.Helper()
	n := 0
	if err := db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			if p == nil {
				return nil
			}
			if p.Type == "freelist" {
				n++
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCloseSavesFreelist: a store's commits leave the free list out of
// the file, Close writes it (the next Open reads it instead of walking
// every page), and the next commit drops it again.
func TestCloseSavesFreelist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	f := Feed{Kind: KindRemote, URL: "https://example.com/f", Policy: "auto"}
	if err := s.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	if n := freelistPages(t, s.db); n != 0 {
		t.Fatalf("%d free-list pages while running, want none", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := freelistPages(t, db); n != 1 {
		t.Fatalf("%d free-list pages after Close, want 1", n)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("x"), []byte("y")) }); err != nil {
		t.Fatal(err)
	}
	if n := freelistPages(t, db); n != 0 {
		t.Fatalf("%d free-list pages after a commit, want none", n)
	}
}
