package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Observation tails. A poll that stores no item writes its feed record
// and one observation. Kept in the feed's own obs bucket, the observation
// rewrote three pages of that feed alone at every poll (the obs leaf, the
// feed's data bucket root and the feed_data leaf holding its header),
// which no group commit shares with other feeds: two thirds of the pages
// a 304 wrote. So a feed's newest observations are kept beside its
// record instead, in the feeds bucket under the record's key followed by
// tailSuffix, usually on the very leaf the poll rewrites anyway; they are
// moved to the obs bucket together, tailMax (or tailMaxBytes) at a time.
// Reads see the obs bucket followed by the tail.
const (
	// tailSuffix ends a tail's key: the feed's 8-byte ID, then 't'.
	tailSuffix = 't'
	// tailMax is how many observations a tail holds before they are
	// moved to the obs bucket.
	tailMax = 8
	// tailMaxBytes bounds a tail's size; a larger observation goes to the
	// obs bucket at once.
	tailMaxBytes = 2048
)

// tailKey is the key of feed id's observation tail in the feeds bucket.
func tailKey(id uint64) []byte {
	k := make([]byte, 9)
	binary.BigEndian.PutUint64(k, id)
	k[8] = tailSuffix
	return k
}

// isFeedKey reports whether k, a key of the feeds bucket, is a feed's
// record (not its observation tail).
func isFeedKey(k []byte) bool { return len(k) == 8 }

// tailEntries splits an encoded tail into its observations, oldest first.
// The slices alias v. A tail is a sequence of uvarint length, bytes.
func tailEntries(v []byte) ([][]byte, error) {
	var out [][]byte
	for at := 0; at < len(v); {
		n, w := binary.Uvarint(v[at:])
		if w <= 0 || n > uint64(len(v)-at-w) {
			return nil, fmt.Errorf("observation tail: bad length at byte %d of %d", at, len(v))
		}
		out = append(out, v[at+w:at+w+int(n)])
		at += w + int(n)
	}
	return out, nil
}

// feedTail returns feed id's tail entries (oldest first) from the feeds
// bucket b; none when it has no tail.
func feedTail(b *bolt.Bucket, id uint64) ([][]byte, error) {
	v := b.Get(tailKey(id))
	if v == nil {
		return nil, nil
	}
	e, err := tailEntries(v)
	if err != nil {
		return nil, corruptf("feed %d: %v", id, err)
	}
	return e, nil
}

// putObservation appends the encoded observation raw to feed feedID's
// observations: to its tail while the tail has room, otherwise moving the
// tail to the obs bucket first. ErrFeedNotFound when the feed does not
// exist.
func (s *Store) putObservation(tx *bolt.Tx, feedID uint64, raw []byte) error {
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return err
	}
	if feeds.Get(u64(feedID)) == nil {
		return ErrFeedNotFound
	}
	key := tailKey(feedID)
	old := feeds.Get(key)
	entries, err := tailEntries(old)
	if err != nil {
		return corruptf("feed %d: %v", feedID, err)
	}
	room := len(entries) < tailMax && len(old)+binary.MaxVarintLen32+len(raw) <= tailMaxBytes
	if room {
		v := make([]byte, 0, len(old)+binary.MaxVarintLen32+len(raw))
		v = append(v, old...)
		v = binary.AppendUvarint(v, uint64(len(raw)))
		return feeds.Put(key, append(v, raw...))
	}
	// Move the tail (and raw, when it does not fit in a tail of its own)
	// to the obs bucket, in order.
	obs, err := openObsBucket(tx, feedID)
	if err != nil {
		return err
	}
	for _, e := range entries {
		// A copy: e points into the page the tail was read from.
		if err := s.appendObs(obs, feedID, bytes.Clone(e)); err != nil {
			return err
		}
	}
	if binary.MaxVarintLen32+len(raw) > tailMaxBytes {
		if err := s.appendObs(obs, feedID, raw); err != nil {
			return err
		}
		if old != nil {
			return feeds.Delete(key)
		}
		return nil
	}
	v := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen32+len(raw)), uint64(len(raw)))
	return feeds.Put(key, append(v, raw...))
}
