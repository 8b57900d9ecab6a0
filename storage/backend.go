package storage

import "encoding/json"

// The contracts every storage backend keeps. Callers outside storage take
// the narrowest of these interfaces they need, never *Store, so that the
// bbolt Store and the JetStream store (storage/jetstream) can stand behind
// the same code. The contract suite in storage/storagetest pins the
// behaviour each method promises, for every backend.
//
// The methods keep the bbolt Store's signatures (no context): a backend
// whose calls go over the network bounds each one itself.

// FeedReader reads feed records.
type FeedReader interface {
	// Feed returns the feed with this ID, or ErrFeedNotFound.
	Feed(id uint64) (Feed, error)
	// FeedByURL returns the remote feed polled from url, or ErrFeedNotFound.
	FeedByURL(url string) (Feed, error)
	// FeedBySlug returns the sensor or pipe feed of kind with this slug,
	// or ErrFeedNotFound.
	FeedBySlug(kind Kind, slug string) (Feed, error)
	// Feeds returns every feed, ordered by ID.
	Feeds() ([]Feed, error)
}

// FeedStore keeps feed records: unique URL for remote feeds, unique slug
// per kind for sensor and pipe feeds.
type FeedStore interface {
	FeedReader
	// CreateFeed stores f, assigning f.ID; ErrFeedExists when its URL (or
	// kind and slug) is taken.
	CreateFeed(f *Feed) error
	// UpdateFeed applies fn to the stored feed and stores the result
	// atomically; an error from fn changes nothing.
	UpdateFeed(id uint64, fn func(*Feed) error) (Feed, error)
	// DeleteFeed removes the feed with its items and observations.
	DeleteFeed(id uint64) error
}

// ItemReader reads a feed's items.
type ItemReader interface {
	// Items returns the feed's items matching q, in q's order.
	Items(feedID uint64, q ItemQuery) ([]Item, error)
	// Item returns one item by its ID, or ErrItemNotFound.
	Item(feedID uint64, itemID string) (Item, error)
	// CountItems returns the number of items the feed holds.
	CountItems(feedID uint64) (int, error)
	// ItemCounts returns CountItems of each feed of ids.
	ItemCounts(ids []uint64) (map[uint64]int, error)
	// LastSeq returns the store-wide sequence of the newest item stored.
	LastSeq() (uint64, error)
}

// ItemStore keeps items, each ID at most once per feed, within the feed's
// retention.
type ItemStore interface {
	ItemReader
	// AddItems stores the items whose IDs the feed does not hold yet and
	// returns them; the rest are left as they are.
	AddItems(feedID uint64, items []Item) (added []Item, err error)
}

// VersionStore answers the versions (ETag inputs) of feeds.
type VersionStore interface {
	// FeedVersionBySlug returns the version of the sensor or pipe feed.
	FeedVersionBySlug(kind Kind, slug string, depth int) (Version, error)
	// FeedSnapshot returns the feed, its newest n items and their version,
	// read at one moment.
	FeedSnapshot(kind Kind, slug string, n int) (Feed, []Item, Version, error)
}

// ObservationReader reads what polls observed.
type ObservationReader interface {
	// Observations returns the feed's newest observations (up to limit),
	// oldest first.
	Observations(feedID uint64, limit int) ([]Observation, error)
	// RecentLatencies returns the latencies of the newest polls of each
	// feed of ids.
	RecentLatencies(ids []uint64, polls int) (map[uint64][]float64, error)
}

// PollStore records polls: the items, the observation the policy learns
// from, and the feed's new state.
type PollStore interface {
	ObservationReader
	// RecordFetch stores a poll's items, its observation and the feed
	// update fn makes, all or nothing.
	RecordFetch(feedID uint64, items []Item, o Observation, fn func(f *Feed, o *Observation, added []Item) error) (Fetched, error)
	// RecordPoll stores the observation and the feed update fn makes, all
	// or nothing.
	RecordPoll(feedID uint64, o Observation, fn func(*Feed) error) (Feed, error)
}

// FeedState is what a node needs to schedule a feed at its learned
// prediction: the feed's record and its newest observations, oldest
// first, which the aggregator replays through the policy.
type FeedState struct {
	Feed         Feed
	Observations []Observation
}

// StateLoader loads the scheduling state of many feeds at once: what a
// cluster node needs for the feeds of the shards it takes over. The
// JetStream backend reads it in two passes instead of three round trips
// per feed; the bbolt Store offers it too, so callers have one path.
type StateLoader interface {
	// FeedStates returns the state of every feed whose ID want accepts
	// (every feed when want is nil), by ID, with at most obsLimit newest
	// observations each (obsLimit ≤ 0: all kept).
	FeedStates(want func(id uint64) bool, obsLimit int) (map[uint64]*FeedState, error)
}

// StateStreamer is StateLoader without holding every observation at
// once: a pass that reads many feeds' observations must read them all
// before any feed's are complete (the stream interleaves them), so it
// hands each one over as it reads it.
type StateStreamer interface {
	// StreamFeedStates calls feed with the record of every feed whose
	// ID want accepts (every feed when want is nil), in ID order, then
	// obs with each stored observation of the feeds for which feed
	// answered true, oldest first for each feed. After an error, what
	// was handed over is incomplete and must be dropped.
	StreamFeedStates(want func(id uint64) bool, feed func(Feed) bool, obs func(id uint64, o Observation)) error
}

// FeedIDLister lists the stored feeds' IDs without reading their
// records: what a clustered aggregator needs at each resync to notice
// feeds other nodes created or deleted. The JetStream backend answers
// from the defs bucket leader's key listing (one request); its list may
// hold deleted feeds (Feed tells them apart).
type FeedIDLister interface {
	// FeedIDs returns the IDs of the stored feeds, ascending.
	FeedIDs() ([]uint64, error)
}

// Unavailabler is a Backend that tells the errors that mean it cannot
// answer now but may soon (the JetStream backend: a cluster without a
// quorum, a stream electing its leader, a request unanswered): the HTTP
// API answers those 503 with Retry-After rather than 500.
type Unavailabler interface {
	Unavailable(err error) bool
}

// PipeReader reads pipe records.
type PipeReader interface {
	// Pipe returns the pipe with this ID, or ErrPipeNotFound.
	Pipe(id uint64) (Pipe, error)
	// Pipes returns every pipe, ordered by ID.
	Pipes() ([]Pipe, error)
}

// PipeStore keeps pipes, their output feeds and runner state.
type PipeStore interface {
	PipeReader
	// CreatePipe stores p and its output feed out together, assigning
	// both IDs.
	CreatePipe(p *Pipe, out *Feed) error
	// UpdatePipeFeed stores p and applies edit (if not nil) to its output
	// feed, both or neither.
	UpdatePipeFeed(p Pipe, edit func(*Feed) error) error
	// DeletePipe removes the pipe and its output feed.
	DeletePipe(id uint64) error
	// CommitPipeRun stores a run's outputs, the pipe's new state and the
	// run's record, all or nothing.
	CommitPipeRun(pipeID uint64, state json.RawMessage, out []Item, run PipeRun) (added []Item, err error)
}

// PluginStore keeps plugins' records, keyed by plugin name and key.
type PluginStore interface {
	PluginPut(plugin, key string, value []byte) error
	// PluginCreate stores value under key unless the key holds a value
	// already, and returns what the key holds after the call: value, or
	// the one found. Writers racing to create one key get one answer.
	PluginCreate(plugin, key string, value []byte) ([]byte, error)
	// PluginApply makes the writes ops in plugin's namespace, in order,
	// as one write where the backend can (see each backend's method).
	// Records are refused as PluginPut refuses them, the whole batch
	// when any is.
	PluginApply(plugin string, ops []PluginOp) error
	// PluginGet returns the value, or ErrPluginKeyNotFound.
	PluginGet(plugin, key string) ([]byte, error)
	PluginDelete(plugin, key string) error
	// PluginList calls fn for each of the plugin's records, ordered by key.
	PluginList(plugin string, fn func(key string, value []byte) error) error
}

// Backend is everything slogfeed keeps: what cmd/slogfeed opens and hands,
// narrowed, to each component.
type Backend interface {
	FeedStore
	ItemStore
	VersionStore
	PollStore
	PipeStore
	PluginStore
	// SetReducer installs the reduction applied when retention removes
	// items (nil: items are dropped); set once, before use.
	SetReducer(r Reducer)
	// Check verifies the stored data is consistent.
	Check() error
	// Close releases the backend; no call may follow.
	Close() error
}

var (
	_ Backend     = (*Store)(nil)
	_ StateLoader = (*Store)(nil)
)
