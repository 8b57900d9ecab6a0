package storage

import (
	"bytes"
	"slices"
	"sync"
)

// maxFeedMemo bounds the entries of a feedMemo.
const maxFeedMemo = 4096

// feedMemo keeps the feed records Store.Feed decoded, each with the bytes
// it was decoded from, for the write that usually follows (a poll reads
// its feed, fetches, then records the fetch): that write finds the feed
// decoded instead of decoding it again inside its transaction, where it
// would hold up the group commit. An entry is used only when the stored
// bytes are still those it was decoded from, so it is never stale; the
// write takes it out (it rewrites the record), so the memo holds about as
// many feeds as polls under way, and it is emptied when it reaches
// maxFeedMemo (reads that no write follows).
type feedMemo struct {
	mu sync.Mutex
	m  map[uint64]memoFeed
}

type memoFeed struct {
	raw []byte
	f   Feed
}

// put remembers f as decoded from raw (both copied).
func (m *feedMemo) put(id uint64, raw []byte, f *Feed) {
	e := memoFeed{raw: bytes.Clone(raw), f: cloneFeed(f)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= maxFeedMemo {
		m.m = make(map[uint64]memoFeed)
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
