package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web/feedlist"
)

// gatedStore holds a load's reads of feeds until gate is closed; entered
// is closed when the first one begins (the load has listed the feeds).
type gatedStore struct {
	*storage.Store
	gate, entered chan struct{}
	once          *sync.Once
}

func (g gatedStore) FeedsWithStates(ids []uint64, fn func(storage.Feed, *storage.PolicyState) error) error {
	g.once.Do(func() { close(g.entered) })
	<-g.gate
	return g.Store.FeedsWithStates(ids, fn)
}

// TestHealthzWhileLoading: while the polling service loads its feeds,
// /healthz answers 200 with "loading" and the progress when the node can
// take writes, the node's own failure otherwise; once loaded, the node's
// own answer.
func TestHealthzWhileLoading(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const feeds = 200
	for i := range feeds {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://s%d.example/f.rss", i), Policy: "auto"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
	}
	gate, entered := make(chan struct{}), make(chan struct{})
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: gatedStore{st, gate, entered, new(sync.Once)}, Fetcher: fetcher.New(fetcher.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	ready := error(nil)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"status": "unavailable", "error": ready.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
	})
	h := healthzWhileLoading(svc.LoadProgress, inner)
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	loaded := svc.LoadInBackground(t.Context())
	if !svc.LoadProgress().Loading {
		// LoadInBackground marks the load under way before it returns.
		t.Fatal("load not under way")
	}
	<-entered
	tests := []struct {
		name     string
		ready    error
		path     string
		wantCode int
		want     string
	}{
		{"loading", nil, "/healthz", 200, "loading"},
		{"cannot take writes", fmt.Errorf("nats: disconnected"), "/healthz", 503, "unavailable"},
		{"other paths pass through", nil, "/other", 200, "ok"},
	}
	for _, tt := range tests {
		ready = tt.ready
		code, body := get(tt.path)
		if code != tt.wantCode || body["status"] != tt.want {
			t.Errorf("%s: %d %v, want %d %q", tt.name, code, body, tt.wantCode, tt.want)
		}
		if tt.want == "loading" && (body["feeds"] != float64(feeds) || body["loaded"] != float64(0)) {
			t.Errorf("%s: progress %v, want 0 of %d", tt.name, body, feeds)
		}
	}
	close(gate)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	ready = nil
	if code, body := get("/healthz"); code != 200 || body["status"] != "ok" {
		t.Errorf("loaded: %d %v, want 200 ok", code, body)
	}
	if p := svc.LoadProgress(); p.Done != feeds || p.Replayed != 0 {
		t.Errorf("progress %+v", p)
	}
}

// listerOnly is a store seen only as a feedlist.Lister: it keeps no
// summaries to warm.
type listerOnly struct{ st *storage.Store }

func (l listerOnly) Feeds() ([]storage.Feed, error)       { return l.st.Feeds() }
func (l listerOnly) Feed(id uint64) (storage.Feed, error) { return l.st.Feed(id) }

// failingIndex is a store whose summaries cannot be built.
type failingIndex struct{ *storage.Store }

func (failingIndex) FleetStats() (storage.FleetStats, error) {
	return storage.FleetStats{}, errors.New("disk on fire")
}

// TestWarmFeedList: after the load, serve builds the summaries of a store
// that keeps them, and says so with the number of feeds; a store without
// summaries has nothing to warm, a failure is logged, and a server
// already stopping does not start the walk.
func TestWarmFeedList(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const feeds = 300
	for i := range feeds {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://s%d.example/f.rss", i), Policy: "auto"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
	}
	stopped, stop := context.WithCancel(t.Context())
	stop()
	tests := []struct {
		name  string
		ctx   context.Context
		store feedlist.Lister
		want  string // in the log; "" for nothing
	}{
		{"summaries built", t.Context(), st, fmt.Sprintf(`msg="feed list ready" feeds=%d`, feeds)},
		{"no summaries kept", t.Context(), listerOnly{st}, ""},
		{"build fails", t.Context(), failingIndex{st}, `msg="cannot build the feed list" err="disk on fire"`},
		{"stopping", stopped, st, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			warmFeedList(tc.ctx, slog.New(slog.NewTextHandler(&buf, nil)), tc.store)
			if got := buf.String(); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("log %q, want %q", got, tc.want)
			}
		})
	}
}
