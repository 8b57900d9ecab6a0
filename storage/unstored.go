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
// stored again (RecordFetch, RecordPoll), the feed is deleted, the
// service clears it (it stops polling the feed), or the note expires: the
// service sets it again at every failed poll, with a time after which it
// is ignored (a note the service forgot to clear does not stay). The note
// is the process's own: on a cluster another node's reads never show it.

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
	until time.Time // ignored from then on
}

// Note records that feed id's polls cannot be stored: msg says why
// (it becomes the feed's LastError), since is when the first poll in a
// row failed, until when the note is ignored unless set again. An empty
// msg clears the note.
func (u *Unstored) Note(id uint64, msg string, since, until time.Time) {
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
	u.feeds[id] = unstoredPoll{msg: TruncateUTF8(msg, MaxWarningLen), since: since, until: until}
}

// Clear forgets the note of feed id: a poll of it was stored, or the
// feed was deleted.
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

// Has reports whether feed id has a note in force at now.
func (u *Unstored) Has(id uint64, now time.Time) bool {
	_, ok := u.get(id, now)
	return ok
}

// Apply makes f read as its note in force at now says, if it has one:
// LastError is the note's, LastErrorAt when the failures began.
// ErrorCount, which the error backoff of fetches counts from, stays the
// record's.
func (u *Unstored) Apply(f *Feed, now time.Time) {
	if p, ok := u.get(f.ID, now); ok {
		f.LastError, f.LastErrorAt = p.msg, p.since
	}
}

// get returns the note of feed id in force at now; an expired one is
// forgotten.
func (u *Unstored) get(id uint64, now time.Time) (unstoredPoll, bool) {
	if u.n.Load() == 0 {
		return unstoredPoll{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	p, ok := u.feeds[id]
	if ok && !now.Before(p.until) {
		delete(u.feeds, id)
		u.n.Add(-1)
		return unstoredPoll{}, false
	}
	return p, ok
}

// NoteUnstored records that feed id's polls cannot be stored (see
// Unstored.Note), in this process's memory, until then at the latest;
// the next poll of the feed stored clears it.
func (s *Store) NoteUnstored(id uint64, msg string, since, until time.Time) {
	s.unstored.Note(id, msg, since, until)
}
