package jetstream

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// DefaultOwnedFeeds bounds, when Options.OwnedFeeds is zero, how many
// owned feeds a Store keeps the record of (and trusts the item index of)
// without reading them back: beyond it, polls read as a node without an
// Owner does.
const DefaultOwnedFeeds = 1 << 18

// DefaultOwnedItems bounds, when Options.OwnedItems is zero, how many item
// IDs (of stored items and of items retention removed) the trusted item
// indexes of owned feeds hold in all: 2,097,152 IDs, about 200 MB of heap
// at about 95 bytes per ID. A feed whose index would go beyond it is
// polled as one the node does not own, and an owned feed whose index
// grows past it is again.
const DefaultOwnedItems = 1 << 21

// changedSubject is the core NATS subject a Store announces, by feed ID,
// the feed records it wrote outside a poll (an edit, a delete): the
// node that owns the feed drops its copy at once instead of polling once
// more from it.
const changedSubject = "slogfeed.changed.feed"

// ownMark is when a Store's copy of an owned feed's state was made: the
// Owner's Changed channel, the Store's ownership generation, the NATS
// connection's reconnect count and, with a tenured Owner, the tenure of
// the feed's shard at that moment. The copy holds while the generation
// is the same and the Owner still owns the feed, and then, with a
// tenured Owner, while the shard's tenure is the same (other shards
// gained or lost leave it alone), or else while the channel is open
// (any change of ownership ends it). A shard lost and claimed again
// between two polls has a new tenure, or closed the channel, so the
// copy is not used. A reconnect ends the copies of records
// (recordOwnership): the announcements of other nodes' edits
// (changedSubject) sent while the connection was down are lost, and a
// lease that lapsed for want of the connection renews in the same
// tenure. An item index needs no such rule: a poll's write of items
// names the subject's expected last sequence, and a read checks the
// subject's tail up to the leader's last sequence.
type ownMark struct {
	changed    <-chan struct{}
	gen        uint64
	reconnects uint64
	tenure     uint64 // the shard's Tenure plus one; 0 without a tenured Owner
}

// TenuredOwner is an Owner by shards that counts its claims of each shard
// and tells a shard whose lease lapsed (lease.Node). Given one, SetOwner
// keeps the copies of a feed's state while its shard's tenure is the
// same: a node that gains or loses other shards keeps them, and a shard
// owned again with the tenure it lapsed in was held by no other node
// meanwhile (cluster.Lapser), so the copies of its feeds' state made
// before the lapse hold again.
type TenuredOwner interface {
	cluster.Owner
	cluster.Lapser
	Shards() int
	Tenure(shard int) uint64
}

// ownership answers for a copy of feed id's state marked m whether it
// holds now (use) and, when it does not, whether it may hold again
// (keep): the feed's shard lapsed in the tenure the copy was made in.
type ownership func(id uint64, m ownMark) (use, keep bool)

type ownerBox struct{ o cluster.Owner }

// SetOwner makes the Store keep the records and the item index of the
// feeds o owns from its own writes, so that a poll of such a feed with
// nothing new (304, or only known items) reads nothing: its group
// publish's compare-and-set (record revision, items subject's last
// sequence) refuses a copy made stale by another writer, and the write
// then reads and tries again. A copy is dropped when the feed's shard is
// lost (o.Changed; with a TenuredOwner, when the shard is lost other
// than by a lapse, and kept unused while it is lapsed), on SetShards, on
// a delete or an edit on any node, on any refused write and, for the
// records, when the connection reconnects. nil stops
// it. Call it before polling starts; an error (the subscription to other
// nodes' edits failed) leaves the Store without an Owner.
func (s *Store) SetOwner(o cluster.Owner) error {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	s.ownGen.Add(1)
	s.own.clear()
	if o == nil {
		s.owner.Store(nil)
		return nil
	}
	if s.ownSub == nil {
		sub, err := s.js.Conn().Subscribe(changedSubject, func(m *nats.Msg) {
			if id, err := strconv.ParseUint(string(m.Data), 10, 64); err == nil {
				s.own.forget(id)
			}
		})
		if err != nil {
			s.owner.Store(nil)
			return fmt.Errorf("jetstream store: hear of feed edits: %w", err)
		}
		s.ownSub = sub
	}
	s.owner.Store(&ownerBox{o})
	return nil
}

// markOwned returns the mark of a copy of feed id's state made now,
// false when the Store has no Owner or does not own the feed. The
// channel is read before ownership is asked, so a change in between
// closes it.
func (s *Store) markOwned(id uint64) (ownMark, bool) {
	b := s.owner.Load()
	if b == nil {
		return ownMark{}, false
	}
	m := ownMark{changed: b.o.Changed(), gen: s.ownGen.Load(), reconnects: s.reconnects()}
	if t, sh, ok := tenuredShard(b.o, id); ok {
		m.tenure = t.Tenure(sh) + 1
	}
	return m, b.o.OwnsFeed(id)
}

// reconnects is how many times the Store's NATS connection reconnected.
func (s *Store) reconnects() uint64 {
	return s.js.Conn().Stats().Reconnects
}

// tenuredShard returns o as a TenuredOwner and the shard of feed id, if
// o is one.
func tenuredShard(o cluster.Owner, id uint64) (TenuredOwner, int, bool) {
	t, ok := o.(TenuredOwner)
	if !ok || t.Shards() <= 0 {
		return nil, 0, false
	}
	return t, cluster.ShardOf(cluster.KindFeed, id, t.Shards()), true
}

// recordHolds reports whether a copy of feed id's record marked m holds.
func (s *Store) recordHolds(id uint64, m ownMark) bool {
	use, _ := s.recordOwnership(id, m, s.reconnects())
	return use
}

// recordOwnership is ownership for a copy of feed id's record, the
// connection having reconnected reconnects times: a reconnect since the
// copy was made ends it (ownMark).
func (s *Store) recordOwnership(id uint64, m ownMark, reconnects uint64) (use, keep bool) {
	if m.reconnects != reconnects {
		return false, false
	}
	return s.ownership(id, m)
}

// ownership is the Store's ownership check (the type's doc). Ownership
// is asked before the tenure, so a shard lost and claimed again in
// between shows its new tenure; and again when the shard is not lapsed
// either, so a renewal landing between the two questions does not make
// the shard look neither owned nor lapsed.
func (s *Store) ownership(id uint64, m ownMark) (use, keep bool) {
	b := s.owner.Load()
	if b == nil || m.gen != s.ownGen.Load() {
		return false, false
	}
	if m.tenure == 0 {
		if m.changed != nil {
			select {
			case <-m.changed:
				return false, false
			default:
			}
		}
		return b.o.OwnsFeed(id), false
	}
	t, sh, ok := tenuredShard(b.o, id)
	if !ok {
		return false, false
	}
	if b.o.OwnsFeed(id) {
		return t.Tenure(sh)+1 == m.tenure, false
	}
	tenure, lapsed := t.Lapsed(sh)
	if !lapsed && b.o.OwnsFeed(id) {
		return t.Tenure(sh)+1 == m.tenure, false
	}
	return false, lapsed && tenure+1 == m.tenure
}

// announceChanged tells the owner of feed id, on whatever node, that its
// record was written outside a poll. It is best effort: a lost
// announcement costs the owner one poll from a stale copy, whose write
// is refused and retried from a fresh read.
func (s *Store) announceChanged(id uint64) {
	s.own.forget(id)
	_ = s.js.Conn().Publish(changedSubject, []byte(strconv.FormatUint(id, 10)))
}

// ownRecords are the records of owned feeds as this Store last wrote
// them in a poll, with their revisions.
type ownRecords struct {
	mu    sync.Mutex
	max   int
	feeds map[uint64]ownRecord
	// refuse counts the puts of new feeds still to be refused without a
	// scan after a scan that freed nothing: a node owning more feeds
	// than max would otherwise scan every copy at each such poll.
	refuse int
}

// ownRecord is the copy of a record: as stored, compressed (records.go),
// which takes under half the decoded record's heap, decoded at each
// use (about 13 µs).
type ownRecord struct {
	data []byte
	rev  uint64
	mark ownMark
}

// get returns the copy of feed id's record, leaving it in place.
func (r *ownRecords) get(id uint64) (ownRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.feeds[id]
	return e, ok
}

// take removes and returns the copy of feed id's record: the write that
// follows puts the record it stored back, and a refused or failed write
// leaves none.
func (r *ownRecords) take(id uint64) (ownRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.feeds[id]
	if ok {
		delete(r.feeds, id)
	}
	return e, ok
}

// put keeps e as feed id's copy; when the bound is reached, copies that
// neither hold nor may hold again (valid) are dropped first, and e is
// not kept if none was. After a scan that dropped none, the next max/8
// new feeds are refused without one, so that a node owning more feeds
// than the bound scans the copies once per max/8 of its polls beyond
// it, not at each.
func (r *ownRecords) put(id uint64, e ownRecord, valid func(uint64, ownMark) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.feeds == nil {
		r.feeds = map[uint64]ownRecord{}
	}
	if _, ok := r.feeds[id]; !ok && len(r.feeds) >= r.max {
		if r.refuse > 0 {
			r.refuse--
			return
		}
		for k, old := range r.feeds {
			if !valid(k, old.mark) {
				delete(r.feeds, k)
			}
		}
		if len(r.feeds) >= r.max {
			r.refuse = r.max / 8
			return
		}
	}
	r.feeds[id] = e
}

func (r *ownRecords) forget(id uint64) {
	r.mu.Lock()
	delete(r.feeds, id)
	r.mu.Unlock()
}

func (r *ownRecords) clear() {
	r.mu.Lock()
	clear(r.feeds)
	r.refuse = 0
	r.mu.Unlock()
}

// ownedRecord returns the Store's copy of feed id's record when it holds
// (see SetOwner), dropping one that does not.
func (s *Store) ownedRecord(id uint64) (feedRecord, bool) {
	e, ok := s.own.get(id)
	if !ok {
		return feedRecord{}, false
	}
	if use, keep := s.recordOwnership(id, e.mark, s.reconnects()); !use {
		if !keep {
			s.own.forget(id)
		}
		return feedRecord{}, false
	}
	rec, err := decodeRecord(id, e.data)
	if err != nil {
		s.own.forget(id)
		return feedRecord{}, false
	}
	return rec, true
}

// takeOwnedRecord is ownedRecord for the write of a poll: the copy is
// removed, with its revision.
func (s *Store) takeOwnedRecord(id uint64) (feedRecord, uint64, bool) {
	e, ok := s.own.take(id)
	if !ok || !s.recordHolds(id, e.mark) {
		return feedRecord{}, 0, false
	}
	rec, err := decodeRecord(id, e.data)
	if err != nil {
		return feedRecord{}, 0, false
	}
	return rec, e.rev, true
}

// keepOwnedRecord keeps rec, just written as data (its stored form) at
// revision rev by a poll that began with mark m, when the feed is a
// remote one the Store still owns. The copy is compressed whether or not
// the cluster's records are.
func (s *Store) keepOwnedRecord(rec *feedRecord, data []byte, rev uint64, m ownMark) {
	reconnects := s.reconnects()
	if rec.Kind != storage.KindRemote || rev == 0 || !s.recordHolds(rec.ID, m) {
		return
	}
	// A scan of the copies at the bound keeps those that hold or may
	// hold again, the reconnect count read once for it.
	kept := func(id uint64, m ownMark) bool {
		use, keep := s.recordOwnership(id, m, reconnects)
		return use || keep
	}
	s.own.put(rec.ID, ownRecord{data: bytes.Clone(packRecord(data, true)), rev: rev, mark: m}, kept)
}
