package jetstream

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultGroupWindow is how long the first write of a group waits for
// others before the group is sent (Options.GroupWindow).
const DefaultGroupWindow = 2 * time.Millisecond

// groupCallTimeout bounds one group's publishes and acknowledgements.
const groupCallTimeout = 30 * time.Second

// group commits the stored state of concurrent fetches together, as the
// bbolt store group-commits its transactions: the observations of every
// fetch in the group are published at once, and once JetStream has
// acknowledged them, the feed records, each with the revision its
// fetch read (a compare-and-set). One flush and one batch of
// acknowledgements serve the whole group, and a replicated stream takes
// the group's messages in few proposals instead of one round trip each.
//
// The first write waits at most the window for others; writes that come
// while a group is being sent form the next group, sent as soon as the
// current one is acknowledged, so a busy node groups more without waiting
// longer.
type group struct {
	js     jetstream.JetStream
	window time.Duration

	mu      sync.Mutex
	pending []*groupWrite
	busy    bool // a flush is scheduled or running
}

// groupWrite is one fetch's part of a group: its observation, then its
// record's update.
type groupWrite struct {
	obs     *nats.Msg
	obsOpts []jetstream.PublishOpt
	rec     *nats.Msg // a KV update: the record, with the revision expected
	done    chan struct{}

	obsErr error  // the observation is not stored; the record was not sent
	recErr error  // the record is not stored (IsConflict: read again)
	recRev uint64 // the record's new revision
}

func newGroup(js jetstream.JetStream, window time.Duration) *group {
	return &group{js: js, window: window}
}

// kvUpdate is the message of a KV compare-and-set of key in bucket.
func kvUpdate(bucket, key string, value []byte, rev uint64) *nats.Msg {
	m := nats.NewMsg("$KV." + bucket + "." + key)
	m.Data = value
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	return m
}

// commit sends w with the writes of its group and returns once both of
// its parts are acknowledged or refused, or ctx ends (the group goes on).
func (g *group) commit(ctx context.Context, w *groupWrite) error {
	w.done = make(chan struct{})
	g.mu.Lock()
	g.pending = append(g.pending, w)
	if !g.busy {
		g.busy = true
		time.AfterFunc(g.window, g.flush)
	}
	g.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush sends the pending groups, one after the other, until none is left.
func (g *group) flush() {
	for {
		g.mu.Lock()
		ws := g.pending
		g.pending = nil
		if len(ws) == 0 {
			g.busy = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.send(ws)
	}
}

// send publishes one group: the observations, then the records of the
// writes whose observation is stored.
func (g *group) send(ws []*groupWrite) {
	ctx, cancel := context.WithTimeout(context.Background(), groupCallTimeout)
	defer cancel()
	acks := make([]jetstream.PubAckFuture, len(ws))
	for i, w := range ws {
		acks[i], w.obsErr = g.js.PublishMsgAsync(w.obs, w.obsOpts...)
	}
	for i, w := range ws {
		if w.obsErr == nil {
			_, w.obsErr = wait(ctx, acks[i])
		}
	}
	for i, w := range ws {
		acks[i] = nil
		if w.obsErr == nil {
			acks[i], w.recErr = g.js.PublishMsgAsync(w.rec)
		}
	}
	for i, w := range ws {
		if acks[i] != nil {
			var pa *jetstream.PubAck
			if pa, w.recErr = wait(ctx, acks[i]); w.recErr == nil {
				w.recRev = pa.Sequence
			}
		}
		close(w.done)
	}
}

// wait returns the acknowledgement of an asynchronous publish.
func wait(ctx context.Context, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	select {
	case pa := <-f.Ok():
		return pa, nil
	case err := <-f.Err():
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
