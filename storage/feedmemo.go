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
// commit; a poll on its fetch slot. An entry is used only when the stored
// bytes are still those it holds, so it is never stale (an entry put by a
// write that was rolled back, or overtaken by another write, is simply
// not used). A write takes the entry out before it rewrites the record;
// other writes (UpdateFeed, …) leave none. When the memo is full, an
// arbitrary entry makes room for the new one.
type feedMemo struct {
	mu sync.Mutex
	m  map[uint64]memoFeed
}

type memoFeed struct {
	raw []byte
	f   Feed
}

// put remembers f as decoded from (or encoded to) raw, both copied.
func (m *feedMemo) put(id uint64, raw []byte, f *Feed) {
	m.putOwned(id, bytes.Clone(raw), f)
}

// putOwned is put for a raw that the caller hands over: a fresh encoding
// (validateFeed's) that nobody changes afterwards. It is not copied.
func (m *feedMemo) putOwned(id uint64, raw []byte, f *Feed) {
	e := memoFeed{raw: raw, f: cloneFeed(f)}
	m.mu.Lock()
	defer m.mu.Unlock()
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
