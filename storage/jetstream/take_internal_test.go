package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// scriptedDirectGets answers the batched direct gets of the defs bucket
// on nc, answer n (from 0) by script[n] (the last one for the rest):
// each requested key's record with its sequence, then an end of batch
// saying up to which sequence the answering replica held the stream.
type directAnswer struct {
	upTo    uint64 // the end's Nats-UpTo-Sequence
	pending int    // the end's Nats-Num-Pending
	status  string // instead of records and end: this status alone
}

func scriptedDirectGets(t *testing.T, nc *nats.Conn, script []directAnswer) *atomic.Int64 {
	t.Helper()
	var calls atomic.Int64
	prefix := "$KV." + DefsBucket + "."
	_, err := nc.Subscribe("$JS.API.DIRECT.GET.KV_"+DefsBucket, func(m *nats.Msg) {
		a := script[min(int(calls.Add(1))-1, len(script)-1)]
		if a.status != "" {
			r := nats.NewMsg(m.Reply)
			r.Header.Set("Status", a.status)
			_ = m.RespondMsg(r)
			return
		}
		var req multiLastRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Error(err)
			return
		}
		for i, subj := range req.MultiLast {
			id := strings.TrimPrefix(subj, prefix+feedKeyPrefix)
			r := nats.NewMsg(m.Reply)
			r.Header.Set(njs.SubjectHeader, subj)
			r.Header.Set(njs.SequenceHeader, strconv.Itoa(100+i))
			r.Data = []byte(`{"id":` + id + `,"kind":"remote","url":"http://x/` + id + `","policy":"auto","policy_state":{}}`)
			_ = m.RespondMsg(r)
		}
		end := nats.NewMsg(m.Reply)
		end.Header.Set("Status", "204")
		end.Header.Set("Nats-UpTo-Sequence", strconv.FormatUint(a.upTo, 10))
		end.Header.Set("Nats-Num-Pending", strconv.Itoa(a.pending))
		_ = m.RespondMsg(end)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &calls
}

// TestReadRecordBatchChecksTheReplica: a batch answered by a replica that
// had not stored what the leader held is read again, until one that had
// answers; a batch cut short or refused is an error.
func TestReadRecordBatchChecksTheReplica(t *testing.T) {
	e, err := StartEmbedded(EmbedOptions{Name: "solo", StoreDir: t.TempDir(), Listen: "127.0.0.1:0", MaxMemory: 32 << 20, MaxStore: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	const target = 500
	for _, tt := range []struct {
		name   string
		script []directAnswer
		calls  int64
		err    string
	}{
		{"up to date", []directAnswer{{upTo: target}}, 1, ""},
		{"lagging, then up to date", []directAnswer{{upTo: target - 7}, {upTo: target - 1}, {upTo: target + 3}}, 3, ""},
		{"always lagging", []directAnswer{{upTo: 1}}, recordTries, "lags the leader"},
		{"cut short", []directAnswer{{upTo: target, pending: 4}}, recordTries, "left out"},
		{"refused", []directAnswer{{status: "408"}}, recordTries, "408"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := nats.Connect(e.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			js, err := njs.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			calls := scriptedDirectGets(t, nc, tt.script)
			s := &Store{js: js}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			msgs, err := s.readRecordBatch(ctx, []uint64{3, 5, 8}, target)
			switch {
			case tt.err == "" && err != nil:
				t.Fatal(err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("err %v, want one with %q", err, tt.err)
			case tt.err == "" && len(msgs) != 3:
				t.Errorf("%d records, want 3", len(msgs))
			}
			if got := calls.Load(); got != tt.calls {
				t.Errorf("%d batched gets, want %d", got, tt.calls)
			}
			if tt.name == "always lagging" && !errors.Is(err, errLagging) {
				t.Errorf("err %v, want errLagging", err)
			}
		})
	}
}
