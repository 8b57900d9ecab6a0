package storage

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// MaxBatch bounds how many writes one group commit carries.
const MaxBatch = 256

// Group commit. The hot writes (AddItems, RecordPoll, RecordFetch,
// AddObservation) go through Store.update: a write that finds no commit
// under way commits at once, alone; writes that arrive while a commit runs
// wait and then commit together in one bbolt transaction, at most MaxBatch
// of them: one fsync for the whole group. A lone writer pays no delay, and
// under load the groups grow by themselves as long as a commit (its fsync)
// takes. A commit also has fixed costs of its own besides the fsyncs
// (the meta page, the pages on the path to the root), so when the last
// group carried more than one write, the writer leading the next one
// lingers while writes keep arriving, up to Options.CommitLinger, and the
// groups grow larger: a write at most that much later, for less work per
// write. Each write is still atomic on its
// own and durable when update returns: when a write's function fails,
// the group is rolled back, that write runs alone (and fails alone, with
// no fsync), and the others are committed again without it
// (commitGroup).
type committer struct {
	mu      sync.Mutex
	queue   []*commitReq
	leading bool // a writer is committing a group

	// Counters for CommitStats.
	groups, writes, busyNs atomic.Int64
	last                   atomic.Int64 // writes the last group carried
}

// CommitStats are the group committer's counters since the store was
// opened: how many groups were committed, how many writes they carried,
// and how long a group was being committed (fsyncs included). Busy over
// a stretch of wall time is how much of it the single writer was busy.
type CommitStats struct {
	Groups int64
	Writes int64
	Busy   time.Duration
	// Pages is how many pages all write transactions wrote to the file
	// (bbolt's own count, the meta pages included).
	Pages int64
}

// CommitStats returns the group committer's counters.
func (s *Store) CommitStats() CommitStats {
	c := &s.commit
	st := s.db.Stats()
	return CommitStats{Groups: c.groups.Load(), Writes: c.writes.Load(), Busy: time.Duration(c.busyNs.Load()),
		Pages: st.TxStats.GetWrite()}
}

// commitReq is one write waiting in the group.
type commitReq struct {
	fn       func(*bolt.Tx) error
	poll     bool // a poll's write (updatePoll): changes feed records only as it tells the memo
	err      error
	panicked any
	// done receives false once the write is committed (or failed), or
	// true when the write is to lead the next group itself.
	done chan bool
}

// update runs fn in a write transaction, grouped with concurrent writes
// (see committer), and returns fn's error or the commit's. fn may run
// more than once (after a rollback caused by another write of its group):
// it must not have effects outside tx besides assignments it repeats.
// A panic in fn is rolled back and re-raised in the caller.
//
// Every write through update ends the feed memo's entries' currency (see
// feedGen); the polls' writes, which put what they store in the memo
// themselves, go through updatePoll instead.
func (s *Store) update(fn func(*bolt.Tx) error) error { return s.enqueue(fn, false) }

// updatePoll is update for a write that changes no feed record but as it
// tells the memo when it commits (memoOnCommit): RecordFetch, RecordPoll,
// and AddObservation, which changes none.
func (s *Store) updatePoll(fn func(*bolt.Tx) error) error { return s.enqueue(fn, true) }

// dbUpdate is bbolt's Update for the writes that are not group-committed;
// like update, it ends the memo entries' currency once the write is over.
func (s *Store) dbUpdate(fn func(*bolt.Tx) error) error {
	defer s.feedGen.Add(1)
	return s.db.Update(fn)
}

func (s *Store) enqueue(fn func(*bolt.Tx) error, poll bool) error {
	c := &s.commit
	r := &commitReq{fn: fn, poll: poll, done: make(chan bool, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, r)
	lead := !c.leading
	c.leading = true
	c.mu.Unlock()
	if !lead && !<-r.done {
		return r.result()
	}
	// Lead: commit what is queued (r among it), then hand the lead to
	// the first writer still waiting.
	s.lingerForWrites()
	c.mu.Lock()
	n := min(len(c.queue), MaxBatch)
	group := c.queue[:n:n]
	c.queue = c.queue[n:]
	c.mu.Unlock()
	began := time.Now()
	s.commitGroup(group)
	for _, q := range group {
		if !q.poll {
			// Before any writer of the group returns: a read that
			// follows one must not take a memo entry from before it.
			s.feedGen.Add(1)
			break
		}
	}
	c.busyNs.Add(int64(time.Since(began)))
	c.groups.Add(1)
	c.writes.Add(int64(len(group)))
	c.last.Store(int64(len(group)))
	for _, q := range group {
		if q != r {
			q.done <- false
		}
	}
	c.mu.Lock()
	if len(c.queue) > 0 {
		c.queue[0].done <- true
	} else {
		c.leading = false
		c.queue = nil
	}
	c.mu.Unlock()
	return r.result()
}

// lingerForWrites holds the leader of a group back while writes keep arriving
// (see committer): in steps of an eighth of the linger, up to the whole,
// and no longer once a step brought no write or MaxBatch are waiting.
// Only when the last group carried more than one write: a lone writer
// never waits.
func (s *Store) lingerForWrites() {
	c := &s.commit
	if s.linger <= 0 || c.last.Load() < 2 {
		return
	}
	queued := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue)
	}
	step := s.linger / 8
	n := queued()
	for waited := time.Duration(0); n < MaxBatch && waited < s.linger; waited += step {
		time.Sleep(step)
		m := queued()
		if m == n {
			return // no write came
		}
		n = m
	}
}

func (r *commitReq) result() error {
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.err
}

// commitGroup runs the group's functions in one transaction and sets each
// request's result. When some fail, the pass still runs the others (on a
// transaction that is rolled back), so that independent failures are all
// found at once: each failed write then runs alone, and the rest commit
// together (commitSplit). Each function runs at most a few times whatever
// the number of failures: O(n) calls for a group of n, not O(k·n).
func (s *Store) commitGroup(group []*commitReq) {
	if len(group) == 1 {
		s.commitAlone(group[0])
		return
	}
	var failed []int
	err := s.db.Update(func(tx *bolt.Tx) error {
		for i, q := range group {
			if q.call(tx) != nil {
				failed = append(failed, i)
			}
		}
		if len(failed) > 0 {
			return errGroupFailed
		}
		return nil
	})
	if len(failed) == 0 {
		for _, q := range group {
			q.err = err // nil, or the commit's own failure
		}
		return
	}
	rest := make([]*commitReq, 0, len(group)-len(failed))
	for i, q := range group {
		if len(failed) > 0 && failed[0] == i {
			failed = failed[1:]
			s.commitAlone(q)
			continue
		}
		rest = append(rest, q)
	}
	s.commitSplit(rest)
}

// commitSplit commits group in one transaction. A write that fails there
// (it succeeded in commitGroup's pass, but on other writes' changes)
// splits it: the writes before it commit together, it runs alone, and
// the writes after it go on in the next transaction.
func (s *Store) commitSplit(group []*commitReq) {
	for len(group) > 0 {
		if len(group) == 1 {
			s.commitAlone(group[0])
			return
		}
		failed := -1
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i, q := range group {
				if err := q.call(tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, q := range group {
				q.err = err
			}
			return
		}
		s.commitSplit(group[:failed])
		s.commitAlone(group[failed])
		group = group[failed+1:]
	}
}

func (s *Store) commitAlone(q *commitReq) {
	q.panicked = nil
	q.err = s.db.Update(q.call)
}

// call runs q's function, turning a panic into an error that rolls the
// transaction back (update re-raises it in q's own goroutine).
func (q *commitReq) call(tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			q.panicked = p
			err = errPanicked
		}
	}()
	return q.fn(tx)
}

// errGroupFailed rolls back a group transaction in which a write failed.
var errGroupFailed = errors.New("storage: a write of the group failed")

// errPanicked rolls back a transaction whose function panicked.
var errPanicked = errors.New("storage: write panicked")
