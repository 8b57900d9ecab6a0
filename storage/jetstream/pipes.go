package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	if len(inputs) == 0 || len(inputs) > MaxPipeInputs {
		return fmt.Errorf("pipe %d inputs: %w: %d input feeds (1…%d)", pipeID, storage.ErrInvalid, len(inputs), MaxPipeInputs)
	}
	subjects := make([]string, len(inputs))
	for i, id := range inputs {
		subjects[i] = itemSubject(id)
	}
	_, err := s.items.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:        pipeConsumer(pipeID),
		Description:    fmt.Sprintf("slogfeed pipe %d inputs", pipeID),
		FilterSubjects: subjects,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        s.opt.PipeAckWait,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		MaxAckPending:  10_000,
		Replicas:       0, // as the stream
	})
	if err != nil {
		return fmt.Errorf("pipe %d inputs: %w", pipeID, err)
	}
	return nil
}

// DeletePipeInputs deletes the pipe's consumer.
func (s *Store) DeletePipeInputs(ctx context.Context, pipeID uint64) error {
	if err := s.items.DeleteConsumer(ctx, pipeConsumer(pipeID)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("delete pipe %d inputs: %w", pipeID, err)
	}
	return nil
}

// PipeBatch is a batch of a pipe's input items, fetched by one node and
// held for it until CommitPipeBatch or PipeAckWait.
type PipeBatch struct {
	PipeID uint64
	// Items in stream order; each has FeedID (the input feed) and Seq.
	Items []storage.Item
	msgs  []jetstream.Msg
}

// NextPipeBatch fetches up to max input items the pipe has not committed
// yet, without waiting for new ones (an empty batch when there are none).
func (s *Store) NextPipeBatch(ctx context.Context, pipeID uint64, max int) (*PipeBatch, error) {
	cons, err := s.items.Consumer(ctx, pipeConsumer(pipeID))
	if err != nil {
		return nil, fmt.Errorf("pipe %d inputs: %w", pipeID, err)
	}
	b := &PipeBatch{PipeID: pipeID}
	if max <= 0 {
		return b, nil
	}
	batch, err := cons.FetchNoWait(max)
	if err != nil {
		return nil, fmt.Errorf("pipe %d inputs: %w", pipeID, err)
	}
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
		it.Seq = md.Sequence.Stream
		b.Items = append(b.Items, it)
		b.msgs = append(b.msgs, m)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return b, fmt.Errorf("pipe %d inputs: %w", pipeID, err)
	}
	return b, nil
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
	for _, m := range b.msgs {
		if err := m.DoubleAck(ctx); err != nil {
			return added, fmt.Errorf("pipe %d: acknowledge input %s: %w", b.PipeID, m.Subject(), err)
		}
	}
	return added, nil
}
