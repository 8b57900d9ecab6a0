package plugins

import "github.com/slogfeed/slogfeed/storage"

// Store is what plugin services may use of storage: their own records,
// and feeds and pipes to read.
type Store interface {
	storage.PluginStore
	storage.FeedReader
	storage.PipeReader
}
