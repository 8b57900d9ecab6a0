package ui

import "github.com/slogfeed/slogfeed/storage"

// Store is what the web UI reads of storage; it writes nothing.
type Store interface {
	storage.FeedReader
	storage.ItemReader
	storage.ObservationReader
}
