package publish

import (
	"sync"
	"time"
)

// Changes remembers, for each document a publisher serves, the entity tag
// it last served and since when that document holds those bytes, so that
// Last-Modified moves whenever a document changes, whatever changed in it
// (an item updated in place or removed, not only one that arrived). It
// keeps at most its bound of documents, forgetting one at random past it.
// It is safe for concurrent use.
type Changes struct {
	mu   sync.Mutex
	max  int
	docs map[string]change
}

type change struct {
	etag  string
	since time.Time
}

// NewChanges returns a Changes that remembers at most max documents
// (at least one).
func NewChanges(max int) *Changes {
	return &Changes{max: max, docs: make(map[string]change)}
}

// Since returns when the document key, now served with entity tag etag,
// last changed: base, the time its content says it last changed (its
// newest item's arrival or update), unless the document changed (another
// tag than the one this Changes last saw for key) without base moving to
// a later second: then when this Changes first saw etag (now, the first
// time). A document it does not know (its first request, after a
// restart, or forgotten) is taken to have changed at base.
func (c *Changes) Since(key, etag string, base, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.docs[key]
	switch {
	case !ok:
		if len(c.docs) >= max(c.max, 1) {
			for k := range c.docs {
				delete(c.docs, k)
				break
			}
		}
		prev = change{etag: etag, since: base}
	case prev.etag != etag:
		// A change its content dates explains (an item that arrived, in a
		// later second than the last change) is dated by them, any other
		// (an item removed) by now.
		prev.etag = etag
		if base.Truncate(time.Second).After(prev.since.Truncate(time.Second)) {
			prev.since = base
		} else {
			prev.since = now
		}
	}
	c.docs[key] = prev
	if base.After(prev.since) {
		return base
	}
	return prev.since
}
