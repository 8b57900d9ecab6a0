package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// infoStream is a stream whose Info answers from a script, one answer a
// call, the last one repeated.
type infoStream struct {
	jetstream.Stream
	answers []error
	calls   int
}

func (s *infoStream) Info(context.Context, ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	err := s.answers[min(s.calls, len(s.answers)-1)]
	s.calls++
	if err != nil {
		return nil, err
	}
	return &jetstream.StreamInfo{Cluster: &jetstream.ClusterInfo{Leader: "s1"}}, nil
}

// TestAnsweringWaitsForAssignment: a stream just created can be "not
// found" by the server answering its info, or have no leader yet, for a
// moment; answering waits through both and gives up only when its context
// ends, while another error ends it at once.
func TestAnsweringWaitsForAssignment(t *testing.T) {
	other := errors.New("permission denied")
	for _, tc := range []struct {
		name    string
		answers []error
		want    error // nil: answered
		calls   int   // -1: any number, until the context ends
	}{
		{"answers", []error{nil}, nil, 1},
		{"not found, then answers", []error{jetstream.ErrStreamNotFound, jetstream.ErrStreamNotFound, nil}, nil, 3},
		{"no leader, then answers", []error{errNoLeader, nil}, nil, 2},
		{"not found until the end", []error{jetstream.ErrStreamNotFound}, jetstream.ErrStreamNotFound, -1},
		{"another error", []error{other, nil}, other, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				s := &infoStream{answers: tc.answers}
				err := answering(ctx, s)
				switch {
				case tc.want == nil && err != nil:
					t.Fatalf("answering: %v; want nil", err)
				case tc.want != nil && !errors.Is(err, tc.want):
					t.Fatalf("answering: %v; want %v", err, tc.want)
				}
				if tc.calls >= 0 && s.calls != tc.calls {
					t.Errorf("%d info calls; want %d", s.calls, tc.calls)
				}
				if tc.calls < 0 && s.calls < 2 {
					t.Errorf("%d info calls; want tries until the context ends", s.calls)
				}
			})
		})
	}
}

// TestRetryUnansweredWaitsOutUnavailable: "JetStream system temporarily
// unavailable" (a cluster whose meta group has no leader yet, as when
// the servers come back from a lost quorum) is tried again until ctx
// ends; JetStream not enabled, or any other API error, ends it at once.
func TestRetryUnansweredWaitsOutUnavailable(t *testing.T) {
	unavailable := &jetstream.APIError{Code: 503, ErrorCode: jsClusterNotAvailable, Description: "JetStream system temporarily unavailable"}
	for _, tc := range []struct {
		name    string
		answers []error
		want    error
		calls   int
	}{
		{"unavailable then answered", []error{unavailable, unavailable, nil}, nil, 3},
		{"wrapped", []error{fmt.Errorf("update stream X: %w", unavailable), nil}, nil, 2},
		{"not enabled", []error{jetstream.ErrJetStreamNotEnabled, nil}, jetstream.ErrJetStreamNotEnabled, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				_, err := RetryUnanswered(t.Context(), func(context.Context) (struct{}, error) {
					err := tc.answers[min(calls, len(tc.answers)-1)]
					calls++
					return struct{}{}, err
				})
				if !errors.Is(err, tc.want) || calls != tc.calls {
					t.Fatalf("err %v after %d calls, want %v after %d", err, calls, tc.want, tc.calls)
				}
			})
		})
	}
}

// TestBackendUnavailable: the errors the HTTP API answers 503 for.
func TestBackendUnavailable(t *testing.T) {
	b := &Backend{}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{fmt.Errorf("read items: %w", &jetstream.APIError{Code: 503, ErrorCode: jsClusterNotAvailable}), true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10023}, false}, // insufficient resources
		{jetstream.ErrJetStreamNotEnabled, false},
		{nats.ErrNoResponders, true},
		{nats.ErrConnectionClosed, true},
		{errNoLeader, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10052}, false},
		{storage.ErrFeedNotFound, false},
		{errors.New("disk on fire"), false},
	} {
		if got := b.Unavailable(tc.err); got != tc.want {
			t.Errorf("Unavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
