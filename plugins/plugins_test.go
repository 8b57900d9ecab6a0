package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/plugins/internal/sourcetest"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// fakeSource is a source adapter that only has a name.
type fakeSource string

func (s fakeSource) Name() string { return string(s) }
func (fakeSource) Prepare(c json.RawMessage, _ time.Time) (json.RawMessage, error) {
	return c, nil
}
func (fakeSource) Parse([]byte, string, json.RawMessage, parser.Options) (*parser.Parsed, error) {
	return &parser.Parsed{}, nil
}

func panics(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// registerTestSources registers test-a and test-b once per process, so
// the test also passes with -count=N (the registry is process-wide).
var registerTestSources = sync.OnceFunc(func() {
	plugins.RegisterSource(fakeSource("test-a"))
	plugins.RegisterSource(fakeSource("test-b"))
	plugins.RegisterSource(panicky{"test-panicky"})
	plugins.RegisterSource(picky{"test-picky"})
})

func TestRegisterSource(t *testing.T) {
	registerTestSources()
	for _, tc := range []struct {
		name string
		src  aggregator.Source
		want string
	}{
		{"duplicate", fakeSource("test-a"), "registered twice"},
		{"no name", fakeSource(""), "without a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := panics(func() { plugins.RegisterSource(tc.src) }); !strings.Contains(msg, tc.want) {
				t.Fatalf("RegisterSource(%q) panicked with %q, want %q", tc.src.Name(), msg, tc.want)
			}
		})
	}
	t.Run("lookup", func(t *testing.T) {
		srcs := plugins.Sources()
		for _, name := range []string{"test-a", "test-b"} {
			if s, ok := srcs.Source(name); !ok || s.Name() != name {
				t.Errorf("Source(%q) = %v, %v", name, s, ok)
			}
		}
		if s, ok := srcs.Source("test-missing"); ok || s != nil {
			t.Errorf("Source(missing) = %v, %v", s, ok)
		}
		names := plugins.SourceNames()
		if !slices.IsSorted(names) || !slices.Contains(names, "test-a") || !slices.Contains(names, "test-b") {
			t.Errorf("SourceNames() = %v", names)
		}
	})
}

// fakeService records what it is told.
type fakeService struct {
	name     string
	mu       sync.Mutex
	notified []uint64
	ran      atomic.Bool
}

func (s *fakeService) Routes() []web.Route {
	return []web.Route{{Pattern: "GET /test/" + s.name, Handler: http.NotFoundHandler()}}
}

func (s *fakeService) Notify(f storage.Feed, items []storage.Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notified = append(s.notified, f.ID)
}

func (s *fakeService) Run(ctx context.Context) error {
	s.ran.Store(true)
	<-ctx.Done()
	return ctx.Err()
}

// The services of this test binary, registered once: the registry is
// global. failing and off switch the factories' outcome per test.
var (
	failing, off atomic.Bool
	built        = map[string]*fakeService{}
	builtMu      sync.Mutex
)

func init() {
	for _, name := range []string{"test-svc-c", "test-svc-a", "test-svc-b"} {
		plugins.RegisterService(name, func(env plugins.Env) (plugins.Service, error) {
			switch {
			case name == "test-svc-b" && failing.Load():
				return nil, errors.New("no credentials configured")
			case name == "test-svc-c" && off.Load():
				return nil, nil
			}
			s := &fakeService{name: name}
			builtMu.Lock()
			built[name] = s
			builtMu.Unlock()
			return s, nil
		})
	}
}

func TestRegisterService(t *testing.T) {
	factory := func(plugins.Env) (plugins.Service, error) { return nil, nil }
	for _, tc := range []struct {
		name, svc string
		f         plugins.ServiceFactory
		want      string
	}{
		{"duplicate", "test-svc-a", factory, "registered twice"},
		{"no name", "", factory, "without a name"},
		{"no factory", "test-svc-nil", nil, "without a name or factory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := panics(func() { plugins.RegisterService(tc.svc, tc.f) }); !strings.Contains(msg, tc.want) {
				t.Fatalf("RegisterService(%q) panicked with %q, want %q", tc.svc, msg, tc.want)
			}
		})
	}
}

func TestNewServices(t *testing.T) {
	t.Run("order", func(t *testing.T) {
		s, err := plugins.NewServices(plugins.Env{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.Names(), []string{"test-svc-a", "test-svc-b", "test-svc-c"}; !slices.Equal(got, want) {
			t.Fatalf("Names() = %v, want %v", got, want)
		}
		var patterns []string
		for _, r := range s.Routes() {
			patterns = append(patterns, r.Pattern)
		}
		if want := []string{"GET /test/test-svc-a", "GET /test/test-svc-b", "GET /test/test-svc-c"}; !slices.Equal(patterns, want) {
			t.Errorf("Routes() = %v, want %v", patterns, want)
		}
		s.Notify(storage.Feed{ID: 7}, []storage.Item{{ID: "x"}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
		builtMu.Lock()
		defer builtMu.Unlock()
		for _, name := range s.Names() {
			svc := built[name]
			if !slices.Equal(svc.notified, []uint64{7}) {
				t.Errorf("%s was notified of %v", name, svc.notified)
			}
		}
	})
	t.Run("switched off", func(t *testing.T) {
		off.Store(true)
		defer off.Store(false)
		s, err := plugins.NewServices(plugins.Env{})
		if err != nil || slices.Contains(s.Names(), "test-svc-c") {
			t.Fatalf("NewServices = %v, %v; want test-svc-c left out", s.Names(), err)
		}
	})
	t.Run("error", func(t *testing.T) {
		failing.Store(true)
		defer failing.Store(false)
		s, err := plugins.NewServices(plugins.Env{})
		if s != nil || err == nil || err.Error() != "plugin test-svc-b: no credentials configured" {
			t.Fatalf("NewServices = %v, %v; want the failing plugin named", s, err)
		}
	})
}

// panicky is an adapter that breaks its promise never to panic.
type panicky struct{ fakeSource }

func (panicky) Parse([]byte, string, json.RawMessage, parser.Options) (*parser.Parsed, error) {
	var m map[string]int
	m["boom"]++ // a nil map: panics
	return nil, nil
}

// picky refuses every configuration.
type picky struct{ fakeSource }

func (picky) Prepare(json.RawMessage, time.Time) (json.RawMessage, error) {
	return nil, errors.New("threshold must be positive")
}

// TestServiceUsesSources: the aggregator finds adapters through the
// registry, turns a Prepare error into a subscription error, and keeps a
// panicking or missing adapter's failure on its own feed.
func TestServiceUsesSources(t *testing.T) {
	registerTestSources()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("anything"))
	}))
	defer srv.Close()
	env := sourcetest.New(t, sourcetest.Loopback)

	if _, err := env.Service.Subscribe(storage.Feed{URL: srv.URL + "/p", Source: &storage.SourceSpec{Type: "test-picky"}}); err == nil ||
		err.Error() != "source test-picky: threshold must be positive" || !errors.Is(err, aggregator.ErrBadSettings) {
		t.Errorf("Subscribe with a refused configuration: %v", err)
	}
	if _, err := env.Service.Subscribe(storage.Feed{URL: srv.URL + "/u", Source: &storage.SourceSpec{Type: "test-unknown"}}); !errors.Is(err, aggregator.ErrUnknownSource) {
		t.Errorf("Subscribe with an unknown type: %v", err)
	}

	boom := env.Subscribe(t, srv.URL+"/boom", "test-panicky", `{}`)
	// A feed stored by a build that had an adapter this one lacks.
	gone := storage.Feed{Kind: storage.KindRemote, URL: srv.URL + "/gone", Policy: "auto", Source: &storage.SourceSpec{Type: "test-gone"}}
	if err := env.Store.CreateFeed(&gone); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   uint64
		want string
	}{
		{boom.ID, "malformed feed: source test-panicky failed: assignment to entry in nil map"},
		{gone.ID, `aggregator: unknown source type "test-gone"`},
	} {
		if f := env.Fetch(t, tc.id); f.LastError != tc.want || f.ErrorCount != 1 {
			t.Errorf("feed %d: error %q (%d), want %q", tc.id, f.LastError, f.ErrorCount, tc.want)
		}
	}
}
