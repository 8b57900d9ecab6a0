package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/runner"
)

// A pipe's errors answer by whose they are: a definition's mistakes and
// limits are the request's (400), a run that failed on its items,
// whatever limit its operator crossed, is 422 naming the node.
func TestPipeErrorStatus(t *testing.T) {
	a := &pipeAPI{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	atNode := func(err error) error {
		return fmt.Errorf("pipe 3: %w", &transform.NodeError{Node: "mod", Op: "wasm", Err: err})
	}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"unknown pipe", fmt.Errorf("%w: 9", runner.ErrNotFound), http.StatusNotFound},
		{"too many nodes", transform.Errors{&transform.FieldError{Field: "nodes", Err: fmt.Errorf("%w: 300 nodes, at most 256", transform.ErrLimit)}}, http.StatusBadRequest},
		{"a node's bad config", transform.Errors{&transform.NodeError{Node: "f", Op: "filter", Err: &transform.FieldError{Field: "regex", Err: errors.New("bad")}}}, http.StatusBadRequest},
		{"a regex over its limit", transform.Errors{&transform.NodeError{Node: "f", Op: "filter", Err: &transform.FieldError{Field: "regex", Err: transform.ErrLimit}}}, http.StatusBadRequest},
		{"a module over its memory limit in a run", atNode(fmt.Errorf("over its memory limit (%w): asked for 16.1 MiB", transform.ErrLimit)), http.StatusUnprocessableEntity},
		{"an operator making too many items", atNode(fmt.Errorf("%w: 200000 items, at most 100000", transform.ErrLimit)), http.StatusUnprocessableEntity},
		{"a trap", atNode(errors.New("wasm: unreachable")), http.StatusUnprocessableEntity},
		{"the run's time limit", atNode(transform.ErrTimeLimit), http.StatusUnprocessableEntity},
		{"a panic", atNode(&transform.PanicError{Value: "boom"}), http.StatusInternalServerError},
		{"the runner stopping", atNode(runner.ErrClosed), http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			a.fail(rec, httptest.NewRequestWithContext(context.Background(), "POST", "/api/v1/pipes/3/run", nil), tc.err)
			if rec.Code != tc.want {
				t.Errorf("%v: %d %s, want %d", tc.err, rec.Code, rec.Body, tc.want)
			}
		})
	}
}
