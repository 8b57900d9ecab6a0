package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// directBatchRequest is a batched direct get of JetStream's API: up to
// Batch messages of subject NextFor from stream sequence Seq on.
type directBatchRequest struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch"`
}

// directBatch reads up to batch messages of subject in the items stream
// from stream sequence from on, in order, with one batched direct get:
// any replica answers it, without a consumer, in one request. It calls
// fn with each message's sequence and body, and returns how many more
// messages of the subject the answering server holds after the last one
// it sent (0 when it holds none from from on). A replica that lags the
// leader may lack the newest messages: callers check what they expected.
// A server that does not batch direct gets (before NATS 2.11), an answer
// of another status than found, not found and no responders, and an
// answer that stops for directIdle make it errNoVouch.
func (s *Store) directBatch(ctx context.Context, subject string, from uint64, batch int, fn func(seq uint64, data []byte) error) (more uint64, err error) {
	body, err := json.Marshal(directBatchRequest{Seq: from, NextFor: subject, Batch: batch})
	if err != nil {
		return 0, err
	}
	nc := s.js.Conn()
	inbox := nc.NewInbox()
	// Room for the whole answer: a subscription's own channel would be
	// sized for any answer (64k messages), and one too small drops what
	// does not fit.
	ch := make(chan *nats.Msg, batch+1)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+ItemsStream, inbox, body); err != nil {
		return 0, err
	}
	idle := time.NewTimer(directIdle)
	defer idle.Stop()
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-idle.C:
			// A lost end of the batch, a replica gone mid-batch: the
			// caller reads another way.
			return 0, errNoVouch
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		idle.Reset(directIdle)
		switch status := m.Header.Get("Status"); status {
		case "":
		case "503":
			return 0, nats.ErrNoResponders // no replica of the stream answering
		case "204": // end of the batch
			more, err := strconv.ParseUint(m.Header.Get(numPendingHeader), 10, 64)
			if err != nil {
				return 0, errNoVouch
			}
			return more, nil
		case "404":
			return 0, nil
		default:
			// Another answer (a request the server refuses, a timeout): the
			// caller reads another way.
			return 0, errNoVouch
		}
		if m.Header.Get(numPendingHeader) == "" {
			// A server without batched direct gets answers the first
			// message alone: the caller reads another way.
			return 0, errNoVouch
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("direct get of %s from %d: sequence %q: %w", subject, from, m.Header.Get(jetstream.SequenceHeader), err)
		}
		if got := m.Header.Get(jetstream.SubjectHeader); got != subject {
			return 0, fmt.Errorf("direct get of %s from %d: message %d of %s", subject, from, seq, got)
		}
		if err := fn(seq, m.Data); err != nil {
			return 0, err
		}
	}
}

// directIdle bounds the wait for each message of a batched direct get's
// answer.
const directIdle = time.Second

// numPendingHeader is the header of a batched direct get's end of batch
// that counts the messages after it.
const numPendingHeader = "Nats-Num-Pending"

// errNoVouch is how a read by the index reports that what it found is
// not what the index said: the caller reads the whole subject instead.
var errNoVouch = errors.New("the index does not vouch for the read")
