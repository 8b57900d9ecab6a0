package storage

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Order is the order Items returns items in.
type Order int

// Item orders.
const (
	// ByArrival is newest arrival (highest Seq) first. With
	// ItemQuery.AfterSeq set, it is oldest first instead (see there).
	ByArrival Order = iota
	// ByPublished is newest publish time first (items without a publish
	// time are placed by the time they were fetched); ties by newest Seq.
	ByPublished
	// ByArrivalAsc is oldest arrival (lowest Seq) first: what an
	// incremental consumer reads, from AfterSeq 0 on its first run.
	ByArrivalAsc
)

// ItemQuery selects items of one feed.
type ItemQuery struct {
	// Limit caps the number of items returned; ≤ 0 means all.
	Limit int
	// Order of the result.
	Order Order
	// AfterSeq, when not 0, returns only items with Seq > AfterSeq, oldest
	// first (the Order must be ByArrival or ByArrivalAsc). An incremental
	// consumer remembers the last Seq it read and passes it here; Seq
	// values are store-wide and never reused.
	AfterSeq uint64
	// BeforeSeq, when not 0, returns only items with Seq < BeforeSeq,
	// newest first (the Order must be ByArrival, AfterSeq 0): the next
	// page of a feed paged by Seq.
	BeforeSeq uint64
	// Since and Until, when not zero, keep only items whose publish time
	// (fetch time for items without one) is in [Since, Until).
	Since, Until time.Time
}

// AddItems stores new items of feed feedID and returns those it added, in
// input order, with FeedID, Seq and (when zero) Fetched set.
//
// Items are deduplicated by ID within the feed. An item whose ID is
// already stored is not added again; when its title, summary, content,
// updated date or reading differ, and its updated date is not older than
// the stored one, those fields are replaced in place and the item keeps
// its Seq, Published and Fetched (it is not returned as added). A zero
// Updated or a nil Reading leaves the stored one alone. Later duplicates
// within one call are treated the same way.
//
// An item that retention would drop at once is not stored: one older than
// Retention.MaxAge, or, when the feed already holds Retention.MaxItems,
// one not newer than the oldest it holds (otherwise an item that fell out
// of the window would come back as new on every fetch). Nor is an item of
// a remote feed without a date of its own (Item.IsUndated) whose ID is
// among those retention dropped that the store remembers (DroppedIDs):
// dated when fetched, it looks new to a process that has not read the
// document before. An item with a date of its own is judged by that date
// alone, so a reissued ID dated newer than the items kept is stored.
// After adding, the feed's retention is applied in the same transaction,
// and items it removed are not returned as added; the IDs of the items
// it removes from a remote feed are remembered.
//
// Invalid items (see the Max* limits and ErrInvalid) are refused one by
// one, and so is an update that would make the stored item larger than
// MaxItemSize: the valid items are still written and the error joins one
// *ItemError per refused item. An error from the Reducer does not undo
// the additions either: the items are stored, retention is skipped (it
// runs again on the next call) and the reducer's error is joined to the
// result. Any other error means nothing was written. The call is one
// transaction: when it returns, what it added is durable.
func (s *Store) AddItems(feedID uint64, items []Item) (added []Item, err error) {
	now := s.now()
	valid, errs := prepareItems(feedID, items, now)
	var res addResult
	txErr := s.update(func(tx *bolt.Tx) error {
		var err error
		res, err = s.addItemsTx(tx, feedID, valid, now)
		return err
	})
	if txErr != nil {
		return nil, fmt.Errorf("storage: add items to feed %d: %w", feedID, txErr)
	}
	errs = append(errs, res.updateErrs...)
	return res.added, errors.Join(append(errs, res.retErr)...)
}

// preparedItems are items made ready for addItemsTx by prepareItems.
type preparedItems struct {
	items []Item
	index []int    // items[i] is the caller's items[index[i]]
	raw   [][]byte // items[i] encoded (encodeItem), its Seq left to the key
	// listed is how many items the feed's document lists as the call's
	// update sets Feed.Listed (RecordFetch; 0: unknown), for the IDs
	// retention drops (DroppedKeep).
	listed int
}

// prepareItems sets the FeedID, Seq and (when zero) Fetched of copies of
// items, validates and encodes them, outside the write transaction. It
// returns the valid ones and one *ItemError per invalid item.
func prepareItems(feedID uint64, items []Item, now time.Time) (valid preparedItems, errs []error) {
	valid.items = make([]Item, 0, len(items))
	valid.index = make([]int, 0, len(items))
	valid.raw = make([][]byte, 0, len(items))
	for i := range items {
		it := items[i]
		it.FeedID, it.Seq = feedID, 0
		if it.Fetched.IsZero() {
			it.Fetched = now
		}
		raw, err := validItem(&it)
		if err != nil {
			errs = append(errs, &ItemError{Index: i, ID: shortID(it.ID), Err: err})
			continue
		}
		valid.items = append(valid.items, it)
		valid.index = append(valid.index, i)
		valid.raw = append(valid.raw, raw)
	}
	return valid, errs
}

// addResult is what addItemsTx did besides failing.
type addResult struct {
	// added are the items stored as new (see AddItems).
	added []Item
	// updateErrs has one *ItemError per update refused because the
	// stored item would grow beyond MaxItemSize; the others were written.
	updateErrs []error
	// retErr is the Reducer's error: the items are stored, retention was
	// skipped.
	retErr error
}

// addItemsTx is AddItems inside tx, for items prepared by prepareItems
// (index maps them back to the caller's positions, for ItemError). It
// sets the Seq of the items of valid it inserts. An error means tx must
// be rolled back.
func (s *Store) addItemsTx(tx *bolt.Tx, feedID uint64, prep preparedItems, now time.Time) (addResult, error) {
	valid, index := prep.items, prep.index
	var res addResult
	feed, err := s.memoFeed(tx, feedID, false) // retention is read, the feed not changed
	if err != nil {
		return addResult{}, err
	}
	fb, err := openFeedBuckets(tx, feedID)
	if err != nil {
		return addResult{}, err
	}
	if fb == nil {
		return addResult{}, corruptf("feed %d has no item count", feedID)
	}
	skip := admission(fb, feed.Retention, now)
	dropped := droppedLookup(tx, &feed)
	ins := itemInserter{tx: tx, fb: fb}
	res.added = make([]Item, 0, len(valid))
	addedAt := make(map[string]int, len(valid))
	for i := range valid {
		it := &valid[i]
		old, found, err := getItem(fb, it.ID)
		if err != nil {
			return addResult{}, err
		}
		if found {
			if !changed(&old, it) {
				continue
			}
			merge(&old, it)
			if err := putItemRecord(fb, &old); errors.Is(err, ErrInvalid) {
				// The stored fields plus the new ones are too large.
				res.updateErrs = append(res.updateErrs, &ItemError{Index: index[i], ID: shortID(it.ID), Err: err})
				continue
			} else if err != nil {
				return addResult{}, err
			}
			if j, ok := addedAt[it.ID]; ok {
				res.added[j] = old
			}
			continue
		}
		if skip(it) || it.IsUndated() && dropped(it.ID) {
			continue
		}
		if err := ins.insert(it, prep.raw[i]); err != nil {
			return addResult{}, err
		}
		addedAt[it.ID] = len(res.added)
		res.added = append(res.added, *it)
	}
	if err := ins.flush(); err != nil { // before retention reads the count
		return addResult{}, err
	}
	removed, err := s.retain(tx, feed, fb, now, max(prep.listed, len(valid)))
	var re *reducerError
	switch {
	case errors.As(err, &re):
		res.retErr = fmt.Errorf("storage: retention of feed %d: %w", feedID, re.err)
	case err != nil:
		return addResult{}, err
	}
	if removed > 0 || res.retErr == nil && feed.Retention != (Retention{}) {
		// Retention may have removed (or a digest replaced) items
		// added here: report only those still stored as added.
		kept := res.added[:0]
		for _, it := range res.added {
			if v, _ := getU64(fb.ids.Get([]byte(it.ID))); v == it.Seq {
				kept = append(kept, it)
			}
		}
		res.added = kept
	}
	return res, nil
}

// admission returns the filter that keeps out items retention would
// remove at once.
func admission(fb *feedBuckets, r Retention, now time.Time) func(*Item) bool {
	var cutoff, oldest time.Time
	if r.MaxAge > 0 {
		cutoff = now.Add(-r.MaxAge)
	}
	full := false
	if r.MaxItems > 0 && fb.count() >= uint64(r.MaxItems) {
		if k, _ := fb.pub.Cursor().First(); len(k) == pubKeyLen {
			full, oldest = true, pubKeyTime(k)
		}
	}
	return func(it *Item) bool {
		t := admissionTime(it)
		return !cutoff.IsZero() && t.Before(cutoff) || full && !t.After(oldest)
	}
}

// changed reports whether in is an update of stored item old worth
// writing: one of the fields an update replaces differs, and in is not an
// older version (by its updated date) than old. A zero Updated or a nil
// Reading in the update means "not given" and never erases a stored one.
func changed(old, in *Item) bool {
	if !in.Updated.IsZero() && in.Updated.Before(old.Updated) {
		return false
	}
	return old.Title != in.Title || old.Summary != in.Summary || old.Content != in.Content ||
		!in.Updated.IsZero() && !old.Updated.Equal(in.Updated) ||
		in.Reading != nil && !sameReading(old.Reading, in.Reading)
}

// merge copies the fields an update replaces from in to old.
func merge(old, in *Item) {
	old.Title, old.Summary, old.Content = in.Title, in.Summary, in.Content
	if !in.Updated.IsZero() {
		old.Updated = in.Updated
	}
	if in.Reading != nil {
		old.Reading = in.Reading
	}
}

func sameReading(a, b *Reading) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Value == b.Value && a.Unit == b.Unit && a.Sensor == b.Sensor && a.Time.Equal(b.Time) &&
		sameFloatPtr(a.Lat, b.Lat) && sameFloatPtr(a.Lon, b.Lon)
}

func sameFloatPtr(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// insertItem gives it the next Seq and writes it with its index entries.
// raw is it as encodeItem encoded it, or nil to encode it here.
func insertItem(tx *bolt.Tx, fb *feedBuckets, it *Item, raw []byte) error {
	w := itemInserter{tx: tx, fb: fb}
	if err := w.insert(it, raw); err != nil {
		return err
	}
	return w.flush()
}

// itemInserter inserts new items into one feed's buckets: the store-wide
// item sequence and the feed's item count are read at the first insert
// and written once, by flush, however many items the batch holds. Until
// flush, the stored sequence and count lag behind the items inserted.
type itemInserter struct {
	tx   *bolt.Tx
	fb   *feedBuckets
	meta *bolt.Bucket // nil before the first insert
	seq  uint64       // the last sequence number given
	n    uint64       // items inserted and not flushed
}

// insert gives it the next Seq and writes it with its index entries. raw
// is it as encodeItem encoded it, or nil to encode it here.
func (w *itemInserter) insert(it *Item, raw []byte) error {
	if w.meta == nil {
		if w.meta = w.tx.Bucket(bucketMeta); w.meta == nil {
			return corruptf("bucket %s missing", bucketMeta)
		}
		w.seq, _ = getU64(w.meta.Get(keyItemSeq))
	}
	w.seq++
	seq := w.seq
	it.Seq = seq
	var err error
	if raw != nil {
		err = w.fb.items.Put(u64(seq), raw)
	} else {
		err = putItemRecord(w.fb, it)
	}
	if err != nil {
		return err
	}
	if err := w.fb.ids.Put([]byte(it.ID), u64(seq)); err != nil {
		return err
	}
	if err := w.fb.pub.Put(pubKey(sortTime(it), seq), []byte{}); err != nil {
		return err
	}
	w.n++
	return nil
}

// flush stores the sequence and the count the inserts moved.
func (w *itemInserter) flush() error {
	if w.n == 0 {
		return nil
	}
	if err := w.meta.Put(keyItemSeq, u64(w.seq)); err != nil {
		return err
	}
	n := w.n
	w.n = 0
	return w.fb.setCount(w.fb.count() + n)
}

// deleteItem removes it (as stored) and its index entries.
func deleteItem(fb *feedBuckets, it *Item) error {
	return deleteEntry(fb, overEntry{key: pubKey(sortTime(it), it.Seq), id: it.ID})
}

// putItemRecord writes the item (itemenc.go) under its Seq, or fails
// with ErrInvalid (writing nothing) when it cannot be encoded or its JSON
// would be larger than MaxItemSize.
func putItemRecord(fb *feedBuckets, it *Item) error {
	raw, err := encodeItem(it, it.Seq)
	if err != nil {
		return err
	}
	return fb.items.Put(u64(it.Seq), raw)
}

// getItem loads the item with this ID.
func getItem(fb *feedBuckets, id string) (Item, bool, error) {
	if id == "" || len(id) > bolt.MaxKeySize {
		return Item{}, false, nil
	}
	sk := fb.ids.Get([]byte(id))
	if sk == nil {
		return Item{}, false, nil
	}
	seq, ok := getU64(sk)
	if !ok {
		return Item{}, false, corruptf("item %q: bad seq %x", shortID(id), sk)
	}
	it, err := getItemBySeq(fb, seq)
	if err != nil {
		return Item{}, false, err
	}
	if it.ID != id {
		return Item{}, false, corruptf("item %q: seq %d holds item %q", shortID(id), seq, shortID(it.ID))
	}
	return it, true, nil
}

// getItemBySeq loads the item stored under seq.
func getItemBySeq(fb *feedBuckets, seq uint64) (Item, error) {
	v := fb.items.Get(u64(seq))
	if v == nil {
		return Item{}, corruptf("item seq %d missing", seq)
	}
	return decodeItem(seq, v)
}

// Items returns items of feed feedID selected by q, or ErrFeedNotFound.
func (s *Store) Items(feedID uint64, q ItemQuery) ([]Item, error) {
	if q.Order < ByArrival || q.Order > ByArrivalAsc {
		return nil, fmt.Errorf("storage: items of feed %d: %w", feedID, invalidf("unknown order %d", q.Order))
	}
	if q.BeforeSeq > 0 && (q.Order != ByArrival || q.AfterSeq > 0) {
		return nil, fmt.Errorf("storage: items of feed %d: %w", feedID, invalidf("BeforeSeq needs newest-first arrival order"))
	}
	if q.AfterSeq > 0 && q.Order == ByPublished {
		return nil, fmt.Errorf("storage: items of feed %d: %w", feedID, invalidf("AfterSeq needs arrival order"))
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return nil, fmt.Errorf("storage: items of feed %d: %w", feedID, invalidf("Until %v is before Since %v", q.Until, q.Since))
	}
	var out []Item
	err := s.db.View(func(tx *bolt.Tx) error {
		fb, err := s.feedBuckets(tx, feedID)
		if err != nil {
			return err
		}
		full := func() bool { return q.Limit > 0 && len(out) >= q.Limit }
		inWindow := func(t time.Time) bool {
			return (q.Since.IsZero() || !t.Before(q.Since)) && (q.Until.IsZero() || t.Before(q.Until))
		}
		if q.Order == ByPublished {
			c := fb.pub.Cursor()
			var k []byte
			if q.Until.IsZero() {
				k, _ = c.Last()
			} else if k, _ = c.Seek(pubKey(q.Until, 0)); k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev()
			}
			for ; k != nil && !full(); k, _ = c.Prev() {
				if len(k) != pubKeyLen {
					return corruptf("feed %d: bad published key %x", feedID, k)
				}
				t := pubKeyTime(k)
				if !q.Since.IsZero() && t.Before(q.Since) {
					break
				}
				if !inWindow(t) {
					continue
				}
				it, err := getItemBySeq(fb, pubKeySeq(k))
				if err != nil {
					return err
				}
				out = append(out, it)
			}
			return nil
		}
		c := fb.items.Cursor()
		var k, v []byte
		next := c.Prev
		switch {
		case q.AfterSeq > 0:
			k, v = c.Seek(u64(q.AfterSeq + 1))
			next = c.Next
			if q.AfterSeq == ^uint64(0) {
				k = nil
			}
		case q.Order == ByArrivalAsc:
			k, v = c.First()
			next = c.Next
		case q.BeforeSeq > 0:
			if k, _ = c.Seek(u64(q.BeforeSeq)); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		default:
			k, v = c.Last()
		}
		for ; k != nil && !full(); k, v = next() {
			seq, ok := getU64(k)
			if !ok {
				return corruptf("feed %d: bad item key %x", feedID, k)
			}
			it, err := decodeItem(seq, v)
			if err != nil {
				return err
			}
			if inWindow(sortTime(&it)) {
				out = append(out, it)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: items of feed %d: %w", feedID, err)
	}
	return out, nil
}

// Item returns the item of feed feedID with this ID, or ErrFeedNotFound or
// ErrItemNotFound.
func (s *Store) Item(feedID uint64, itemID string) (Item, error) {
	var it Item
	err := s.db.View(func(tx *bolt.Tx) error {
		fb, err := s.feedBuckets(tx, feedID)
		if err != nil {
			return err
		}
		var found bool
		it, found, err = getItem(fb, itemID)
		if err == nil && !found {
			err = ErrItemNotFound
		}
		return err
	})
	if err != nil {
		return Item{}, fmt.Errorf("storage: item %q of feed %d: %w", shortID(itemID), feedID, err)
	}
	return it, nil
}

// HasItems reports, for each of ids, whether feed feedID holds an item
// with that ID, in one read transaction (Item would take one per ID). It
// fails with ErrFeedNotFound. It is not part of Backend: callers use it
// when the store has it and fall back to Item.
func (s *Store) HasItems(feedID uint64, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	err := s.db.View(func(tx *bolt.Tx) error {
		// Only the ID index is opened: a poll asks this of every document.
		idx, err := openFeedView(tx, feedID, bucketItemIDs)
		if err != nil {
			return err
		}
		for i, id := range ids {
			out[i] = id != "" && len(id) <= bolt.MaxKeySize && idx.Get([]byte(id)) != nil
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: items of feed %d: %w", feedID, err)
	}
	return out, nil
}

// CountItems returns how many items feed feedID holds, or ErrFeedNotFound.
func (s *Store) CountItems(feedID uint64) (int, error) {
	var n uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		fb, err := s.feedBuckets(tx, feedID)
		if err != nil {
			return err
		}
		n = fb.count()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storage: count items of feed %d: %w", feedID, err)
	}
	return int(n), nil
}

// LastSeq returns the highest Seq given to an item so far (0 when none).
// Items added later have higher Seq values.
func (s *Store) LastSeq() (uint64, error) {
	var seq uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		meta, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		seq, _ = getU64(meta.Get(keyItemSeq))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storage: last seq: %w", err)
	}
	return seq, nil
}

// feedBuckets returns the data buckets of an existing feed, or
// ErrFeedNotFound.
func (s *Store) feedBuckets(tx *bolt.Tx, feedID uint64) (*feedBuckets, error) {
	fb, err := openFeedBuckets(tx, feedID)
	if err != nil {
		return nil, err
	}
	if fb == nil {
		return nil, ErrFeedNotFound
	}
	return fb, nil
}
