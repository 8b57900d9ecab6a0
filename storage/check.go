package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// maxCheckErrors bounds how many problems Check reports.
const maxCheckErrors = 20

// Check verifies the data file: bbolt's page-level consistency check, then
// the store's own invariants (every feed record decodes and is indexed by
// its URL or slug and has an item count, every index entry points at a
// matching feed, in every feed the item ids, records and publish-time
// index agree with each other and with the item count, the shared data
// buckets hold nothing of a feed that does not exist, and no move of an
// older layout is left unfinished; every pipe record
// decodes, is indexed by its slug and has an output feed of KindPipe with
// the same slug, and every pipe slug index entry points at a matching
// pipe). It reads the whole file in one read transaction, so writers are
// not blocked. Problems come back joined, wrapped in ErrCorrupt.
func (s *Store) Check() error {
	var errs []error
	add := func(err error) bool {
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		errs = append(errs, err)
		return len(errs) < maxCheckErrors
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		// Drain the whole channel so the checker goroutine ends.
		for err := range tx.Check() {
			if len(errs) < maxCheckErrors {
				add(err)
			}
		}
		if len(errs) > 0 {
			return nil // invariants are meaningless on a broken file
		}
		checkInvariants(tx, add)
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: check %s: %w", s.path, err)
	}
	if len(errs) > 0 {
		// Each joined error wraps ErrCorrupt and says so.
		return fmt.Errorf("storage: check %s:\n%w", s.path, errors.Join(errs...))
	}
	return nil
}

// checkInvariants reports each broken invariant to add, stopping when add
// returns false.
func checkInvariants(tx *bolt.Tx, add func(error) bool) {
	buckets := map[string]*bolt.Bucket{}
	names := [][]byte{bucketMeta, bucketFeeds, bucketFeedURL, bucketFeedSlug, bucketPipes, bucketPipeSlug, bucketPluginData}
	for _, name := range append(names, dataBuckets...) {
		b := tx.Bucket(name)
		if b == nil {
			add(fmt.Errorf("bucket %s missing", name))
			return
		}
		buckets[string(name)] = b
	}
	if v, err := schemaVersion(tx); err != nil || v != SchemaVersion {
		if !add(fmt.Errorf("schema version %d, want %d (%v)", v, SchemaVersion, err)) {
			return
		}
	}
	if tx.Bucket(legacyFeedData) != nil || tx.Bucket(legacyItemsJSON) != nil || buckets[string(bucketMeta)].Get(keyMigrating) != nil {
		if !add(fmt.Errorf("the move of feed data to schema %d is unfinished", SchemaVersion)) {
			return
		}
	}
	lastSeq, _ := getU64(buckets[string(bucketMeta)].Get(keyItemSeq))

	feeds := map[uint64]Feed{}
	var listed uint64  // items the feeds count
	var tails []uint64 // feeds with an observation tail, a policy state or a dropped set
	err := buckets[string(bucketFeeds)].ForEach(func(k, v []byte) error {
		if len(k) == 9 && k[8] == stateSuffix {
			if err := checkPolicyState(k, v); err != nil {
				if !add(err) {
					return errStop
				}
			} else {
				tails = append(tails, binary.BigEndian.Uint64(k))
			}
			return nil
		}
		if isDroppedKey(k) {
			if err := checkDropped(k, v); err != nil {
				if !add(err) {
					return errStop
				}
			} else {
				tails = append(tails, binary.BigEndian.Uint64(k))
			}
			return nil
		}
		if !isFeedKey(k) {
			if err := checkTail(k, v); err != nil {
				if !add(err) {
					return errStop
				}
			} else {
				tails = append(tails, binary.BigEndian.Uint64(k))
			}
			return nil
		}
		f, err := decodeFeed(k, v)
		if err != nil {
			if !add(err) {
				return errStop
			}
			return nil
		}
		feeds[f.ID] = f
		index, key := indexKey(&f)
		if id, _ := getU64(tx.Bucket(index).Get(key)); id != f.ID {
			if !add(fmt.Errorf("feed %d: %s[%q] = %d", f.ID, index, key, id)) {
				return errStop
			}
		}
		if fb, err := openFeedBuckets(tx, f.ID); err != nil || fb == nil {
			if err == nil {
				err = fmt.Errorf("feed %d: item count missing", f.ID)
			}
			if !add(err) {
				return errStop
			}
		} else {
			listed += fb.count()
			if !checkFeedItems(f.ID, fb, lastSeq, add) {
				return errStop
			}
		}
		return nil
	})
	if err != nil {
		return
	}
	for _, id := range tails {
		if _, ok := feeds[id]; !ok && !add(fmt.Errorf("observation tail or policy state of feed %d: no such feed", id)) {
			return
		}
	}
	for _, index := range [][]byte{bucketFeedURL, bucketFeedSlug} {
		err := buckets[string(index)].ForEach(func(k, v []byte) error {
			id, _ := getU64(v)
			f, ok := feeds[id]
			if ok {
				fi, fk := indexKey(&f)
				ok = bytes.Equal(fi, index) && bytes.Equal(fk, k)
			}
			if !ok && !add(fmt.Errorf("%s[%q] = %d: no such feed", index, k, id)) {
				return errStop
			}
			return nil
		})
		if err != nil {
			return
		}
	}
	for _, name := range feedRanges {
		if !checkDataOwners(buckets[string(name)], name, feeds, add) {
			return
		}
	}
	// Every record was reached through its feed's item_seq, and each
	// feed's count matched what it reached: any other is of no feed.
	if n := buckets[string(bucketItems)].Stats().KeyN; uint64(n) != listed {
		if !add(fmt.Errorf("%s holds %d item records, the feeds %d", bucketItems, n, listed)) {
			return
		}
	}
	checkPipes(buckets[string(bucketPipes)], buckets[string(bucketPipeSlug)], feeds, add)
}

// checkPipes checks the pipe records against their slug index and output
// feeds, and the slug index against the records.
func checkPipes(pipeB, slugB *bolt.Bucket, feeds map[uint64]Feed, add func(error) bool) {
	pipes := map[uint64]Pipe{}
	err := pipeB.ForEach(func(k, v []byte) error {
		p, err := decodePipe(k, v)
		if err != nil {
			if !add(err) {
				return errStop
			}
			return nil
		}
		pipes[p.ID] = p
		if id, _ := getU64(slugB.Get([]byte(p.Slug))); id != p.ID {
			if !add(fmt.Errorf("pipe %d: %s[%q] = %d", p.ID, bucketPipeSlug, p.Slug, id)) {
				return errStop
			}
		}
		var problem error
		switch f, found := feeds[p.FeedID]; {
		case !found:
			problem = fmt.Errorf("pipe %d: output feed %d missing", p.ID, p.FeedID)
		case f.Kind != KindPipe || f.Slug != p.Slug:
			problem = fmt.Errorf("pipe %d (slug %q): output feed %d is %s feed %q", p.ID, p.Slug, f.ID, f.Kind, f.Slug)
		}
		if problem != nil && !add(problem) {
			return errStop
		}
		return nil
	})
	if err != nil {
		return
	}
	_ = slugB.ForEach(func(k, v []byte) error {
		id, _ := getU64(v)
		if p, ok := pipes[id]; !ok || p.Slug != string(k) {
			if !add(fmt.Errorf("%s[%q] = %d: no such pipe", bucketPipeSlug, k, id)) {
				return errStop
			}
		}
		return nil
	})
}

var errStop = errors.New("stop")

// checkDataOwners reports the entries of data bucket b (named name) that
// belong to no feed, one report per feed ID; false means stop. It seeks
// from one feed's range to the next instead of reading every entry.
func checkDataOwners(b *bolt.Bucket, name []byte, feeds map[uint64]Feed, add func(error) bool) bool {
	c := b.Cursor()
	for k, _ := c.First(); k != nil; {
		if len(k) < 8 || bytes.Equal(name, bucketItemCount) && len(k) != 8 {
			if !add(fmt.Errorf("%s[%x]: bad key", name, k)) {
				return false
			}
			k, _ = c.Next()
			continue
		}
		id := binary.BigEndian.Uint64(k)
		if f, ok := feeds[id]; !ok || f.ID != id || id == 0 {
			if !add(fmt.Errorf("%s[%x]: data of feed %d, which does not exist", name, k, id)) {
				return false
			}
		}
		if id == ^uint64(0) {
			break
		}
		k, _ = c.Seek(u64(id + 1))
	}
	return true
}

// checkFeedItems checks one feed's items; false means stop.
func checkFeedItems(feedID uint64, fb *feedBuckets, lastSeq uint64, add func(error) bool) bool {
	report := func(format string, args ...any) bool {
		return add(fmt.Errorf("feed %d: "+format, append([]any{feedID}, args...)...))
	}
	var nIDs, nItems, nPub uint64
	err := fb.items.ForEach(func(k, v []byte) error {
		nItems++
		seq, ok := getU64(k)
		if !ok {
			if !report("bad item key %x", k) {
				return errStop
			}
			return nil
		}
		it, err := decodeItem(seq, v)
		switch {
		case err != nil:
			ok = report("%v", err)
		case it.FeedID != feedID:
			ok = report("item seq %d has feed id %d", seq, it.FeedID)
		case seq > lastSeq:
			ok = report("item seq %d above the last seq %d", seq, lastSeq)
		default:
			if id, _ := getU64(fb.ids.Get([]byte(it.ID))); id != seq {
				ok = report("ids[%q] = %d, want %d", shortID(it.ID), id, seq)
			} else if fb.pub.Get(pubKey(sortTime(&it), seq)) == nil {
				ok = report("published index entry of item seq %d missing", seq)
			}
		}
		if !ok {
			return errStop
		}
		return nil
	})
	if err != nil {
		return false
	}
	if err := fb.ids.ForEach(func(k, v []byte) error {
		nIDs++
		return nil
	}); err != nil {
		return false
	}
	err = fb.pub.ForEach(func(k, v []byte) error {
		nPub++
		if len(k) != pubKeyLen {
			if !report("bad published key %x", k) {
				return errStop
			}
			return nil
		}
		if len(v) != 0 || fb.items.seqs.Get(k[12:20]) == nil {
			if !report("published index entry %x (value %q) points nowhere", k, shortID(string(v))) {
				return errStop
			}
		}
		return nil
	})
	if err != nil {
		return false
	}
	if n := fb.count(); nIDs != n || nItems != n || nPub != n {
		return report("count %d, but %d ids, %d items, %d published index entries", n, nIDs, nItems, nPub)
	}
	return true
}

// checkDropped checks a feed's dropped set (dropped.go): readable and
// not empty.
func checkDropped(k, v []byte) error {
	id := binary.BigEndian.Uint64(k)
	d, err := DecodeDroppedIDs(v)
	if err != nil {
		return fmt.Errorf("feed %d: %w", id, err)
	}
	if len(d.Hashes) == 0 {
		return fmt.Errorf("feed %d: an empty dropped set", id)
	}
	return nil
}

// checkTail checks an observation tail (obstail.go): its key, its framing,
// its size and that each entry is an observation.
func checkTail(k, v []byte) error {
	if len(k) != 9 || k[8] != tailSuffix {
		return fmt.Errorf("feeds[%x]: neither a feed record nor an observation tail", k)
	}
	id := binary.BigEndian.Uint64(k)
	entries, err := tailEntries(v)
	switch {
	case err != nil:
		return fmt.Errorf("feed %d: %w", id, err)
	case len(entries) == 0 || len(entries) > tailMax || len(v) > tailMaxBytes:
		return fmt.Errorf("feed %d: observation tail of %d entries, %d bytes (at most %d, %d; not empty)",
			id, len(entries), len(v), tailMax, tailMaxBytes)
	}
	for i, e := range entries {
		if _, err := decodeObservation(e); err != nil {
			return fmt.Errorf("feed %d: observation tail[%d]: %w", id, i, err)
		}
	}
	return nil
}
