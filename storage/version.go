package storage

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"

	bolt "go.etcd.io/bbolt"
)

// Version is a cheap change marker of a feed and of its newest items, for
// caches of what is rendered from them (the republished feeds of package
// web). Two Versions of the same feed taken with the same depth are equal
// only when the feed's stored record and its newest depth items (by
// arrival) are the same:
//
//   - LastSeq and Count change when an item is added or removed anywhere
//     in the feed (retention deletes items without adding any, which
//     changes Count; a digest replacing an item gets a new Seq).
//   - Sum changes when the feed record changes (a rename, any other field)
//     or when one of the newest depth items is added, removed or updated
//     in place (AddItems rewrites a known item's title, summary or reading
//     under its old Seq, which neither LastSeq nor Count would show).
//
// Sum is a 64-bit keyed hash with a seed chosen when the process starts:
// Versions compare within one process only, and a collision needs luck,
// not crafting. The zero Version is never returned for an existing feed.
type Version struct {
	FeedID  uint64 `json:"feed_id"`
	LastSeq uint64 `json:"last_seq"` // largest Seq among the feed's items, 0 when it has none
	Count   uint64 `json:"count"`    // number of items the feed holds
	Sum     uint64 `json:"sum"`      // hash of the feed record and the newest depth item records
}

// versionSeed keys Version.Sum for the life of the process.
var versionSeed = maphash.MakeSeed()

// FeedVersion returns the Version of feed feedID whose Sum covers its
// newest depth items by arrival (none when depth ≤ 0), or ErrFeedNotFound.
// It is one short read transaction that decodes nothing: a lookup of the
// feed record, the item count, and depth steps of a cursor from the last
// item back.
func (s *Store) FeedVersion(feedID uint64, depth int) (Version, error) {
	var v Version
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		v, err = feedVersion(tx, feedID, depth)
		return err
	})
	if err != nil {
		return Version{}, fmt.Errorf("storage: version of feed %d: %w", feedID, err)
	}
	return v, nil
}

// FeedVersionBySlug is FeedVersion for the sensor or pipe feed of this kind
// and slug, resolved in the same transaction; Version.FeedID says which
// feed it is. It fails with ErrFeedNotFound when there is none.
func (s *Store) FeedVersionBySlug(kind Kind, slug string, depth int) (Version, error) {
	var v Version
	err := s.db.View(func(tx *bolt.Tx) error {
		id, err := feedIDBySlug(tx, kind, slug)
		if err != nil {
			return err
		}
		v, err = feedVersion(tx, id, depth)
		return err
	})
	if err != nil {
		return Version{}, fmt.Errorf("storage: version of %s feed %q: %w", kind, shortID(slug), err)
	}
	return v, nil
}

// FeedSnapshot returns, from one read transaction, the sensor or pipe feed
// of this kind and slug, its newest n items by arrival (newest first, as
// Items with ByArrival and Limit n; all of them when n ≤ 0) and the
// Version of both with depth n. What is rendered from the feed and items
// can therefore be cached under the Version and compared with a later
// FeedVersionBySlug of the same depth, without a change slipping in
// between the two reads. It fails with ErrFeedNotFound when there is no
// such feed.
func (s *Store) FeedSnapshot(kind Kind, slug string, n int) (Feed, []Item, Version, error) {
	var (
		f     Feed
		items []Item
		v     Version
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		items = nil
		id, err := feedIDBySlug(tx, kind, slug)
		if err != nil {
			return err
		}
		if f, err = getFeed(tx, id); err != nil {
			return err
		}
		fb, err := openFeedBuckets(tx, id)
		if err != nil {
			return err
		}
		if fb == nil {
			return corruptf("feed %d has no item count", id)
		}
		if n <= 0 {
			n = int(min(fb.count(), 1<<30))
		}
		c := fb.items.Cursor()
		for k, val := c.Last(); k != nil && len(items) < n; k, val = c.Prev() {
			seq, ok := getU64(k)
			if !ok {
				return corruptf("feed %d: bad item key %x", id, k)
			}
			it, err := decodeItem(seq, val)
			if err != nil {
				return err
			}
			items = append(items, it)
		}
		v, err = feedVersion(tx, id, n)
		return err
	})
	if err != nil {
		return Feed{}, nil, Version{}, fmt.Errorf("storage: snapshot of %s feed %q: %w", kind, shortID(slug), err)
	}
	return f, items, v, nil
}

// feedIDBySlug resolves a sensor or pipe feed's slug.
func feedIDBySlug(tx *bolt.Tx, kind Kind, slug string) (uint64, error) {
	b, err := bucket(tx, bucketFeedSlug)
	if err != nil {
		return 0, err
	}
	key := slugKey(kind, slug)
	if slug == "" || len(key) > bolt.MaxKeySize {
		return 0, ErrFeedNotFound
	}
	id, ok := getU64(b.Get(key))
	if !ok {
		return 0, ErrFeedNotFound
	}
	return id, nil
}

// feedVersion computes the Version of feed id inside tx.
func feedVersion(tx *bolt.Tx, id uint64, depth int) (Version, error) {
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return Version{}, err
	}
	rec := feeds.Get(u64(id))
	if rec == nil {
		return Version{}, ErrFeedNotFound
	}
	// Only the three data buckets a version reads are opened (not
	// openFeedBuckets' six): this runs on every request.
	counts, err := dataBucket(tx, bucketItemCount)
	if err != nil {
		return Version{}, err
	}
	cv := counts.Get(u64(id))
	if cv == nil {
		return Version{}, corruptf("feed %d has no item count", id)
	}
	count, _ := getU64(cv)
	all, err := dataBucket(tx, bucketItems)
	if err != nil {
		return Version{}, err
	}
	seqs, err := dataBucket(tx, bucketItemSeqs)
	if err != nil {
		return Version{}, err
	}
	items := itemsView{seqs: newView(seqs, id), all: all}
	v := Version{FeedID: id, Count: count}
	// Sum hashes the list of (key, hash of record) of the feed record and
	// the newest depth items: one-shot maphash.Bytes per record is several
	// times faster than streaming the records through a maphash.Hash.
	var stack [1024]byte // enough for the default depth of 50
	list := binary.BigEndian.AppendUint64(stack[:0], maphash.Bytes(versionSeed, rec))
	c := items.Cursor()
	k, val := c.Last()
	if k != nil {
		seq, ok := getU64(k)
		if !ok {
			return Version{}, corruptf("feed %d: bad item key %x", id, k)
		}
		v.LastSeq = seq
	}
	for i := 0; i < depth && k != nil; i++ {
		list = append(list, k...)
		list = binary.BigEndian.AppendUint64(list, maphash.Bytes(versionSeed, val))
		k, val = c.Prev()
	}
	v.Sum = maphash.Bytes(versionSeed, list)
	return v, nil
}
