package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// FeedState is storage.FeedState: a feed's record and newest
// observations.
type FeedState = storage.FeedState

// FeedStates returns the state of every feed whose ID want accepts (every
// feed when want is nil), by ID, with at most obsLimit newest observations
// each (obsLimit ≤ 0: all the stream keeps).
//
// It reads in two passes instead of a KV get and a consumer per feed: one
// over the last value of every feed key of the defs bucket, one over the
// observations stream (for more than 16 wanted feeds; fewer are read one
// by one). That is what a node taking over shards needs (its figure:
// BenchmarkManyFeeds in docs/benchmarks.md). Each pass reads up to what
// the stream's leader held when it began (see pass): a feed written
// meanwhile may be read before or after its write, but nothing the leader
// held is missed because a replica lagged or a fetch came back empty.
func (s *Store) FeedStates(ctx context.Context, want func(id uint64) bool, obsLimit int) (map[uint64]*FeedState, error) {
	out, err := s.readRecords(ctx, want)
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
	if err := s.readAllObservations(ctx, out, obsLimit); err != nil {
		return nil, err
	}
	for _, st := range out {
		if obsLimit > 0 && len(st.Observations) > obsLimit {
			st.Observations = st.Observations[len(st.Observations)-obsLimit:]
		}
	}
	return out, nil
}

// StreamFeedStates is storage.StateStreamer's: the records pass of
// FeedStates, then each observation of the feeds feed accepts handed to
// obs as the observations pass reads it, so the caller holds what it
// derives from them (a policy replayed) rather than all of them.
func (s *Store) StreamFeedStates(ctx context.Context, want func(id uint64) bool, feed func(storage.Feed) bool, obs func(id uint64, o storage.Observation)) error {
	recs, err := s.readRecords(ctx, want)
	if err != nil {
		return err
	}
	ids := make([]uint64, 0, len(recs))
	for id := range recs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	keep := map[uint64]bool{}
	for _, id := range ids {
		if feed(recs[id].Feed) {
			keep[id] = true
		}
	}
	return s.replayObservations(ctx, keep, obs, nil)
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
	err = s.pass(ctx, defs, []string{prefix + "*"}, jetstream.DeliverLastPerSubjectPolicy, "feed states: records", func(m jetstream.Msg) error {
		id, err := strconv.ParseUint(strings.TrimPrefix(m.Subject(), prefix), 10, 64)
		if err != nil || want != nil && !want(id) {
			return nil // not a feed, or not wanted
		}
		if m.Headers().Get(kvOperationHeader) != "" {
			delete(out, id) // deleted (after a value this pass read, when it resumed)
			return nil
		}
		st := &FeedState{}
		data, err := unpackRecord(m.Data())
		if err != nil {
			return fmt.Errorf("feed %d: %w", id, err)
		}
		if err := json.Unmarshal(data, &st.Feed); err != nil || st.Feed.ID != id {
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

// obsFilters are the subject filters of a pass over the observations of
// the feeds ids: with shards, their shards' subjects and those without a
// shard; without, every observation. A pass that wants most shards reads
// them all.
func (s *Store) obsFilters(ids map[uint64]bool) []string {
	n := int(s.shards.Load())
	if n <= 0 {
		return []string{obsSubject + ">"}
	}
	shards := map[int]bool{}
	for id := range ids {
		shards[cluster.ShardOf(cluster.KindFeed, id, n)] = true
	}
	if 2*len(shards) > n {
		return []string{obsSubject + ">"}
	}
	filters := make([]string, 0, len(shards)+1)
	for sh := range shards {
		filters = append(filters, shardObsSubject(sh)+"*")
	}
	slices.Sort(filters)
	return append(filters, obsSubject+"*")
}

// obsFeedOf is the feed ID of an observation subject, with or without a
// shard.
func obsFeedOf(subject string) (uint64, error) {
	return strconv.ParseUint(subject[strings.LastIndexByte(subject, '.')+1:], 10, 64)
}

// perFeedObservations is up to how many feeds FeedStates reads the
// observations of one feed at a time.
const perFeedObservations = 16

// readAllObservations appends the observations of the feeds of out to
// their states, in one pass over the observations stream, keeping at most
// obsLimit newest (all when ≤ 0).
func (s *Store) readAllObservations(ctx context.Context, out map[uint64]*FeedState, obsLimit int) error {
	wanted := make(map[uint64]bool, len(out))
	for id := range out {
		wanted[id] = true
	}
	return s.pass(ctx, s.obs, s.obsFilters(wanted), jetstream.DeliverAllPolicy, "feed states: observations", func(m jetstream.Msg) error {
		id, err := obsFeedOf(m.Subject())
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

// pass calls fn for the messages of stream on subjects filter, in stream
// order, through one ordered consumer with the deliver policy given, up
// to the last message the stream's leader held when the pass began.
func (s *Store) pass(ctx context.Context, stream jetstream.Stream, filters []string, policy jetstream.DeliverPolicy, what string, fn func(jetstream.Msg) error) error {
	// ctx bounds the whole pass (minutes); each request to the cluster
	// is bounded on its own and asked again when unanswered (a leader
	// that died with the request, or stepped down meanwhile).
	info, err := RetryUnanswered(ctx, func(ctx context.Context) (*jetstream.StreamInfo, error) { return leaderInfo(ctx, stream) })
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	target := info.State.LastSeq
	if target == 0 {
		return nil
	}
	cons, err := RetryUnanswered(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			FilterSubjects: filters, DeliverPolicy: policy,
			InactiveThreshold: 10 * time.Second, MaxResetAttempts: passResetAttempts,
		})
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer s.release(stream, cons)
	name := info.Config.Name
	more := func(ctx context.Context, from uint64) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, assetAttempt)
		defer cancel()
		for _, filter := range filters {
			if has, err := s.leaderHasNext(ctx, name, filter, from, target); has || err != nil {
				return has, err
			}
		}
		return false, nil
	}
	return readPass(ctx, cons, target, more, what, fn)
}

// passConsumer is what readPass needs of an ordered consumer.
type passConsumer interface {
	FetchNoWait(batch int) (jetstream.MessageBatch, error)
}

// Bounds of a pass (readPass).
const (
	// passResetAttempts bounds the ordered consumer's own attempts to
	// create its next consumer, which it does at every fetch (without
	// a bound it retries for ever, and the pass could not end).
	passResetAttempts = 3
	// passRetries is how many fetches in a row may fail (no responders,
	// a timeout, a consumer not created) before the pass gives up.
	passRetries = 8
	// passIdle is how many empty fetches in a row, while the leader
	// holds a message the pass has not read, it takes before giving up.
	passIdle = 30
)

// readPass reads the ordered consumer cons until it has read the message
// at sequence target, or the stream's leader holds no message on its
// filter after the last one read up to target (more), calling fn for each.
//
// An ordered consumer in fetch mode creates a new server-side consumer at
// every fetch, from the sequence after the last message it delivered, on
// any replica of the stream; so:
//   - an empty fetch is not the end: the consumer may sit on a replica
//     that lags the leader, or the server may not have answered within
//     the client's one-second wait for a no-wait fetch (both happen on a
//     loaded cluster, and ended passes early without an error: feeds a
//     takeover should have scheduled were not read). The pass asks the
//     leader (more) and fetches again while it holds more;
//   - a fetch that fails ("no responders" from a consumer not answering
//     yet, a timeout) is tried again: the next fetch resumes after the
//     last message read, the pass is not restarted.
//
// An error of fn ends the pass at once.
func readPass(ctx context.Context, cons passConsumer, target uint64, more func(ctx context.Context, from uint64) (bool, error), what string, fn func(jetstream.Msg) error) error {
	var last uint64 // stream sequence of the last message read
	fails, idle := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		n := 0
		batch, err := cons.FetchNoWait(fetchBatch)
		if err == nil {
			for m := range batch.Messages() {
				md, err := m.Metadata()
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				n++
				last = md.Sequence.Stream
				if err := fn(m); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
			}
			if err = batch.Error(); errors.Is(err, jetstream.ErrNoMessages) {
				err = nil
			}
		}
		if last >= target {
			return nil
		}
		if n > 0 {
			fails, idle = 0, 0
		}
		if err == nil && n == 0 {
			var has bool
			if has, err = more(ctx, last+1); err == nil {
				if !has {
					return nil
				}
				if idle++; idle > passIdle {
					return fmt.Errorf("%s: the leader holds messages after %d up to %d, fetches return none", what, last, target)
				}
				if err := sleepCtx(ctx, backoff(idle, 50*time.Millisecond, time.Second)); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				continue
			}
		}
		if err != nil {
			if fails++; fails > passRetries {
				return fmt.Errorf("%s: after %d tries, read up to %d of %d: %w", what, fails, last, target, err)
			}
			if err := sleepCtx(ctx, backoff(fails, 100*time.Millisecond, 2*time.Second)); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
	}
}

// backoff is the pause before try n (from 1): first, doubling, at most
// limit.
func backoff(n int, first, limit time.Duration) time.Duration {
	d := first
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// leaderHasNext reports whether the leader of stream holds a message on
// subjects filter at a sequence from from to to (a non-direct message
// get, which only the leader answers).
func (s *Store) leaderHasNext(ctx context.Context, stream, filter string, from, to uint64) (bool, error) {
	m, err := s.leaderMsgGet(ctx, stream, struct {
		Seq  uint64 `json:"seq"`
		Next string `json:"next_by_subj"`
	}{from, filter})
	if err != nil {
		return false, fmt.Errorf("next message from the leader: %w", err)
	}
	return m != nil && m.Seq <= to, nil
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

// StreamFeedStates is Store.StreamFeedStates (storage.StateStreamer),
// bounded by DefaultLoadTimeout and cancelled by Close.
func (b *Backend) StreamFeedStates(want func(id uint64) bool, feed func(storage.Feed) bool, obs func(id uint64, o storage.Observation)) error {
	ctx, cancel := context.WithTimeout(b.ctx, DefaultLoadTimeout)
	defer cancel()
	return b.s.StreamFeedStates(ctx, want, feed, obs)
}

var (
	_ storage.FeedIDLister  = (*Backend)(nil)
	_ storage.StateStreamer = (*Backend)(nil)
)
