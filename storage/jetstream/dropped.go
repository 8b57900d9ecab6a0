package jetstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
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
// (storage.EncodeDroppedIDs, base64 in the record's JSON); a record
// without it (a feed that never dropped an item, or one written by an
// older slogfeed) has none. A write by an older slogfeed drops it: the
// items it held may come back once.
//
// The hashes go into the record before retention deletes the messages
// (rememberDropped): a record write that fails leaves the messages in
// place, for the next retention to delete, and a crash or a takeover
// after the write finds the IDs in the record. This costs a record write
// of its own per retention run that drops items of a feed whose drops
// are remembered (storage.DroppedKeep: a document listing more items than
// MaxItems keeps, or MaxAge set); the other feeds write nothing more.
// RecordFetch hands the record it read to that write and takes back the
// one written (droppedRecords), so that a poll pays no extra read and its
// own write does not conflict with it.

// droppedRecords holds, per feed, the record (and revision) a RecordFetch
// in progress expects: put before its items are added, replaced by
// rememberDropped when it writes the record, taken by the RecordFetch
// when the items are added. Entries live only within a RecordFetch call.
type droppedRecords struct {
	mu    sync.Mutex
	feeds map[uint64]recordAt
}

type recordAt struct {
	rec feedRecord
	rev uint64
}

// put sets the record a RecordFetch of feed id expects.
func (d *droppedRecords) put(id uint64, rec feedRecord, rev uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.feeds == nil {
		d.feeds = map[uint64]recordAt{}
	}
	d.feeds[id] = recordAt{rec, rev}
}

// take returns and forgets the record a RecordFetch of feed id expects.
func (d *droppedRecords) take(id uint64) (feedRecord, uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.feeds[id]
	if ok {
		delete(d.feeds, id)
	}
	return r.rec, r.rev, ok
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

// droppedLookup returns the lookup of the record's dropped set (none when
// it cannot be read: nothing new is refused).
func droppedLookup(rec *feedRecord) func(id string) bool {
	d, err := storage.DecodeDroppedIDs(rec.Dropped)
	if err != nil {
		return func(string) bool { return false }
	}
	return d.Lookup()
}

// errRetentionWidened: the feed's retention was widened since retention
// read it; nothing is removed (the next run uses the new one).
var errRetentionWidened = errors.New("retention widened meanwhile")

// rememberDropped writes the keys of the items retention is about to
// remove from feed f (its Listed counting the items of the call, see
// storage.DroppedKeep) into the feed's record, before their messages are
// deleted. Nothing is written when the feed's drops are not remembered
// or the set holds the keys already. It returns errRetentionWidened,
// writing nothing, when the record's retention is wider than f's.
func (s *Store) rememberDropped(ctx context.Context, f storage.Feed, items []knownItem) error {
	keep := storage.DroppedKeep(&f, 0)
	if len(items) == 0 || f.Kind != storage.KindRemote {
		return nil
	}
	rec, rev, waiting := s.dropped.take(f.ID)
	if keep == 0 && (!waiting || rec.Dropped == nil) {
		// No drop of the feed can come back, and it has no set (as a
		// RecordFetch read the record; retention outside a fetch does
		// not read it for that).
		if waiting {
			s.dropped.put(f.ID, rec, rev)
		}
		return nil
	}
	hashes := make([]uint64, 0, len(items))
	for _, it := range items {
		if h, ok := keyHash(it.key); ok {
			hashes = append(hashes, h)
		}
	}
	for try := range maxRetries {
		if try > 0 || !waiting {
			var err error
			if rec, rev, err = s.record(ctx, f.ID); err != nil {
				return err
			}
		}
		if rec.Kind != storage.KindRemote {
			return nil
		}
		if storage.RetentionWidened(f.Retention, rec.Retention) {
			return errRetentionWidened
		}
		old, err := storage.DecodeDroppedIDs(rec.Dropped)
		if err != nil {
			old = storage.DroppedIDs{} // written again whole
		}
		nd := storage.EncodeDroppedIDs(old.Add(hashes, keep))
		if bytes.Equal(nd, rec.Dropped) {
			if waiting {
				s.dropped.put(f.ID, rec, rev)
			}
			return nil
		}
		nrec := rec
		nrec.Dropped = nd
		data, err := s.encodeRecord(&nrec)
		if err != nil {
			return err
		}
		newRev, err := s.defs.Update(ctx, feedKey(f.ID), data, rev)
		if s.opt.Metrics.kvWrite(DefsBucket, err) == nil {
			s.recent.forget(f.ID)
			s.own.forget(f.ID)
			if waiting {
				s.dropped.put(f.ID, nrec, newRev)
			}
			return nil
		}
		if !IsConflict(err) {
			return fmt.Errorf("dropped items of feed %d: %w", f.ID, err)
		}
	}
	return fmt.Errorf("dropped items of feed %d: %w", f.ID, ErrStale)
}
