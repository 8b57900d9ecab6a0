package storage

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ItemCounts returns how many items each of the feeds ids holds, read in
// one transaction (a list of many feeds would otherwise take one
// transaction per feed). Feeds that do not exist are left out.
func (s *Store) ItemCounts(ids []uint64) (map[uint64]int, error) {
	out := make(map[uint64]int, len(ids))
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, id := range ids {
			fb, err := s.feedBuckets(tx, id)
			if errors.Is(err, ErrFeedNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out[id] = int(fb.count())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: count items: %w", err)
	}
	return out, nil
}
