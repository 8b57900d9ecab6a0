package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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

// AddItems publishes items to feedID's subject and returns those stored,
// with Seq set to their stream sequence (store-wide, increasing). An item
// whose ID the feed already has (or had, before retention removed it) is
// not published; one that another node publishes at the same moment is
// dropped by the stream's message-ID de-duplication. Neither is returned. ret.MaxAge becomes each message's
// TTL; ret.MaxItems is applied by purging the subject's oldest items after
// the publish. Items without an ID or too large for one message are
// refused with a *storage.ItemError wrapping storage.ErrInvalid while the
// others are stored; the errors are joined.
//
// Unlike the bbolt store, a changed item with a known ID is not merged
// into the stored one (next stage); it is skipped.
func (s *Store) AddItems(ctx context.Context, feedID uint64, items []storage.Item, ret storage.Retention) ([]storage.Item, error) {
	now := s.opt.Now()
	subject := itemSubject(feedID)
	if err := s.syncKnown(ctx, feedID); err != nil {
		return nil, err
	}
	var errs []error
	type pending struct {
		item storage.Item
		msg  *nats.Msg
		opts []jetstream.PublishOpt
		ack  jetstream.PubAckFuture
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
		data, err := json.Marshal(&it)
		if err != nil || len(data) > s.maxData {
			errs = append(errs, &storage.ItemError{Index: i, ID: short(it.ID), Err: fmt.Errorf("%w: item of %d bytes (at most %d), %v", storage.ErrInvalid, len(data), s.maxData, err)})
			continue
		}
		msgID := MsgID(feedID, it.ID)
		if s.known.has(feedID, msgID) {
			continue
		}
		opts := []jetstream.PublishOpt{jetstream.WithMsgID(msgID)}
		if ret.MaxAge > 0 {
			opts = append(opts, jetstream.WithMsgTTL(max(ret.MaxAge, time.Second)))
		}
		msg := &nats.Msg{Subject: subject, Data: data}
		ack, err := s.js.PublishMsgAsync(msg, opts...)
		if err != nil {
			errs = append(errs, fmt.Errorf("publish item %d of feed %d: %w", i, feedID, err))
			continue
		}
		sent = append(sent, pending{it, msg, opts, ack})
	}
	var added []storage.Item
	var stored []string
	for _, p := range sent {
		var pa *jetstream.PubAck
		var err error
		select {
		case pa = <-p.ack.Ok():
		case err = <-p.ack.Err():
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
			stored = append(stored, MsgID(feedID, p.item.ID))
		}
	}
	s.known.add(feedID, stored)
	if len(sent) > 0 {
		s.opt.Metrics.published("items", start)
	}
	if ret.MaxItems > 0 && len(added) > 0 {
		if err := s.ApplyRetention(ctx, feedID, ret); err != nil {
			errs = append(errs, err)
		}
	}
	return added, errors.Join(errs...)
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
		pa, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: msg.Subject, Data: msg.Data}, opts...)
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

// ApplyRetention purges feedID's items beyond ret.MaxItems, oldest first.
// (MaxAge needs no pass: it is each message's TTL.)
func (s *Store) ApplyRetention(ctx context.Context, feedID uint64, ret storage.Retention) error {
	if ret.MaxItems <= 0 {
		return nil
	}
	if err := s.items.Purge(ctx, jetstream.WithPurgeSubject(itemSubject(feedID)), jetstream.WithPurgeKeep(uint64(ret.MaxItems))); err != nil {
		return fmt.Errorf("retention of feed %d: %w", feedID, err)
	}
	return nil
}

// CountItems returns how many items feedID has.
func (s *Store) CountItems(ctx context.Context, feedID uint64) (int, error) {
	subject := itemSubject(feedID)
	info, err := s.items.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, fmt.Errorf("count items of feed %d: %w", feedID, err)
	}
	return int(info.State.Subjects[subject]), nil
}

// Items returns up to limit items of feedID with a Seq above afterSeq, in
// Seq order.
func (s *Store) Items(ctx context.Context, feedID, afterSeq uint64, limit int) ([]storage.Item, error) {
	return retryNoResponders(ctx, func() ([]storage.Item, error) { return s.readItems(ctx, feedID, afterSeq, limit) })
}

func (s *Store) readItems(ctx context.Context, feedID, afterSeq uint64, limit int) ([]storage.Item, error) {
	if limit <= 0 {
		return nil, nil
	}
	// A short-lived ephemeral consumer: the server drops it 10 s after the
	// read.
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{itemSubject(feedID)}, InactiveThreshold: 10 * time.Second}
	if afterSeq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = afterSeq + 1
	}
	cons, err := s.items.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("read items of feed %d: %w", feedID, err)
	}
	return fetchAll(ctx, cons, limit, fmt.Sprintf("read items of feed %d", feedID), func(m jetstream.Msg) (storage.Item, error) {
		var it storage.Item
		if err := json.Unmarshal(m.Data(), &it); err != nil {
			return it, fmt.Errorf("%w: %v", storage.ErrCorrupt, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return it, err
		}
		it.Seq = md.Sequence.Stream
		return it, nil
	})
}

// fetchAll reads up to limit messages from the ordered consumer cons,
// decoding each, until the consumer has no more; errors are prefixed
// with what. It returns what it read before an error too.
func fetchAll[T any](ctx context.Context, cons jetstream.Consumer, limit int, what string, decode func(jetstream.Msg) (T, error)) ([]T, error) {
	var out []T
	for len(out) < limit {
		batch, err := cons.FetchNoWait(limit - len(out))
		if err != nil {
			return out, fmt.Errorf("%s: %w", what, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			v, err := decode(m)
			if err != nil {
				return out, fmt.Errorf("%s: %w", what, err)
			}
			out = append(out, v)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return out, fmt.Errorf("%s: %w", what, err)
		}
		if n == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// retryNoResponders runs read again, a few times with a short growing
// pause, while it fails with "no responders": on a replicated stream an
// ephemeral consumer just created is now and then not yet answering its
// first fetch (about one read in twenty on the 3-server test cluster).
func retryNoResponders[T any](ctx context.Context, read func() (T, error)) (T, error) {
	wait := 10 * time.Millisecond
	for try := 0; ; try++ {
		v, err := read()
		if err == nil || !errors.Is(err, nats.ErrNoResponders) || try == 5 {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}
