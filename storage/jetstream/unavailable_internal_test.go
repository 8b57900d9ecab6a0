package jetstream

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsAnswer is a JetStream API answer with an error.
func jsAnswer(code, errCode int, desc string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "err_code": errCode, "description": desc}})
	return b
}

// storeOnBareServer starts a NATS server without JetStream and returns a
// Store connected to it, with its connection: the test answers the
// Store's requests itself.
func storeOnBareServer(t *testing.T) (*Store, *nats.Conn) {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &Store{js: js}, nc
}

// TestLeaderReadsTellUnavailability: a read asked of a stream's leader
// that JetStream answers "temporarily unavailable" (10008: the cluster
// has lost its quorum) fails with an error the Backend calls
// unavailability, so the HTTP API answers 503 with Retry-After; any other
// error answer is not, and "no message" is still no error.
func TestLeaderReadsTellUnavailability(t *testing.T) {
	s, nc := storeOnBareServer(t)
	b := NewBackend(s, time.Second)
	ctx := t.Context()
	reads := []struct {
		name string
		read func(ctx context.Context) error
	}{
		{"leaderGet", func(ctx context.Context) error { _, err := s.leaderGet(ctx, IndexBucket, "slug.x"); return err }},
		{"leaderHasNext", func(ctx context.Context) error {
			_, err := s.leaderHasNext(ctx, ObsStream, obsSubject+"1", 1, 2)
			return err
		}},
		{"leaderLastSeq", func(ctx context.Context) error {
			_, err := s.leaderLastSeq(ctx, ItemsStream, itemSubject(1))
			return err
		}},
		{"noneOnLeader", func(ctx context.Context) error {
			req, _ := json.Marshal(multiLastRequest{MultiLast: []string{"$KV." + DefsBucket + ".feed.1"}})
			return s.noneOnLeader(ctx, "KV_"+DefsBucket, req)
		}},
	}
	for _, tc := range []struct {
		name             string
		answer           []byte
		wantErr, unavail bool
	}{
		{"no quorum", jsAnswer(503, 10008, "JetStream system temporarily unavailable"), true, true},
		{"bad request", jsAnswer(400, 10003, "bad request"), true, false},
		{"no message", jsAnswer(404, 10037, "no message found"), false, false},
	} {
		sub, err := nc.Subscribe("$JS.API.STREAM.MSG.GET.>", func(m *nats.Msg) { _ = m.Respond(tc.answer) })
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, r := range reads {
			err := r.read(ctx)
			if (err != nil) != tc.wantErr || err != nil && b.Unavailable(err) != tc.unavail {
				t.Errorf("%s, %s: %v (unavailable: %v); want an error %v, unavailable %v", tc.name, r.name, err, err != nil && b.Unavailable(err), tc.wantErr, tc.unavail)
			}
		}
		if err := sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
	}
}

// unavailableStream is a stream of a cluster without a quorum: its info
// is answered "temporarily unavailable".
type unavailableStream struct {
	jetstream.Stream
	calls int
}

func (u *unavailableStream) Info(context.Context, ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	u.calls++
	return nil, &jetstream.APIError{Code: 503, ErrorCode: jsClusterNotAvailable, Description: "JetStream system temporarily unavailable"}
}

// TestRecentLatenciesFailFast: the recent latencies a feed list shows
// are not waited for while the cluster says it cannot answer: the read
// fails at once, with an error the Backend calls unavailability, rather
// than at the end of the call's timeout.
func TestRecentLatenciesFailFast(t *testing.T) {
	obs := &unavailableStream{}
	s := &Store{obs: obs}
	b := NewBackend(s, 5*time.Second)
	start := time.Now()
	_, err := b.RecentLatencies([]uint64{1, 2}, 200)
	took := time.Since(start)
	if err == nil || !b.Unavailable(err) {
		t.Errorf("RecentLatencies: %v, want an error Unavailable reports", err)
	}
	if took > time.Second || obs.calls != 1 {
		t.Errorf("RecentLatencies answered after %s and %d reads, want at once after one", took.Round(time.Millisecond), obs.calls)
	}
}

// TestFailFastRetriesPassingFailures: under failFast, a cluster's answer
// that it is temporarily unavailable ends the read at once, while a
// passing "no responders" or timeout is asked again (taken for
// unavailability, it turned most feed pages into a 503).
func TestFailFastRetriesPassingFailures(t *testing.T) {
	unavailable := &jetstream.APIError{Code: 503, ErrorCode: jsClusterNotAvailable, Description: "JetStream system temporarily unavailable"}
	for _, tc := range []struct {
		name      string
		first     error
		wantCalls int
		wantErr   bool
	}{
		{"no responders, then an answer", nats.ErrNoResponders, 2, false},
		{"a timeout, then an answer", nats.ErrTimeout, 2, false},
		{"temporarily unavailable", unavailable, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			v, err := RetryUnanswered(failFast(t.Context()), func(context.Context) (int, error) {
				calls++
				if calls == 1 {
					return 0, tc.first
				}
				return 7, nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr || !tc.wantErr && v != 7 {
				t.Errorf("%d calls, %v, %v; want %d calls, an error %v", calls, v, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}

// flakyObsStream holds one observation of each feed; the first fetch of
// its consumers fails with "no responders", as one in about twenty does
// while ordered consumers are created on a loaded cluster.
type flakyObsStream struct {
	jetstream.Stream
	fetches int
}

func (f *flakyObsStream) Info(_ context.Context, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	return &jetstream.StreamInfo{State: jetstream.StreamState{Subjects: map[string]uint64{legacyObsSubject(1): 1}}}, nil
}

func (f *flakyObsStream) OrderedConsumer(context.Context, jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	return &flakyConsumer{s: f}, nil
}

type flakyConsumer struct {
	jetstream.Consumer
	s *flakyObsStream
}

func (c *flakyConsumer) CachedInfo() *jetstream.ConsumerInfo { return nil }

func (c *flakyConsumer) FetchNoWait(int) (jetstream.MessageBatch, error) {
	c.s.fetches++
	if c.s.fetches == 1 {
		return nil, nats.ErrNoResponders
	}
	ch := make(chan jetstream.Msg, 1)
	ch <- obsMsg{data: []byte(`{"at":"2026-12-07T12:00:00Z","hit":true,"latency_s":[1.5]}`)}
	close(ch)
	return passBatch{msgs: ch}, nil
}

type obsMsg struct {
	jetstream.Msg
	data []byte
}

func (m obsMsg) Data() []byte { return m.data }

// A passing "no responders" while the feed list's latencies are read is
// asked again, not answered as the cluster being unavailable (which made
// most feed pages a 503 on a healthy cluster).
func TestRecentLatenciesRetriesPassingFailure(t *testing.T) {
	obs := &flakyObsStream{}
	s := &Store{obs: obs}
	b := NewBackend(s, 5*time.Second)
	lat, err := b.RecentLatencies([]uint64{1}, 200)
	if err != nil || len(lat[1]) != 1 || lat[1][0] != 1.5 {
		t.Fatalf("RecentLatencies = %v, %v; want feed 1's latency after a second fetch", lat, err)
	}
}
