package ui

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
)

// errNoQuorum stands for a cluster store's "cannot answer now".
var errNoQuorum = errors.New("JetStream system temporarily unavailable (10008)")

// noQuorumStore is the env's store as a cluster without a quorum
// answers: its latencies read fails with an error it calls unavailable.
type noQuorumStore struct{ *storage.Store }

func (noQuorumStore) RecentLatencies([]uint64, int) (map[uint64][]float64, error) {
	return nil, errNoQuorum
}

func (noQuorumStore) Unavailable(err error) bool { return errors.Is(err, errNoQuorum) }

// A page the store cannot serve now is a 503 with Retry-After, as the API
// answers, not a page with its figures missing or a 500.
func TestPagesUnavailable(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	u, err := New(Options{
		Store: noQuorumStore{e.st}, Auth: e.auth, Aggregator: e.agg, Pipes: e.pipes,
		BaseURL: "http://127.0.0.1:8080", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://127.0.0.1:8080/ui/feeds", nil)
	u.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "cannot answer now") {
		t.Fatalf("%d, Retry-After %q: %.300s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}
