// Package jetstream is slogfeed's NATS JetStream side: the embedded
// JetStream server that `slogfeed serve --nats-embed` runs inside the
// process (StartEmbedded), and the storage backend that keeps slogfeed's
// data in JetStream (Store, with Backend presenting it behind the storage
// interfaces). docs/cluster.md is the operator's guide; the design of the
// backend is below.
//
// # Embedded server
//
// StartEmbedded runs a nats-server (github.com/nats-io/nats-server/v2 as a
// library) with JetStream enabled, its data under EmbedOptions.StoreDir,
// and returns once it accepts clients and JetStream is ready: for a
// clustered server (ClusterListen set), once the JetStream meta group has
// a leader this server follows. Three processes started with each other's
// cluster addresses in Routes form a replicated cluster. The server logs
// through log/slog, never installs signal handlers, and Shutdown stops it
// and waits for it to finish.
//
// The sub-package jstest starts such servers in-process for tests: a
// single server or a 3-server cluster on loopback ports, with stop and
// restart of one server.
//
// # Store
//
//	stream SLOGFEED_ITEMS   slogfeed.items.<feed ID>   one subject per feed; Nats-Msg-Id
//	                                                   <feed ID>/<hash of item ID>; MaxAge as
//	                                                   the message TTL; MaxItems by purge-keep;
//	                                                   MaxMsgsPerSubject the hard cap
//	stream SLOGFEED_OBS     slogfeed.obs.<shard>.<id>  poll observations, the newest
//	                                                   MaxObservations per feed (on
//	                                                   slogfeed.obs.<id> without shards)
//	KV slogfeed_defs        feed.<id>                  the feed record (definition, the
//	                                                   policy state, validators, counters,
//	                                                   the items retention dropped)
//	                        seq.feed                   the highest feed ID reserved (ids.go:
//	                                                   nodes reserve IDs in blocks)
//	                        pipe.<id>, seq.pipe        pipe records (definition, runner
//	                                                   state, counters); the highest pipe
//	                                                   ID reserved
//	KV slogfeed_index       url.<hash>, slug.<hash>    unique URLs and slugs → feed ID
//	                        pipe.<hash>                unique pipe slugs → pipe ID
//	KV slogfeed_plugins     <b64 plugin>.<b64 key>     plugin records
//	consumer slogfeed_pipe_<id> on SLOGFEED_ITEMS     a pipe's inputs (pipes.go)
//
// Streams and buckets get 3 replicas when the cluster can place them,
// else 1 (KeyValue, Stream). Every record write is a compare-and-set:
// UpdateFeed and RecordPoll re-read and re-apply on a conflict, so two
// nodes writing one feed lose no update. AddItems stores an item of a feed
// once whichever node publishes it: two nodes publishing at the same
// moment are de-duplicated by the stream's message IDs (window 10 minutes
// by default), and beyond the window each Store refuses IDs the feed
// already has (known.go), read from the subject's message headers.
// The items of a feed are deleted by retention one message at a time
// (ApplyRetention).
//
// Options.Metrics records JetStream publish latency and KV writes by bucket
// and result (see Metrics).
//
// # Backend
//
// Backend wraps a Store with the bbolt storage.Store's signatures (each
// call bounded by a timeout), so it stands behind the storage interfaces
// (storage.FeedStore, ItemStore, VersionStore, PollStore, PipeReader,
// PluginStore) and runs the contract suite storage/storagetest. Multi-key
// bbolt transactions (RecordFetch, CreatePipe, CommitPipeRun) are ordered
// writes whose last step is a compare-and-set; each method documents what
// a crash between the steps leaves.
//
// Backend is a storage.Backend. Retention is by publish time, as in the
// bbolt store, with the Reducer of SetReducer (PACK) given the items it
// removes (retention.go); the order comes from each Store's index of a
// feed's items (known.go), rebuilt from the item messages' headers
// (ItemKeyHeader, ItemTimeHeader), so only the items a Reducer is given
// are read.
//
// # Policy states and takeovers
//
// A remote feed's record carries the state of its scheduling policy as of
// the newest observation the record counts (policystate.go): each poll's
// record write folds the poll's observation into it, through the Learner
// the polling service installs (SetLearner), in the compare-and-set that
// writes the poll's counters. A node taking shards over reads the records
// of their feeds with TakeFeedStates: batched direct gets of the keys'
// last values (1,000 keys a request, four at once), so the read grows
// with the feeds taken, not with the bucket, and no observation is read
// for a record that has a state. Records without one (stored before
// states were kept, or by a node without a Learner) are replayed from
// their observations, read on their shards' subjects only, and the state
// reached is written back at the revision read.
//
// Each owner also writes its shards' schedule digests and state snapshots
// to the digest bucket (DigestBucket: shard.<shard>.<part> and
// state.<shard>.<part>, parts under the message size), and a Backend
// answers FeedsWrittenSince from the writes its feed-ID watch saw in the
// last ten minutes: a node taking shards over gives a feed not written
// since its shard's snapshot its state from there, and reads only the
// records of the others (aggregator's snapshot.go).
//
// FeedStates loads the records and every observation of many feeds in
// two ordered-consumer passes. Reads delete their ephemeral consumers
// once done, and polls catch up with a feed's new items by direct gets,
// so that no consumers pile up against the stream's limit (1,000 by
// default).
//
// Not yet here: item updates (a changed item with a known ID is skipped,
// not merged); Items, Item and snapshots read the feed's whole subject
// (bounded by MaxItemsPerFeed) instead of an index.
package jetstream
