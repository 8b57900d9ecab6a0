package jetstream

import (
	"cmp"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// DefaultKnownFeeds is how many feeds' item IDs a Store keeps in memory
// when Options.KnownFeeds is zero; a feed beyond it is reloaded from the
// stream on its next AddItems.
const DefaultKnownFeeds = 4096

// Headers of every item message. The item's key (MsgID of its feed and
// ID) and its sort time let a Store rebuild a feed's index from the
// headers alone (a headers-only consumer), without the items' bodies.
const (
	// ItemKeyHeader holds MsgID(feed, item ID). Ordinary items also carry
	// it as Nats-Msg-Id (de-duplication); digest items of a Reducer, which
	// replace an item of the same ID, carry it only here.
	ItemKeyHeader = "Slogfeed-Item"
	// ItemTimeHeader holds the item's publish time (its fetch time when it
	// has none), what retention and reads by publish time order by: in
	// Unix nanoseconds with a sign ("+1772323200000000000"), or, for a
	// time outside the years 1678 to 2262 that those do not hold, in RFC
	// 3339 (timeHeader).
	ItemTimeHeader = "Slogfeed-Time"
)

// known is each Store's index of the items of recently used feeds: per
// item key (MsgID), the stream sequence and the sort time (publish time,
// else fetch time) of the message holding it, and the keys of the newest
// items retention removed (up to keptRemoved of them), so AddItems stores
// an item once even after the stream's duplicate window and retention
// orders by publish time without reading the items. A feed's index is complete up to a stream sequence;
// when the feed's subject has messages beyond it (this node's own
// publishes, or another node's: a sensor reading posted elsewhere, the
// overlap poll at a takeover), only those are read.
//
// The index of a feed the node owns (Store.SetOwner) is trusted once
// synced: it is complete up to the subject's last sequence for as long
// as the node owns the feed and only its own publishes extend it, so
// its polls read nothing back. Trusted indexes are outside the bound of
// recently used feeds (max), up to ownMax of them holding up to itemMax
// item entries (stored or removed) in all: a feed whose trust would go
// beyond either stays untrusted, and a trusted index that grows past
// itemMax loses its trust. A refused publish, a publish that does not
// extend the index, or a change of the owned shards ends the trust.
type known struct {
	mu       sync.Mutex
	max      int
	ownMax   int
	itemMax  int
	order    *list.List // of uint64 feed IDs not trusted, most recent first
	feeds    map[uint64]*knownFeed
	nTrusted int     // feeds with a trusted index
	nItems   int     // item entries of the trusted indexes
	swept    ownMark // the ownership the trusted indexes were last checked against
	pend     knownPending
}

// knownItem is where and when an item of a feed is stored.
type knownItem struct {
	key string // MsgID(feed, item ID)
	seq uint64 // stream sequence; 0: removed by retention
	at  int64  // sort time (sortNanos)
	// loose: at came from a time header that does not vouch for it
	// (parseTimeHeader), so the item's sort time may be another.
	loose bool
}

type knownFeed struct {
	// items holds the stream sequence of each item key, 0 for an item
	// removed by retention; a stored item's sort time is its entry's in
	// bySeq, a removed one's in goneAt.
	items  map[string]uint64
	goneAt map[string]int64
	gone   int // entries of items removed by retention (seq 0)
	// bySeq holds the entries of the stored items (seq ≠ 0) by sequence,
	// byAt their sequences by sort time then sequence (knownorder.go).
	bySeq []knownEntry
	byAt  []uint64
	// loose holds the sequences of stored items whose entry is loose
	// (knownItem.loose); nil when none.
	loose map[uint64]struct{}
	// pend holds the entries put and dropped since bySeq and byAt were
	// last brought up to date (settle): the known's, which every change
	// settles before it lets go of known.mu.
	pend *knownPending

	lastSeq uint64        // items are complete up to this stream sequence
	synced  int64         // when lastSeq was last checked against the stream, Unix nanoseconds
	elem    *list.Element // nil while trusted
	trust   ownMark       // when trusted: the ownership it holds under
	// shadow: two messages of the feed were seen holding one key (a
	// digest replacing an item, two nodes' digests of the same items),
	// so the subject may hold a message the index has no entry for.
	shadow bool
}

func newKnown(max, ownMax, itemMax int) *known {
	return &known{max: max, ownMax: ownMax, itemMax: itemMax, order: list.New(), feeds: map[uint64]*knownFeed{}}
}

// touch marks f as recently used.
func (k *known) touch(f *knownFeed) {
	if f.elem != nil {
		k.order.MoveToFront(f.elem)
	}
}

// untrustLocked ends f's trust: it is one of the recently used feeds
// again.
func (k *known) untrustLocked(id uint64, f *knownFeed) {
	if f.elem != nil {
		return
	}
	f.trust = ownMark{}
	f.elem = k.order.PushFront(id)
	k.nTrusted--
	k.nItems -= len(f.items)
}

// putLocked records it in f's index, counting a new entry of a trusted
// index.
func (k *known) putLocked(f *knownFeed, it knownItem) {
	n := len(f.items)
	f.put(it)
	if f.elem == nil {
		k.nItems += len(f.items) - n
	}
}

// boundLocked ends the trust of f when the trusted indexes hold more
// item entries than itemMax.
func (k *known) boundLocked(id uint64, f *knownFeed) {
	if f.elem == nil && k.nItems > k.itemMax {
		k.untrustLocked(id, f)
		k.evictLocked()
	}
}

// evictLocked drops the least recently used feeds beyond the bound.
func (k *known) evictLocked() {
	for k.order.Len() > k.max {
		old := k.order.Remove(k.order.Back()).(uint64)
		delete(k.feeds, old)
	}
}

// trust makes the feed's index trusted under ownership m (the node owned
// the feed when the sync that made the index complete began). Trusted
// indexes whose ownership neither holds nor may hold again by own are
// checked, and untrusted, whenever the Owner's Changed channel or the
// generation of m differs from the last check's.
func (k *known) trust(feedID uint64, m ownMark, own ownership) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok {
		return
	}
	// A mark whose channel is closed began before a change a newer
	// mark's sweep covers: it does not sweep again.
	stale := false
	if m.changed != nil {
		select {
		case <-m.changed:
			stale = true
		default:
		}
	}
	if sweep := (ownMark{changed: m.changed, gen: m.gen}); !stale && k.swept != sweep {
		for id, g := range k.feeds {
			if g.elem != nil {
				continue
			}
			if use, keep := own(id, g.trust); !use && !keep {
				k.untrustLocked(id, g)
			}
		}
		k.swept = sweep
	}
	if f.elem == nil {
		f.trust = m
		return
	}
	if k.nTrusted >= k.ownMax || len(f.items) > k.itemMax-k.nItems {
		return
	}
	k.order.Remove(f.elem)
	f.elem, f.trust = nil, m
	k.nTrusted++
	k.nItems += len(f.items)
	k.evictLocked()
}

// distrust ends the trust in the feed's index, if any.
func (k *known) distrust(feedID uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.feeds[feedID]; ok {
		k.untrustLocked(feedID, f)
		k.evictLocked()
	}
}

// trusted reports whether the feed's index is trusted and its ownership
// still holds by own; one whose ownership may not hold again is
// untrusted.
func (k *known) trusted(feedID uint64, own ownership) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok || f.elem != nil {
		return false
	}
	use, keep := own(feedID, f.trust)
	if use || keep {
		return use
	}
	k.untrustLocked(feedID, f)
	k.evictLocked()
	return false
}

// upTo returns the sequence the feed's index is complete up to.
func (k *known) upTo(feedID uint64) (uint64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok {
		return 0, false
	}
	k.touch(f)
	return f.lastSeq, true
}

// extend adds items read from the stream and makes the feed's index
// complete up to lastSeq; reset starts the index afresh. It evicts the
// least recently used feed beyond the bound.
func (k *known) extend(feedID, lastSeq uint64, items []knownItem, reset bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok {
		f = &knownFeed{elem: k.order.PushFront(feedID), pend: &k.pend}
		k.feeds[feedID] = f
		reset = true
	}
	if reset {
		k.untrustLocked(feedID, f) // before the entries it counted go
		f.items = make(map[string]uint64, len(items))
		f.goneAt, f.gone, f.shadow = nil, 0, false
		f.bySeq, f.byAt, f.loose = nil, nil, nil
	}
	for _, it := range items {
		k.putLocked(f, it)
	}
	f.settle()
	f.lastSeq = lastSeq
	k.touch(f)
	k.evictLocked()
	k.boundLocked(feedID, f)
}

// put records it unless the index has a later message of the same key,
// or the same message with a sort time it vouches for and it does not.
// The entry's place in bySeq and byAt is pending until settle.
func (f *knownFeed) put(it knownItem) {
	old, ok := f.items[it.key]
	if ok && old != 0 && it.seq != 0 && old != it.seq {
		f.shadow = true
	}
	if ok && old > it.seq {
		return
	}
	if ok && it.seq != 0 && old == it.seq && (it.loose || !f.isLoose(old)) {
		return
	}
	if ok && old == 0 && it.seq != 0 {
		f.gone-- // a removed item stored again
		delete(f.goneAt, it.key)
	}
	if ok && old != 0 {
		f.drop(knownEntry{seq: old, at: f.atOf(old)})
	}
	f.items[it.key] = it.seq
	if it.seq == 0 {
		f.setGoneAt(it.key, it.at)
		return
	}
	f.pend.addPut(knownEntry{seq: it.seq, at: it.at})
	if it.loose {
		if f.loose == nil {
			f.loose = map[uint64]struct{}{}
		}
		f.loose[it.seq] = struct{}{}
	}
}

// drop takes the stored entry e out of bySeq and byAt (pending until
// settle).
func (f *knownFeed) drop(e knownEntry) {
	f.pend.drop = append(f.pend.drop, e)
	if f.loose != nil {
		delete(f.loose, e.seq)
		if len(f.loose) == 0 {
			f.loose = nil
		}
	}
}

// atOf returns the sort time of the stored item at seq.
func (f *knownFeed) atOf(seq uint64) int64 {
	if at, ok := f.pend.atOf(seq); ok {
		return at
	}
	if i, ok := slices.BinarySearchFunc(f.bySeq, knownEntry{seq: seq}, bySeqOrder); ok {
		return f.bySeq[i].at
	}
	return 0
}

// setGoneAt records the sort time of the removed item of key.
func (f *knownFeed) setGoneAt(key string, at int64) {
	if f.goneAt == nil {
		f.goneAt = map[string]int64{}
	}
	f.goneAt[key] = at
}

// isLoose reports whether the stored entry at seq is loose.
func (f *knownFeed) isLoose(seq uint64) bool {
	_, ok := f.loose[seq]
	return ok
}

// checked notes that the feed's index was found complete at at.
func (k *known) checked(feedID uint64, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.feeds[feedID]; ok {
		f.synced = at.UnixNano()
	}
}

// checkedSince reports whether the feed's index was found complete at or
// after t.
func (k *known) checkedSince(feedID uint64, t time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	return ok && f.synced >= t.UnixNano()
}

// advance records it, stored right after the sequence the feed's index
// was complete up to with nothing in between (its publish expected that
// sequence), and makes the index complete up to it; a trusted index stays
// trusted. An index that has moved or was evicted since is left alone
// (false).
func (k *known) advance(feedID, from uint64, it knownItem) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok || f.lastSeq != from || it.seq <= from {
		return false
	}
	k.putLocked(f, it)
	f.settle()
	f.lastSeq = it.seq
	k.boundLocked(feedID, f)
	return true
}

// add records items just stored; they do not make the index complete to
// a later sequence (other writers may have published in between), so
// the index is no longer trusted.
func (k *known) add(feedID uint64, items []knownItem) {
	if len(items) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.feeds[feedID]; ok {
		for _, it := range items {
			k.putLocked(f, it)
		}
		f.settle()
		k.untrustLocked(feedID, f)
		k.evictLocked()
	}
}

// keptRemoved is how many keys of removed items a feed's index keeps
// at least: it forgets the oldest of them (by sort time) when it holds
// twice as many. A forgotten key is one a freshly read index (after a
// takeover or an eviction) would not have either, since the stream no
// longer holds its message, and an item offered again under it is
// treated alike: AddItems refuses an item no newer than the oldest kept
// one of a full feed or older than the feed's maximum age, which is what
// retention removed, and stores it again only if the feed has had room
// for it since (its retention raised), as the bbolt store does. The keys
// kept spare the fetcher the items of a document that lists more items
// than the feed keeps; without a bound an index would grow by every item
// its feed ever had.
const keptRemoved = 64

// removed marks the items retention removed (a key whose index entry has
// moved to another message since is left alone): their keys stay known,
// so the items do not come back as new, until the index holds 2 ×
// keptRemoved of them and forgets the oldest.
func (k *known) removed(feedID uint64, items []knownItem) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok {
		return
	}
	for _, it := range items {
		if cur, ok := f.items[it.key]; ok && cur == it.seq && cur != 0 {
			at := f.atOf(cur)
			f.drop(knownEntry{seq: cur, at: at})
			f.items[it.key] = 0
			f.setGoneAt(it.key, at)
			f.gone++
		}
	}
	f.settle()
	if f.gone < 2*keptRemoved {
		return
	}
	n := f.forgetRemoved(keptRemoved)
	if f.elem == nil {
		k.nItems -= n
	}
}

// forgetRemoved drops the keys of removed items but the newest keep (by
// sort time, then key) and returns how many it dropped.
func (f *knownFeed) forgetRemoved(keep int) int {
	gone := make([]knownItem, 0, f.gone)
	for key, at := range f.goneAt {
		gone = append(gone, knownItem{key: key, at: at})
	}
	if len(gone) <= keep {
		f.gone = len(gone)
		return 0
	}
	slices.SortFunc(gone, func(a, b knownItem) int {
		if c := cmp.Compare(b.at, a.at); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	for _, it := range gone[keep:] {
		delete(f.items, it.key)
		delete(f.goneAt, it.key)
	}
	f.gone = keep
	return len(gone) - keep
}

// has reports whether the feed's index holds the key, stored or removed.
func (k *known) has(feedID uint64, key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok {
		return false
	}
	_, in := f.items[key]
	return in
}

// live returns the stored items of the feed's index, oldest first by
// sort time, then sequence; false when the feed has no index.
func (k *known) live(feedID uint64) ([]knownItem, bool) {
	k.mu.Lock()
	f, ok := k.feeds[feedID]
	var out []knownItem
	if ok {
		out = make([]knownItem, 0, len(f.bySeq))
		for key, seq := range f.items {
			if seq != 0 {
				out = append(out, knownItem{key: key, seq: seq, at: f.atOf(seq), loose: f.isLoose(seq)})
			}
		}
	}
	k.mu.Unlock()
	slices.SortFunc(out, func(a, b knownItem) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return out, ok
}

// lookup returns the index entry of key and whether the index can tell
// where the item is: it has the feed and no message of the subject can
// be missing from it (no key was seen in two messages).
func (k *known) lookup(feedID uint64, key string) (knownItem, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok || f.shadow {
		return knownItem{}, false
	}
	k.touch(f)
	seq := f.items[key]
	if seq == 0 {
		return knownItem{key: key, at: f.goneAt[key]}, true
	}
	return knownItem{key: key, seq: seq, at: f.atOf(seq), loose: f.isLoose(seq)}, true
}

// oldest returns how many items the feed's index holds stored and the
// oldest sort time among them (0, 0 when the feed has no index or none).
func (k *known) oldest(feedID uint64) (n int, at int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok || len(f.byAt) == 0 {
		return 0, 0
	}
	return len(f.byAt), f.atOf(f.byAt[0])
}

// stored returns the sequence of the message holding key (0 when none).
func (k *known) stored(feedID uint64, key string) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.feeds[feedID]; ok {
		return f.items[key]
	}
	return 0
}

func (k *known) forget(feedID uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.feeds[feedID]; ok {
		if f.elem != nil {
			k.order.Remove(f.elem)
		} else {
			k.nTrusted--
			k.nItems -= len(f.items)
		}
		delete(k.feeds, feedID)
	}
}

// sortTime is what retention orders items by: the publish time, the
// fetch time for an item without one (as the bbolt store).
func sortTime(it *storage.Item) time.Time {
	if it.Published.IsZero() {
		return it.Fetched
	}
	return it.Published
}

// itemHeaders returns the headers of item it's message.
func itemHeaders(key string, it *storage.Item) nats.Header {
	return nats.Header{
		ItemKeyHeader:  []string{key},
		ItemTimeHeader: []string{timeHeader(sortTime(it))},
	}
}

// directCatchUp is how many new messages of a feed syncKnown reads by
// direct gets before it reads the rest through a consumer.
const directCatchUp = 16

// syncKnown brings this Store's index of feedID up to the subject's last
// message: nothing to read when no one published to the feed since, the
// new messages' headers when someone did, everything when the Store has
// no index of the feed or the subject's last message was removed below
// what it remembers.
func (s *Store) syncKnown(ctx context.Context, feedID uint64) error {
	return s.syncKnownFrom(ctx, feedID, streamLog{s})
}

// syncKnownFrom is syncKnown reading the feed's messages through log.
//
// Every "nothing more" comes from the stream's leader, which holds every
// acknowledged message: whether a message a direct get or a fetch did not
// return exists, and for a feed the node owns the subject's last sequence. A replica that
// lags the leader (one just restarted, say, at a takeover) answers a
// direct get "not found" and a fetch with nothing for messages it has not
// stored yet; taking that for "removed" marked the index complete over
// items it never read, and the new owner stored them again.
func (s *Store) syncKnownFrom(ctx context.Context, feedID uint64, log itemLog) error {
	// Ownership is noted before the read: a change during it closes the
	// mark's channel and the index is not trusted.
	mark, owned := s.markOwned(feedID)
	subject := itemSubject(feedID)
	s.opt.Metrics.read("items")
	last, err := log.lastSeq(ctx, subject, owned)
	if err != nil {
		return fmt.Errorf("items of feed %d: %w", feedID, err)
	}
	upTo, ok := s.known.upTo(feedID)
	if ok && upTo == last {
		s.known.checked(feedID, s.opt.Now())
		if owned {
			s.known.trust(feedID, mark, s.ownership)
		}
		return nil
	}
	reset := !ok || upTo > last
	if reset {
		upTo = 0
	}
	var items []knownItem
	// A few new messages (this node's own publishes, a reading posted
	// elsewhere) are read by direct gets, answered by any replica without
	// a consumer: a consumer per poll would pile up against the stream's
	// consumer limit (1,000 by default) at a few hundred polls a second.
	next := upTo + 1
	for range directCatchUp {
		if next > last {
			break
		}
		m, err := log.get(ctx, next, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// Removed since, or not on this replica yet: the leader says.
			has, err := log.hasNext(ctx, subject, next, last)
			if err != nil {
				return fmt.Errorf("item IDs of feed %d: %w", feedID, err)
			}
			if !has {
				next = last + 1
			}
			break // what is left comes through a consumer
		}
		if err != nil {
			return fmt.Errorf("item IDs of feed %d: %w", feedID, err)
		}
		it, err := s.knownOf(ctx, m.Sequence, m.Header)
		if err != nil {
			return fmt.Errorf("item IDs of feed %d: %w", feedID, err)
		}
		if it.key != "" {
			items = append(items, it)
		}
		next = m.Sequence + 1
	}
	if next <= last {
		cons, release, err := log.consumer(ctx, subject, next)
		if err != nil {
			return fmt.Errorf("item IDs of feed %d: %w", feedID, err)
		}
		defer release()
		more := func(ctx context.Context, from uint64) (bool, error) { return log.hasNext(ctx, subject, from, last) }
		err = readPass(ctx, cons, last, more, fmt.Sprintf("item IDs of feed %d", feedID), func(msg jetstream.Msg) error {
			md, err := msg.Metadata()
			if err != nil {
				return err
			}
			if md.Sequence.Stream > last {
				return nil // published since the last sequence was read: the next sync reads it
			}
			it, err := s.knownOf(ctx, md.Sequence.Stream, msg.Headers())
			if err != nil {
				return err
			}
			if it.key != "" {
				items = append(items, it)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	s.known.extend(feedID, last, items, reset)
	s.known.checked(feedID, s.opt.Now())
	if owned {
		s.known.trust(feedID, mark, s.ownership)
	}
	return nil
}

// itemLog is how syncKnownFrom reads a feed's item messages.
type itemLog interface {
	// lastSeq is the last sequence on subject, 0 when there is none:
	// the stream leader's when the node owns the feed.
	lastSeq(ctx context.Context, subject string, owned bool) (uint64, error)
	// get is the first message on subject at or after seq, from any
	// replica (jetstream.ErrMsgNotFound when that replica has none).
	get(ctx context.Context, seq uint64, subject string) (*jetstream.RawStreamMsg, error)
	// hasNext reports whether the leader holds a message on subject at
	// a sequence from from to to.
	hasNext(ctx context.Context, subject string, from, to uint64) (bool, error)
	// consumer is an ordered consumer of the headers of subject's
	// messages from sequence from, and what releases it.
	consumer(ctx context.Context, subject string, from uint64) (passConsumer, func(), error)
}

// streamLog is the items stream as an itemLog. The subject's last
// sequence comes from the leader for a feed the node owns (whose polls
// add the items a stale index would take for new: the index a takeover
// builds), else from any replica (a direct get: a sensor reading posted
// to a node that does not own the sensor's feed costs no request to the
// leader; a replica that lags only makes the index complete up to an
// earlier sequence).
type streamLog struct{ s *Store }

func (l streamLog) lastSeq(ctx context.Context, subject string, owned bool) (uint64, error) {
	if owned {
		return l.s.leaderLastSeq(ctx, ItemsStream, subject)
	}
	m, err := retryNoResponders(ctx, func() (*jetstream.RawStreamMsg, error) { return l.s.items.GetLastMsgForSubject(ctx, subject) })
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return m.Sequence, nil
}

func (l streamLog) get(ctx context.Context, seq uint64, subject string) (*jetstream.RawStreamMsg, error) {
	// A stream leader change leaves the stream without responders for a
	// moment: retryNoResponders waits it out.
	return retryNoResponders(ctx, func() (*jetstream.RawStreamMsg, error) {
		return l.s.items.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
	})
}

func (l streamLog) hasNext(ctx context.Context, subject string, from, to uint64) (bool, error) {
	return l.s.leaderHasNext(ctx, ItemsStream, subject, from, to)
}

func (l streamLog) consumer(ctx context.Context, subject string, from uint64) (passConsumer, func(), error) {
	cons, err := l.s.items.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, HeadersOnly: true, InactiveThreshold: 10 * time.Second,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from, MaxResetAttempts: passResetAttempts,
	})
	if err != nil {
		return nil, nil, err
	}
	return cons, func() { l.s.release(l.s.items, cons) }, nil
}

// leaderLastSeq is the sequence of the last message on subject that the
// leader of stream holds (a non-direct message get, which only the
// leader answers), 0 when it holds none.
func (s *Store) leaderLastSeq(ctx context.Context, stream, subject string) (uint64, error) {
	m, err := s.leaderMsgGet(ctx, stream, map[string]string{"last_by_subj": subject})
	switch {
	case err != nil:
		return 0, fmt.Errorf("last message from the leader: %w", err)
	case m == nil:
		return 0, nil
	}
	return m.Seq, nil
}

// syncOwned is syncKnown unless the feed's index is trusted (the node
// owns the feed and extended the index only by its own publishes since
// its last sync): then there is nothing to read.
func (s *Store) syncOwned(ctx context.Context, feedID uint64) error {
	if s.known.trusted(feedID, s.ownership) {
		return nil
	}
	return s.syncKnown(ctx, feedID)
}

// recentSync is how long after a sync of a feed's item IDs a fetch of the
// same feed trusts them without reading the subject's last sequence
// again: the aggregator asks HasItems of a document and stores it
// moments later. An item another writer adds in between is not stored
// twice: its message ID is de-duplicated by the stream.
const recentSync = 2 * time.Second

// syncKnownRecent is syncKnown unless the feed's index was synced within
// recentSync.
func (s *Store) syncKnownRecent(ctx context.Context, feedID uint64) error {
	if s.known.checkedSince(feedID, s.opt.Now().Add(-recentSync)) || s.known.trusted(feedID, s.ownership) {
		return nil
	}
	return s.syncKnown(ctx, feedID)
}

// knownOf returns the index entry of the message at seq from its
// headers; a message without the time header has its body read.
func (s *Store) knownOf(ctx context.Context, seq uint64, h nats.Header) (knownItem, error) {
	it := knownItem{key: h.Get(ItemKeyHeader), seq: seq}
	if it.key == "" {
		it.key = h.Get(jetstream.MsgIDHeader)
	}
	if at, loose, ok := parseTimeHeader(h.Get(ItemTimeHeader)); ok {
		it.at, it.loose = at, loose
		return it, nil
	}
	m, err := s.items.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return knownItem{}, nil // removed since
	}
	if err != nil {
		return knownItem{}, err
	}
	var item storage.Item
	if err := json.Unmarshal(m.Data, &item); err != nil {
		return knownItem{}, fmt.Errorf("%w: message %d: %v", storage.ErrCorrupt, seq, err)
	}
	it.at = sortNanos(sortTime(&item))
	if it.key == "" {
		it.key = MsgID(item.FeedID, item.ID)
	}
	return it, nil
}
