package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/slogfeed/slogfeed/storage"
)

// DefaultPipeAckWait is how long a pipe's input batch stays with the node
// that fetched it before JetStream hands it out again when PipeAckWait is
// zero. It is below the lease TTL, so by the time a pipe's shard has moved
// its unacknowledged inputs are free for the new owner.
const DefaultPipeAckWait = 5 * time.Second

// MaxPipeInputs bounds the input feeds of one pipe consumer.
const MaxPipeInputs = 256

func pipeConsumer(pipeID uint64) string { return "slogfeed_pipe_" + strconv.FormatUint(pipeID, 10) }

// PipeInputs creates or updates the durable consumer through which pipe
// pipeID reads the items of its input feeds. A new consumer starts at the
// inputs' first items; an updated one (inputs changed) keeps its place.
// Any node can fetch from it; what one node fetched and did not commit is
// handed out again after PipeAckWait.
func (s *Store) PipeInputs(ctx context.Context, pipeID uint64, inputs []uint64) error {
	return s.setPipeInputs(ctx, pipeID, inputs, jetstream.DeliverAllPolicy, 0)
}

// SetPipeInputs is PipeInputs for the runner (storage.PipeInputQueue): a
// new consumer starts at stream sequence from, or, when from is 0, at the
// items stored from now on (the runner reads a new input's backlog from
// the store).
func (s *Store) SetPipeInputs(ctx context.Context, pipeID uint64, inputs []uint64, from uint64) error {
	if from == 0 {
		return s.setPipeInputs(ctx, pipeID, inputs, jetstream.DeliverNewPolicy, 0)
	}
	return s.setPipeInputs(ctx, pipeID, inputs, jetstream.DeliverByStartSequencePolicy, from)
}

// pipeQueueKey is the consumer metadata key naming one incarnation of a
// pipe's consumer (PipeBatch.Queue).
const pipeQueueKey = "slogfeed_queue"

func (s *Store) setPipeInputs(ctx context.Context, pipeID uint64, inputs []uint64, deliver jetstream.DeliverPolicy, from uint64) error {
	if len(inputs) == 0 || len(inputs) > MaxPipeInputs {
		return fmt.Errorf("pipe %d inputs: %w: %d input feeds (1…%d)", pipeID, storage.ErrInvalid, len(inputs), MaxPipeInputs)
	}
	subjects := make([]string, 0, len(inputs))
	for _, id := range inputs {
		if sub := itemSubject(id); !slices.Contains(subjects, sub) {
			subjects = append(subjects, sub)
		}
	}
	slices.Sort(subjects)
	for range maxRetries {
		cons, err := s.items.Consumer(ctx, pipeConsumer(pipeID))
		if err == nil {
			// Only the filter changes: the deliver policy and start of
			// a consumer cannot, and its place is kept.
			cfg := cons.CachedInfo().Config
			have := slices.Clone(cfg.FilterSubjects)
			if cfg.FilterSubject != "" {
				have = append(have, cfg.FilterSubject)
			}
			slices.Sort(have)
			if slices.Equal(have, subjects) {
				return nil
			}
			cfg.FilterSubjects, cfg.FilterSubject = subjects, ""
			if _, err = s.items.UpdateConsumer(ctx, cfg); err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
				if err == nil {
					return nil
				}
				continue // deleted meanwhile: create it
			}
			return fmt.Errorf("pipe %d inputs: %w", pipeID, err)
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("pipe %d inputs: %w", pipeID, err)
		}
		_, err = s.items.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:        pipeConsumer(pipeID),
			Description:    fmt.Sprintf("slogfeed pipe %d inputs", pipeID),
			FilterSubjects: subjects,
			AckPolicy:      jetstream.AckExplicitPolicy,
			AckWait:        s.opt.PipeAckWait,
			DeliverPolicy:  deliver,
			OptStartSeq:    from,
			MaxAckPending:  10_000,
			Replicas:       0, // as the stream
			Metadata:       map[string]string{pipeQueueKey: nuid.Next()},
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			return fmt.Errorf("pipe %d inputs: %w", pipeID, err)
		}
		// Another node created it meanwhile: update that one.
	}
	return fmt.Errorf("pipe %d inputs: %w", pipeID, ErrStale)
}

// DeletePipeInputs deletes the pipe's consumer.
func (s *Store) DeletePipeInputs(ctx context.Context, pipeID uint64) error {
	if err := s.items.DeleteConsumer(ctx, pipeConsumer(pipeID)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("delete pipe %d inputs: %w", pipeID, err)
	}
	return nil
}

// PipeBatch is a batch of a pipe's input items, fetched by one node and
// held for it until CommitPipeBatch (or Ack, Release) or PipeAckWait.
type PipeBatch struct {
	PipeID uint64
	// Items in delivery order; each has FeedID (the input feed) and Seq.
	Items []storage.Item
	// Queue names the consumer's incarnation (a consumer made afresh has
	// another); AckFloor is the stream sequence at or below which every
	// item it delivered was acknowledged, and Held how many it had out,
	// or due again, and did not deliver in this batch, both as it said
	// before the fetch.
	Queue    string
	AckFloor uint64
	Held     int
	msgs     []jetstream.Msg
	nc       *nats.Conn
}

// pipeRefetchWait bounds NextPipeBatch's second fetch: the consumer said
// it had items to deliver, and a fetch that does not wait found none.
const pipeRefetchWait = 2 * time.Second

// NextPipeBatch fetches up to max input items the pipe has not committed
// yet, without waiting for new ones (an empty batch when there are none).
// Without a consumer it fails with storage.ErrNoPipeInputs.
//
// A fetch that does not wait can come back empty from a consumer that has
// items to deliver (on a replicated stream, a consumer just created or
// whose leader just changed, now and then; once in CI): when the consumer
// said it had some, NextPipeBatch fetches again, waiting up to
// pipeRefetchWait for as many as it said.
func (s *Store) NextPipeBatch(ctx context.Context, pipeID uint64, max int) (*PipeBatch, error) {
	// A consumer whose leader is being elected answers neither the
	// lookup nor a fetch for a moment ("no responders"): nothing was
	// delivered, so both are tried again.
	cons, err := retryNoResponders(ctx, func() (jetstream.Consumer, error) { return s.items.Consumer(ctx, pipeConsumer(pipeID)) })
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("pipe %d inputs: %w", pipeID, storage.ErrNoPipeInputs)
	}
	if err != nil {
		return nil, fmt.Errorf("pipe %d inputs: %w", pipeID, err)
	}
	info := cons.CachedInfo()
	b := &PipeBatch{PipeID: pipeID, nc: s.js.Conn(), Queue: info.Config.Metadata[pipeQueueKey], AckFloor: info.AckFloor.Stream, Held: info.NumAckPending}
	if max <= 0 {
		return b, nil
	}
	_, err = retryNoResponders(ctx, func() (struct{}, error) {
		batch, err := cons.FetchNoWait(max)
		if err == nil {
			err = b.take(batch)
		}
		if len(b.Items) > 0 {
			err = nil // delivered: keep them, whatever came after
		}
		return struct{}{}, err
	})
	if err == nil && len(b.Items) == 0 && info.NumPending > 0 {
		want := int(min(uint64(max), info.NumPending))
		fctx, cancel := context.WithTimeout(ctx, pipeRefetchWait)
		var batch jetstream.MessageBatch
		if batch, err = cons.Fetch(want, jetstream.FetchContext(fctx)); err == nil {
			err = b.take(batch)
		}
		cancel()
		if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
			err = nil // the items it said it had went elsewhere meanwhile
		}
	}
	if b.Held < 0 {
		b.Held = 0
	}
	if err != nil {
		return b, fmt.Errorf("pipe %d inputs: %w", pipeID, err)
	}
	return b, nil
}

// take adds the items of a fetched batch to b, and returns the fetch's
// error (none for a fetch that found no message).
func (b *PipeBatch) take(batch jetstream.MessageBatch) error {
	for m := range batch.Messages() {
		var it storage.Item
		md, err := m.Metadata()
		if err == nil {
			err = json.Unmarshal(m.Data(), &it)
		}
		if err != nil {
			// Not an item: terminate it so it is not handed out again.
			_ = m.Term()
			continue
		}
		if md.NumDelivered > 1 {
			b.Held-- // it was pending before the fetch
		}
		it.Seq = md.Sequence.Stream
		b.Items = append(b.Items, it)
		b.msgs = append(b.msgs, m)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return err
	}
	return nil
}

// PipeInputsWaiting returns how many input items the pipe's consumer has
// not delivered yet (its NumPending), or storage.ErrNoPipeInputs.
func (s *Store) PipeInputsWaiting(ctx context.Context, pipeID uint64) (int, error) {
	cons, err := s.items.Consumer(ctx, pipeConsumer(pipeID))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, fmt.Errorf("pipe %d inputs: %w", pipeID, storage.ErrNoPipeInputs)
	}
	if err != nil {
		return 0, fmt.Errorf("pipe %d inputs: %w", pipeID, err)
	}
	return int(cons.CachedInfo().NumPending), nil
}

// Ack acknowledges the items at indexes idx: each but the last without
// waiting, the last confirmed by the server, which processes one
// connection's acknowledgements of a consumer in order. A message whose
// hold lapsed before its acknowledgement is handed out again.
func (b *PipeBatch) Ack(ctx context.Context, idx []int) error {
	return b.settle(ctx, idx, "acknowledge", jetstream.Msg.Ack, func(m jetstream.Msg) error { return m.DoubleAck(ctx) })
}

// Release hands the items at indexes idx back for the next fetch (a
// negative acknowledgement without delay), the last confirmed by the
// server, so that the next fetch has them first.
func (b *PipeBatch) Release(ctx context.Context, idx []int) error {
	return b.settle(ctx, idx, "hand back", jetstream.Msg.Nak, func(m jetstream.Msg) error {
		if m.Reply() == "" {
			return m.Nak()
		}
		_, err := b.nc.RequestWithContext(ctx, m.Reply(), []byte("-NAK"))
		return err
	})
}

func (b *PipeBatch) settle(ctx context.Context, idx []int, what string, each, last func(jetstream.Msg) error) error {
	var errs []error
	for n, i := range idx {
		send := each
		if n == len(idx)-1 {
			send = last
		}
		if err := send(b.msgs[i]); err != nil {
			errs = append(errs, fmt.Errorf("pipe %d: %s input %d: %w", b.PipeID, what, b.Items[i].Seq, err))
		}
	}
	return errors.Join(errs...)
}

// CommitPipeBatch stores the outputs of a run over b in the pipe's output
// feed (as AddItems: each output ID once, so a rerun of the same inputs,
// on this node or another, emits nothing twice) and then acknowledges b's
// inputs, each acknowledgement confirmed by the server. A crash between
// the two leaves the inputs to be handed out again, and their rerun's
// outputs are recognised as stored.
func (s *Store) CommitPipeBatch(ctx context.Context, b *PipeBatch, outFeedID uint64, out []storage.Item, ret storage.Retention) ([]storage.Item, error) {
	added, err := s.AddItems(ctx, outFeedID, out, ret)
	if err != nil {
		return added, fmt.Errorf("pipe %d: %w", b.PipeID, err)
	}
	for i, m := range b.msgs {
		if err := m.DoubleAck(ctx); err != nil {
			return added, fmt.Errorf("pipe %d: acknowledge input %d: %w", b.PipeID, b.Items[i].Seq, err)
		}
	}
	return added, nil
}

// SetPipeInputs is Store.SetPipeInputs (storage.PipeInputQueue).
func (b *Backend) SetPipeInputs(pipeID uint64, feeds []uint64, from uint64) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.SetPipeInputs(ctx, pipeID, feeds, from)
}

// NextPipeInputs is Store.NextPipeBatch (storage.PipeInputQueue); the
// batch's Ack and Release are bounded by the call timeout.
func (b *Backend) NextPipeInputs(pipeID uint64, max int) (storage.PipeBatch, error) {
	ctx, cancel := b.call()
	defer cancel()
	pb, err := b.s.NextPipeBatch(ctx, pipeID, max)
	if err != nil {
		return nil, err
	}
	return backendBatch{pb, b}, nil
}

// PipeInputsWaiting is Store.PipeInputsWaiting (storage.PipeInputQueue).
func (b *Backend) PipeInputsWaiting(pipeID uint64) (int, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.PipeInputsWaiting(ctx, pipeID)
}

// backendBatch is a PipeBatch as storage.PipeBatch.
type backendBatch struct {
	b  *PipeBatch
	be *Backend
}

func (x backendBatch) Items() []storage.Item { return x.b.Items }
func (x backendBatch) Queue() string         { return x.b.Queue }
func (x backendBatch) AckFloor() uint64      { return x.b.AckFloor }
func (x backendBatch) Held() int             { return x.b.Held }

func (x backendBatch) Ack(idx []int) error {
	ctx, cancel := x.be.call()
	defer cancel()
	return x.b.Ack(ctx, idx)
}

func (x backendBatch) Release(idx []int) error {
	ctx, cancel := x.be.call()
	defer cancel()
	return x.b.Release(ctx, idx)
}

var _ storage.PipeInputQueue = (*Backend)(nil)
