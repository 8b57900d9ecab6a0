package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// TakeFuncs are the callbacks of TakeFeedStates, called from one
// goroutine.
type TakeFuncs struct {
	// Feed is given each feed that exists, with what scheduling it takes
	// (storage.SchedulingFields; the other fields are zero), and its
	// policy state, nil when its record has none. It returns true to
	// have the feed's observations handed to Obs (a replay).
	Feed func(f storage.Feed, st *storage.PolicyState) (replay bool)
	// Obs is given each observation, oldest first, of the feeds Feed
	// asked to replay.
	Obs func(id uint64, o storage.Observation)
	// Reached, when set, returns the state a feed's replay reached (nil:
	// none); TakeFeedStates stores it in the feed's record, unless the
	// record changed since it was read.
	Reached func(id uint64) *storage.PolicyState
	// Unreadable, when set, is given each feed whose record is left out
	// because it cannot be decoded, with its storage.ErrCorrupt error.
	Unreadable func(id uint64, err error)
}

// TakeStats tells what a TakeFeedStates read.
type TakeStats struct {
	Records  int // records read (feeds that exist)
	Restored int // records given with their policy state
	Replayed int // feeds whose observations were read
	Stored   int // states reached by replay stored in their records
	// Unreadable counts the records and observations left out because
	// they cannot be decoded (storage.ErrCorrupt); Unreadable's first
	// error is FirstUnreadable. Such a feed is not handed to Feed: read
	// alone (Store.Feed), it reports its error.
	Unreadable      int
	FirstUnreadable error
}

// unreadable counts err, a record or an observation left out.
func (st *TakeStats) unreadable(err error) {
	st.Unreadable++
	if st.FirstUnreadable == nil {
		st.FirstUnreadable = err
	}
}

// Bounds of TakeFeedStates.
const (
	// recordBatch is how many records one batched read asks for: the
	// server answers at most 1,024 messages to one multi-subject get.
	recordBatch = 1000
	// recordReaders is how many batched reads run at once.
	recordReaders = 4
	// recordBatchTimeout bounds one batched read.
	recordBatchTimeout = 10 * time.Second
	// recordTries bounds the reads of one batch (a replica that lags the
	// leader, a lost answer).
	recordTries = 6
)

// TakeFeedStates reads the records of the feeds ids (those of the shards
// a node takes over) in batched reads of the defs bucket's last values,
// by key, so the read grows with the feeds taken, not with the bucket;
// each record is handed to fn.Feed with its policy state. The
// observations of the feeds fn.Feed asks to replay (records without a
// state) are read then, filtered by their shards' subjects (one by one
// when few), and the states their replays reached (fn.Reached) are
// written to their records at the revision read, so the next takeover
// restores them.
//
// A batch is read again when the replica that answered it had not yet
// stored every message the bucket's leader held when the read began: no
// record written before the call is read older than it was. A record or
// observation that cannot be decoded is left out and counted
// (TakeStats.Unreadable, slogfeed_jetstream_unreadable_total; a record's
// feed is given to fn.Unreadable); the others are read, and the state a
// replay reached without an observation left out is not stored.
func (s *Store) TakeFeedStates(ctx context.Context, ids []uint64, fn TakeFuncs) (TakeStats, error) {
	var stats TakeStats
	if len(ids) == 0 {
		return stats, nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	type replayed struct {
		rev uint64
		raw []byte
	}
	replays := map[uint64]replayed{}
	badRecord := func(id uint64, err error) error {
		stats.unreadable(err)
		s.opt.Metrics.leftOut("record")
		if fn.Unreadable != nil {
			fn.Unreadable(id, err)
		}
		return nil // the others are handed over
	}
	err := s.lastRecords(ctx, ids, func(id, rev uint64, data []byte) error {
		var r schedRecord
		data, err := unpackRecord(data)
		if err != nil {
			return badRecord(id, fmt.Errorf("feed %d: %w", id, err))
		}
		if err := json.Unmarshal(data, &r); err != nil || r.ID != id {
			return badRecord(id, fmt.Errorf("feed %d: %w: %v", id, storage.ErrCorrupt, err))
		}
		stats.Records++
		var st *storage.PolicyState
		if r.State != nil && len(r.State.Policy) <= storage.MaxPolicyStateSize {
			st = r.State.policyState()
			stats.Restored++
		}
		if fn.Feed(r.feed(), st) {
			replays[id] = replayed{rev: rev, raw: data}
		}
		return nil
	})
	if err != nil || len(replays) == 0 {
		return stats, err
	}
	stats.Replayed = len(replays)
	want := make(map[uint64]bool, len(replays))
	for id := range replays {
		want[id] = true
	}
	// A feed with observations left out is replayed from the others,
	// but the state reached is not stored: the next takeover replays it
	// again rather than restore a state that missed them.
	partial := map[uint64]bool{}
	leftOut := func(id uint64, err error) {
		stats.unreadable(err)
		s.opt.Metrics.leftOut("observation")
		partial[id] = true
	}
	if err := s.replayObservations(ctx, want, fn.Obs, leftOut); err != nil {
		return stats, err
	}
	if fn.Reached == nil {
		return stats, nil
	}
	// Store the states reached, each at the revision read: a record
	// written since (a poll) keeps what it has.
	var acks []jetstream.PubAckFuture
	for _, id := range slices.Sorted(maps.Keys(replays)) {
		if partial[id] {
			continue
		}
		st := fn.Reached(id)
		if st == nil {
			continue
		}
		rec, err := decodeRecord(id, replays[id].raw)
		if err != nil || !statedFeed(rec.Kind) {
			continue
		}
		rec.State = recordStateOf(st)
		data, err := s.encodeRecord(&rec)
		if err != nil || rec.State == nil {
			continue
		}
		s.own.forget(id) // the copy of a poll before this write is stale
		a, err := s.js.PublishMsgAsync(kvUpdate(DefsBucket, feedKey(id), data, replays[id].rev))
		if err != nil {
			break // the others wait for the next takeover
		}
		acks = append(acks, a)
	}
	for _, a := range acks {
		_, err := wait(ctx, a)
		if s.opt.Metrics.kvWrite(DefsBucket, err) == nil {
			stats.Stored++
		}
	}
	return stats, nil
}

// replayObservations hands obs the observations of the feeds want, oldest
// first: one feed at a time for a few, else in one pass filtered on their
// shards' subjects. An observation that cannot be decoded is given to
// unreadable and left out (a feed read alone: all of its), or, with
// unreadable nil, ends the read with its error.
func (s *Store) replayObservations(ctx context.Context, want map[uint64]bool, obs func(id uint64, o storage.Observation), unreadable func(id uint64, err error)) error {
	if len(want) <= perFeedObservations {
		for _, id := range slices.Sorted(maps.Keys(want)) {
			list, err := s.Observations(ctx, id, 0)
			if errors.Is(err, storage.ErrCorrupt) && unreadable != nil {
				unreadable(id, err) // replayed from none: the others go on
				continue
			}
			if err != nil {
				return err
			}
			for _, o := range list {
				obs(id, o)
			}
		}
		return nil
	}
	return s.pass(ctx, s.obs, s.obsFilters(want), jetstream.DeliverAllPolicy, "feed states: observations", func(m jetstream.Msg) error {
		id, err := obsFeedOf(m.Subject())
		if err != nil || !want[id] {
			return nil
		}
		var o storage.Observation
		if err := json.Unmarshal(m.Data(), &o); err != nil {
			err = fmt.Errorf("observation of feed %d: %w: %v", id, storage.ErrCorrupt, err)
			if unreadable == nil {
				return err
			}
			unreadable(id, err)
			return nil // the replay goes on without it
		}
		obs(id, o)
		return nil
	})
}

// schedRecord is what TakeFeedStates decodes of a record.
type schedRecord struct {
	storage.SchedulingFields
	State *recordState `json:"policy_state,omitempty"`
}

func (r *schedRecord) feed() storage.Feed {
	return storage.Feed{
		ID: r.ID, Kind: r.Kind, URL: r.URL, Policy: r.Policy, Weight: r.Weight, IgnoreCache: r.IgnoreCache,
		Sleep: r.Sleep, UpdateHint: r.UpdateHint, RetryAfter: r.RetryAfter,
	}
}

// lastRecords calls fn, from the calling goroutine, with the last value
// and revision of each feed key of ids that holds one (deleted feeds are
// left out), a batch of keys at a time, recordReaders batches at once.
func (s *Store) lastRecords(ctx context.Context, ids []uint64, fn func(id, rev uint64, data []byte) error) error {
	// ctx bounds the whole read (minutes): each request is bounded on its
	// own and asked again when unanswered.
	defs, err := RetryUnanswered(ctx, func(ctx context.Context) (jetstream.Stream, error) { return s.js.Stream(ctx, "KV_"+DefsBucket) })
	if err != nil {
		return fmt.Errorf("feed records: %w", err)
	}
	info, err := RetryUnanswered(ctx, func(ctx context.Context) (*jetstream.StreamInfo, error) { return leaderInfo(ctx, defs) })
	if err != nil {
		return fmt.Errorf("feed records: %w", err)
	}
	target := info.State.LastSeq
	if target == 0 {
		return nil
	}
	type batch struct {
		msgs []*nats.Msg
		err  error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nb := (len(ids) + recordBatch - 1) / recordBatch
	results := make([]chan batch, nb)
	for i := range results {
		results[i] = make(chan batch, 1)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(recordReaders, nb) {
		wg.Go(func() {
			for i := range next {
				msgs, err := s.readRecordBatch(ctx, ids[i*recordBatch:min((i+1)*recordBatch, len(ids))], target)
				results[i] <- batch{msgs, err}
			}
		})
	}
	go func() {
		defer close(next)
		for i := range nb {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer wg.Wait()
	prefix := "$KV." + DefsBucket + "." + feedKeyPrefix
	for i := range nb {
		var b batch
		select {
		case b = <-results[i]:
		case <-ctx.Done():
			return fmt.Errorf("feed records: %w", ctx.Err())
		}
		if b.err != nil {
			return fmt.Errorf("feed records: %w", b.err)
		}
		for _, m := range b.msgs {
			if m.Header.Get(kvOperationHeader) != "" {
				continue // deleted
			}
			id, err := strconv.ParseUint(strings.TrimPrefix(m.Header.Get(jetstream.SubjectHeader), prefix), 10, 64)
			if err != nil {
				continue
			}
			rev, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
			if err != nil {
				return fmt.Errorf("feed record %d: %w: sequence %q", id, storage.ErrCorrupt, m.Header.Get(jetstream.SequenceHeader))
			}
			if err := fn(id, rev, m.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

// multiLastRequest is a batched direct get of the last message of each
// of the subjects.
type multiLastRequest struct {
	MultiLast []string `json:"multi_last"`
}

// errLagging is an answer from a replica that had not stored every
// message the leader held.
var errLagging = errors.New("the replica that answered lags the leader")

// readRecordBatch reads the last values of the feed keys of ids, from a
// replica that holds the defs bucket's messages up to target at least,
// trying again (another replica may answer) when one did not.
func (s *Store) readRecordBatch(ctx context.Context, ids []uint64, target uint64) ([]*nats.Msg, error) {
	subjects := make([]string, len(ids))
	for i, id := range ids {
		subjects[i] = "$KV." + DefsBucket + "." + feedKey(id)
	}
	req, err := json.Marshal(multiLastRequest{MultiLast: subjects})
	if err != nil {
		return nil, err
	}
	var last error
	for try := 1; try <= recordTries; try++ {
		msgs, err := s.directMulti(ctx, "KV_"+DefsBucket, req, target, len(ids))
		if err == nil {
			return msgs, nil
		}
		last = err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := sleepCtx(ctx, backoff(try, 50*time.Millisecond, time.Second)); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("after %d tries: %w", recordTries, last)
}

// directMulti sends one batched direct get to stream and returns its
// messages, up to max; errLagging when the replica that answered held
// less than target.
func (s *Store) directMulti(ctx context.Context, stream string, req []byte, target uint64, max int) ([]*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, recordBatchTimeout)
	defer cancel()
	nc := s.js.Conn()
	inbox := nc.NewRespInbox()
	// The answers (up to max, and the status that ends them) fit in a
	// channel of their own size: a synchronous subscription's buffer
	// holds 65,536 (512 KiB, allocated and cleared per read, which at a
	// million feeds cost a takeover 6% of its CPU in collector assists
	// and page returns). More than that is refused below anyway.
	answers := make(chan *nats.Msg, max+2)
	sub, err := nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // the inbox is not reused
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return nil, err
	}
	var msgs []*nats.Msg
	for {
		var m *nats.Msg
		select {
		case m = <-answers:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		switch status := m.Header.Get("Status"); status {
		case "":
			if len(msgs) == max {
				return nil, fmt.Errorf("batched get of %s: more than %d answers", stream, max)
			}
			msgs = append(msgs, m)
			continue
		case "204": // end of the batch
			upTo, err := strconv.ParseUint(m.Header.Get("Nats-UpTo-Sequence"), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("batched get of %s: end without its sequence", stream)
			}
			if upTo < target {
				return nil, errLagging
			}
			if np := m.Header.Get("Nats-Num-Pending"); np != "" && np != "0" {
				return nil, fmt.Errorf("batched get of %s: %s answers left out", stream, np)
			}
			return msgs, nil
		case "404": // none of the subjects holds a message
			if len(msgs) > 0 {
				return nil, fmt.Errorf("batched get of %s: %s %s", stream, status, m.Header.Get("Description"))
			}
			// No sequence to check the replica by: ask the leader
			// whether any of them exists (rare: feeds deleted).
			return nil, s.noneOnLeader(ctx, stream, req)
		default:
			return nil, fmt.Errorf("batched get of %s: %s %s", stream, status, m.Header.Get("Description"))
		}
	}
}

// noneOnLeader returns nil when none of the subjects of the batched get
// req holds a message on the stream's leader, errLagging otherwise.
func (s *Store) noneOnLeader(ctx context.Context, stream string, req []byte) error {
	var r multiLastRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return err
	}
	for _, subject := range r.MultiLast {
		m, err := s.leaderMsgGet(ctx, stream, struct {
			Last string `json:"last_by_subj"`
		}{subject})
		if err != nil {
			return err
		}
		if m != nil {
			return errLagging
		}
	}
	return nil
}

// TakeFeedStates is Store.TakeFeedStates with the callbacks of
// TakeFuncs (Feed, Obs, Reached, Unreadable), bounded by
// DefaultLoadTimeout and cancelled by ctx or by Close.
func (b *Backend) TakeFeedStates(ctx context.Context, ids []uint64, feed func(f storage.Feed, st *storage.PolicyState) (replay bool), obs func(id uint64, o storage.Observation), reached func(id uint64) *storage.PolicyState, unreadable func(id uint64, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultLoadTimeout)
	defer cancel()
	stop := context.AfterFunc(b.ctx, cancel)
	defer stop()
	_, err := b.s.TakeFeedStates(ctx, ids, TakeFuncs{Feed: feed, Obs: obs, Reached: reached, Unreadable: unreadable})
	return err
}

// SetLearner is Store.SetLearner.
func (b *Backend) SetLearner(l storage.Learner) { b.s.SetLearner(l) }
