package jetstream

import (
	"context"
	"sync"
	"time"
)

// recentReads keeps the feed records read in the last recentSync, each
// with its revision, for the write that usually follows: the aggregator
// reads a feed before it fetches it and stores the fetch moments later.
// A record changed in between (another node, the API) makes that write's
// compare-and-set fail, and the write reads it again, so a stale entry
// costs a retry, never a lost update.
type recentReads struct {
	mu    sync.Mutex
	feeds map[uint64]recentRead
}

type recentRead struct {
	f   feedRecord
	rev uint64
	at  int64 // Unix nanoseconds
}

// maxRecentReads bounds the entries kept between sweeps.
const maxRecentReads = 1 << 16

func (r *recentReads) put(f feedRecord, rev uint64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.feeds == nil {
		r.feeds = map[uint64]recentRead{}
	}
	if len(r.feeds) >= maxRecentReads {
		old := at.Add(-recentSync).UnixNano()
		for id, e := range r.feeds {
			if e.at < old {
				delete(r.feeds, id)
			}
		}
		if len(r.feeds) >= maxRecentReads {
			clear(r.feeds)
		}
	}
	r.feeds[f.ID] = recentRead{f: f, rev: rev, at: at.UnixNano()}
}

// take removes and returns the record of id read at or after since.
func (r *recentReads) take(id uint64, since time.Time) (feedRecord, uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.feeds[id]
	if !ok {
		return feedRecord{}, 0, false
	}
	delete(r.feeds, id)
	if e.at < since.UnixNano() {
		return feedRecord{}, 0, false
	}
	return e.f, e.rev, true
}

// forget drops the entry of id (its record was written or deleted here).
func (r *recentReads) forget(id uint64) {
	r.mu.Lock()
	delete(r.feeds, id)
	r.mu.Unlock()
}

// recentRecord is record, from a read of the last recentSync when there
// is one.
func (s *Store) recentRecord(ctx context.Context, id uint64) (feedRecord, uint64, error) {
	if f, rev, ok := s.recent.take(id, s.opt.Now().Add(-recentSync)); ok {
		return f, rev, nil
	}
	return s.record(ctx, id)
}
