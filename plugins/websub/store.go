package websub

import "github.com/slogfeed/slogfeed/storage"

// Store is what WebSub needs of storage: its subscriptions (plugin records
// "websub") and the feeds it serves and subscribes.
type Store interface {
	storage.PluginStore
	storage.FeedReader
}
