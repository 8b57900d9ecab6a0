package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// MsgID is the Nats-Msg-Id of an item of a feed: the feed ID and a hash of
// the item ID (item IDs may be up to storage.MaxIDLen bytes of anything).
// Any node publishing the same item of the same feed uses the same
// message ID, so the stream stores it once within its duplicate window.
func MsgID(feedID uint64, itemID string) string {
	h := sha256.Sum256([]byte(itemID))
	return strconv.FormatUint(feedID, 10) + "/" + base64.RawURLEncoding.EncodeToString(h[:18])
}

// AddItems is AddFeedItems for a feed known by its ID and retention
// only: a Reducer is given a feed record with just these two set. Callers
// holding the feed record use AddFeedItems.
func (s *Store) AddItems(ctx context.Context, feedID uint64, items []storage.Item, ret storage.Retention) ([]storage.Item, error) {
	return s.AddFeedItems(ctx, storage.Feed{ID: feedID, Retention: ret}, items)
}

// AddFeedItems publishes items to feed f's subject and returns those
// stored, with Seq set to their stream sequence (store-wide, increasing).
// An item whose ID the feed already has (or had, before retention removed
// it) is not published; one that another node publishes at the same
// moment is dropped by the stream's message-ID de-duplication. Neither is
// returned. Items without an ID or too large for one message are refused
// with a *storage.ItemError wrapping storage.ErrInvalid while the others
// are stored; the errors are joined.
//
// Retention is by publish time (the fetch time for items without one), as
// in the bbolt store: an item retention would drop at once is not stored
// (older than f.Retention.MaxAge, or, when the feed already holds MaxItems,
// not newer than the oldest it holds), and after the publish the feed's
// retention is applied (ApplyRetention); items it removed are not
// returned as added. Without a Reducer, MaxAge is also each message's TTL,
// counted from its publish time, so age applies to feeds that stopped
// publishing. An error of the Reducer (or of a removal) does not undo the
// additions: it is joined to the result, and retention runs again on the
// next call.
//
// Unlike the bbolt store, a changed item with a known ID is not merged
// into the stored one (next stage); it is skipped.
func (s *Store) AddFeedItems(ctx context.Context, f storage.Feed, items []storage.Item) ([]storage.Item, error) {
	if err := s.syncKnown(ctx, f.ID); err != nil {
		return nil, err
	}
	return s.addSynced(ctx, f, items)
}

// addSynced is AddFeedItems once the feed's known item IDs are synced.
func (s *Store) addSynced(ctx context.Context, f storage.Feed, items []storage.Item) ([]storage.Item, error) {
	now := s.opt.Now()
	feedID, ret := f.ID, f.Retention
	subject := itemSubject(feedID)
	red := s.reducer()
	skip := s.admission(feedID, ret, now)
	var errs []error
	type pending struct {
		item  storage.Item
		msg   *nats.Msg
		opts  []jetstream.PublishOpt
		ack   jetstream.PubAckFuture
		err   error
		index int
	}
	var sent []pending
	start := time.Now()
	for i, it := range items {
		it.FeedID, it.Seq = feedID, 0
		if it.Fetched.IsZero() {
			it.Fetched = now
		}
		if it.ID == "" || len(it.ID) > storage.MaxIDLen {
			errs = append(errs, &storage.ItemError{Index: i, ID: short(it.ID), Err: fmt.Errorf("%w: item id of %d bytes", storage.ErrInvalid, len(it.ID))})
			continue
		}
		msgID := MsgID(feedID, it.ID)
		if s.known.has(feedID, msgID) {
			continue // the usual case for most of a document's items
		}
		data, err := json.Marshal(&it)
		if err != nil || len(data) > s.maxData {
			errs = append(errs, &storage.ItemError{Index: i, ID: short(it.ID), Err: fmt.Errorf("%w: item of %d bytes (at most %d), %v", storage.ErrInvalid, len(data), s.maxData, err)})
			continue
		}
		if skip(&it) {
			continue
		}
		opts := []jetstream.PublishOpt{jetstream.WithMsgID(msgID)}
		if ret.MaxAge > 0 && red == nil {
			opts = append(opts, jetstream.WithMsgTTL(max(sortTime(&it).Add(ret.MaxAge).Sub(now), time.Second)))
		}
		sent = append(sent, pending{item: it, msg: &nats.Msg{Subject: subject, Data: data, Header: itemHeaders(msgID, &it)}, opts: opts, index: i})
	}
	// One new item, the usual case, is published expecting the subject's
	// last sequence the index is complete up to: once stored, the index
	// is complete up to the item, and the next poll reads nothing back.
	alone, upTo := false, uint64(0)
	if seq, ok := s.known.upTo(feedID); ok && len(sent) == 1 {
		alone, upTo = true, seq
		sent[0].opts = append(slices.Clip(sent[0].opts), jetstream.WithExpectLastSequencePerSubject(upTo))
	}
	for k := range sent {
		p := &sent[k]
		if p.ack, p.err = s.js.PublishMsgAsync(p.msg, p.opts...); p.err != nil {
			errs = append(errs, fmt.Errorf("publish item %d of feed %d: %w", p.index, feedID, p.err))
		}
	}
	var added []storage.Item
	var stored []knownItem
	advanced := false // the one item extended the index
	for _, p := range sent {
		if p.err != nil {
			continue
		}
		var pa *jetstream.PubAck
		var err error
		select {
		case pa = <-p.ack.Ok():
			if alone && !pa.Duplicate {
				advanced = s.known.advance(feedID, upTo, knownItem{key: MsgID(feedID, p.item.ID), seq: pa.Sequence, at: sortNanos(sortTime(&p.item))})
			}
		case err = <-p.ack.Err():
			if alone && (IsConflict(err) || inProcess(err)) {
				// The index is behind the subject: read it at the
				// next poll.
				s.known.distrust(feedID)
				// Another writer published to the feed since the sync:
				// the message ID keeps the item stored once.
				p.msg = &nats.Msg{Subject: p.msg.Subject, Data: p.msg.Data, Header: itemHeaders(MsgID(feedID, p.item.ID), &p.item)}
				p.opts = p.opts[:len(p.opts)-1]
				pa, err = s.js.PublishMsg(ctx, p.msg, p.opts...)
			}
			if inProcess(err) {
				pa, err = s.republish(ctx, p.msg, p.opts)
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("publish items of feed %d: %w", feedID, ctx.Err()))
			return added, errors.Join(errs...)
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("publish item %s of feed %d: %w", short(p.item.ID), feedID, err))
		case !pa.Duplicate:
			p.item.Seq = pa.Sequence
			added = append(added, p.item)
			if !advanced {
				stored = append(stored, knownItem{key: MsgID(feedID, p.item.ID), seq: pa.Sequence, at: sortNanos(sortTime(&p.item))})
			}
		}
	}
	s.known.add(feedID, stored)
	if len(sent) > 0 {
		s.opt.Metrics.published("items", start)
	}
	if ret != (storage.Retention{}) {
		removed, err := s.retain(ctx, f, now)
		if err != nil {
			errs = append(errs, err)
		}
		if removed > 0 {
			// Retention may have removed (or a digest replaced) items
			// added here: report only those still stored as added.
			added = slices.DeleteFunc(added, func(it storage.Item) bool {
				return s.known.stored(feedID, MsgID(feedID, it.ID)) != it.Seq
			})
		}
	}
	return added, errors.Join(errs...)
}

// HasItems reports, for each of ids, whether feed feedID holds (or held,
// before retention removed it) an item with that ID, from the node's
// index of the feed's item IDs after one read of the subject's last
// sequence: a poll asks this of every document, and reading the items
// themselves would take a consumer. Unlike the bbolt store it does not
// check that the feed exists (a deleted feed holds nothing).
func (s *Store) HasItems(ctx context.Context, feedID uint64, ids []string) ([]bool, error) {
	if err := s.syncOwned(ctx, feedID); err != nil {
		return nil, err
	}
	out := make([]bool, len(ids))
	for i, id := range ids {
		out[i] = id != "" && len(id) <= storage.MaxIDLen && s.known.has(feedID, MsgID(feedID, id))
	}
	return out, nil
}

// admission returns the filter of the items retention would remove at
// once (see AddFeedItems), from the feed's index.
func (s *Store) admission(feedID uint64, r storage.Retention, now time.Time) func(*storage.Item) bool {
	var cutoff int64
	if r.MaxAge > 0 {
		cutoff = now.Add(-r.MaxAge).UnixNano()
	}
	full, oldest := false, int64(0)
	if r.MaxItems > 0 {
		if n, at := s.known.oldest(feedID); n >= r.MaxItems {
			full, oldest = true, at
		}
	}
	return func(it *storage.Item) bool {
		t := sortTime(it)
		if !it.OwnDate.IsZero() && it.OwnDate.Before(t) { // see storage.Item.OwnDate
			t = it.OwnDate
		}
		ns := sortNanos(t)
		return r.MaxAge > 0 && ns < cutoff || full && ns <= oldest
	}
}

// errDuplicateInProcess is JetStream's answer to a message whose ID
// another publish of the same ID is storing right now (replicated
// streams): the overlap poll at a takeover.
const errDuplicateInProcess jetstream.ErrorCode = 10158

func inProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errDuplicateInProcess
}

// republish publishes msg again until the concurrent publish of its ID
// has been stored, then JetStream answers that it is a duplicate.
func (s *Store) republish(ctx context.Context, msg *nats.Msg, opts []jetstream.PublishOpt) (*jetstream.PubAck, error) {
	wait := 10 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		pa, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: msg.Subject, Data: msg.Data, Header: msg.Header}, opts...)
		if !inProcess(err) {
			return pa, err
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func short(id string) string {
	if len(id) > 80 {
		return id[:80]
	}
	return id
}

// CountItems returns how many items feedID has.
func (s *Store) CountItems(ctx context.Context, feedID uint64) (int, error) {
	subject := itemSubject(feedID)
	info, err := leaderInfo(ctx, s.items, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, fmt.Errorf("count items of feed %d: %w", feedID, err)
	}
	return int(info.State.Subjects[subject]), nil
}

// Items returns up to limit items of feedID with a Seq above afterSeq, in
// Seq order: a read of the range after afterSeq (readRange), which ends
// where the stream's leader holds no more.
func (s *Store) Items(ctx context.Context, feedID, afterSeq uint64, limit int) ([]storage.Item, error) {
	if limit <= 0 {
		return nil, nil
	}
	items, err := s.readRange(ctx, feedID, afterSeq+1, 0, limit, func(read []storage.Item) bool { return len(read) >= limit })
	if len(items) > limit {
		items = items[:limit]
	}
	return items, err
}

// itemsFrom is a consumer of feedID's items from stream sequence from (1:
// the first) on: a short-lived ephemeral one, which the server drops 10 s
// after the read.
func (s *Store) itemsFrom(ctx context.Context, feedID, from uint64) (jetstream.Consumer, error) {
	s.readers.Add(1)
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{itemSubject(feedID)}, InactiveThreshold: 10 * time.Second}
	if from > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from
	}
	return s.items.OrderedConsumer(ctx, cfg)
}

// decodeItem decodes the item message at stream sequence seq.
func decodeItem(data []byte, seq uint64) (storage.Item, error) {
	var it storage.Item
	if err := json.Unmarshal(data, &it); err != nil {
		return storage.Item{}, fmt.Errorf("%w: item message %d: %v", storage.ErrCorrupt, seq, err)
	}
	it.Seq = seq
	return it, nil
}

// fetchAll reads up to limit messages from the ordered consumer cons,
// decoding each, until the consumer has no more; errors are prefixed
// with what. It returns what it read before an error too.
func fetchAll[T any](ctx context.Context, cons jetstream.Consumer, limit int, what string, decode func(jetstream.Msg) (T, error)) ([]T, error) {
	var out []T
	err := eachMsg(ctx, cons, limit, what, func(m jetstream.Msg) error {
		v, err := decode(m)
		if err == nil {
			out = append(out, v)
		}
		return err
	})
	return out, err
}

// fetchBatch bounds one fetch of eachMsg.
const fetchBatch = 4096

// eachMsg calls fn for up to limit messages of the ordered consumer cons,
// in order, until the consumer has no more; errors are prefixed with
// what.
func eachMsg(ctx context.Context, cons jetstream.Consumer, limit int, what string, fn func(jetstream.Msg) error) error {
	for seen := 0; seen < limit; {
		batch, err := cons.FetchNoWait(min(limit-seen, fetchBatch))
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if err := fn(m); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if n == 0 {
			break
		}
		seen += n
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// noRespondersBudget bounds how long retryNoResponders keeps trying, and
// noRespondersMaxWait the pause between two tries.
const (
	noRespondersBudget  = 3 * time.Second
	noRespondersMaxWait = 200 * time.Millisecond
)

// retryNoResponders runs read again, with a short growing pause, while it
// fails with "no responders", for up to noRespondersBudget (or until ctx
// ends): on a replicated stream an ephemeral consumer just created is now
// and then not yet answering its first fetch (about one read in twenty on
// the 3-server test cluster), and a bucket whose stream was just placed
// answers nothing until its leader is elected (more than the 0.3 s these
// retries used to allow, once, in CI). A request nobody answered was not
// carried out, so a write is retried as safely as a read.
func retryNoResponders[T any](ctx context.Context, read func() (T, error)) (T, error) {
	wait := 10 * time.Millisecond
	deadline := time.Now().Add(noRespondersBudget)
	for {
		v, err := read()
		if err == nil || !errors.Is(err, nats.ErrNoResponders) || !time.Now().Add(wait).Before(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait = min(2*wait, noRespondersMaxWait)
	}
}

// release deletes the ephemeral consumer cons of stream once a read is
// done with it, in the background (bounded by releaseTimeout), instead of
// leaving it to its inactivity threshold: JetStream allows 1,000
// consumers per stream by default, and reads at a few hundred a second
// would reach that within the threshold.
func (s *Store) release(stream jetstream.Stream, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	name := info.Name
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_ = stream.DeleteConsumer(ctx, name) // at worst it expires by itself
	}()
}

// releaseTimeout bounds the deletion of a read's consumer.
const releaseTimeout = 5 * time.Second

// readRange returns the items of feedID from stream sequence from (1: the
// first) on, in Seq order, up to the first at or above below (no bound
// when 0) or until enough reports that the items read so far suffice.
// expect, the number of items the caller expects to read, sizes the first
// fetch; later fetches double it.
func (s *Store) readRange(ctx context.Context, feedID, from, below uint64, expect int, enough func([]storage.Item) bool) ([]storage.Item, error) {
	subject := itemSubject(feedID)
	to := uint64(math.MaxUint64)
	if below != 0 {
		to = below - 1
	}
	more := func(ctx context.Context, from uint64) (bool, error) {
		return s.leaderHasNext(ctx, ItemsStream, subject, from, to)
	}
	return retryNoResponders(ctx, func() ([]storage.Item, error) {
		what := fmt.Sprintf("read items of feed %d", feedID)
		cons, err := s.itemsFrom(ctx, feedID, from)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		defer s.release(s.items, cons)
		return s.readRangeFrom(ctx, cons, from, below, expect, enough, more, what)
	})
}

// readRangeFrom is readRange reading the ordered consumer cons, which
// starts at from. An empty fetch is not the end of the range (the
// consumer may sit on a replica that lags the leader, or the server may
// not have answered the no-wait fetch in time): the range ends at below,
// or where the stream's leader holds no message of the subject after the
// last one read and before below (more); while it holds one, the read
// fetches again, up to passIdle empty fetches in a row.
func (s *Store) readRangeFrom(ctx context.Context, cons passConsumer, from, below uint64, expect int, enough func([]storage.Item) bool, more func(ctx context.Context, from uint64) (bool, error), what string) ([]storage.Item, error) {
	var out []storage.Item
	next, idle := from, 0                      // next: the sequence after the last message read
	batch := min(max(expect, 1)+1, fetchBatch) // one more shows where the window ends
	for read := 0; read < int(s.opt.MaxItemsPerFeed); {
		msgs, err := cons.FetchNoWait(batch)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		n, done := 0, false
		for m := range msgs.Messages() {
			n++
			if done {
				continue // the rest of a batch that went past below
			}
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			if below != 0 && md.Sequence.Stream >= below {
				done = true
				continue
			}
			next = md.Sequence.Stream + 1
			s.bodies.Add(1)
			it, err := decodeItem(m.Data(), md.Sequence.Stream)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			out = append(out, it)
		}
		if err := msgs.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if done || enough != nil && enough(out) {
			break
		}
		if n == 0 {
			has, err := more(ctx, next)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			if !has {
				break
			}
			if idle++; idle > passIdle {
				return nil, fmt.Errorf("%s: the leader holds messages from %d, fetches return none", what, next)
			}
			if err := sleepCtx(ctx, backoff(idle, 10*time.Millisecond, time.Second)); err != nil {
				return nil, err
			}
			continue
		}
		idle = 0
		read += n
		batch = min(2*batch, fetchBatch)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// windowPasses bounds the windows queryItems reads backwards before it
// reads the rest of the subject.
const windowPasses = 3

// queryItems answers q on feedID's items as the bbolt store does,
// reading a window of the feed's subject where it can prove the answer
// the same as the whole subject's:
//
//   - oldest first (AfterSeq, ByArrivalAsc): the subject from AfterSeq on,
//     until Limit items match;
//   - newest first by arrival: the items the index names from the
//     Limit-th newest matching one to BeforeSeq (queryByTime), when it can
//     vouch for them; else from the sequence of the Limit-th newest
//     matching item of the index to BeforeSeq through a consumer. The
//     index only says where to start: everything from the start on was
//     read, so Limit matching items there are the newest. When fewer
//     match (the index held items removed since, its sort times are not
//     the items'), the window is widened back, and after windowPasses the
//     rest of the subject is read;
//   - newest first by publish time, and without a Limit a window of
//     publish times: the items the index names (queryByTime), when it
//     can vouch for them.
//
// Other queries (no Limit and no window), and those the index cannot
// vouch for, read the whole subject; a whole read gives the index the
// exact sort times of the entries it read from headers that do not
// vouch for theirs (known.vouch).
func (s *Store) queryItems(ctx context.Context, feedID uint64, q storage.ItemQuery) ([]storage.Item, error) {
	if byTime(q) || byArrival(q) {
		items, ok, err := s.queryByTime(ctx, feedID, q)
		if err != nil || ok {
			return items, err
		}
	}
	switch {
	case q.Limit <= 0:
	case q.AfterSeq > 0 || q.Order == storage.ByArrivalAsc:
		seen, n := 0, 0
		items, err := s.readRange(ctx, feedID, q.AfterSeq+1, q.BeforeSeq, q.Limit, func(read []storage.Item) bool {
			for ; seen < len(read); seen++ {
				if inWindow(q, &read[seen]) {
					n++
				}
			}
			return n >= q.Limit
		})
		if err != nil {
			return nil, err
		}
		return query(items, q), nil
	case q.Order == storage.ByArrival:
		if err := s.syncKnownRecent(ctx, feedID); err != nil {
			return nil, err
		}
		sp := spanOf(q.Since, q.Until)
		// Each pass reads the messages below what the previous ones read,
		// from a start further back.
		var items []storage.Item
		below, n := q.BeforeSeq, q.Limit
		for range windowPasses {
			from, ok := s.known.nthNewest(feedID, n, q.BeforeSeq, sp)
			if !ok || below != 0 && from >= below {
				from = 1 // the index has fewer: read all of it
			}
			older, err := s.readRange(ctx, feedID, from, below, n-len(items), nil)
			if err != nil {
				return nil, err
			}
			items = append(older, items...)
			if out := query(slices.Clone(items), q); from == 1 || len(out) == q.Limit {
				return out, nil
			}
			below, n = from, 4*n
		}
		older, err := s.readRange(ctx, feedID, 1, below, int(s.opt.MaxItemsPerFeed), nil)
		if err != nil {
			return nil, err
		}
		return query(append(older, items...), q), nil
	}
	all, err := s.Items(ctx, feedID, q.AfterSeq, int(s.opt.MaxItemsPerFeed))
	if err != nil {
		return nil, err
	}
	if q.AfterSeq == 0 {
		s.known.vouch(feedID, all)
	}
	return query(all, q), nil
}

// leaderLog is streamLog taking the subject's last sequence from the
// stream's leader whether or not the node owns the feed: an index synced
// through it holds every message acknowledged before the sync.
type leaderLog struct{ streamLog }

func (l leaderLog) lastSeq(ctx context.Context, subject string, _ bool) (uint64, error) {
	return l.s.leaderLastSeq(ctx, ItemsStream, subject)
}

// item returns the item of feedID with this ID, or
// storage.ErrItemNotFound, from the Store's index of the feed synced
// with the stream's leader and one message get; when the index cannot
// tell (it saw two messages of one key) or the message is not where it
// says, from the whole subject.
func (s *Store) item(ctx context.Context, feedID uint64, itemID string) (storage.Item, error) {
	notFound := fmt.Errorf("item %q of feed %d: %w", itemID, feedID, storage.ErrItemNotFound)
	if itemID == "" || len(itemID) > storage.MaxIDLen {
		return storage.Item{}, notFound
	}
	if err := s.syncKnownFrom(ctx, feedID, leaderLog{streamLog{s}}); err != nil {
		return storage.Item{}, err
	}
	e, ok := s.known.lookup(feedID, MsgID(feedID, itemID))
	switch {
	case ok && e.seq == 0:
		return storage.Item{}, notFound // never stored, or removed
	case ok:
		it, err := s.itemAt(ctx, e.seq)
		if err == nil {
			s.bodies.Add(1)
		}
		if err == nil && it.ID == itemID && it.FeedID == feedID {
			return it, nil
		}
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return storage.Item{}, err
		}
	}
	all, err := s.Items(ctx, feedID, 0, int(s.opt.MaxItemsPerFeed))
	if err != nil {
		return storage.Item{}, err
	}
	// The subject may hold the item twice (a digest that replaced it):
	// the later message is the item.
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].ID == itemID {
			return all[i], nil
		}
	}
	return storage.Item{}, notFound
}
