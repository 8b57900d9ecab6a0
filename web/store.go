package web

import "github.com/slogfeed/slogfeed/storage"

// Store is what the HTTP API, the sensor store and the republished feeds
// need of storage.
type Store interface {
	storage.FeedStore
	storage.ItemStore
	storage.VersionStore
	storage.ObservationReader
}
