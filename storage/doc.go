// Package storage keeps everything slogfeed knows in one bbolt data file:
// feeds (subscriptions, sensors and pipe outputs, with their scheduling
// state), their items, the poll observations their policies are rebuilt
// from after a restart, and the pipes (transform chains) with the state
// their runner keeps between runs.
//
// The contracts callers rely on are interfaces (backend.go): FeedStore,
// ItemStore, VersionStore, PollStore, PipeStore, PluginStore, their
// read-only parts, and Backend, which embeds them all. The rest of
// slogfeed takes the narrowest of them, never *Store, so that the
// JetStream backend (storage/jetstream) can stand in for the bbolt Store;
// storage/storagetest checks both against the same contract suite.
//
// A Store is safe for concurrent use. Every method is one bbolt
// transaction: a write that returned without error is on disk (unless
// Options.NoSync), and a failed one changed nothing (AddItems documents its
// partial-success rules for refused items). Input is checked before
// anything is written, against the Max* limits, and refused with
// ErrInvalid; see errors.go for the errors callers branch on.
//
// The hot writes (AddItems, RecordFetch, RecordPoll, AddObservation) are
// group-committed (commit.go): writes that arrive while a commit is under
// way share the next transaction and its fsync, up to MaxBatch of them;
// under concurrent load a group lingers up to Options.CommitLinger while
// writes keep arriving. A lone write commits at once, each write stays
// atomic on its own (one that fails is rolled back alone), and none
// returns before its group is on disk. RecordFetch stores a poll's items,
// observation and feed update in one of them, so a crash keeps all or
// none. Items are validated and encoded before the transaction, and a
// poll's feed record and observation are worked out before it from the
// feed record the poll read with Feed (feedmemo.go, prepared.go), used
// only while that record's bytes are unchanged, so that the single
// writer does little besides writing. HasItems (not
// part of Backend) answers which of many item IDs a feed holds in one
// read.
//
// # Layout
//
// All integers are 8-byte big-endian, so keys sort numerically.
//
//	meta                      schema → version; item_seq → last item Seq
//	feeds                     feed ID → Feed JSON (IDs: the bucket's sequence)
//	                          feed ID | 't' → observation tail: the feed's newest
//	                            observations, uvarint length | Observation each
//	                          feed ID | 'd' → items retention dropped (remote
//	                            feeds, dropped.go): version, 8-byte ID hashes
//	                          feed ID | 's' → policy state (remote feeds): version,
//	                            next and last (Unix ns), the policy's own bytes
//	feed_url                  URL → feed ID            (remote feeds)
//	feed_slug                 "<kind>/<slug>" → feed ID (sensor and pipe feeds)
//	items                     Seq → Item, binary (itemenc.go; all feeds')
//	item_count                feed ID → number of items (every feed has one)
//	item_seq                  feed ID | Seq → nothing (the feed's items by arrival)
//	item_ids                  feed ID | item ID → Seq
//	item_pub                  feed ID | time(12 bytes) | Seq → nothing
//	obs                       feed ID | sequence → Observation (older
//	                            than the tail)
//	pipes                     pipe ID → Pipe JSON (IDs: the bucket's sequence)
//	pipe_slug                 slug → pipe ID
//	plugin_data/
//	  <plugin>/               key → value, the plugin's own records (plugindata.go)
//
// A feed's items and observations have no bucket of their own
// (feeddata.go), so an empty feed costs its count entry alone and small
// feeds share pages. Item records are keyed by Seq alone: new items of
// all feeds are appended at the end of one bucket, which fills its pages,
// and a poll writes no page of older items. The other buckets are keyed
// by feed ID first, so that a feed's entries sit together.
//
// Seq is store-wide: items of all feeds share one sequence, so a consumer
// of several feeds can remember one number per feed and ask for newer items
// (ItemQuery.AfterSeq). The published index orders items by publish time,
// or by fetch time for items without one (the zero time would otherwise
// sort them before everything); its time is the Unix second with the sign
// bit flipped, then the nanosecond, so times before 1970 sort correctly.
//
// # Pipes
//
// A pipe's record holds its definition (JSON that storage does not
// interpret), its runner's state and its run counters. Its output is an
// ordinary feed of KindPipe with the pipe's slug (feed_slug
// "pipe/<slug>"), created, renamed and deleted together with the pipe in
// one transaction (CreatePipe, UpdatePipe, DeletePipe). CommitPipeRun
// adds a run's output items to that feed (exactly as AddItems would),
// stores the runner's new state and the run's outcome in one
// transaction: output and input cursors commit together, so a crash never
// loses output nor makes a rerun duplicate it. Check verifies that every
// pipe, its slug entry and its output feed agree.
//
// # Schema migrations
//
// meta/schema holds the schema version. The migrations table in migrate.go
// lists every change of layout in order; Open applies those above the
// stored version, each in its own transaction together with the new
// version number, so an interrupted upgrade resumes where it stopped. A
// file written by a newer slogfeed is refused with ErrSchemaTooNew and not
// touched. Schema 1 is the initial layout; schema 2 added pipes and
// pipe_slug; schema 3 added plugin_data; schema 4 added observation tails
// (obstail.go: nothing to convert, but a schema-3 slogfeed would read a
// tail as a broken feed record); schema 5 added policy states
// (policystate.go: nothing to convert, but a schema-4 slogfeed would
// leave them behind its observations); schema 6 moved every feed's
// items and observations from a bucket of its own (feed_data/<feed ID>/
// with the count and buckets ids, items, published and obs) to the shared
// buckets, a batch of feeds per transaction (meta/migrating marks a move
// under way, which the next Open resumes); schema 7 rewrote every
// observation, JSON until then, in a binary form (obsenc.go), a batch of
// feeds per transaction (meta/migrate_from: the next feed to convert);
// schema 8 rewrote every item record, JSON until then, in a binary form
// (itemenc.go) that leaves its Seq to the key, a batch of records per
// transaction: the old items bucket is set aside under items_json and
// its records move, converted and in order of Seq, to a new one, so that
// its pages are as full as appends leave them; schema 9 added the sets
// of items retention dropped (dropped.go: nothing to convert, but a
// schema-8 slogfeed would report them as broken observation tails).
// testdata/schema1.db is a file of schema 1, testdata/schema2.db one of
// schema 2 (with a pipe) and testdata/schema5.db one of schema 5, which
// every later version must still open (brought to schema 6 first, it is
// also the file of JSON observations schema 7 converts, and to schema 7
// the file of JSON items schema 8 converts).
//
// # Retention
//
// A feed's Retention bounds its items by count (MaxItems) and age (MaxAge,
// relative to Options.Now). A feed created without one gets
// Options.DefaultRetention (none unless set; DefaultRetention, its newest
// 200 items, is the bound for a node of many feeds); with it and at most
// Options.MaxObservations observations a feed (500 by default), every
// feed's share of the data file is bounded. Both look at the published index: the items
// over the bound are always its oldest entries. Without a Reducer they are
// deleted; with one (SetReducer, the transform package's PACK policies)
// the Reducer chooses which to keep and adds digest items summarising the
// rest. Retention runs in the transaction of every AddItems and on demand
// (ApplyRetention). AddItems does not store an item retention would drop
// at once, so an item that fell out of a full feed's window does not come
// back as new on the next fetch.
//
// # Locking
//
// bbolt locks the data file (flock) for as long as it is open: a second
// slogfeed process, or a second Open in the same process, waits
// Options.LockTimeout and then fails with ErrLocked naming the file.
package storage
