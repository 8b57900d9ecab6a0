package jetstream

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// laggingLog is a feed's item messages as a cluster with a lagging
// replica serves them: the leader holds every message in leader, direct
// gets are answered by a replica holding those up to replicaUpTo, and
// the ordered consumer's first emptyFetches fetches return nothing (a
// consumer on the lagging replica, a slow answer).
type laggingLog struct {
	leader       []uint64 // sequences on the subject, increasing
	replicaUpTo  uint64
	emptyFetches int
}

func keyOf(seq uint64) string { return "item-" + strconv.FormatUint(seq, 10) }

func (l *laggingLog) lastSeq(context.Context, string, bool) (uint64, error) {
	if len(l.leader) == 0 {
		return 0, nil
	}
	return l.leader[len(l.leader)-1], nil
}

func (l *laggingLog) get(_ context.Context, seq uint64, subject string) (*jetstream.RawStreamMsg, error) {
	for _, s := range l.leader {
		if s >= seq && s <= l.replicaUpTo {
			h := nats.Header{}
			h.Set(ItemKeyHeader, keyOf(s))
			h.Set(ItemTimeHeader, strconv.FormatUint(s*1000, 10))
			return &jetstream.RawStreamMsg{Subject: subject, Sequence: s, Header: h}, nil
		}
	}
	return nil, jetstream.ErrMsgNotFound
}

func (l *laggingLog) hasNext(_ context.Context, _ string, from, to uint64) (bool, error) {
	for _, s := range l.leader {
		if s >= from && s <= to {
			return true, nil
		}
	}
	return false, nil
}

func (l *laggingLog) consumer(_ context.Context, _ string, from uint64) (passConsumer, func(), error) {
	var seqs []uint64
	for _, s := range l.leader {
		if s >= from {
			seqs = append(seqs, s)
		}
	}
	var script []fetchStep
	for range l.emptyFetches {
		script = append(script, fetchStep{n: 0})
	}
	return &fakeOrdered{seqs: seqs, script: script, wrap: func(m passMsg) jetstream.Msg { return headerMsg{m} }}, func() {}, nil
}

// headerMsg is a fake pass's message that carries an item's headers.
type headerMsg struct{ passMsg }

func (m headerMsg) Headers() nats.Header {
	h := nats.Header{}
	h.Set(ItemKeyHeader, keyOf(m.seq))
	h.Set(ItemTimeHeader, strconv.FormatUint(m.seq*1000, 10))
	return h
}

// A new owner's index of a feed's items is complete up to the leader's
// last message, however far the replica it reads lags: a direct get that
// finds nothing and fetches that return nothing are not taken for
// "removed" while the leader holds more (the index then skipped items
// the new owner stored again).
func TestSyncKnownLaggingReplica(t *testing.T) {
	seqs := func(from, to uint64, skip ...uint64) []uint64 {
		var out []uint64
	next:
		for s := from; s <= to; s++ {
			for _, k := range skip {
				if s == k {
					continue next
				}
			}
			out = append(out, s)
		}
		return out
	}
	tests := []struct {
		name  string
		log   laggingLog
		known []uint64 // the index before: complete up to the last of these
	}{
		{"a replica up to date", laggingLog{leader: seqs(1, 40), replicaUpTo: 40}, nil},
		{"a replica lagging after the first messages", laggingLog{leader: seqs(1, 40), replicaUpTo: 7}, nil},
		{"a replica with none of them", laggingLog{leader: seqs(1, 40), replicaUpTo: 0}, nil},
		{"a lagging replica and empty fetches", laggingLog{leader: seqs(1, 40), replicaUpTo: 7, emptyFetches: 3}, nil},
		{"new messages past an index, the replica lagging", laggingLog{leader: seqs(1, 30), replicaUpTo: 22, emptyFetches: 2}, seqs(1, 20)},
		{"messages removed by retention in between", laggingLog{leader: seqs(1, 40, 5, 6, 7, 8, 9, 10, 11, 12), replicaUpTo: 4, emptyFetches: 1}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{known: newKnown(16, 16, 1<<20), opt: Options{Now: func() time.Time { return time.Unix(0, 0) }}}
			const feed = 7
			if len(tc.known) > 0 {
				var items []knownItem
				for _, q := range tc.known {
					items = append(items, knownItem{key: keyOf(q), seq: q, at: int64(q) * 1000})
				}
				s.known.extend(feed, tc.known[len(tc.known)-1], items, true)
			}
			log := tc.log
			if err := s.syncKnownFrom(context.Background(), feed, &log); err != nil {
				t.Fatal(err)
			}
			want := tc.log.leader[len(tc.log.leader)-1]
			if up, _ := s.known.upTo(feed); up != want {
				t.Errorf("index complete up to %d, want %d", up, want)
			}
			var missing []uint64
			for _, q := range tc.log.leader {
				if !s.known.has(feed, keyOf(q)) {
					missing = append(missing, q)
				}
			}
			if len(missing) > 0 {
				t.Errorf("the index lacks the items at %v: they would be stored again", missing)
			}
		})
	}
}
