package jetstream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultIDRelist is how long Backend.FeedIDs answers from the feed IDs
// its watch keeps before it lists the defs bucket's keys again: a bound
// on what a watch that stopped without a sign could miss (a watch that
// ends brings a listing at once, a reconnect one ReconnectRelist later,
// in the background). The servers answer a listing by walking every key
// of the bucket (at a million feeds the listings every 10 minutes took
// 9% of a three-node cluster's CPU), so the backstop is hourly.
const DefaultIDRelist = time.Hour

// ReconnectRelist is how long after Backend.FeedIDs first sees that its
// NATS connection reconnected it lists the keys again, in the
// background. The watch's ordered consumer resumes where it stopped, so
// that listing is insurance; and a reconnect comes with a takeover (the
// dead node's server was some nodes' server), whose record reads it
// would slow: at a million feeds a listing cost the bucket's leader
// about 4 s of CPU (a map and a sort of every key), in the seconds the
// survivors were reading the records of the feeds they took over.
const ReconnectRelist = 5 * time.Minute

// feedIDSet is the feed IDs a Backend knows: the defs bucket's keys as
// one listing found them, kept current by a keys-only watch of the
// bucket's new writes, started before that listing so that nothing
// written between the two is missed. A clustered aggregator asks for the
// IDs every resync; listing a million keys costs the bucket's leader
// seconds of CPU and a few hundred megabytes of transient heap, a
// watched set a merge of what changed since the last call.
//
// The set lists again when the watch ended (its subscription closed:
// the caller waits for the listing), and in the background, answering
// from the set meanwhile, ReconnectRelist after the NATS connection
// reconnected since the listing (the watch's ordered consumer resumes
// where it stopped; the listing is insurance) or when DefaultIDRelist
// passed.
type feedIDSet struct {
	listMu sync.Mutex // one listing at a time

	mu         sync.Mutex
	ids        []uint64            // ascending, as of the last merge
	added      []uint64            // put by the watch since, not in ids
	deleted    map[uint64]struct{} // deleted or purged, seen by the watch since
	watch      jetstream.KeyWatcher
	watchGen   uint64 // bumped when a watch starts; an ended one clears watch if still current
	listedAt   time.Time
	reconnects uint64
	// reconnected: when a reconnect since the listing was first seen
	// (zero: none).
	reconnected time.Time
	relisting   bool // a background listing runs (current)

	// While a listing runs (listing), what the watch saw since it
	// started is also kept apart: a merge meanwhile (current) moves
	// added into ids and clears it, and the listing, which may have
	// walked past a key created after it began, replaces ids.
	listing     bool
	listAdded   []uint64
	listDeleted map[uint64]struct{}

	// recent is the newest write the watch saw of each feed written
	// within recentHorizon of the newest write it saw (newest), by the
	// stream's clock; covered is the time from which it saw every
	// write (zero: not known yet). A watch that ends clears them.
	recent     map[uint64]time.Time
	covered    time.Time
	newest     time.Time
	lastPruned time.Time
}

// recentHorizon is how long the set remembers a feed's write: what
// FeedsWrittenSince answers without reading the stream (a takeover asks
// for the writes since its shards' state snapshots, a few minutes).
const recentHorizon = 10 * time.Minute

// FeedIDs lists the IDs of the stored feeds, ascending, without reading
// their records: the keys of the defs bucket, from a set a keys-only
// watch of the bucket keeps current (one listing of the keys as the
// stream's leader knows them when the set starts, after a reconnect and
// every DefaultIDRelist). Deleted feeds may be among them (a listing
// keeps their keys' delete markers); Feed tells them apart. A clustered
// aggregator asks for these every resync.
func (b *Backend) FeedIDs() ([]uint64, error) {
	return b.ids.get(b)
}

func (x *feedIDSet) get(b *Backend) ([]uint64, error) {
	now := b.s.opt.Now()
	reconnects := b.s.js.Conn().Stats().Reconnects
	if out, ok := x.current(b, now, reconnects); ok {
		return out, nil
	}
	x.listMu.Lock()
	defer x.listMu.Unlock()
	if out, ok := x.current(b, now, reconnects); ok {
		return out, nil // listed by another caller meanwhile
	}
	ctx, cancel := b.call()
	defer cancel()
	if err := x.list(ctx, b, now, reconnects); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.ids), nil
}

// current returns the set when a watch follows it (ok). When a listing
// is due (ReconnectRelist after a reconnect since the last, or
// DefaultIDRelist passed) it starts one in the background and answers
// from the set meanwhile: a listing of a million keys takes seconds, and
// a reconnect is what a takeover brings (the dead node's server was
// some nodes' server), so the takeover is neither held up by it nor
// made to share the servers' CPU with it.
func (x *feedIDSet) current(b *Backend, now time.Time, reconnects uint64) (out []uint64, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.watch == nil || x.listedAt.IsZero() {
		return nil, false
	}
	x.mergeLocked(x.ids)
	due := now.Sub(x.listedAt) >= DefaultIDRelist
	if x.reconnects != reconnects {
		if x.reconnected.IsZero() {
			x.reconnected = now
		}
		due = due || now.Sub(x.reconnected) >= ReconnectRelist
	}
	if due && !x.relisting {
		x.relisting = true
		go x.relist(b, now, reconnects)
	}
	return slices.Clone(x.ids), true
}

// relistTimeout bounds a background listing.
const relistTimeout = 2 * time.Minute

// relist lists the keys again in the background (current).
func (x *feedIDSet) relist(b *Backend, now time.Time, reconnects uint64) {
	x.listMu.Lock()
	defer x.listMu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, relistTimeout)
	defer cancel()
	_ = x.list(ctx, b, now, reconnects) // failed: the next call starts another
	x.mu.Lock()
	x.relisting = false
	x.mu.Unlock()
}

// list starts a new watch, then lists the bucket's feed keys and makes
// them the set, with what the watch saw since merged in. The caller
// holds listMu.
func (x *feedIDSet) list(ctx context.Context, b *Backend, now time.Time, reconnects uint64) error {
	x.beginListing()
	if err := x.startWatch(b); err != nil {
		x.endListing(nil, false, now, reconnects)
		return fmt.Errorf("list feed IDs: watch the feed records: %w", err)
	}
	listed, err := b.s.listIDs(ctx, feedKeyPrefix)
	b.s.opt.Metrics.listed()
	if err != nil {
		x.endListing(nil, false, now, reconnects)
		return fmt.Errorf("list feed IDs: %w", err)
	}
	x.endListing(listed, true, now, reconnects)
	return nil
}

// beginListing starts keeping apart what the watch sees, before the
// listing's watch starts.
func (x *feedIDSet) beginListing() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.listing, x.listAdded, x.listDeleted = true, nil, nil
}

// endListing makes listed (ascending) the set, with what the watch saw
// since the listing began: the feeds created meanwhile that the listing
// missed, less those deleted meanwhile that it found. When the listing
// failed (!ok) the set stays as it is.
func (x *feedIDSet) endListing(listed []uint64, ok bool, now time.Time, reconnects uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	added, deleted := x.listAdded, x.listDeleted
	x.listing, x.listAdded, x.listDeleted = false, nil, nil
	if !ok {
		return
	}
	if len(added) > 0 {
		listed = append(listed, added...)
		slices.Sort(listed)
		listed = slices.Compact(listed)
	}
	if len(deleted) > 0 {
		listed = slices.DeleteFunc(listed, func(id uint64) bool {
			_, gone := deleted[id]
			return gone
		})
	}
	x.mergeLocked(listed)
	x.listedAt, x.reconnects, x.reconnected = now, reconnects, time.Time{}
}

// mergeLocked makes ids listed (ascending, owned by the set; ids itself
// to bring it up to date) with the watch's puts added and its deletes
// removed. Puts are few (feeds created since the last call), so the
// sort finds a sorted run with a short tail.
func (x *feedIDSet) mergeLocked(listed []uint64) {
	merged := listed
	if len(x.added) > 0 {
		merged = append(merged, x.added...)
		slices.Sort(merged)
		merged = slices.Compact(merged)
	}
	if len(x.deleted) > 0 {
		merged = slices.DeleteFunc(merged, func(id uint64) bool {
			_, gone := x.deleted[id]
			return gone
		})
	}
	x.ids, x.added, x.deleted = merged, x.added[:0], nil
}

// note records what the watch saw of feed id: a write at at (by the
// stream's clock), a delete when deleted.
func (x *feedIDSet) note(id uint64, deleted bool, at time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.wroteLocked(id, at)
	if deleted {
		if x.deleted == nil {
			x.deleted = map[uint64]struct{}{}
		}
		x.deleted[id] = struct{}{}
		if x.listing {
			if x.listDeleted == nil {
				x.listDeleted = map[uint64]struct{}{}
			}
			x.listDeleted[id] = struct{}{}
		}
		return
	}
	if _, found := slices.BinarySearch(x.ids, id); found {
		return // a poll's write of a listed feed: most of what the watch sees
	}
	delete(x.deleted, id)
	x.added = append(x.added, id)
	if x.listing {
		delete(x.listDeleted, id)
		x.listAdded = append(x.listAdded, id)
	}
}

// wroteLocked remembers feed id's write at at, and forgets the writes
// past recentHorizon once a minute.
func (x *feedIDSet) wroteLocked(id uint64, at time.Time) {
	if at.IsZero() {
		return
	}
	if x.recent == nil {
		x.recent = map[uint64]time.Time{}
	}
	if at.After(x.recent[id]) {
		x.recent[id] = at
	}
	if x.covered.IsZero() {
		x.covered, x.lastPruned = at, at
	}
	if at.After(x.newest) {
		x.newest = at
	}
	if x.newest.Sub(x.lastPruned) < time.Minute {
		return
	}
	horizon := x.newest.Add(-recentHorizon)
	maps.DeleteFunc(x.recent, func(_ uint64, t time.Time) bool { return t.Before(horizon) })
	if x.covered.Before(horizon) {
		x.covered = horizon
	}
	x.lastPruned = x.newest
}

// writtenSince returns the feeds the watch saw written at or after t
// with the time of each one's newest write; ok is false when the watch
// may have missed some (it began, or forgot, after t).
func (x *feedIDSet) writtenSince(t time.Time) (map[uint64]time.Time, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.watch == nil || x.covered.IsZero() || t.Before(x.covered) {
		return nil, false
	}
	out := map[uint64]time.Time{}
	for id, at := range x.recent {
		if !at.Before(t) {
			out[id] = at
		}
	}
	return out, true
}

// startWatch starts a watch on the defs bucket's feed keys, headers
// only, from the bucket's next write, in place of the current one (the
// set keeps being followed meanwhile). It runs until the Backend closes
// or its subscription ends.
func (x *feedIDSet) startWatch(b *Backend) error {
	// The watch's subscription ends with the context it was made with
	// (nats.go), so it gets the Backend's, which Close cancels; the
	// consumer's creation is bounded by the JetStream context's timeout.
	w, err := b.s.defs.Watch(b.ctx, feedKeyPrefix+"*", jetstream.MetaOnly(), jetstream.UpdatesOnly())
	if err != nil {
		return err
	}
	x.mu.Lock()
	old := x.watch
	x.watch = w
	x.watchGen++
	gen := x.watchGen
	x.mu.Unlock()
	if old != nil {
		_ = old.Stop()
	}
	go x.follow(b.ctx, w, gen)
	return nil
}

// follow applies w's updates to the set until w ends or ctx is done.
func (x *feedIDSet) follow(ctx context.Context, w jetstream.KeyWatcher, gen uint64) {
	defer func() {
		x.mu.Lock()
		if x.watchGen == gen {
			x.watch = nil // the next FeedIDs lists again
			// The next watch starts from its own first write.
			x.recent, x.covered, x.newest, x.lastPruned = nil, time.Time{}, time.Time{}, time.Time{}
		}
		x.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			id, err := strconv.ParseUint(strings.TrimPrefix(e.Key(), feedKeyPrefix), 10, 64)
			if err != nil {
				continue
			}
			x.note(id, e.Operation() != jetstream.KeyValuePut, e.Created())
		}
	}
}
