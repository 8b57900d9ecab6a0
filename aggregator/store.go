package aggregator

import "github.com/slogfeed/slogfeed/storage"

// Store is what the aggregator needs of storage: feed records, items, and
// each poll's record.
type Store interface {
	storage.FeedStore
	storage.ItemReader
	storage.PollStore
}
