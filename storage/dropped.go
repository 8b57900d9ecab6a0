package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Items retention dropped. A remote feed's document may list more items
// than the feed's Retention keeps. Items with a date of their own are
// judged by it and stay out (see AddItems), but an item without one is
// dated when it is fetched, so it looks new to every process that has
// not seen the document before: after a restart, or on a cluster after
// another node took the feed over, it would be stored again as a new
// item. So the store remembers, per remote feed, the hashes of the IDs of
// the newest items retention dropped (DroppedIDs), as many as the feed's
// documents list (Feed.Listed, at most MaxDroppedIDs), and refuses a new
// item without a date of its own (Item.IsUndated) whose ID it remembers.
// An item with a date of its own is judged by that date (admission), as
// without the set: an item updated in place with fresh dates, or a guid
// reissued for a newer item, is stored again. A feed that never dropped
// an item has no set; a sensor or pipe feed, which no document lists,
// never keeps one.
//
// The set holds hashes of IDs only, not of contents: an undated item
// under a remembered ID is refused even when its content changed. An
// undated item carries no evidence that it is newer than the one
// dropped, and a publisher edits listed items in place (a corrected
// title, a summary) as often as it reissues an ID; remembering contents
// would cost a hash per item besides. The price: an undated item reissued
// under an ID the set holds (a guid-less reading whose title and link
// repeat one dropped, "Level: 3.2 m") is not stored until later drops
// push the ID out of the set or the feed's retention is widened.
//
// The bbolt store keeps the set in the feeds bucket under the record's
// key followed by droppedSuffix, beside the record a poll rewrites
// anyway: a version byte, how many the set keeps (uvarint), then the
// 8-byte hashes, oldest drop first.

// MaxDroppedIDs bounds the item IDs a feed remembers of those retention
// dropped (8 bytes each): four times the items the feed parser keeps of
// one document by default.
const MaxDroppedIDs = 4096

// droppedSuffix ends the key of a feed's dropped set: the feed's 8-byte
// ID, then 'd'.
const droppedSuffix = 'd'

// droppedVersion is the first byte of an encoded DroppedIDs.
const droppedVersion = 1

// DroppedIDs are the hashes (DroppedHash) of the IDs of the items
// retention dropped from a feed, oldest drop first, each once, and how
// many of them the set keeps.
type DroppedIDs struct {
	Hashes []uint64
	// Keep is the most drops the set keeps: the most items the feed's
	// documents listed (DroppedKeep) since the set began. It never goes
	// down: a short document (a publisher's glitch, a truncated reply) or
	// a poll that does not know its document's length does not make the
	// feed forget drops a longer document still lists. Only a widened
	// retention, which clears the set (RetentionWidened), starts over.
	Keep int
}

// DroppedHash is the hash a feed's DroppedIDs hold of an item ID: the
// first 8 bytes of its SHA-256, big-endian (the first bytes of the item's
// message ID on JetStream).
func DroppedHash(id string) uint64 {
	h := sha256.Sum256([]byte(id))
	return binary.BigEndian.Uint64(h[:8])
}

// DroppedKeep is how many dropped IDs feed f remembers, given that the
// call dropping them was given n items (a document's, read whole after a
// restart): as many as its documents list (the larger of Listed and n),
// and 0 (new drops are not remembered) where no dropped item can come
// back: for a feed no document lists, and for one whose retention has no
// MaxAge and keeps at least as many items as its documents list. Such a
// feed's documents list only items newer than every item it dropped, as
// far as their order goes (a document that keeps an old item listed
// while MaxItems newer ones arrive is the exception it does not cover).
func DroppedKeep(f *Feed, n int) int {
	if f.Kind != KindRemote {
		return 0
	}
	listed := min(max(f.Listed, n), MaxDroppedIDs)
	if r := f.Retention; r.MaxAge <= 0 && (r.MaxItems <= 0 || listed <= r.MaxItems) {
		return 0
	}
	return listed
}

// Add returns d with hashes appended as the newest drops (a hash already
// in d moves to the end), keeping the newest max(keep, d.Keep) of them
// (at most MaxDroppedIDs). A set that keeps none (keep ≤ 0 and no set
// yet) stays empty. It takes time linear in the hashes of d and those
// added.
func (d DroppedIDs) Add(hashes []uint64, keep int) DroppedIDs {
	keep = min(max(keep, d.Keep), MaxDroppedIDs)
	if len(hashes) == 0 || keep <= 0 {
		return d
	}
	// The last place of each hash added wins.
	last := make(map[uint64]int, len(hashes))
	for i, h := range hashes {
		last[h] = i
	}
	out := make([]uint64, 0, len(d.Hashes)+len(last))
	for _, h := range d.Hashes {
		if _, again := last[h]; !again {
			out = append(out, h)
		}
	}
	for i, h := range hashes {
		if last[h] == i {
			out = append(out, h)
		}
	}
	if len(out) > keep {
		out = slices.Clone(out[len(out)-keep:])
	}
	return DroppedIDs{Hashes: out, Keep: keep}
}

// Lookup returns a function reporting whether an item ID is in d.
func (d DroppedIDs) Lookup() func(id string) bool {
	if len(d.Hashes) == 0 {
		return func(string) bool { return false }
	}
	sorted := slices.Clone(d.Hashes)
	slices.Sort(sorted)
	return func(id string) bool {
		_, ok := slices.BinarySearch(sorted, DroppedHash(id))
		return ok
	}
}

// EncodeDroppedIDs encodes d: a version byte, Keep as a uvarint, then the
// hashes, 8 bytes each, big-endian. A d without hashes encodes as nil.
func EncodeDroppedIDs(d DroppedIDs) []byte {
	if len(d.Hashes) == 0 {
		return nil
	}
	b := make([]byte, 1, 1+binary.MaxVarintLen64+8*len(d.Hashes))
	b[0] = droppedVersion
	b = binary.AppendUvarint(b, uint64(d.Keep))
	for _, h := range d.Hashes {
		b = binary.BigEndian.AppendUint64(b, h)
	}
	return b
}

// DecodeDroppedIDs decodes what EncodeDroppedIDs wrote (nil or empty: no
// set). A set of another version, framing or size is refused with
// ErrCorrupt.
func DecodeDroppedIDs(b []byte) (DroppedIDs, error) {
	if len(b) == 0 {
		return DroppedIDs{}, nil
	}
	keep, k := uint64(0), 0
	if b[0] == droppedVersion {
		keep, k = binary.Uvarint(b[1:])
	}
	rest := len(b) - 1 - k
	if k <= 0 || keep > MaxDroppedIDs || rest%8 != 0 || rest/8 > int(keep) || rest == 0 {
		return DroppedIDs{}, fmt.Errorf("%w: dropped item IDs of %d bytes, version %d", ErrCorrupt, len(b), b[0])
	}
	d := DroppedIDs{Hashes: make([]uint64, rest/8), Keep: int(keep)}
	for i := range d.Hashes {
		d.Hashes[i] = binary.BigEndian.Uint64(b[1+k+8*i:])
	}
	return d, nil
}

// RetentionWidened reports whether retention to keeps an item that from
// would drop: one of its limits is higher, or gone. The items a feed
// dropped are then forgotten, and a document listing them brings them
// back (those without a date of their own as new ones).
func RetentionWidened(from, to Retention) bool {
	wider := func(a, b int64) bool { return a > 0 && (b == 0 || b > a) }
	return wider(int64(from.MaxItems), int64(to.MaxItems)) || wider(int64(from.MaxAge), int64(to.MaxAge))
}

// droppedKey is the key of feed id's dropped set in the feeds bucket.
func droppedKey(id uint64) []byte {
	k := make([]byte, 9)
	binary.BigEndian.PutUint64(k, id)
	k[8] = droppedSuffix
	return k
}

// isDroppedKey reports whether k, a key of the feeds bucket, is a dropped
// set's.
func isDroppedKey(k []byte) bool { return len(k) == 9 && k[8] == droppedSuffix }

// droppedLookup returns the lookup of feed f's dropped set in tx, read
// when first asked.
func droppedLookup(tx *bolt.Tx, f *Feed) func(id string) bool {
	if f.Kind != KindRemote {
		return func(string) bool { return false }
	}
	var has func(string) bool
	return func(id string) bool {
		if has == nil {
			has = func(string) bool { return false }
			if feeds := tx.Bucket(bucketFeeds); feeds != nil {
				// A set that cannot be read is treated as none: the
				// items it held may come back, nothing new is refused.
				if d, err := DecodeDroppedIDs(feeds.Get(droppedKey(f.ID))); err == nil {
					has = d.Lookup()
				}
			}
		}
		return has(id)
	}
}

// rememberDropped adds the IDs of items retention removed from feed f to
// its dropped set in tx, keeping DroppedKeep(f, n) of them or as many as
// the set keeps already (DroppedIDs.Keep); a feed without a set gets one
// only when DroppedKeep says its drops can come back.
func rememberDropped(tx *bolt.Tx, f *Feed, ids []string, n int) error {
	if len(ids) == 0 {
		return nil
	}
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return err
	}
	k := droppedKey(f.ID)
	d, err := DecodeDroppedIDs(feeds.Get(k))
	if err != nil {
		d = DroppedIDs{} // written again whole
	}
	keep := DroppedKeep(f, n)
	if keep == 0 && len(d.Hashes) == 0 {
		return nil // no drop of this feed can come back
	}
	hashes := make([]uint64, len(ids))
	for i, id := range ids {
		hashes[i] = DroppedHash(id)
	}
	return feeds.Put(k, EncodeDroppedIDs(d.Add(hashes, keep)))
}
