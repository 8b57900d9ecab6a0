// Package storage keeps everything slogfeed knows in one bbolt data file:
// feeds (subscriptions, sensors and pipe outputs, with their scheduling
// state), their items and the poll observations their policies are
// rebuilt from after a restart.
//
// A Store is safe for concurrent use. Every method is one bbolt
// transaction: a write that returned without error is on disk (unless
// Options.NoSync), and a failed one changed nothing (AddItems documents its
// partial-success rules for refused items). Input is checked before
// anything is written, against the Max* limits, and refused with
// ErrInvalid; see errors.go for the errors callers branch on.
//
// # Layout
//
// All integers are 8-byte big-endian, so keys sort numerically.
//
//	meta                      schema → version; item_seq → last item Seq
//	feeds                     feed ID → Feed JSON (IDs: the bucket's sequence)
//	feed_url                  URL → feed ID            (remote feeds)
//	feed_slug                 "<kind>/<slug>" → feed ID (sensor and pipe feeds)
//	feed_data/<feed ID>/      one bucket per feed:
//	    count                 number of items
//	    ids/                  item ID → Seq
//	    items/                Seq → Item JSON
//	    published/            time(12 bytes) | Seq → item ID
//	    obs/                  sequence → Observation JSON
//
// Seq is store-wide: items of all feeds share one sequence, so a consumer
// of several feeds can remember one number per feed and ask for newer items
// (ItemQuery.AfterSeq). The published index orders items by publish time,
// or by fetch time for items without one (the zero time would otherwise
// sort them before everything); its time is the Unix second with the sign
// bit flipped, then the nanosecond, so times before 1970 sort correctly.
//
// # Schema migrations
//
// meta/schema holds the schema version. The migrations table in migrate.go
// lists every change of layout in order; Open applies those above the
// stored version, each in its own transaction together with the new
// version number, so an interrupted upgrade resumes where it stopped. A
// file written by a newer slogfeed is refused with ErrSchemaTooNew and not
// touched. testdata/schema1.db is a file of schema 1 that every later
// version must still open.
//
// # Retention
//
// A feed's Retention bounds its items by count (MaxItems) and age (MaxAge,
// relative to Options.Now). Both look at the published index: the items
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
