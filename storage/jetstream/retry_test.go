package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestRetryNoResponders: a call answered by no responder is tried again
// (a bucket's stream electing its leader answers nothing for a while);
// any other error, success, or the end of ctx ends the retries at once.
func TestRetryNoResponders(t *testing.T) {
	errOther := errors.New("other")
	noResp := fmt.Errorf("seq.feed: %w", nats.ErrNoResponders)
	for _, tc := range []struct {
		name      string
		errs      []error // what the calls return, in turn; nil after them
		cancelled bool    // ctx already ended
		wantCalls int
		wantErr   error
	}{
		{"answered at once", nil, false, 1, nil},
		// 10+20+40+80+160+200+200 ms: more than the 0.3 s of five tries
		// the retries used to give up after.
		{"leader elected after 0.7 s", []error{noResp, noResp, noResp, noResp, noResp, noResp, noResp}, false, 8, nil},
		{"other error not retried", []error{errOther}, false, 1, errOther},
		{"no responders, then another error", []error{noResp, errOther}, false, 2, errOther},
		{"ctx ended", []error{noResp, noResp}, true, 1, nats.ErrNoResponders},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			calls := 0
			v, err := retryNoResponders(ctx, func() (int, error) {
				calls++
				if calls <= len(tc.errs) && tc.errs[calls-1] != nil {
					return 0, tc.errs[calls-1]
				}
				return 42, nil
			})
			if calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls, tc.wantCalls)
			}
			switch {
			case tc.wantErr == nil && (err != nil || v != 42):
				t.Errorf("got %d, %v; want 42", v, err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
	t.Run("gives up after the budget", func(t *testing.T) {
		start := time.Now()
		calls := 0
		_, err := retryNoResponders(t.Context(), func() (int, error) { calls++; return 0, noResp })
		took := time.Since(start)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("error %v, want no responders", err)
		}
		// It never sleeps past the budget, and tries all along it.
		if took > noRespondersBudget+time.Second || calls < 10 {
			t.Errorf("gave up after %v and %d calls, want within the %v budget after at least 10", took, calls, noRespondersBudget)
		}
	})
}
