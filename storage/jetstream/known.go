package jetstream

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultKnownFeeds is how many feeds' item IDs a Store keeps in memory
// when Options.KnownFeeds is zero; a feed beyond it is reloaded from the
// stream on its next AddItems.
const DefaultKnownFeeds = 4096

// known remembers, per feed, the message IDs of the items the stream
// holds (and of items retention removed since), complete up to a stream
// sequence, so AddItems stores an item once even after the stream's
// duplicate window. When the feed's subject has messages beyond that
// sequence (this node's own publishes, or another node's: a sensor
// reading posted elsewhere, the overlap poll at a takeover), only those
// are read.
type known struct {
	mu    sync.Mutex
	max   int
	order *list.List // of uint64 feed IDs, most recent first
	feeds map[uint64]*knownFeed
}

type knownFeed struct {
	ids     map[string]struct{}
	lastSeq uint64 // ids are complete up to this stream sequence
	elem    *list.Element
}

func newKnown(max int) *known {
	return &known{max: max, order: list.New(), feeds: map[uint64]*knownFeed{}}
}

// upTo returns the sequence the feed's IDs are complete up to.
func (k *known) upTo(feedID uint64) (uint64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok {
		return 0, false
	}
	k.order.MoveToFront(f.elem)
	return f.lastSeq, true
}

// extend adds ids read from the stream and makes the feed's set complete
// up to lastSeq; reset starts the set afresh. It evicts the least recently
// used feed beyond the bound.
func (k *known) extend(feedID, lastSeq uint64, ids []string, reset bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok {
		f = &knownFeed{elem: k.order.PushFront(feedID)}
		k.feeds[feedID] = f
		reset = true
	}
	if reset {
		f.ids = make(map[string]struct{}, len(ids))
	}
	for _, id := range ids {
		f.ids[id] = struct{}{}
	}
	f.lastSeq = lastSeq
	k.order.MoveToFront(f.elem)
	for k.order.Len() > k.max {
		old := k.order.Remove(k.order.Back()).(uint64)
		delete(k.feeds, old)
	}
}

// add records IDs just stored; they do not make the set complete to a
// later sequence (other writers may have published in between).
func (k *known) add(feedID uint64, ids []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.feeds[feedID]; ok {
		for _, id := range ids {
			f.ids[id] = struct{}{}
		}
	}
}

// has reports whether the feed's set holds the message ID.
func (k *known) has(feedID uint64, msgID string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok {
		return false
	}
	_, in := f.ids[msgID]
	return in
}

func (k *known) forget(feedID uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.feeds[feedID]; ok {
		k.order.Remove(f.elem)
		delete(k.feeds, feedID)
	}
}

// syncKnown brings this Store's set of feedID's item message IDs up to
// the subject's last message: nothing to read when no one published to
// the feed since, the new messages' headers when someone did, everything
// when the Store has no set for the feed or the subject was purged below
// what it remembers.
func (s *Store) syncKnown(ctx context.Context, feedID uint64) error {
	subject := itemSubject(feedID)
	var last uint64
	m, err := s.items.GetLastMsgForSubject(ctx, subject)
	switch {
	case err == nil:
		last = m.Sequence
	case errors.Is(err, jetstream.ErrMsgNotFound):
	default:
		return fmt.Errorf("items of feed %d: %w", feedID, err)
	}
	upTo, ok := s.known.upTo(feedID)
	if ok && upTo == last {
		return nil
	}
	reset := !ok || upTo > last
	if reset {
		upTo = 0
	}
	var ids []string
	if last > upTo {
		cons, err := s.items.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject}, HeadersOnly: true, InactiveThreshold: 10 * time.Second,
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: upTo + 1,
		})
		if err != nil {
			return fmt.Errorf("item IDs of feed %d: %w", feedID, err)
		}
		for done := false; !done; {
			batch, err := cons.FetchNoWait(1000)
			if err != nil {
				return fmt.Errorf("item IDs of feed %d: %w", feedID, err)
			}
			n := 0
			for msg := range batch.Messages() {
				n++
				if id := msg.Headers().Get(jetstream.MsgIDHeader); id != "" {
					ids = append(ids, id)
				}
				if md, err := msg.Metadata(); err == nil && md.Sequence.Stream >= last {
					done = true
				}
			}
			done = done || n == 0
		}
	}
	s.known.extend(feedID, last, ids, reset)
	return nil
}
