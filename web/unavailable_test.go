package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
)

// errQuorum stands for a cluster store's error while it has no quorum.
var errQuorum = errors.New("jetstream: system temporarily unavailable")

// downStore is a store whose every item write and feed read fails with
// errQuorum, which it says is unavailability (storage.Unavailabler).
type downStore struct{ *storage.Store }

func (downStore) AddItems(uint64, []storage.Item) ([]storage.Item, error) { return nil, errQuorum }
func (downStore) Feed(uint64) (storage.Feed, error)                       { return storage.Feed{}, errQuorum }
func (downStore) Unavailable(err error) bool                              { return errors.Is(err, errQuorum) }

// A store that cannot answer now (a cluster without a quorum) is a 503
// with Retry-After, for the sensor store and the API; any other failure
// stays a 500.
func TestUnavailableStoreIs503(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	down := downStore{st}
	sensors := SensorHandler(down, SensorOptions{})
	api := New(Options{Store: down, Sensors: sensors, Aggregator: downAgg{}})
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/api/v1/sensors/lab-1/readings", `{"value": 21.5}`},
		{"GET", "/api/v1/feeds/1", ""},
		{"POST", "/api/v1/feeds", `{"url": "https://sensors.example/a.rss"}`},
	} {
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "try again") {
			t.Errorf("%s %s: %d %v %s, want 503 with Retry-After", tc.method, tc.path, rec.Code, rec.Header(), rec.Body)
		}
	}
	req := httptest.NewRequest("POST", "/api/v1/feeds/bulk", strings.NewReader(`{"feeds": [{"url": "https://sensors.example/b.rss"}]}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"reason": "unavailable"`) {
		t.Errorf("bulk: %d %s, want the feed refused as unavailable", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	New(Options{Store: down, Pipes: &fakePipes{err: fmt.Errorf("list pipes: %w", errQuorum)}}).ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pipes", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("pipes: %d %s, want 503 with Retry-After", rec.Code, rec.Body)
	}
	// The same failure from a store that does not call it unavailability.
	rec = httptest.NewRecorder()
	New(Options{Store: failingFeed{st}}).ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/feeds/1", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("another failure: %d %s, want 500", rec.Code, rec.Body)
	}
}

type failingFeed struct{ *storage.Store }

func (failingFeed) Feed(uint64) (storage.Feed, error) { return storage.Feed{}, errQuorum }

// downAgg subscribes nothing: its store has no quorum.
type downAgg struct{ Aggregator }

func (downAgg) Subscribe(storage.Feed) (storage.Feed, error) {
	return storage.Feed{}, fmt.Errorf("create feed: %w", errQuorum)
}

// latenciesFail is a store whose recent latencies cannot be read (err),
// telling errQuorum as unavailability.
type latenciesFail struct {
	*storage.Store
	err error
}

func (s latenciesFail) RecentLatencies([]uint64, int) (map[uint64][]float64, error) {
	return nil, s.err
}
func (latenciesFail) Unavailable(err error) bool { return errors.Is(err, errQuorum) }

// The feed list whose latencies the store cannot read now (a cluster
// without a quorum) is a 503 with Retry-After, as any other read is, not
// a page without its medians; after another failure the page still
// answers, without them.
func TestFeedListUnavailableLatencies(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateFeed(&storage.Feed{Kind: storage.KindRemote, URL: "https://feeds.example/a.rss", Policy: "auto"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err        error
		wantStatus int
	}{
		{fmt.Errorf("observations of feed 1: %w", errQuorum), http.StatusServiceUnavailable},
		{errors.New("observations of feed 1: corrupt"), http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		New(Options{Store: latenciesFail{st, tc.err}}).ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/feeds", nil))
		if rec.Code != tc.wantStatus || tc.wantStatus == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "" {
			t.Errorf("%v: %d %v %s, want %d", tc.err, rec.Code, rec.Header(), rec.Body, tc.wantStatus)
		}
	}
}

// countFails is a store whose item counts cannot be read (err), telling
// errQuorum as unavailability.
type countFails struct {
	*storage.Store
	err error
}

func (s countFails) CountItems(uint64) (int, error) { return 0, s.err }
func (countFails) Unavailable(err error) bool       { return errors.Is(err, errQuorum) }

// A sensor feed whose items the store cannot count now (a cluster whose
// items stream has no leader) is a 503 with Retry-After, not the feed
// with a count of 0 from its record; after another failure it answers,
// with the record's counter.
func TestFeedUnavailableCount(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := storage.Feed{Kind: storage.KindSensor, Slug: "lab-1", Title: "lab-1", Policy: "auto"}
	if err := st.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddItems(f.ID, []storage.Item{{ID: "r1"}, {ID: "r2"}}); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/api/v1/feeds/%d", f.ID)
	for _, tc := range []struct {
		err        error
		wantStatus int
	}{
		{nil, http.StatusOK},
		{fmt.Errorf("count items of feed %d: %w", f.ID, errQuorum), http.StatusServiceUnavailable},
		{errors.New("count items: corrupt"), http.StatusOK},
	} {
		var store storage.Backend = st
		if tc.err != nil {
			store = countFails{st, tc.err}
		}
		rec := httptest.NewRecorder()
		New(Options{Store: store}).ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != tc.wantStatus || tc.wantStatus == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "" {
			t.Errorf("%v: %d %v %s, want %d", tc.err, rec.Code, rec.Header(), rec.Body, tc.wantStatus)
		}
		if tc.err == nil && !strings.Contains(rec.Body.String(), `"items": 2`) {
			t.Errorf("counted: %s, want 2 items", rec.Body)
		}
	}
}
