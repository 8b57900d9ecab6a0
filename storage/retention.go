package storage

import (
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Reducer decides what happens to the items a feed holds beyond its
// Retention, instead of simply deleting them: the hook of the transform
// package's PACK data-reduction policies.
//
// Reduce is given the feed and its items over capacity, oldest first (by
// publish time, then arrival): the oldest beyond Retention.MaxItems and
// all older than Retention.MaxAge. It returns the items to keep (matched
// by Seq; changes to them are ignored, and items not among the given ones
// are ignored) and digest items to add, which summarise the dropped ones.
// Every given item not kept is deleted. A digest item whose ID the feed
// already holds replaces that item entirely and gets a new Seq, so
// incremental readers see the merged digest; its FeedID and Seq are set
// by the store, and Fetched when zero. Digest items are checked like any
// other item; an invalid one fails the reduction.
//
// Reduce runs inside the store's write transaction: it must not call the
// Store, and should be quick. When it returns an error (or an invalid
// digest), nothing is removed and the error is reported (see AddItems and
// ApplyRetention).
type Reducer interface {
	Reduce(feed Feed, items []Item) (keep []Item, digest []Item, err error)
}

// reducerError marks an error of the Reducer, which does not abort the
// transaction of AddItems.
type reducerError struct{ err error }

func (e *reducerError) Error() string { return e.err.Error() }
func (e *reducerError) Unwrap() error { return e.err }

// ApplyRetention applies feed feedID's Retention now and returns how many
// items it removed (digest items added by a Reducer are not counted).
// Without a Reducer, it deletes the oldest items (by publish time) beyond
// Retention.MaxItems and those published before Options.Now minus
// Retention.MaxAge. AddItems calls it after every addition; call it
// periodically too, so age limits apply to feeds that stopped publishing.
func (s *Store) ApplyRetention(feedID uint64) (removed int, err error) {
	// Most calls find nothing to remove (the periodic sweep of age
	// limits): a read transaction says so without a write and its fsync.
	var over bool
	err = s.db.View(func(tx *bolt.Tx) error {
		return withFeedData(s, tx, feedID, func(feed Feed, fb *feedBuckets) error {
			over = overRetention(fb, feed.Retention, s.now())
			return nil
		})
	})
	if err == nil && over {
		err = s.dbUpdate(func(tx *bolt.Tx) error {
			return withFeedData(s, tx, feedID, func(feed Feed, fb *feedBuckets) (err error) {
				removed, err = s.retain(tx, feed, fb, s.now(), 0)
				return err
			})
		})
	}
	if err != nil {
		return 0, fmt.Errorf("storage: retention of feed %d: %w", feedID, err)
	}
	return removed, nil
}

// withFeedData calls fn with feed feedID's record and data buckets in tx.
func withFeedData(s *Store, tx *bolt.Tx, feedID uint64, fn func(Feed, *feedBuckets) error) error {
	feed, err := getFeed(tx, feedID)
	if err != nil {
		return err
	}
	fb, err := s.feedBuckets(tx, feedID)
	if err != nil {
		return err
	}
	return fn(feed, fb)
}

// overRetention reports whether the feed of fb holds items its retention
// r removes at now: more than MaxItems, or one published before now minus
// MaxAge.
func overRetention(fb *feedBuckets, r Retention, now time.Time) bool {
	if r.MaxItems > 0 && fb.count() > uint64(r.MaxItems) {
		return true
	}
	if r.MaxAge > 0 {
		if k, _ := fb.pub.Cursor().First(); len(k) == pubKeyLen && pubKeyTime(k).Before(now.Add(-r.MaxAge)) {
			return true
		}
	}
	return false
}

// overEntry is one published-index entry beyond retention: its key, and
// its item's ID when known ("" to read it from the item's record).
type overEntry struct {
	key []byte
	id  string
}

// retain applies the feed's retention inside tx and remembers the IDs of
// the items it removes from a remote feed (rememberDropped; n is how many
// items the call that added some was given). A Reducer failure comes back
// as a *reducerError, with nothing changed.
func (s *Store) retain(tx *bolt.Tx, feed Feed, fb *feedBuckets, now time.Time, n int) (int, error) {
	r := feed.Retention
	if r.MaxItems <= 0 && r.MaxAge <= 0 {
		return 0, nil
	}
	var over uint64
	if n := fb.count(); r.MaxItems > 0 && n > uint64(r.MaxItems) {
		over = n - uint64(r.MaxItems)
	}
	var cutoff time.Time
	if r.MaxAge > 0 {
		cutoff = now.Add(-r.MaxAge)
	}
	if over == 0 && cutoff.IsZero() {
		return 0, nil // within MaxItems, and no age bound: no page to read
	}
	var entries []overEntry
	c := fb.pub.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) != pubKeyLen {
			return 0, corruptf("feed %d: bad published key %x", feed.ID, k)
		}
		old := !cutoff.IsZero() && pubKeyTime(k).Before(cutoff)
		if uint64(len(entries)) >= over && !old {
			break
		}
		entries = append(entries, overEntry{key: append([]byte(nil), k...)})
	}
	if len(entries) == 0 {
		return 0, nil
	}
	var gone []string // the IDs of the items removed, for a remote feed
	remember := feed.Kind == KindRemote
	red := s.currentReducer()
	if red == nil {
		for _, e := range entries {
			id, err := deleteEntryID(fb, e)
			if err != nil {
				return 0, err
			}
			if remember {
				gone = append(gone, id)
			}
		}
		return len(entries), rememberDropped(tx, &feed, gone, n)
	}

	items := make([]Item, len(entries))
	for i, e := range entries {
		it, err := getItemBySeq(fb, pubKeySeq(e.key))
		if err != nil {
			return 0, err
		}
		items[i] = it
	}
	keep, digest, err := red.Reduce(feed, items)
	if err != nil {
		return 0, &reducerError{err}
	}
	digests := make([]Item, len(digest))
	for i, d := range digest {
		d.FeedID, d.Seq = feed.ID, 0
		if d.Fetched.IsZero() {
			d.Fetched = now
		}
		if err := validateItem(&d); err != nil {
			return 0, &reducerError{fmt.Errorf("digest item %d (id %q): %w", i, shortID(d.ID), err)}
		}
		digests[i] = d
	}
	kept := make(map[uint64]bool, len(keep))
	for _, it := range keep {
		kept[it.Seq] = true
	}
	removed := 0
	for i, e := range entries {
		if kept[pubKeySeq(e.key)] {
			continue
		}
		if err := deleteEntry(fb, e); err != nil {
			return 0, err
		}
		if remember {
			gone = append(gone, items[i].ID)
		}
		removed++
	}
	for i := range digests {
		d := &digests[i]
		old, found, err := getItem(fb, d.ID)
		if err != nil {
			return 0, err
		}
		if found {
			if err := deleteItem(fb, &old); err != nil {
				return 0, err
			}
		}
		if err := insertItem(tx, fb, d, nil); err != nil {
			return 0, err
		}
	}
	if remember {
		// A digest stands for the items it replaced, not for one
		// dropped: its own ID is not remembered.
		gone = slices.DeleteFunc(gone, func(id string) bool {
			return slices.ContainsFunc(digests, func(d Item) bool { return d.ID == id })
		})
	}
	return removed, rememberDropped(tx, &feed, gone, n)
}

// deleteEntry deletes the item of a published-index entry.
func deleteEntry(fb *feedBuckets, e overEntry) error {
	_, err := deleteEntryID(fb, e)
	return err
}

// deleteEntryID is deleteEntry, returning the ID of the item it deleted.
func deleteEntryID(fb *feedBuckets, e overEntry) (string, error) {
	seq := pubKeySeq(e.key)
	if e.id == "" {
		// The index holds no ID: the record has it (its page is
		// rewritten by the delete below anyway).
		raw := fb.items.Get(u64(seq))
		if raw == nil {
			return "", corruptf("feed %d: item seq %d missing", fb.id, seq)
		}
		id, err := itemRecordID(raw)
		if err != nil || id == "" {
			return "", corruptf("feed %d: item seq %d: no id (%v)", fb.id, seq, err)
		}
		e.id = id
	}
	if err := fb.items.Delete(u64(seq)); err != nil {
		return "", err
	}
	if err := fb.ids.Delete([]byte(e.id)); err != nil {
		return "", err
	}
	if err := fb.pub.Delete(e.key); err != nil {
		return "", err
	}
	if n := fb.count(); n > 0 {
		return e.id, fb.setCount(n - 1)
	}
	return e.id, nil
}
