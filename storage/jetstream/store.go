package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// Names of the JetStream assets the store keeps its data in.
const (
	ItemsStream = "SLOGFEED_ITEMS" // subjects slogfeed.items.<feed ID>
	ObsStream   = "SLOGFEED_OBS"   // subjects slogfeed.obs.<shard>.<feed ID> (slogfeed.obs.<feed ID> without shards)
	DefsBucket  = "slogfeed_defs"  // feed.<id>, seq.feed
	IndexBucket = "slogfeed_index" // url.<hash>, slug.<kind>.<hash> → feed ID
	// PluginsBucket keeps plugins' records, keyed <plugin>.<key>, both
	// base64url-encoded (plugin keys may hold any byte).
	PluginsBucket = "slogfeed_plugins"
	itemsSubject  = "slogfeed.items."
	obsSubject    = "slogfeed.obs."
)

// Defaults of Options.
const (
	// DefaultDuplicateWindow is how long the items and observations
	// streams remember message IDs: a second copy published within it (a
	// retried publish, the overlap poll at a takeover, both within
	// seconds) is dropped by JetStream. An item offered again later is
	// caught by the owning node's item index instead. Each remembered ID
	// costs every server about 100 B of heap, so the window is what most
	// of a busy server's memory grows with: 2 minutes (JetStream's own
	// default) holds a third of what 10 minutes does.
	DefaultDuplicateWindow = 2 * time.Minute
	// DefaultMaxItemsPerFeed is the stream-wide cap on any feed's items
	// (MaxMsgsPerSubject); a feed's own Retention.MaxItems is applied
	// below it.
	DefaultMaxItemsPerFeed = 100_000
)

// ErrStale is returned when a compare-and-set write kept losing to
// concurrent writers (another node wrote the same record each time).
var ErrStale = errors.New("jetstream store: record changed concurrently")

// maxRetries bounds the compare-and-set retry loops.
const maxRetries = 16

// Options configure a Store.
type Options struct {
	// Replicas of the streams and buckets the store creates; 0 means 3 on
	// a JetStream cluster (waiting, within Open's context, until the
	// cluster can place them) and 1 on a single server.
	Replicas int
	// DuplicateWindow; zero means DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// MaxItemsPerFeed; zero means DefaultMaxItemsPerFeed.
	MaxItemsPerFeed int64
	// MaxObservations kept per feed; zero means
	// storage.DefaultMaxObservations.
	MaxObservations int64
	// Now stamps Created, Updated and Fetched; nil means time.Now.
	Now func() time.Time
	// Metrics, when set, records publish latencies and KV writes.
	Metrics *Metrics
	// KnownFeeds bounds how many feeds' item IDs are kept in memory;
	// zero means DefaultKnownFeeds.
	KnownFeeds int
	// Shards is the cluster's shard count (storage/cluster.ShardOf):
	// each feed's observations are published on a subject of its shard,
	// slogfeed.obs.<shard>.<id>, so that a node taking shards over reads
	// theirs only. Zero publishes on slogfeed.obs.<id> (one node). Set it
	// here or with SetShards before the first poll is stored; either
	// layout is read.
	Shards int
	// GroupWindow is how long the first fetch of a group waits for
	// others before their observations and records are sent together;
	// zero means DefaultGroupWindow, negative sends each fetch alone.
	GroupWindow time.Duration
	// OwnedFeeds bounds how many owned feeds' records and item indexes
	// are kept from the Store's own writes (SetOwner); zero means
	// DefaultOwnedFeeds.
	OwnedFeeds int
	// OwnedItems bounds how many item IDs the item indexes of owned
	// feeds kept from the Store's own writes hold in all (about 95 bytes
	// each); zero means DefaultOwnedItems. Both bounds apply: an owned
	// feed beyond either is polled as one the node does not own.
	OwnedItems int
	// PipeAckWait is how long a pipe's fetched inputs stay with their node;
	// zero means DefaultPipeAckWait.
	PipeAckWait time.Duration
}

// Store keeps feeds, their items and their poll observations in
// JetStream (see docs/cluster.md): feed definitions with their policy
// state and counters, items with de-duplication and retention by publish
// time, observations, pipes and plugin records. Backend presents it as a
// storage.Backend.
//
// Every method is bounded by its context; a write is acknowledged once
// JetStream has stored it on a majority of the replicas.
type Store struct {
	js      jetstream.JetStream
	items   jetstream.Stream
	obs     jetstream.Stream
	defs    jetstream.KeyValue
	index   jetstream.KeyValue
	plugins jetstream.KeyValue
	opt     Options
	maxData int
	known   *known
	recent  recentReads
	learner learners
	ids     idSequences
	shards  atomic.Int64
	group   *group // nil: each fetch alone
	red     atomic.Pointer[reducerBox]
	bodies  atomic.Uint64  // item messages read whole by queries (readItems, readRange)
	readers atomic.Uint64  // consumers created to read items (itemsFrom)
	dropped droppedRecords // the records RecordFetch calls expect (dropped.go)

	ownMu  sync.Mutex // serialises SetOwner
	owner  atomic.Pointer[ownerBox]
	ownGen atomic.Uint64 // bumped by SetOwner and by SetShards
	ownSub *nats.Subscription
	own    ownRecords

	digestMu sync.Mutex // opens digestKV on first use
	digestKV jetstream.KeyValue

	compressGate atomic.Pointer[func() bool] // SetRecordCompression
}

// MaxStreamConsumers is the consumer limit of the items and observations
// streams. Each saved pipe keeps a durable consumer on the items stream,
// and reads take short-lived ones; a stream that states no limit gets the
// server's default_max_consumers (1,000 on nats-server), which would cap
// a cluster at about a thousand pipes.
const MaxStreamConsumers = 1_000_000

// Open opens the store's streams and buckets on js, creating them when
// they do not exist.
func Open(ctx context.Context, js jetstream.JetStream, opt Options) (*Store, error) {
	if opt.DuplicateWindow == 0 {
		opt.DuplicateWindow = DefaultDuplicateWindow
	}
	if opt.MaxItemsPerFeed == 0 {
		opt.MaxItemsPerFeed = DefaultMaxItemsPerFeed
	}
	if opt.MaxObservations == 0 {
		opt.MaxObservations = storage.DefaultMaxObservations
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.PipeAckWait == 0 {
		opt.PipeAckWait = DefaultPipeAckWait
	}
	if opt.KnownFeeds == 0 {
		opt.KnownFeeds = DefaultKnownFeeds
	}
	if opt.OwnedFeeds == 0 {
		opt.OwnedFeeds = DefaultOwnedFeeds
	}
	if opt.OwnedItems == 0 {
		opt.OwnedItems = DefaultOwnedItems
	}
	if opt.OwnedFeeds < 0 || opt.OwnedItems < 0 || opt.KnownFeeds < 0 || opt.PipeAckWait < 0 || opt.DuplicateWindow < 0 || opt.MaxItemsPerFeed < 0 || opt.MaxObservations < 0 || opt.Replicas < 0 || opt.Replicas > 5 {
		return nil, fmt.Errorf("jetstream store: %w: options %+v", storage.ErrInvalid, opt)
	}
	s := &Store{js: js, opt: opt, maxData: int(js.Conn().MaxPayload()) - 4096, known: newKnown(opt.KnownFeeds, opt.OwnedFeeds, opt.OwnedItems)}
	s.own.max = opt.OwnedFeeds
	s.SetShards(opt.Shards)
	switch {
	case opt.GroupWindow == 0:
		s.group = newGroup(js, DefaultGroupWindow)
	case opt.GroupWindow > 0:
		s.group = newGroup(js, opt.GroupWindow)
	}
	var err error
	if s.items, err = Stream(ctx, js, jetstream.StreamConfig{
		Name:              ItemsStream,
		Description:       "slogfeed items, one subject per feed",
		Subjects:          []string{itemsSubject + "*"},
		Storage:           jetstream.FileStorage,
		Replicas:          opt.Replicas,
		Duplicates:        opt.DuplicateWindow,
		MaxMsgsPerSubject: opt.MaxItemsPerFeed,
		MaxConsumers:      MaxStreamConsumers,
		AllowMsgTTL:       true,
		AllowDirect:       true,
	}); err != nil {
		return nil, fmt.Errorf("jetstream store: %w", err)
	}
	if s.obs, err = Stream(ctx, js, jetstream.StreamConfig{
		Name:              ObsStream,
		Description:       "slogfeed poll observations, one subject per feed",
		Subjects:          []string{obsSubject + "*", obsSubject + "*.*"},
		Storage:           jetstream.FileStorage,
		Replicas:          opt.Replicas,
		Duplicates:        opt.DuplicateWindow,
		MaxMsgsPerSubject: opt.MaxObservations,
		MaxConsumers:      MaxStreamConsumers,
		AllowDirect:       true,
	}); err != nil {
		return nil, fmt.Errorf("jetstream store: %w", err)
	}
	if s.defs, err = KeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: DefsBucket, Description: "slogfeed feed definitions, policy state and counters",
		History: 1, Storage: jetstream.FileStorage, Replicas: opt.Replicas,
	}); err != nil {
		return nil, fmt.Errorf("jetstream store: %w", err)
	}
	if s.index, err = KeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: IndexBucket, Description: "slogfeed unique feed URLs and slugs",
		History: 1, Storage: jetstream.FileStorage, Replicas: opt.Replicas,
	}); err != nil {
		return nil, fmt.Errorf("jetstream store: %w", err)
	}
	if s.plugins, err = KeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: PluginsBucket, Description: "slogfeed plugin records",
		History: 1, Storage: jetstream.FileStorage, Replicas: opt.Replicas,
	}); err != nil {
		return nil, fmt.Errorf("jetstream store: %w", err)
	}
	return s, nil
}

func itemSubject(feedID uint64) string { return itemsSubject + strconv.FormatUint(feedID, 10) }

// legacyObsSubject is feed feedID's observation subject without a shard.
func legacyObsSubject(feedID uint64) string { return obsSubject + strconv.FormatUint(feedID, 10) }

// obsSubjectOf is the subject feedID's observations are published on.
func (s *Store) obsSubjectOf(feedID uint64) string {
	n := int(s.shards.Load())
	if n <= 0 {
		return legacyObsSubject(feedID)
	}
	return shardObsSubject(cluster.ShardOf(cluster.KindFeed, feedID, n)) + strconv.FormatUint(feedID, 10)
}

// shardObsSubject is the prefix of the observation subjects of shard.
func shardObsSubject(shard int) string { return obsSubject + strconv.Itoa(shard) + "." }

// obsSubjectsOf are the subjects feedID's observations may be on: its
// shard's (once Shards is set) and the one without a shard.
func (s *Store) obsSubjectsOf(feedID uint64) []string {
	if s.shards.Load() <= 0 {
		return []string{legacyObsSubject(feedID)}
	}
	return []string{s.obsSubjectOf(feedID), legacyObsSubject(feedID)}
}

// SetShards sets Options.Shards, for a node that learns the cluster's
// shard count after it opened the store. n ≤ 0 is ignored.
func (s *Store) SetShards(n int) {
	if n > 0 && s.shards.Swap(int64(n)) != int64(n) {
		s.ownGen.Add(1) // copies of owned feeds' state are dropped
		s.own.clear()
	}
}

// IsConflict reports whether err is a compare-and-set that lost: a KV
// Create of an existing key, an Update or Delete at a revision that is no
// longer the last, a publish whose expected last sequence did not match.
func IsConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
