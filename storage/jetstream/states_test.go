package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// passMsg is a message of a fake pass: only its stream sequence.
type passMsg struct {
	jetstream.Msg
	seq uint64
}

func (m passMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}}, nil
}

// passBatch is one fetch's answer.
type passBatch struct {
	msgs chan jetstream.Msg
	err  error
}

func (b passBatch) Messages() <-chan jetstream.Msg { return b.msgs }
func (b passBatch) Error() error                   { return b.err }

// fetchStep scripts one fetch of a fakeOrdered: up to n messages (-1:
// as many as the batch takes), then err; fail makes the fetch itself
// fail.
type fetchStep struct {
	n    int
	err  error
	fail error
}

// fakeOrdered is an ordered consumer over stream sequences seqs: each
// fetch (as nats.go's does, with a new server-side consumer) starts after
// the last message it delivered.
type fakeOrdered struct {
	seqs   []uint64
	next   int
	script []fetchStep
	calls  int
	// wrap, when set, makes each message another kind (items, headers).
	wrap func(passMsg) jetstream.Msg
}

func (c *fakeOrdered) FetchNoWait(batch int) (jetstream.MessageBatch, error) {
	step := fetchStep{n: -1}
	if c.calls < len(c.script) {
		step = c.script[c.calls]
	}
	c.calls++
	if step.fail != nil {
		return nil, step.fail
	}
	n := len(c.seqs) - c.next
	if step.n >= 0 {
		n = min(n, step.n)
	}
	n = min(n, batch)
	ch := make(chan jetstream.Msg, n)
	for _, seq := range c.seqs[c.next : c.next+n] {
		var m jetstream.Msg = passMsg{seq: seq}
		if c.wrap != nil {
			m = c.wrap(passMsg{seq: seq})
		}
		ch <- m
	}
	c.next += n
	close(ch)
	return passBatch{msgs: ch, err: step.err}, nil
}

// TestReadPass: a pass ends only at what the leader held when it began,
// resumes after the last message it read when a fetch fails, and never
// takes an empty fetch for the end while the leader holds more (the
// cause of feeds a takeover left unscheduled: a pass that stopped early
// without an error).
func TestReadPass(t *testing.T) {
	seqs := func(from, to uint64) []uint64 {
		var out []uint64
		for s := from; s <= to; s++ {
			out = append(out, s)
		}
		return out
	}
	noResp := fmt.Errorf("fetch: %w", nats.ErrNoResponders)
	tests := []struct {
		name   string
		seqs   []uint64 // the messages on the filter, as a replica delivers them
		target uint64   // the leader's last sequence when the pass began
		// leader holds messages on the filter at these sequences
		leader []uint64
		script []fetchStep
		want   []uint64 // sequences read, in order
		err    string   // a substring of the error, if one is expected
	}{
		{
			name: "reads every message up to the target",
			seqs: seqs(1, 10), target: 10, leader: seqs(1, 10),
			want: seqs(1, 10),
		},
		{
			name: "an empty fetch mid-way (a lagging replica, a slow answer) is not the end",
			seqs: seqs(1, 10), target: 10, leader: seqs(1, 10),
			script: []fetchStep{{n: 4}, {n: 0}, {n: 0}, {n: 3}},
			want:   seqs(1, 10),
		},
		{
			name: "no responders mid-way resumes after the last message read",
			seqs: seqs(1, 10), target: 10, leader: seqs(1, 10),
			script: []fetchStep{{n: 3, err: noResp}, {fail: noResp}, {n: 2}},
			want:   seqs(1, 10),
		},
		{
			name: "the filter's last message before the target ends it when the leader has no more",
			seqs: []uint64{2, 5, 7}, target: 12, leader: []uint64{2, 5, 7},
			want: []uint64{2, 5, 7},
		},
		{
			name: "messages after the target (written meanwhile) are not waited for",
			seqs: []uint64{2, 5}, target: 6, leader: []uint64{2, 5, 9},
			want: []uint64{2, 5},
		},
		{
			name: "fetches that keep failing end it with the error",
			seqs: seqs(1, 5), target: 5, leader: seqs(1, 5),
			script: []fetchStep{{n: 2}, {fail: noResp}, {fail: noResp}, {fail: noResp}, {fail: noResp}, {fail: noResp}, {fail: noResp}, {fail: noResp}, {fail: noResp}, {fail: noResp}},
			want:   []uint64{1, 2},
			err:    "no responders",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if testing.Short() && tt.err != "" {
				t.Skip("backs off for seconds")
			}
			cons := &fakeOrdered{seqs: tt.seqs, script: tt.script}
			more := func(_ context.Context, from uint64) (bool, error) {
				for _, s := range tt.leader {
					if s >= from {
						return s <= tt.target, nil
					}
				}
				return false, nil
			}
			var got []uint64
			err := readPass(t.Context(), cons, tt.target, more, "test pass", func(m jetstream.Msg) error {
				got = append(got, m.(passMsg).seq)
				return nil
			})
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one with %q", err, tt.err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("read %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReadPassStopsAtFnError: an error of the callback ends the pass at
// once, wrapped.
func TestReadPassStopsAtFnError(t *testing.T) {
	bad := errors.New("corrupt")
	cons := &fakeOrdered{seqs: []uint64{1, 2, 3}}
	n := 0
	err := readPass(t.Context(), cons, 3, func(context.Context, uint64) (bool, error) { return false, nil }, "test pass", func(jetstream.Msg) error {
		if n++; n == 2 {
			return bad
		}
		return nil
	})
	if !errors.Is(err, bad) || n != 2 {
		t.Errorf("error %v after %d messages, want %v after 2", err, n, bad)
	}
}
