package jetstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// maxIDBlock bounds how many IDs one write of a sequence key reserves.
const maxIDBlock = 256

// Backoff between two tries of a sequence key's compare-and-set that lost
// to another node: a random wait up to a ceiling that doubles from
// idRetryMin to idRetryMax.
const (
	idRetryMin = 2 * time.Millisecond
	idRetryMax = 200 * time.Millisecond
)

// idSequences hands out the IDs of the store's sequence keys (seq.feed,
// seq.pipe). Each key's IDs are reserved in blocks from the key, one
// compare-and-set per block, and handed out in this process: callers
// that ask while a block is being reserved wait for the next one, which
// is as large as the number of callers then waiting (at most maxIDBlock).
// A lone caller reserves one ID, so a quiet cluster numbers its feeds 1,
// 2, 3…; a bulk subscription's many calls share a few writes instead of
// contending for the key. IDs stay unique across nodes and restarts (a
// block is written to the key before any of it is used); an ID reserved
// by a caller that gave up is handed to the next one, and one left when
// the process stops is never used: IDs are unique and increasing on each
// node, not dense.
type idSequences struct {
	mu   sync.Mutex
	keys map[string]*idSequence
}

// idSequence is the local state of one sequence key.
type idSequence struct {
	next, end uint64        // reserved and not handed out: [next, end)
	waiting   int           // callers without an ID yet
	reserving chan struct{} // closed when the reservation under way ends; nil: none
}

func (q *idSequences) of(key string) *idSequence {
	if q.keys == nil {
		q.keys = make(map[string]*idSequence)
	}
	seq := q.keys[key]
	if seq == nil {
		seq = &idSequence{}
		q.keys[key] = seq
	}
	return seq
}

// nextID returns a new ID of the sequence under key.
func (s *Store) nextID(ctx context.Context, key string) (uint64, error) {
	q := &s.ids
	q.mu.Lock()
	seq := q.of(key)
	seq.waiting++
	for {
		if seq.next < seq.end {
			id := seq.next
			seq.next++
			seq.waiting--
			q.mu.Unlock()
			return id, nil
		}
		if done := seq.reserving; done != nil {
			q.mu.Unlock()
			select {
			case <-done:
			case <-ctx.Done():
				q.mu.Lock()
				seq.waiting--
				q.mu.Unlock()
				return 0, fmt.Errorf("%s: %w", key, ctx.Err())
			}
			q.mu.Lock()
			continue
		}
		n := uint64(min(seq.waiting, maxIDBlock))
		done := make(chan struct{})
		seq.reserving = done
		q.mu.Unlock()
		first, err := s.reserveIDs(ctx, key, n)
		q.mu.Lock()
		seq.reserving = nil
		close(done)
		if err != nil {
			seq.waiting--
			q.mu.Unlock()
			return 0, err
		}
		seq.next, seq.end = first, first+n
	}
}

// reserveIDs adds n to the sequence under key with compare-and-set and
// returns the first of the n IDs it reserved. A write that loses to
// another node's is tried again, after a random wait, until it succeeds or
// ctx ends.
func (s *Store) reserveIDs(ctx context.Context, key string, n uint64) (uint64, error) {
	ceiling := idRetryMin
	fromLeader := false
	for {
		last, rev, err := s.readSequence(ctx, key, fromLeader)
		if err != nil {
			return 0, err
		}
		next := []byte(strconv.FormatUint(last+n, 10))
		// A bucket whose stream was just placed (a cluster forming) may
		// have no responder for a moment: retryNoResponders waits it out.
		_, err = retryNoResponders(ctx, func() (uint64, error) {
			if rev == 0 {
				return s.defs.Create(ctx, key, next)
			}
			return s.defs.Update(ctx, key, next, rev)
		})
		s.opt.Metrics.kvWrite(DefsBucket, err)
		if err == nil {
			return last + 1, nil
		}
		if !IsConflict(err) {
			return 0, fmt.Errorf("%s: %w", key, err)
		}
		// Another node reserved meanwhile. The value read may also have
		// come from a replica behind the leader: read the next one from
		// the leader.
		fromLeader = true
		wait := rand.N(ceiling) + 1
		ceiling = min(2*ceiling, idRetryMax)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: %w (%w)", key, ctx.Err(), ErrStale)
		case <-time.After(wait):
		}
	}
}

// readSequence returns the value of the sequence key and its revision
// (0, 0 when it was never written); from the bucket stream's leader when
// fromLeader is set.
func (s *Store) readSequence(ctx context.Context, key string, fromLeader bool) (last, rev uint64, err error) {
	var e jetstream.KeyValueEntry
	if fromLeader {
		e, err = s.leaderGet(ctx, DefsBucket, key)
		if err == nil && e == nil {
			err = jetstream.ErrKeyNotFound
		}
	} else {
		e, err = retryNoResponders(ctx, func() (jetstream.KeyValueEntry, error) { return s.defs.Get(ctx, key) })
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, 0, nil
	case err != nil:
		return 0, 0, fmt.Errorf("%s: %w", key, err)
	}
	if last, err = strconv.ParseUint(string(e.Value()), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%s: %w: %q", key, storage.ErrCorrupt, e.Value())
	}
	return last, e.Revision(), nil
}
