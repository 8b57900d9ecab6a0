package storage

import (
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The item counts of feeds created one after another fill their pages:
// every poll that stores items reads and rewrites them.
func TestItemCountPagesFull(t *testing.T) {
	tests := []struct {
		name    string
		feeds   int
		addEach int // items added to every feed after the creations
		minFill float64
	}{
		{"created", 3000, 0, 0.9},
		{"created, then items added", 3000, 2, 0.9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t)
			var ids []uint64
			for i := range tt.feeds {
				f := Feed{URL: fmt.Sprintf("https://example.org/%d.rss", i), Kind: KindRemote, Policy: "auto"}
				if err := s.CreateFeed(&f); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, f.ID)
			}
			for _, id := range ids {
				for j := range tt.addEach {
					if _, err := s.AddItems(id, []Item{{ID: fmt.Sprintf("i%d", j), Title: "t"}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := s.db.View(func(tx *bolt.Tx) error {
				st := tx.Bucket(bucketItemCount).Stats()
				fill := float64(st.LeafInuse) / float64(st.LeafAlloc)
				if st.KeyN != tt.feeds || fill < tt.minFill {
					t.Errorf("item_count: %d keys in %d leaf pages, %.0f%% full; want %d keys, at least %.0f%%",
						st.KeyN, st.LeafPageN, 100*fill, tt.feeds, 100*tt.minFill)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
