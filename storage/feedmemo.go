package storage

import (
	"bytes"
	"slices"
	"sync"
)

// maxFeedMemo bounds the entries of a feedMemo: about 1 KiB each (the
// record's bytes and the decoded feed), 16 MiB at most.
const maxFeedMemo = 16384

// feedMemo keeps feed records decoded, each with the bytes it was decoded
// from or encoded to: the feeds Store.Feed decoded, for the write that
// usually follows (a poll reads its feed, fetches, then records the
// fetch), and the feeds a poll's write (RecordFetch, RecordPoll) stored,
// for the next poll's Store.Feed. Neither then decodes the record again:
// a write inside its transaction, where it would hold up the group
// commit; a poll on its fetch slot. An entry is used by a write only when
// the stored bytes are still those it holds, so it is never stale there
// (an entry put by a write that was rolled back, or overtaken by another
// write, is simply not used). A write takes the entry out before it
// rewrites the record; other writes (UpdateFeed, …) leave none. When the
// memo is full, an arbitrary entry makes room for the new one.
//
// Store.Feed uses an entry without reading the record at all when the
// entry is known current: a poll's write put it (in its transaction's
// commit handler, so the polls' entries are put in the order of their
// commits) and no write other than a poll's has ended since that write
// ran (Store.feedGen). Every other write may change feed records behind
// the memo, and ends the currency of every entry.
type feedMemo struct {
	mu sync.Mutex
	m  map[uint64]memoFeed
}

type memoFeed struct {
	raw []byte
	f   Feed
	// gen is Store.feedGen when the poll's write that stored raw ran;
	// the entry is current while feedGen is still gen. 0: put by a read,
	// never current.
	gen uint64
}

// put remembers f as decoded from raw by a read (both copied), unless the
// entry there is current at gen (Store.feedGen now): a read may have
// begun before the write that put it.
func (m *feedMemo) put(id uint64, raw []byte, f *Feed, gen uint64) {
	e := memoFeed{raw: bytes.Clone(raw), f: cloneFeed(f)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.m[id]; ok && old.gen != 0 && old.gen == gen {
		return
	}
	m.store(id, e)
}

// putCommitted remembers f as a poll's write stored it, encoded as raw
// (which the caller hands over: a fresh encoding that nobody changes
// afterwards; f is the caller's to give too, a copy nobody else holds),
// current while Store.feedGen is gen. Called by the write's commit
// handler, in the order of the commits.
func (m *feedMemo) putCommitted(id uint64, raw []byte, f Feed, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.store(id, memoFeed{raw: raw, f: f, gen: gen})
}

// store puts e, making room when the memo is full. m.mu is held.
func (m *feedMemo) store(id uint64, e memoFeed) {
	if m.m == nil {
		m.m = make(map[uint64]memoFeed)
	}
	if _, ok := m.m[id]; !ok && len(m.m) >= maxFeedMemo {
		for k := range m.m {
			delete(m.m, k)
			break
		}
	}
	m.m[id] = e
}

// current returns a copy of feed id's entry when it is current at gen
// (Store.feedGen now).
func (m *feedMemo) current(id uint64, gen uint64) (Feed, bool) {
	m.mu.Lock()
	e, ok := m.m[id]
	m.mu.Unlock()
	if !ok || e.gen == 0 || e.gen != gen {
		return Feed{}, false
	}
	return cloneFeed(&e.f), true
}

// get returns feed id's entry when it was decoded from raw, removing it
// when take is set.
func (m *feedMemo) get(id uint64, raw []byte, take bool) (Feed, bool) {
	m.mu.Lock()
	e, ok := m.m[id]
	if ok && take {
		delete(m.m, id)
	}
	m.mu.Unlock()
	if !ok || !bytes.Equal(e.raw, raw) {
		return Feed{}, false
	}
	return e.f, true
}

// cloneFeed copies f with its own slices and pointed-to values, so that
// neither copy's changes reach the other.
func cloneFeed(f *Feed) Feed {
	c := *f
	c.Category = slices.Clone(f.Category)
	c.Sleep.Daily = slices.Clone(f.Sleep.Daily)
	c.Sleep.Windows = slices.Clone(f.Sleep.Windows)
	c.Reduce = bytes.Clone(f.Reduce)
	if f.Extract != nil {
		e := *f.Extract
		c.Extract = &e
	}
	if f.Source != nil {
		s := *f.Source
		s.Config = bytes.Clone(f.Source.Config)
		c.Source = &s
	}
	return c
}

// peek returns feed id's entry, the bytes it was decoded from or encoded
// to and the feed (the memo's own: read it, do not change it), whether or
// not they are still stored.
func (m *feedMemo) peek(id uint64) ([]byte, Feed, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[id]
	return e.raw, e.f, ok
}
