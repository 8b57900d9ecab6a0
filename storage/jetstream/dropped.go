package jetstream

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/slogfeed/slogfeed/storage"
)

// Items retention dropped. As in the bbolt store (storage.DroppedIDs), a
// remote feed remembers the hashes of the IDs of the newest items
// retention dropped, as many as its documents list, and RecordFetch
// refuses a new item whose ID it remembers: the node's index of a feed's
// items (known.go) forgets the removed ones at a restart or a takeover,
// and an item without a date of its own, dated when fetched, would then
// look new. The set is kept in the feed's record under "dropped"
// (storage.EncodeDroppedIDs, base64 in the record's JSON), written with
// the poll's record in its compare-and-set; a record without it (a feed
// that never dropped an item, or one written by an older slogfeed) has
// none. A write by an older slogfeed drops it: the items it held may
// come back once.
//
// Retention removes items inside AddFeedItems, before the record is
// written: the keys it removed wait in the Store (droppedKeys) until the
// write of the same fetch (or of ApplyRetention) takes them.

// droppedKeys holds, per feed, the hashes of the items retention removed
// that no record write has taken yet.
type droppedKeys struct {
	mu    sync.Mutex
	feeds map[uint64][]uint64
}

// add notes the keys (MsgID) of items retention removed from feed id.
func (d *droppedKeys) add(id uint64, items []knownItem) {
	if len(items) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.feeds == nil {
		d.feeds = map[uint64][]uint64{}
	}
	hs := d.feeds[id]
	for _, it := range items {
		if h, ok := keyHash(it.key); ok {
			hs = append(hs, h)
		}
	}
	if len(hs) > storage.MaxDroppedIDs {
		hs = hs[len(hs)-storage.MaxDroppedIDs:]
	}
	d.feeds[id] = hs
}

// peek returns the hashes waiting for feed id, oldest first.
func (d *droppedKeys) peek(id uint64) []uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.feeds[id]
}

// taken forgets the first n hashes waiting for feed id (those a record
// write took).
func (d *droppedKeys) taken(id uint64, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	hs := d.feeds[id]
	if n >= len(hs) {
		delete(d.feeds, id)
		return
	}
	d.feeds[id] = hs[n:]
}

// keyHash is storage.DroppedHash of the item ID of a key made by MsgID:
// the first 8 bytes of the hash the key holds.
func keyHash(key string) (uint64, bool) {
	_, enc, ok := strings.Cut(key, "/")
	if !ok {
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) < 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// withDropped returns the record's dropped set with hashes added as the
// newest drops, keeping as many as the feed's documents list (n: the
// items of the fetch).
func withDropped(rec *feedRecord, hashes []uint64, n int) []byte {
	if len(hashes) == 0 {
		return rec.Dropped
	}
	d, err := storage.DecodeDroppedIDs(rec.Dropped)
	if err != nil {
		d = nil // written again whole
	}
	return storage.EncodeDroppedIDs(d.Add(hashes, storage.DroppedKeep(&rec.Feed, n)))
}

// droppedLookup returns the lookup of the record's dropped set (none when
// it cannot be read: nothing new is refused).
func droppedLookup(rec *feedRecord) func(id string) bool {
	d, err := storage.DecodeDroppedIDs(rec.Dropped)
	if err != nil {
		return func(string) bool { return false }
	}
	return d.Lookup()
}

// keepDropped writes the keys retention removed from feed id outside a
// fetch (ApplyRetention) into its record.
func (s *Store) keepDropped(ctx context.Context, id uint64) error {
	for range maxRetries {
		hs := s.dropped.peek(id)
		if len(hs) == 0 {
			return nil
		}
		rec, rev, err := s.record(ctx, id)
		if err != nil {
			return err
		}
		if rec.Kind != storage.KindRemote {
			s.dropped.taken(id, len(hs))
			return nil
		}
		rec.Dropped = withDropped(&rec, hs, 0)
		data, err := s.encodeRecord(&rec)
		if err != nil {
			return err
		}
		_, err = s.defs.Update(ctx, feedKey(id), data, rev)
		if s.opt.Metrics.kvWrite(DefsBucket, err) == nil {
			s.dropped.taken(id, len(hs))
			s.recent.forget(id)
			s.own.forget(id)
			return nil
		}
		if !IsConflict(err) {
			return fmt.Errorf("dropped items of feed %d: %w", id, err)
		}
	}
	return fmt.Errorf("dropped items of feed %d: %w", id, ErrStale)
}
