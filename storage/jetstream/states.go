package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// FeedState is storage.FeedState: a feed's record and newest
// observations.
type FeedState = storage.FeedState

// FeedStates returns the state of every feed whose ID want accepts (every
// feed when want is nil), by ID, with at most obsLimit newest observations
// each (obsLimit ≤ 0: all the stream keeps).
//
// It reads in two passes of ordered consumers instead of a KV get and a
// consumer per feed: one over the last value of every feed key of the defs
// bucket, one over the observations stream (for more than 16 wanted
// feeds; fewer are read one by one). That is what a node taking over
// shards needs (docs/cluster.md, Measurements). The passes read what the servers hold when each starts;
// a feed written meanwhile may be read before or after its write.
func (s *Store) FeedStates(ctx context.Context, want func(id uint64) bool, obsLimit int) (map[uint64]*FeedState, error) {
	// A fresh consumer of a replicated stream now and then answers its
	// first fetch with "no responders": each pass is then read again.
	out, err := retryNoResponders(ctx, func() (map[uint64]*FeedState, error) { return s.readRecords(ctx, want) })
	if err != nil || len(out) == 0 {
		return out, err
	}
	// The observations: for a few feeds, a consumer on each one's subject;
	// for more, one pass over the whole stream, keeping the wanted feeds'.
	// (A consumer filtered on many subjects scans the stream once per
	// consumer and filters slowly: 3,333 subjects of a 30,000-message
	// stream took 14 s in filters of 10,000 and 9 s in filters of 100,
	// the whole stream 0.25 s.)
	if len(out) <= perFeedObservations {
		for id, st := range out {
			obs, err := s.Observations(ctx, id, obsLimit)
			if err != nil {
				return nil, err
			}
			st.Observations = obs
		}
		return out, nil
	}
	_, err = retryNoResponders(ctx, func() (struct{}, error) {
		for _, st := range out {
			st.Observations = nil
		}
		return struct{}{}, s.readAllObservations(ctx, out, obsLimit)
	})
	if err != nil {
		return nil, err
	}
	for _, st := range out {
		if obsLimit > 0 && len(st.Observations) > obsLimit {
			st.Observations = st.Observations[len(st.Observations)-obsLimit:]
		}
	}
	return out, nil
}

// readRecords reads the last value of every feed key of the defs bucket
// whose ID want accepts.
func (s *Store) readRecords(ctx context.Context, want func(id uint64) bool) (map[uint64]*FeedState, error) {
	out := map[uint64]*FeedState{}
	defs, err := s.js.Stream(ctx, "KV_"+DefsBucket)
	if err != nil {
		return nil, fmt.Errorf("feed states: %w", err)
	}
	prefix := "$KV." + DefsBucket + "." + feedKeyPrefix
	cons, err := defs.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + "*"}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		InactiveThreshold: 10 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("feed states: %w", err)
	}
	defer s.release(defs, cons)
	err = eachMsg(ctx, cons, math.MaxInt, "feed states: records", func(m jetstream.Msg) error {
		id, err := strconv.ParseUint(strings.TrimPrefix(m.Subject(), prefix), 10, 64)
		if err != nil || want != nil && !want(id) || m.Headers().Get(kvOperationHeader) != "" {
			return nil // not a feed, not wanted, or deleted
		}
		st := &FeedState{}
		if err := json.Unmarshal(m.Data(), &st.Feed); err != nil || st.Feed.ID != id {
			return fmt.Errorf("feed %d: %w: %v", id, storage.ErrCorrupt, err)
		}
		out[id] = st
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// perFeedObservations is up to how many feeds FeedStates reads the
// observations of one feed at a time.
const perFeedObservations = 16

// readAllObservations appends the observations of the feeds of out to
// their states, in one pass over the observations stream, keeping at most
// obsLimit newest (all when ≤ 0).
func (s *Store) readAllObservations(ctx context.Context, out map[uint64]*FeedState, obsLimit int) error {
	cons, err := s.obs.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{obsSubject + "*"}, InactiveThreshold: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("feed states: %w", err)
	}
	defer s.release(s.obs, cons)
	return eachMsg(ctx, cons, math.MaxInt, "feed states: observations", func(m jetstream.Msg) error {
		id, err := strconv.ParseUint(strings.TrimPrefix(m.Subject(), obsSubject), 10, 64)
		st := out[id]
		if err != nil || st == nil {
			return nil
		}
		var o storage.Observation
		if err := json.Unmarshal(m.Data(), &o); err != nil {
			return fmt.Errorf("observation of feed %d: %w: %v", id, storage.ErrCorrupt, err)
		}
		st.Observations = append(st.Observations, o)
		if obsLimit > 0 && len(st.Observations) >= 2*obsLimit {
			st.Observations = append(st.Observations[:0], st.Observations[len(st.Observations)-obsLimit:]...)
		}
		return nil
	})
}

// kvOperationHeader marks a KV delete or purge (the key has no value).
const kvOperationHeader = "KV-Operation"

// DefaultLoadTimeout bounds Backend.FeedStates: one pass over 10^5 feeds
// takes longer than a call's timeout.
const DefaultLoadTimeout = 5 * time.Minute

// FeedStates is Store.FeedStates (storage.StateLoader), bounded by
// DefaultLoadTimeout and cancelled by Close.
func (b *Backend) FeedStates(want func(id uint64) bool, obsLimit int) (map[uint64]*FeedState, error) {
	ctx, cancel := context.WithTimeout(b.ctx, DefaultLoadTimeout)
	defer cancel()
	return b.s.FeedStates(ctx, want, obsLimit)
}
