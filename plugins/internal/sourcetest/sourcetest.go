// Package sourcetest runs source adapters end to end in tests: a real
// aggregator.Service, with a real Fetcher (SSRF guard, limits) and a bbolt
// store, behind the real web API, against httptest servers.
package sourcetest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// Env is one aggregator with its store and API.
type Env struct {
	Store   *storage.Store
	Service *aggregator.Service
	// API is slogfeed's HTTP handler over Store and Service.
	API http.Handler
}

// Loopback is the allow-list that lets the fetcher reach httptest
// servers.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// New builds an Env whose fetcher may reach allow (nil: public addresses
// only, as in production). fo, when given, is the rest of the fetcher's
// options.
func New(t testing.TB, allow []netip.Prefix, fo ...fetcher.Options) *Env {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "sources.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var opt fetcher.Options
	if len(fo) > 0 {
		opt = fo[0]
	}
	opt.Allow = allow
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:     st,
		Fetcher:   fetcher.New(opt),
		Scheduler: schedule.Config{},
		Sources:   plugins.Sources(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Store: st, Service: svc, API: web.New(web.Options{Store: st, Aggregator: svc})}
}

// Subscribe subscribes to url with a source adapter and fails the test on
// an error.
func (e *Env) Subscribe(t testing.TB, url, typ, config string) storage.Feed {
	t.Helper()
	f, err := e.Service.Subscribe(storage.Feed{URL: url, Source: &storage.SourceSpec{Type: typ, Config: json.RawMessage(config)}})
	if err != nil {
		t.Fatalf("subscribe %s with %s %s: %v", url, typ, config, err)
	}
	return f
}

// Refused subscribes to url with the adapter typ and returns the error
// of a subscription that is refused, failing the test when it is not.
func (e *Env) Refused(t testing.TB, url, typ, config string) error {
	t.Helper()
	f, err := e.Service.Subscribe(storage.Feed{URL: url, Source: &storage.SourceSpec{Type: typ, Config: json.RawMessage(config)}})
	if err == nil {
		t.Fatalf("subscribe %s with %s %s: subscribed as feed %d", url, typ, config, f.ID)
	}
	return err
}

// Fetch fetches feed id once and returns it as stored afterwards.
func (e *Env) Fetch(t testing.TB, id uint64) storage.Feed {
	t.Helper()
	if _, err := e.Service.FetchNow(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	f, err := e.Store.Feed(id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Items returns the stored items of feed id, newest published first.
func (e *Env) Items(t testing.TB, id uint64) []storage.Item {
	t.Helper()
	items, err := e.Store.Items(id, storage.ItemQuery{Order: storage.ByPublished})
	if err != nil {
		t.Fatal(err)
	}
	return items
}
