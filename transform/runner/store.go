package runner

import "github.com/slogfeed/slogfeed/storage"

// Store is what the pipe runner needs of storage: pipes and their runs,
// and the feeds and items of their inputs.
type Store interface {
	storage.FeedReader
	storage.ItemReader
	storage.PipeStore
}
