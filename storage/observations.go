package storage

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// AddObservation appends a poll outcome of feed feedID and drops the
// oldest beyond Options.MaxObservations. It fails with ErrFeedNotFound, or
// ErrInvalid for an observation JSON cannot hold (a NaN latency, a year
// outside 0–9999) or larger than MaxObservationSize.
func (s *Store) AddObservation(feedID uint64, o Observation) error {
	raw, err := encodeObservation(feedID, o)
	if err != nil {
		return err
	}
	err = s.db.Update(func(tx *bolt.Tx) error { return s.putObservation(tx, feedID, raw) })
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
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := s.putObservation(tx, feedID, raw); err != nil {
			return err
		}
		f, err := s.updateFeedTx(tx, feedID, fn)
		out = f
		return err
	})
	if err != nil {
		return Feed{}, fmt.Errorf("storage: record poll of feed %d: %w", feedID, err)
	}
	return out, nil
}

func encodeObservation(feedID uint64, o Observation) ([]byte, error) {
	raw, err := json.Marshal(&o)
	if err != nil {
		return nil, fmt.Errorf("storage: observation of feed %d: %w", feedID, invalidf("cannot be encoded: %v", err))
	}
	if len(raw) > MaxObservationSize {
		return nil, fmt.Errorf("storage: observation of feed %d: %w", feedID,
			invalidf("%d bytes encoded, more than %d", len(raw), MaxObservationSize))
	}
	return raw, nil
}

// putObservation appends an encoded observation and drops the oldest
// beyond Options.MaxObservations.
func (s *Store) putObservation(tx *bolt.Tx, feedID uint64, raw []byte) error {
	fb, err := s.feedBuckets(tx, feedID)
	if err != nil {
		return err
	}
	seq, err := fb.obs.NextSequence()
	if err != nil {
		return err
	}
	if err := fb.obs.Put(u64(seq), raw); err != nil {
		return err
	}
	// Keys are consecutive sequence numbers: the first key tells how
	// many are kept.
	k, _ := fb.obs.Cursor().First()
	first, ok := getU64(k)
	if !ok {
		return corruptf("feed %d: bad observation key %x", feedID, k)
	}
	for ; seq-first >= uint64(s.maxObs); first++ {
		if err := fb.obs.Delete(u64(first)); err != nil {
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
		c := fb.obs.Cursor()
		k, v := c.First()
		if limit > 0 {
			// Step back limit entries from the end.
			k, v = c.Last()
			for i := 1; i < limit && k != nil; i++ {
				if pk, pv := c.Prev(); pk != nil {
					k, v = pk, pv
				} else {
					break
				}
			}
		}
		for ; k != nil; k, v = c.Next() {
			var o Observation
			if err := json.Unmarshal(v, &o); err != nil {
				return corruptf("feed %d: observation %x: %v", feedID, k, err)
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: observations of feed %d: %w", feedID, err)
	}
	return out, nil
}
