package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// reducerBox holds a storage.Reducer in an atomic.Pointer.
type reducerBox struct{ r storage.Reducer }

// SetReducer installs r as the retention reducer (nil removes it): the
// items retention removes are given to it first, as in the bbolt store
// (see storage.Reducer). Set it before use: without a Reducer, MaxAge is
// also each item's message TTL, and items published before SetReducer
// keep theirs.
func (s *Store) SetReducer(r storage.Reducer) {
	if r == nil {
		s.red.Store(nil)
		return
	}
	s.red.Store(&reducerBox{r})
}

func (s *Store) reducer() storage.Reducer {
	if b := s.red.Load(); b != nil {
		return b.r
	}
	return nil
}

// retentionError is an error of retention after items were stored: the
// Reducer's, an invalid digest, a failed removal. It does not undo the
// additions (RecordFetch and CommitPipeRun go on); retention runs again
// on the next addition.
type retentionError struct {
	feedID uint64
	err    error
}

func (e *retentionError) Error() string {
	return fmt.Sprintf("retention of feed %d: %v", e.feedID, e.err)
}
func (e *retentionError) Unwrap() error { return e.err }

// ApplyRetention applies feed f's Retention now and returns how many
// items it removed (digest items added by a Reducer are not counted), as
// the bbolt store's ApplyRetention: the items beyond Retention.MaxItems,
// oldest first by publish time (then arrival), and those published before
// Options.Now minus Retention.MaxAge. With a Reducer they are given to it
// first: the items it keeps stay, its digest items are published (one
// whose ID the feed holds replaces that item, with a new Seq), the rest
// are deleted. When the Reducer fails or a digest is invalid, nothing is
// removed. The order comes from the Store's index of the feed (message
// headers), so only the items given to a Reducer are read.
//
// Two nodes applying one feed's retention at the same moment (sensor
// readings posted to both) may both publish a digest of the same items;
// everything else they do is idempotent (deleting a removed message is
// not an error).
func (s *Store) ApplyRetention(ctx context.Context, f storage.Feed) (int, error) {
	if err := s.syncKnown(ctx, f.ID); err != nil {
		return 0, &retentionError{f.ID, err}
	}
	return s.retain(ctx, f, s.opt.Now())
}

// retain is ApplyRetention on the Store's index as it is; errors are
// *retentionError.
func (s *Store) retain(ctx context.Context, f storage.Feed, now time.Time) (int, error) {
	r := f.Retention
	if r.MaxItems <= 0 && r.MaxAge <= 0 {
		return 0, nil
	}
	// Nothing over (the usual case): decided without sorting the index.
	if n, oldest := s.known.oldest(f.ID); n > 0 && (r.MaxItems <= 0 || n <= r.MaxItems) && (r.MaxAge <= 0 || oldest >= now.Add(-r.MaxAge).UnixNano()) {
		return 0, nil
	}
	live, ok := s.known.live(f.ID)
	if !ok {
		// Evicted from the index since the caller synced it.
		if err := s.syncKnown(ctx, f.ID); err != nil {
			return 0, &retentionError{f.ID, err}
		}
		live, _ = s.known.live(f.ID)
	}
	n := 0
	if r.MaxItems > 0 && len(live) > r.MaxItems {
		n = len(live) - r.MaxItems
	}
	if r.MaxAge > 0 {
		cutoff := now.Add(-r.MaxAge).UnixNano()
		for n < len(live) && live[n].at < cutoff {
			n++
		}
	}
	over := live[:n]
	if len(over) == 0 {
		return 0, nil
	}
	red := s.reducer()
	if red == nil {
		if err := s.rememberDropped(ctx, f, over); errors.Is(err, errRetentionWidened) {
			return 0, nil
		} else if err != nil {
			return 0, &retentionError{f.ID, err}
		}
		removed, err := s.deleteItems(ctx, f.ID, over)
		if err != nil {
			return removed, &retentionError{f.ID, err}
		}
		return removed, nil
	}

	items := make([]storage.Item, 0, len(over))
	given := over[:0:0]
	for _, e := range over {
		it, err := s.itemAt(ctx, e.seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			s.known.removed(f.ID, []knownItem{e}) // another node removed it
			continue
		}
		if err != nil {
			return 0, &retentionError{f.ID, err}
		}
		items = append(items, it)
		given = append(given, e)
	}
	if len(items) == 0 {
		return 0, nil
	}
	keep, digest, err := red.Reduce(f, items)
	if err != nil {
		return 0, &retentionError{f.ID, err}
	}
	digests := make([]storage.Item, len(digest))
	raw := make([][]byte, len(digest))
	for i, d := range digest {
		d.FeedID, d.Seq = f.ID, 0
		if d.Fetched.IsZero() {
			d.Fetched = now
		}
		if err := storage.ValidateItems(f.ID, []storage.Item{d}, now); err != nil {
			return 0, &retentionError{f.ID, fmt.Errorf("digest item %d (id %q): %w", i, short(d.ID), err)}
		}
		data, err := json.Marshal(&d)
		if err != nil || len(data) > s.maxData {
			return 0, &retentionError{f.ID, fmt.Errorf("digest item %d (id %q): %w: %d bytes (at most %d), %v", i, short(d.ID), storage.ErrInvalid, len(data), s.maxData, err)}
		}
		digests[i], raw[i] = d, data
	}
	// Digests first: a crash before the removals leaves the reduced items
	// beside their digest, never lost.
	var replaced []knownItem
	start := time.Now()
	for i := range digests {
		d := &digests[i]
		key := MsgID(f.ID, d.ID)
		prev := s.known.stored(f.ID, key)
		pa, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: itemSubject(f.ID), Data: raw[i], Header: itemHeaders(key, d)})
		if err != nil {
			return 0, &retentionError{f.ID, fmt.Errorf("publish digest item %q: %w", short(d.ID), err)}
		}
		s.known.add(f.ID, []knownItem{{key: key, seq: pa.Sequence, at: sortNanos(sortTime(d))}})
		if prev != 0 {
			replaced = append(replaced, knownItem{key: key, seq: prev})
		}
	}
	if len(digests) > 0 {
		s.opt.Metrics.published("items", start)
	}
	kept := make(map[uint64]bool, len(keep))
	for _, it := range keep {
		kept[it.Seq] = true
	}
	drop := make([]knownItem, 0, len(given))
	dropped := make(map[uint64]bool, len(given))
	for _, e := range given {
		if !kept[e.seq] {
			drop = append(drop, e)
			dropped[e.seq] = true
		}
	}
	// A digest stands for the items it replaced, not for one dropped:
	// its own key is not remembered.
	if err := s.rememberDropped(ctx, f, slices.DeleteFunc(slices.Clone(drop), func(e knownItem) bool {
		return slices.ContainsFunc(digests, func(d storage.Item) bool { return MsgID(f.ID, d.ID) == e.key })
	})); errors.Is(err, errRetentionWidened) {
		return 0, nil
	} else if err != nil {
		return 0, &retentionError{f.ID, err}
	}
	removed, err := s.deleteItems(ctx, f.ID, drop)
	if err != nil {
		return removed, &retentionError{f.ID, err}
	}
	var stale []knownItem
	for _, e := range replaced {
		if !dropped[e.seq] {
			stale = append(stale, e)
		}
	}
	if _, err := s.deleteItems(ctx, f.ID, stale); err != nil {
		return removed, &retentionError{f.ID, err}
	}
	return removed, nil
}

// deleteItems deletes the messages of items and marks them removed in the
// index; a message already gone (another node's retention, its TTL)
// counts as deleted. It returns how many it deleted before any error.
func (s *Store) deleteItems(ctx context.Context, feedID uint64, items []knownItem) (int, error) {
	n := 0
	for _, e := range items {
		err := s.items.DeleteMsg(ctx, e.seq)
		if err != nil && !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
			return n, fmt.Errorf("delete item message %d: %w", e.seq, err)
		}
		s.known.removed(feedID, []knownItem{e})
		n++
	}
	return n, nil
}

// itemAt reads the item stored at stream sequence seq.
func (s *Store) itemAt(ctx context.Context, seq uint64) (storage.Item, error) {
	m, err := s.items.GetMsg(ctx, seq)
	if err != nil {
		return storage.Item{}, err
	}
	return decodeItem(m.Data, seq)
}

// SetReducer is Store.SetReducer.
func (b *Backend) SetReducer(r storage.Reducer) { b.s.SetReducer(r) }

// ApplyRetention applies the feed's retention now (Store.ApplyRetention);
// call it periodically so age limits apply through a Reducer to feeds
// that stopped publishing.
func (b *Backend) ApplyRetention(feedID uint64) (int, error) {
	ctx, cancel := b.call()
	defer cancel()
	f, err := b.s.Feed(ctx, feedID)
	if err != nil {
		return 0, err
	}
	return b.s.ApplyRetention(ctx, f)
}

var (
	_ storage.Backend     = (*Backend)(nil)
	_ storage.StateLoader = (*Backend)(nil)
)
