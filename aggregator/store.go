package aggregator

import (
	"errors"

	"github.com/slogfeed/slogfeed/storage"
)

// Store is what the aggregator needs of storage: feed records, items, and
// each poll's record.
type Store interface {
	storage.FeedStore
	storage.ItemReader
	storage.PollStore
}

// itemChecker is a Store that tells which of many item IDs a feed holds
// in one read (storage.Store.HasItems).
type itemChecker interface {
	HasItems(feedID uint64, ids []string) ([]bool, error)
}

// freshItems returns the indexes of the items feed id does not hold.
func (s *Service) freshItems(id uint64, items []storage.Item) []int {
	var fresh []int
	if c, ok := s.opt.Store.(itemChecker); ok && len(items) > 0 {
		ids := make([]string, len(items))
		for i := range items {
			ids[i] = items[i].ID
		}
		if has, err := c.HasItems(id, ids); err == nil {
			for i, h := range has {
				if !h {
					fresh = append(fresh, i)
				}
			}
			return fresh
		}
	}
	for i := range items {
		if _, err := s.opt.Store.Item(id, items[i].ID); errors.Is(err, storage.ErrItemNotFound) {
			fresh = append(fresh, i)
		}
	}
	return fresh
}
