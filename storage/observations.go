package storage

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// AddObservation appends a poll outcome of feed feedID and drops the
// oldest beyond Options.MaxObservations. It fails with ErrFeedNotFound, or
// ErrInvalid for an observation JSON could not hold (a NaN latency, a year
// outside 0–9999) or whose JSON would be larger than MaxObservationSize.
func (s *Store) AddObservation(feedID uint64, o Observation) error {
	raw, err := encodeObservation(feedID, o)
	if err != nil {
		return err
	}
	err = s.updatePoll(func(tx *bolt.Tx) error {
		if err := s.putObservation(tx, feedID, raw); err != nil {
			return err
		}
		return s.foldState(tx, feedID, func() (*Feed, error) {
			f, err := getFeed(tx, feedID)
			return &f, err
		}, &o)
	})
	if err != nil {
		return fmt.Errorf("storage: add observation to feed %d: %w", feedID, err)
	}
	return nil
}

// RecordPoll stores a poll's observation and applies fn to the feed (its
// counters, validators, errors) in one transaction: one write to disk per
// poll instead of two. fn behaves as in UpdateFeed.
func (s *Store) RecordPoll(feedID uint64, o Observation, fn func(*Feed) error) (Feed, error) {
	raw, err := encodeObservation(feedID, o)
	if err != nil {
		return Feed{}, err
	}
	var out Feed
	pre := s.prepareFeed(feedID, func(p *preparedFeed) error { return fn(&p.f) }) // off the writer when it can be
	err = s.updatePoll(func(tx *bolt.Tx) error {
		if err := s.putObservation(tx, feedID, raw); err != nil {
			return err
		}
		if ok, err := s.applyPrepared(tx, feedID, pre); err != nil {
			return err
		} else if ok {
			out = pre.f
			s.memoOnCommit(tx, feedID, pre.raw, pre.memo)
			return s.foldState(tx, feedID, feedOf(&pre.f), &o)
		}
		f, fr, err := s.updateFeedRawTx(tx, feedID, fn)
		if err != nil {
			return err
		}
		out = f
		s.memoOnCommit(tx, feedID, fr, cloneFeed(&f))
		return s.foldState(tx, feedID, feedOf(&f), &o)
	})
	if err != nil {
		return Feed{}, fmt.Errorf("storage: record poll of feed %d: %w", feedID, err)
	}
	s.unstored.Clear(feedID)
	return out, nil
}

// memoOnCommit puts feed id as a poll's write in tx stores it (raw, its
// validated encoding, and f, a copy nobody else holds) in the memo once
// tx commits, current until a write other than a poll's ends
// (feedMemo). tx's commit handlers run in the order of the commits, so
// an earlier write's entry never replaces a later one's.
func (s *Store) memoOnCommit(tx *bolt.Tx, id uint64, raw []byte, f Feed) {
	gen := s.feedGen.Load()
	tx.OnCommit(func() { s.feedMemo.putCommitted(id, raw, f, gen) })
}

func encodeObservation(feedID uint64, o Observation) ([]byte, error) {
	raw, err := marshalObservation(&o)
	if err != nil {
		return nil, fmt.Errorf("storage: observation of feed %d: %w", feedID, invalidf("cannot be encoded: %v", err))
	}
	if len(raw) > MaxObservationSize {
		return nil, fmt.Errorf("storage: observation of feed %d: %w", feedID,
			invalidf("%d bytes encoded, more than %d", len(raw), MaxObservationSize))
	}
	return raw, nil
}

// obsSlack is how many observations beyond Options.MaxObservations a
// feed may hold before the oldest are dropped: an eighth, at most 64.
// Dropping the oldest at every poll rewrote the bucket's first page as
// well as its last at every poll (with a long history, 4.5 pages written
// per 304 instead of 2.2); dropping them a slack at a time rewrites it
// once in that many polls. Every read leaves the slack out (obsKept).
func obsSlack(maxObs int) int { return min(maxObs/8, 64) }

// obsKept is how many of a feed's newest observations a read returns
// when asked for limit (limit ≤ 0: all that are kept).
func (s *Store) obsKept(limit int) int {
	if limit <= 0 || limit > s.maxObs {
		return s.maxObs
	}
	return limit
}

// appendObs appends an encoded observation to feed feedID's obs bucket
// and drops the oldest beyond Options.MaxObservations (counting a full
// tail, see obstail.go), a slack at a time (obsSlack).
func (s *Store) appendObs(obs view, feedID uint64, raw []byte) error {
	// Keys are consecutive sequence numbers from 1: the last key tells
	// the next one, the first how many are kept.
	c := obs.Cursor()
	var seq uint64 = 1
	if k, _ := c.Last(); k != nil {
		last, ok := getU64(k)
		if !ok {
			return corruptf("feed %d: bad observation key %x", feedID, k)
		}
		seq = last + 1
	}
	if err := obs.Put(u64(seq), raw); err != nil {
		return err
	}
	k, _ := c.First()
	first, ok := getU64(k)
	if !ok {
		return corruptf("feed %d: bad observation key %x", feedID, k)
	}
	if seq-first < uint64(s.maxObs+obsSlack(s.maxObs)) {
		return nil
	}
	for ; seq-first >= uint64(s.maxObs); first++ {
		if err := obs.Delete(u64(first)); err != nil {
			return err
		}
	}
	return nil
}

// Observations returns feed feedID's newest limit observations (all kept
// when limit ≤ 0), oldest first: the order to replay them into a policy.
func (s *Store) Observations(feedID uint64, limit int) ([]Observation, error) {
	var out []Observation
	err := s.db.View(func(tx *bolt.Tx) error {
		fb, err := s.feedBuckets(tx, feedID)
		if err != nil {
			return err
		}
		feeds, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		tail, err := feedTail(feeds, feedID)
		if err != nil {
			return err
		}
		// decode appends observation v: key k of the bucket, or entry i
		// of the tail when k is nil.
		decode := func(k []byte, i int, v []byte) error {
			o, err := decodeObservation(v)
			if err != nil {
				if k == nil {
					return corruptf("feed %d: observation tail[%d]: %v", feedID, i, err)
				}
				return corruptf("feed %d: observation %x: %v", feedID, k, err)
			}
			out = append(out, o)
			return nil
		}
		limit := s.obsKept(limit)
		if len(tail) >= limit {
			tail = tail[len(tail)-limit:]
		} else {
			// Step back from the end: the bucket may hold a slack of
			// old observations beyond those kept.
			c := fb.obs.Cursor()
			k, v := c.Last()
			for i := 1; i < limit-len(tail) && k != nil; i++ {
				if pk, pv := c.Prev(); pk != nil {
					k, v = pk, pv
				} else {
					break
				}
			}
			for ; k != nil; k, v = c.Next() {
				if err := decode(k, 0, v); err != nil {
					return err
				}
			}
		}
		for i, v := range tail {
			if err := decode(nil, i, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: observations of feed %d: %w", feedID, err)
	}
	return out, nil
}

// Fetched is what RecordFetch stored.
type Fetched struct {
	// Feed is the feed after the update.
	Feed Feed
	// Added are the items stored as new, as AddItems returns them.
	Added []Item
	// Observation is the observation as stored.
	Observation Observation
	// ItemErr joins the refusals AddItems would return beside stored
	// items (an *ItemError per refused item, a Reducer's error); the rest
	// was stored.
	ItemErr error
}

// RecordFetch stores what one fetch of feed feedID brought in one
// transaction: its items (added and updated as by AddItems), its
// observation and the feed's update, so that a crash keeps all of them or
// none. Before the observation is encoded, fn completes it and updates the
// feed (as in UpdateFeed) knowing the items added; fn may run more than
// once (group commit, see Store) and must only assign. It may also run
// before the transaction, given the items expected to be added before
// they have their Seq: it must not read Seq. An error means
// nothing was written: ErrFeedNotFound, fn's error, ErrInvalid for an
// observation that cannot be stored, or a storage failure.
func (s *Store) RecordFetch(feedID uint64, items []Item, o Observation, fn func(f *Feed, o *Observation, added []Item) error) (Fetched, error) {
	now := s.now()
	valid, errs := prepareItems(feedID, items, now)
	// The feed record and the observation are worked out off the writer,
	// as if every valid item were added (a poll usually brings only items
	// not stored yet); the transaction uses them only when that is what
	// happened, and runs fn itself otherwise.
	expect := valid.items // their IDs, which the transaction does not change
	pre := s.prepareFeed(feedID, func(p *preparedFeed) error {
		p.obs = o
		if err := fn(&p.f, &p.obs, expect); err != nil {
			return err
		}
		var err error
		p.obsRaw, err = encodeObservation(feedID, p.obs)
		return err
	})
	// The transaction's closure escapes to the heap (the group commit runs
	// it on its own goroutine), and so does whatever it captures and sets:
	// one small struct rather than the whole result in every poll.
	st := &recordFetchTx{o: o}
	err := s.updatePoll(func(tx *bolt.Tx) error {
		st.res, st.usedPre, st.slow = addResult{}, false, nil
		if len(valid.items) > 0 {
			// Retention remembers as many dropped IDs as the update
			// says the document lists (Feed.Listed); without a prepared
			// update (rare: the feed was not read before its poll) the
			// stored Listed and the items given count.
			if pre != nil {
				valid.listed = pre.f.Listed
			}
			var err error
			if st.res, err = s.addItemsTx(tx, feedID, valid, now); err != nil {
				return err
			}
		}
		if addedAsExpected(st.res, expect) {
			if ok, err := s.applyPrepared(tx, feedID, pre); err != nil {
				return err
			} else if ok {
				st.usedPre = true
				if err := s.putObservation(tx, feedID, pre.obsRaw); err != nil {
					return err
				}
				s.memoOnCommit(tx, feedID, pre.raw, pre.memo)
				return s.foldState(tx, feedID, feedOf(&pre.f), &pre.obs)
			}
		}
		obs := st.o
		var raw []byte
		f, fr, err := s.updateFeedRawTx(tx, feedID, func(f *Feed) error {
			if err := fn(f, &obs, st.res.added); err != nil {
				return err
			}
			var err error
			raw, err = encodeObservation(feedID, obs)
			return err
		})
		if err != nil {
			return err
		}
		if err := s.putObservation(tx, feedID, raw); err != nil {
			return err
		}
		st.slow = &Fetched{Feed: f, Added: st.res.added, Observation: obs,
			ItemErr: errors.Join(append(append(errs[:len(errs):len(errs)], st.res.updateErrs...), st.res.retErr)...)}
		s.memoOnCommit(tx, feedID, fr, cloneFeed(&f))
		return s.foldState(tx, feedID, feedOf(&f), &obs)
	})
	if err != nil {
		return Fetched{}, fmt.Errorf("storage: record fetch of feed %d: %w", feedID, err)
	}
	s.unstored.Clear(feedID)
	if !st.usedPre {
		return *st.slow, nil
	}
	return Fetched{Feed: pre.f, Added: st.res.added, Observation: pre.obs, ItemErr: errors.Join(errs...)}, nil
}

// recordFetchTx is what RecordFetch's transaction works with and leaves
// behind: the poll's observation, what addItemsTx did, and whether the
// prepared record was stored (usedPre) or, if not, the whole result.
type recordFetchTx struct {
	o       Observation
	res     addResult
	usedPre bool
	slow    *Fetched
}

// FeedStates implements StateLoader: Feeds, then Observations of each
// wanted feed (each a local read; a feed deleted in between is left out).
func (s *Store) FeedStates(want func(id uint64) bool, obsLimit int) (map[uint64]*FeedState, error) {
	feeds, err := s.Feeds()
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]*FeedState)
	for _, f := range feeds {
		if want != nil && !want(f.ID) {
			continue
		}
		obs, err := s.Observations(f.ID, obsLimit)
		if errors.Is(err, ErrFeedNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[f.ID] = &FeedState{Feed: f, Observations: obs}
	}
	return out, nil
}

// openObsBucket returns feed id's observations alone (a poll that stores
// no item needs none of its other data), or ErrFeedNotFound.
func openObsBucket(tx *bolt.Tx, id uint64) (view, error) {
	return openFeedView(tx, id, bucketObs)
}

// addedAsExpected reports whether a transaction's addItemsTx added
// exactly the items expected, in order, with nothing refused or skipped:
// then fn, given the expected items, worked out what it would have been
// given the added ones.
func addedAsExpected(res addResult, expect []Item) bool {
	if len(res.added) != len(expect) || res.updateErrs != nil || res.retErr != nil {
		return false
	}
	for i := range expect {
		if res.added[i].ID != expect[i].ID {
			return false
		}
	}
	return true
}
