package storage

import (
	"sync"
	"sync/atomic"
	"time"
)

// Polls that cannot be stored. When the store refuses a poll's write
// (a full disk, no quorum on a cluster) the polling service tries again
// soon, but the feed's record cannot take the error either: the service
// notes it with NoteUnstored instead, in memory, and the feed reads as
// failing (Feed.LastError, FeedSummary.Erroring) until a poll of it is
// stored again (RecordFetch, RecordPoll) or the service clears it.

// Unstored holds the feeds whose polls cannot be stored, with the error
// each reads as. The zero value is ready; it is safe for concurrent use.
type Unstored struct {
	n     atomic.Int64 // entries of feeds: most reads find none
	mu    sync.Mutex
	feeds map[uint64]unstoredPoll
}

type unstoredPoll struct {
	msg   string
	since time.Time
}

// Note records that feed id's polls cannot be stored: msg says why
// (it becomes the feed's LastError), since is when the first poll in a
// row failed. An empty msg clears the note.
func (u *Unstored) Note(id uint64, msg string, since time.Time) {
	if msg == "" {
		u.Clear(id)
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.feeds == nil {
		u.feeds = map[uint64]unstoredPoll{}
	}
	if _, ok := u.feeds[id]; !ok {
		u.n.Add(1)
	}
	u.feeds[id] = unstoredPoll{msg: TruncateUTF8(msg, MaxWarningLen), since: since}
}

// Clear forgets the note of feed id: a poll of it was stored.
func (u *Unstored) Clear(id uint64) {
	if u.n.Load() == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.feeds[id]; ok {
		delete(u.feeds, id)
		u.n.Add(-1)
	}
}

// Has reports whether feed id has a note.
func (u *Unstored) Has(id uint64) bool {
	if u.n.Load() == 0 {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.feeds[id]
	return ok
}

// Apply makes f read as its note says, if it has one: LastError is the
// note's, LastErrorAt when the failures began. ErrorCount, which the
// error backoff of fetches counts from, stays the record's.
func (u *Unstored) Apply(f *Feed) {
	if u.n.Load() == 0 {
		return
	}
	u.mu.Lock()
	p, ok := u.feeds[f.ID]
	u.mu.Unlock()
	if !ok {
		return
	}
	f.LastError, f.LastErrorAt = p.msg, p.since
}

// NoteUnstored records that feed id's polls cannot be stored (see
// Unstored.Note); the next poll of the feed stored clears it.
func (s *Store) NoteUnstored(id uint64, msg string, since time.Time) {
	s.unstored.Note(id, msg, since)
}
