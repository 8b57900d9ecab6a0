package jetstream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// mostByTime bounds how many items, beyond twice the Limit, a query by
// publish time reads by the index (queryByTime): the loose entries of an
// index read from messages an earlier version wrote, say. Beyond it the
// whole subject is read (and the loose entries vouched for).
const mostByTime = 4096

// tailBatch is how many messages published after the index was synced a
// read by the index asks for at a time.
const tailBatch = 64

// byTime reports whether queryByTime may answer q: a Limit by publish
// time, or without a Limit a window of publish times (Since, Until) in
// any order but oldest first from AfterSeq.
func byTime(q storage.ItemQuery) bool {
	if q.Limit > 0 {
		return q.Order == storage.ByPublished
	}
	return q.AfterSeq == 0 && (!q.Since.IsZero() || !q.Until.IsZero())
}

// byArrival reports whether queryByTime may answer q by arrival: a Limit
// newest first, below BeforeSeq or the newest (known.newestByArrival).
func byArrival(q storage.ItemQuery) bool {
	return q.Limit > 0 && q.Order == storage.ByArrival && q.AfterSeq == 0
}

// queryByTime answers q (byTime, or byArrival from the runs of
// known.newestByArrival) as the bbolt store does, reading only
// the items of the feed's subject that may be in the answer, as the
// Store's index of the feed names them (known.newestByTime): the Limit
// newest by sort time in the window, the items the index has no exact
// sort time for that may be in the answer (a date beyond the years Unix
// nanoseconds hold, which the index holds as the bound it is beyond:
// after 2262 always, before 1678 when the others are fewer than the
// Limit; an entry read from a header an earlier version wrote), and the
// messages published after the index was synced. The index holds every
// item's sequence and, but for those, its exact sort time (sortNanos),
// so the Limit newest of the items read are the Limit newest of the
// feed. They are read in runs of consecutive messages, each a batched
// direct get, and ordered and cut by query, as a whole read is.
//
// The loose entries read are vouched for (known.vouch): an index read
// from headers an earlier version wrote reads them once.
//
// It returns false when the index cannot vouch for the answer: the feed
// has no index, or it may lack a message (shadow), or it holds more
// entries to read than the read is worth, or a run of the subject is not
// what the index says (a message removed since, or not on the replica
// that answered yet). The caller then reads the whole subject.
func (s *Store) queryByTime(ctx context.Context, feedID uint64, q storage.ItemQuery) ([]storage.Item, bool, error) {
	// The index may lag the subject by recentSync: what it lacks is after
	// upTo, and every run list ends with the read of what is after upTo,
	// up to the subject's last message on the stream's leader (which
	// holds every acknowledged one: a replica may not yet).
	if err := s.syncKnownRecent(ctx, feedID); err != nil {
		return nil, false, err
	}
	subject := itemSubject(feedID)
	target, err := s.leaderLastSeq(ctx, ItemsStream, subject)
	if err != nil {
		return nil, false, fmt.Errorf("read items of feed %d: %w", feedID, err)
	}
	most := math.MaxInt
	if q.Limit > 0 {
		most = 2*q.Limit + mostByTime
	}
	sp := spanOf(q.Since, q.Until)
	plan := func() ([]seqRun, uint64, int, bool) {
		if byArrival(q) {
			return s.known.newestByArrival(feedID, q.Limit, q.BeforeSeq, sp, !q.Since.IsZero() || !q.Until.IsZero(), most)
		}
		return s.known.newestByTime(feedID, q.Limit, sp, most)
	}
	runs, upTo, after, ok := plan()
	if ok && (after > tailBatch || target > upTo+tailBatch) {
		// More than a batch stored since the index was synced (a batch of
		// this node's own, which does not move the sequence the index is
		// complete up to, or another node's): the sync reads their
		// headers, not their items.
		if err := s.syncKnown(ctx, feedID); err != nil {
			return nil, false, err
		}
		runs, upTo, _, ok = plan()
	}
	if !ok {
		return nil, false, nil
	}
	var items []storage.Item
	for _, r := range runs {
		got, err := retryNoResponders(ctx, func() ([]storage.Item, error) { return s.readRun(ctx, subject, r, upTo, target) })
		if errors.Is(err, errNoVouch) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("read items of feed %d: %w", feedID, err)
		}
		items = append(items, got...) // runs are in sequence order
	}
	s.known.vouch(feedID, items) // the loose entries read are exact from now on
	return query(items, q), true, nil
}

// tailLag is how long a read of the tail waits before it asks again for
// messages the replica that answered did not hold yet.
const tailLag = 20 * time.Millisecond

// readRun reads the wanted items of run r of subject: the messages from
// r.from on must be r.seqs (up to upTo, the sequence the index is
// complete up to) and, for the run that ends the index, the messages
// after upTo, all of which are wanted, up to at least target (the
// subject's last sequence on the stream's leader) and holding r.after.
// A replica that answers without the messages up to target is asked
// again once, after tailLag. Anything else is errNoVouch.
func (s *Store) readRun(ctx context.Context, subject string, r seqRun, upTo, target uint64) ([]storage.Item, error) {
	var out []storage.Item
	next, wi, ai := 0, 0, 0 // the next of r.seqs, r.want and r.after
	from, after, lagged := r.from, 0, false
	reached := upTo // the last sequence read (or vouched for by the index)
	for {
		batch := len(r.seqs) - next
		if r.tail {
			batch += tailBatch
		}
		last := uint64(0)
		more, err := s.directBatch(ctx, subject, from, batch, func(seq uint64, data []byte) error {
			s.bodies.Add(1)
			last = seq
			switch {
			case seq <= upTo && (next == len(r.seqs) || r.seqs[next] != seq):
				return errNoVouch // a message the index does not hold, or one of its missing
			case seq <= upTo:
				next++
				if wi == len(r.want) || r.want[wi] != seq {
					return nil // between two wanted ones
				}
				wi++
			case !r.tail:
				return errNoVouch
			default:
				if ai < len(r.after) && r.after[ai] < seq {
					return errNoVouch // one of this node's items missing
				}
				if ai < len(r.after) && r.after[ai] == seq {
					ai++
				}
				reached = seq
				after++
			}
			it, err := decodeItem(data, seq)
			if err == nil {
				out = append(out, it)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if last != 0 {
			from = last + 1
		}
		short := r.tail && (reached < target || ai < len(r.after)) // the answering replica lags the leader
		switch {
		case next < len(r.seqs) && (last == 0 || more == 0):
			return nil, errNoVouch // removed since, or not on this replica yet
		case next < len(r.seqs):
		case r.tail && after >= int(s.opt.MaxItemsPerFeed):
			return out, nil
		case r.tail && more > 0:
		case short && !lagged:
			lagged = true
			if err := sleepCtx(ctx, tailLag); err != nil {
				return nil, err
			}
		case short:
			return nil, errNoVouch
		default:
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}
