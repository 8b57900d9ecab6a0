package storage

import (
	"errors"
	"fmt"
	"math"
	neturl "net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/slogfeed/slogfeed/schedule"
)

// FeedSummary is what a list of many feeds filters, counts and pages on:
// the part of a feed record that a poll changes, and the names it is
// searched by.
type FeedSummary struct {
	ID     uint64
	Kind   Kind
	Policy string
	// Text is what a search looks in: the title, the slug and the URL
	// without its credentials, in lower case, one a line.
	Text        string
	Polls, Hits int64
	// MeanLatencyS is the mean use latency of the feed's items, in
	// seconds, when HasLatency.
	MeanLatencyS float64
	HasLatency   bool
	// Erroring: the feed's last fetch failed.
	Erroring bool
	// Aged: the feed's retention has an age limit (Retention.MaxAge).
	Aged bool
}

// SummaryOf is f's summary.
func SummaryOf(f *Feed) FeedSummary {
	s := FeedSummary{
		ID: f.ID, Kind: f.Kind, Policy: f.Policy, Text: searchText(f),
		Polls: f.Polls, Hits: f.Hits, Erroring: f.LastError != "" || f.ErrorCount > 0,
		Aged: f.Retention.MaxAge > 0,
	}
	if f.LatencyCount > 0 {
		s.MeanLatencyS, s.HasLatency = f.LatencySumS/float64(f.LatencyCount), true
	}
	return s
}

// searchText is FeedSummary.Text of f. A string that is already in lower
// case is not copied.
func searchText(f *Feed) string {
	url := strings.ToLower(withoutUserInfo(f.URL))
	if f.Title == "" && f.Slug == "" {
		return "\n\n" + url
	}
	return strings.ToLower(f.Title) + "\n" + strings.ToLower(f.Slug) + "\n" + url
}

// The store keeps every feed's summary in memory (summaryIndex), and the
// fleet's aggregates with them, up to date from the write path: each
// write of a feed record (putFeed, updateFeedRawTx, applyPrepared) and
// each removal (unindexFeed) registers a commit handler that applies the
// change once its transaction commits. A list then reads no feed record
// but those of its page. The index is built on the first read after the
// store is opened, by one walk of the records; the changes committed
// while it is built are kept aside and applied after it.
//
// bbolt runs a transaction's commit handlers after it has released the
// writer lock, so two writers' handlers may run in either order: every
// change carries its transaction's ID (bbolt's, which grows with each
// commit), and an entry keeps the ID of the change it holds; an older
// change never replaces a newer one. A removed feed's entry stays as a
// tombstone (with that ID) until the second compaction after it, so a
// late handler of an earlier write cannot bring it back.
type summaryCache struct {
	buildMu sync.Mutex
	// hooked is the index the write hooks feed, from the start of its
	// build; ready, the same index once built.
	hooked atomic.Pointer[summaryIndex]
	ready  atomic.Pointer[summaryIndex]
}

// errNoWrite rolls back the write that waits for the writer (index).
var errNoWrite = errors.New("storage: no write")

type summaryIndex struct {
	chunk    int // summaryChunk; less in tests
	mu       sync.RWMutex
	building bool
	pending  []summaryChange // committed while building
	// entries are the feeds' summaries in order of ID, tombstones among
	// them (dead); compact drops the dead.
	entries []summaryEntry
	dead    int
	// maxTx is the newest transaction applied; keepAfter, the one
	// before which the last compaction's tombstones were made: the next
	// drops those.
	maxTx, keepAfter uint64

	policies []string
	policyID map[string]uint32
	// policyKeys are the policies' schedule.PolicyKey, by policy ID: a
	// filter by policy keeps the feeds of every spelling of it.
	policyKeys []string

	// The aggregates over the live entries.
	feeds, remote, erroring int
	polls, hits             int64
	lat                     latencyHist
}

// summaryEntry is one feed's summary, compact: 72 bytes and its text.
type summaryEntry struct {
	id          uint64
	tx          uint64 // the transaction whose change it holds
	polls, hits int64
	mean        float64
	text        string
	policy      uint32
	kind        uint8
	flags       uint8
}

const (
	entryDead = 1 << iota
	entryErroring
	entryLatency
	entryAged
)

var kindCodes = []Kind{KindRemote, KindSensor, KindPipe}

func kindCode(k Kind) uint8 {
	if i := slices.Index(kindCodes, k); i >= 0 {
		return uint8(i)
	}
	return uint8(len(kindCodes)) // validateFeed admits no other
}

// summaryChange is a committed put (s set) or removal of feed id.
type summaryChange struct {
	tx     uint64
	id     uint64
	remove bool
	s      FeedSummary
}

// feedStored is the hook of a write of feed record f in tx: the index
// takes f's summary once tx commits.
func (s *Store) feedStored(tx *bolt.Tx, f *Feed) {
	if x := s.summaries.hooked.Load(); x != nil {
		c := summaryChange{tx: uint64(tx.ID()), id: f.ID, s: SummaryOf(f)}
		tx.OnCommit(func() { x.commit(c) })
	}
}

// feedRemoved is the hook of the removal of feed id in tx.
func (s *Store) feedRemoved(tx *bolt.Tx, id uint64) {
	if x := s.summaries.hooked.Load(); x != nil {
		c := summaryChange{tx: uint64(tx.ID()), id: id, remove: true}
		tx.OnCommit(func() { x.commit(c) })
	}
}

func (x *summaryIndex) commit(c summaryChange) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.building {
		x.pending = append(x.pending, c)
		return
	}
	x.apply(c)
}

// index returns the store's summary index, built on first use.
func (s *Store) index() (*summaryIndex, error) {
	c := &s.summaries
	if x := c.ready.Load(); x != nil {
		return x, nil
	}
	c.buildMu.Lock()
	defer c.buildMu.Unlock()
	if x := c.ready.Load(); x != nil {
		return x, nil
	}
	x := &summaryIndex{chunk: summaryChunk, building: true, policyID: map[string]uint32{}, lat: newLatencyHist()}
	db := s.db
	c.hooked.Store(x)
	built := false
	defer func() {
		if !built {
			c.hooked.Store(nil)
		}
	}()
	// A write that began before the hooks could find x may still commit:
	// wait for the writer (with a write that is rolled back), so that the
	// walk's snapshot holds every change the hooks did not see.
	if err := s.dbUpdate(func(*bolt.Tx) error { return errNoWrite }); !errors.Is(err, errNoWrite) {
		return nil, fmt.Errorf("storage: feed summaries: %w", err)
	}
	var entries []summaryEntry
	var snap uint64
	err := db.View(func(tx *bolt.Tx) error {
		snap = uint64(tx.ID())
		b, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		entries = make([]summaryEntry, 0, min(b.Sequence(), 1<<22)+16) // the IDs given so far
		return decodeSummaries(b, func(sums []FeedSummary) {
			for i := range sums {
				entries = append(entries, x.entryOf(&sums[i], snap))
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("storage: feed summaries: %w", err)
	}
	x.mu.Lock()
	for i := range entries {
		x.count(&entries[i], 1)
	}
	x.entries, x.maxTx, x.keepAfter = entries, snap, snap
	for _, c := range x.pending {
		if c.tx > snap { // the walk saw the others
			x.apply(c)
		}
	}
	x.pending, x.building = nil, false
	x.mu.Unlock()
	built = true
	c.ready.Store(x)
	return x, nil
}

// decodeBatch is how many records a worker of decodeSummaries decodes
// at a time.
const decodeBatch = 512

// decodeSummaries decodes the summaries of the feed records of bucket b
// (a read transaction's, open until it returns) on a few cores, and
// hands them to add in order of ID, a batch at a time.
func decodeSummaries(b *bolt.Bucket, add func([]FeedSummary)) error {
	type batch struct {
		keys, vals [][]byte // the transaction's memory
		sums       []FeedSummary
		err        error
		done       chan struct{}
	}
	workers := min(runtime.GOMAXPROCS(0), 4)
	work := make(chan *batch, workers)
	order := make(chan *batch, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for bt := range work {
				bt.sums = make([]FeedSummary, 0, len(bt.keys))
				for i, k := range bt.keys {
					f, err := decodeFeed(k, bt.vals[i])
					if err != nil {
						bt.err = err
						break
					}
					bt.sums = append(bt.sums, SummaryOf(&f))
				}
				close(bt.done)
			}
		})
	}
	collected := make(chan error, 1)
	go func() {
		var err error
		for bt := range order {
			<-bt.done
			if err == nil {
				err = bt.err
			}
			if err == nil {
				add(bt.sums)
			}
		}
		collected <- err
	}()
	var cur *batch
	flush := func() {
		if cur != nil {
			order <- cur
			work <- cur
			cur = nil
		}
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if !isFeedKey(k) {
			continue // an observation tail, a policy state
		}
		if cur == nil {
			cur = &batch{done: make(chan struct{})}
		}
		cur.keys, cur.vals = append(cur.keys, k), append(cur.vals, v)
		if len(cur.keys) == decodeBatch {
			flush()
		}
	}
	flush()
	close(work)
	close(order)
	wg.Wait()
	return <-collected
}

// entryOf is s as an entry of x, from transaction tx. x.mu is held, or
// x is not yet shared.
func (x *summaryIndex) entryOf(s *FeedSummary, tx uint64) summaryEntry {
	p, ok := x.policyID[s.Policy]
	if !ok {
		p = uint32(len(x.policies))
		x.policies = append(x.policies, s.Policy)
		x.policyKeys = append(x.policyKeys, schedule.PolicyKey(s.Policy))
		x.policyID[s.Policy] = p
	}
	e := summaryEntry{id: s.ID, tx: tx, polls: s.Polls, hits: s.Hits, text: s.Text, policy: p, kind: kindCode(s.Kind)}
	if s.Erroring {
		e.flags |= entryErroring
	}
	if s.HasLatency {
		e.flags |= entryLatency
		e.mean = s.MeanLatencyS
	}
	if s.Aged {
		e.flags |= entryAged
	}
	return e
}

// count adds live entry e to the aggregates (sign 1) or takes it out (-1).
func (x *summaryIndex) count(e *summaryEntry, sign int) {
	if e.flags&entryDead != 0 {
		return
	}
	x.feeds += sign
	if e.kind == 0 {
		x.remote += sign
	}
	if e.flags&entryErroring != 0 {
		x.erroring += sign
	}
	x.polls += int64(sign) * e.polls
	x.hits += int64(sign) * e.hits
	if e.flags&entryLatency != 0 {
		x.lat.add(e.mean, sign)
	}
}

// find returns the position of feed id's entry, or where it would go.
func (x *summaryIndex) find(id uint64) (int, bool) {
	return slices.BinarySearchFunc(x.entries, id, func(e summaryEntry, id uint64) int {
		switch {
		case e.id < id:
			return -1
		case e.id > id:
			return 1
		}
		return 0
	})
}

// apply takes committed change c. x.mu is held.
func (x *summaryIndex) apply(c summaryChange) {
	x.maxTx = max(x.maxTx, c.tx)
	i, found := x.find(c.id)
	if found && c.tx < x.entries[i].tx {
		return // a later write's change is there
	}
	var e summaryEntry
	if c.remove {
		e = summaryEntry{id: c.id, tx: c.tx, flags: entryDead}
	} else {
		e = x.entryOf(&c.s, c.tx)
	}
	if !found {
		x.entries = slices.Insert(x.entries, i, e)
		if c.remove {
			x.dead++
		}
		x.count(&x.entries[i], 1)
		return
	}
	old := &x.entries[i]
	if old.text == e.text {
		e.text = old.text // one copy
	}
	x.count(old, -1)
	switch {
	case old.flags&entryDead != 0 && !c.remove:
		x.dead--
	case old.flags&entryDead == 0 && c.remove:
		x.dead++
	}
	*old = e
	x.count(old, 1)
	if x.dead > 1024 && x.dead > len(x.entries)/4 {
		x.compact()
	}
}

// compact drops the tombstones older than the last compaction (see
// summaryCache). x.mu is held.
func (x *summaryIndex) compact() {
	keep := x.entries[:0]
	dead := 0
	for _, e := range x.entries {
		if e.flags&entryDead != 0 {
			if e.tx <= x.keepAfter {
				continue
			}
			dead++
		}
		keep = append(keep, e)
	}
	clear(x.entries[len(keep):])
	x.entries, x.dead, x.keepAfter = keep, dead, x.maxTx
	if cap(x.entries) > 2*len(x.entries)+1024 {
		x.entries = slices.Clip(slices.Clone(x.entries))
	}
}

// summary fills s from live entry e. x.mu is held.
func (x *summaryIndex) summary(e *summaryEntry, s *FeedSummary) {
	*s = FeedSummary{ID: e.id, Kind: KindRemote, Policy: x.policies[e.policy], Text: e.text,
		Polls: e.polls, Hits: e.hits, Erroring: e.flags&entryErroring != 0, Aged: e.flags&entryAged != 0}
	if int(e.kind) < len(kindCodes) {
		s.Kind = kindCodes[e.kind]
	}
	if e.flags&entryLatency != 0 {
		s.MeanLatencyS, s.HasLatency = e.mean, true
	}
}

// Summaries is a store that keeps its feeds' summaries in memory (Store
// does; the JetStream store does not): a walk of them reads no record,
// so callers that would otherwise list every feed check for it first.
type Summaries interface {
	EachFeedSummary(fn func(*FeedSummary) bool) error
}

// summaryChunk is how many entries a walk reads under one hold of the
// index's lock: commits wait for a chunk, never for a whole walk.
const summaryChunk = 4096

// EachFeedSummary calls fn with the summary of every feed, in order of
// ID, until fn returns false. The summaries are kept in memory, up to
// date with every committed write: the walk reads no record. It reads
// them a chunk at a time, so a write committed during the walk shows in
// the chunks read after it. fn must not keep the pointer.
func (s *Store) EachFeedSummary(fn func(*FeedSummary) bool) error {
	x, err := s.index()
	if err != nil {
		return err
	}
	buf := make([]FeedSummary, x.chunk)
	now := s.now()
	after := uint64(0)
	for {
		n := 0
		x.mu.RLock()
		i, found := x.find(after)
		if found {
			i++
		}
		for ; i < len(x.entries) && n < len(buf); i++ {
			e := &x.entries[i]
			if e.flags&entryDead == 0 {
				x.summary(e, &buf[n])
				n++
			}
		}
		x.mu.RUnlock()
		for j := range n {
			if !buf[j].Erroring && s.unstored.Has(buf[j].ID, now) {
				buf[j].Erroring = true // its polls cannot be stored (unstored.go)
			}
			if !fn(&buf[j]) {
				return nil
			}
		}
		if n < len(buf) {
			return nil
		}
		after = buf[n-1].ID
	}
}

// FeedIDsAfter returns the IDs of the first limit feeds whose ID is
// greater than after, in order, and whether more follow; from the
// summaries in memory, in time independent of the number of feeds.
func (s *Store) FeedIDsAfter(after uint64, limit int) (ids []uint64, more bool, err error) {
	x, err := s.index()
	if err != nil {
		return nil, false, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	i, found := x.find(after)
	if found {
		i++
	}
	ids = make([]uint64, 0, min(limit, 1024))
	for ; i < len(x.entries); i++ {
		if x.entries[i].flags&entryDead != 0 {
			continue
		}
		if len(ids) == limit {
			return ids, true, nil
		}
		ids = append(ids, x.entries[i].id)
	}
	return ids, false, nil
}

// FeedIDsBefore returns the IDs of the last limit feeds whose ID is less
// than before, in order, and whether more precede them; from the
// summaries in memory, read backward from before, in time independent
// of the number of feeds. It pages back over the pages FeedIDsAfter
// gives: the limit IDs before the first of a page are the page before.
func (s *Store) FeedIDsBefore(before uint64, limit int) (ids []uint64, more bool, err error) {
	x, err := s.index()
	if err != nil {
		return nil, false, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	i, _ := x.find(before) // entries[i-1] is the last below before
	ids = make([]uint64, 0, min(limit, 1024))
	for i--; i >= 0; i-- {
		if x.entries[i].flags&entryDead != 0 {
			continue
		}
		if len(ids) == limit {
			more = true
			break
		}
		ids = append(ids, x.entries[i].id)
	}
	slices.Reverse(ids)
	return ids, more, nil
}

// SummaryFilter selects feeds by their summaries; its zero value keeps
// every feed.
type SummaryFilter struct {
	// Text is sought in FeedSummary.Text: give it in lower case.
	Text string
	// Policy keeps the feeds polled by that policy however it is spelt
	// (schedule.PolicyKey).
	Policy   string
	Kind     Kind
	Erroring bool
	// Keep, when set, is the caller's own test of the feeds the others
	// keep. It is called without the index locked, and may be slow.
	Keep func(id uint64) bool
}

// MatchFeeds walks the summaries in memory for the feeds f keeps: the IDs
// of the first limit of them whose ID is greater than after, in order,
// and how many it keeps in all. It reads no record. Commits that happen
// during the walk show in the part of it that follows them.
func (s *Store) MatchFeeds(f SummaryFilter, after uint64, limit int) (ids []uint64, total int, err error) {
	err = s.EachMatchingFeed(f, func(id uint64) bool {
		total++
		if id > after && len(ids) < limit {
			ids = append(ids, id)
		}
		return true
	})
	if err != nil {
		return nil, 0, err
	}
	return ids, total, nil
}

// EachMatchingFeed walks the summaries in memory and calls fn with the ID
// of every feed f keeps, in order of ID, until fn returns false. It reads
// no record, and calls fn (and f.Keep) without the index locked. Commits
// that happen during the walk show in the part of it that follows them.
func (s *Store) EachMatchingFeed(f SummaryFilter, fn func(id uint64) bool) error {
	x, err := s.index()
	if err != nil {
		return err
	}
	buf := make([]uint64, 0, x.chunk)
	from := uint64(0)
	for {
		var done bool
		buf, from, done = x.matchChunk(&f, from, buf[:0])
		for _, id := range buf {
			if f.Keep != nil && !f.Keep(id) {
				continue
			}
			if !fn(id) {
				return nil
			}
		}
		if done {
			return nil
		}
	}
}

// matchChunk appends to ids those of the next summaryChunk feeds after
// from that f keeps (Keep aside), with one hold of the lock, and returns
// the last ID it read and whether the walk reached the end.
func (x *summaryIndex) matchChunk(f *SummaryFilter, from uint64, ids []uint64) (_ []uint64, last uint64, done bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var policies []bool // by policy ID: nil keeps every policy
	if f.Policy != "" {
		key := schedule.PolicyKey(f.Policy)
		policies = make([]bool, len(x.policyKeys))
		some := false
		for p, k := range x.policyKeys {
			policies[p] = k == key
			some = some || k == key
		}
		if !some {
			return ids, 0, true // no feed has it
		}
	}
	kind := uint8(math.MaxUint8)
	if f.Kind != "" {
		kind = kindCode(f.Kind)
	}
	var want uint8 = entryDead
	if f.Erroring {
		want |= entryErroring
	}
	i, found := x.find(from)
	if found {
		i++
	}
	end := min(len(x.entries), i+x.chunk)
	for ; i < end; i++ {
		e := &x.entries[i]
		if e.flags&want != want&^entryDead ||
			policies != nil && !policies[e.policy] ||
			kind != math.MaxUint8 && e.kind != kind ||
			f.Text != "" && !strings.Contains(e.text, f.Text) {
			continue
		}
		ids = append(ids, e.id)
	}
	if end == len(x.entries) {
		return ids, 0, true
	}
	return ids, x.entries[end-1].id, false
}

// FleetStats returns the aggregates of every feed, kept up to date by
// the writes: its cost does not grow with the number of feeds.
func (s *Store) FleetStats() (FleetStats, error) {
	x, err := s.index()
	if err != nil {
		return FleetStats{}, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	st := FleetStats{Feeds: x.feeds, Remote: x.remote, Erroring: x.erroring, Polls: x.polls, Hits: x.hits,
		LatencyFeeds: x.lat.n}
	if x.lat.n > 0 {
		qs, m := x.lat.quantiles([]float64{0.5, 0.9, 0.99})
		st.LatencyP50, st.LatencyP90, st.LatencyP99, st.LatencyMax = qs[0], qs[1], qs[2], m
	}
	return st, nil
}

// withoutUserInfo is raw without the user information of its authority,
// so that a search never matches, and so never reveals, a feed's
// credentials. A string that does not parse as a URL but holds an '@'
// gives nothing.
func withoutUserInfo(raw string) string {
	if !strings.Contains(raw, "@") {
		return raw
	}
	u, err := neturl.Parse(raw)
	if err != nil || u.User == nil && (strings.Contains(u.Opaque, "@") || u.Host == "" && strings.Contains(u.Path, "@")) {
		return ""
	}
	u.User = nil
	return u.String()
}
