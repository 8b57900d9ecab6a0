package storage

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// preparedFeed is a poll's update of a feed record worked out before its
// transaction, from the feed as the memo holds it: fn applied, the record
// validated and encoded. The group commit runs one writer at a time, so
// whatever a write does inside its transaction every other write waits
// for; a poll's goroutine does this part beside the others instead. The
// transaction uses it only when the stored record is still the one it was
// worked out from (applyPrepared); otherwise it updates the record itself
// as before (updateFeedRawTx), so the result is the same either way.
type preparedFeed struct {
	old []byte // the stored record it was worked out from
	f   Feed   // the feed updated
	raw []byte // f encoded

	// The poll's observation and its encoding, when the update makes one
	// (RecordFetch's).
	obs    Observation
	obsRaw []byte
	// memo is a copy of f for the memo (memoOnCommit), made here rather
	// than on the writer.
	memo Feed
}

// prepareFeed applies fn to a copy of feed id as the memo holds it (p.f,
// which fn changes; fn may also set p's observation) and encodes the
// result; nil when the memo has no entry, fn fails, the
// record would not validate, or the update moves the feed's index entry
// (each left to the transaction, which reports it as usual). fn must be
// a pure function of the feed it is given: it may run again inside the
// transaction.
func (s *Store) prepareFeed(id uint64, fn func(p *preparedFeed) error) *preparedFeed {
	old, of, ok := s.feedMemo.peek(id)
	if !ok {
		return nil
	}
	p := &preparedFeed{old: old, f: cloneFeed(&of)}
	if err := fn(p); err != nil {
		return nil
	}
	p.f.ID, p.f.Created, p.f.Updated = of.ID, of.Created, s.now()
	oi, ok1 := indexKey(&of)
	ni, nk := indexKey(&p.f)
	if !bytes.Equal(oi, ni) || !bytes.Equal(ok1, nk) {
		return nil
	}
	raw, err := validateFeed(&p.f)
	if err != nil {
		return nil
	}
	p.raw, p.memo = raw, cloneFeed(&p.f)
	return p
}

// applyPrepared stores p's record in tx when feed id's stored record is
// still the one p was worked out from, and reports whether it did.
func (s *Store) applyPrepared(tx *bolt.Tx, id uint64, p *preparedFeed) (bool, error) {
	if p == nil {
		return false, nil
	}
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return false, err
	}
	k := u64(id)
	if v := feeds.Get(k); v == nil || !bytes.Equal(v, p.old) {
		return false, nil
	}
	s.feedStored(tx, &p.f)
	return true, feeds.Put(k, p.raw)
}
