package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

var registry struct {
	mu       sync.RWMutex
	sources  map[string]aggregator.Source
	services map[string]ServiceFactory
}

// RegisterSource makes a source adapter available by its name. It panics
// on an empty or duplicate name: registration happens in init functions,
// where a clash is a programming error.
func RegisterSource(s aggregator.Source) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	name := s.Name()
	if name == "" {
		panic("plugins: source without a name")
	}
	if _, dup := registry.sources[name]; dup {
		panic("plugins: source " + name + " registered twice")
	}
	if registry.sources == nil {
		registry.sources = make(map[string]aggregator.Source)
	}
	registry.sources[name] = s
}

// Sources returns the registered source adapters, for
// aggregator.ServiceOptions.Sources.
func Sources() aggregator.Sources { return sourceSet{} }

type sourceSet struct{}

func (sourceSet) Source(name string) (aggregator.Source, bool) {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	s, ok := registry.sources[name]
	return s, ok
}

// SourceNames lists the registered source adapters, sorted.
func SourceNames() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	var out []string
	for n := range registry.sources {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Env is what a service is built with: serve's own store, clock, logger
// and network settings. Services never read globals or the environment.
type Env struct {
	Store  Store
	Logger *slog.Logger
	// BaseURL is where this slogfeed is reached, e.g.
	// "http://127.0.0.1:8080" (no trailing slash): the base of callback
	// and self links.
	BaseURL string
	// Now is the clock.
	Now func() time.Time
	// Client makes outgoing requests (webhook deliveries, WebSub
	// verification and distribution) through the fetcher's SSRF guard
	// and limits.
	Client *http.Client
	// Aggregator is the live aggregator (nil in tests that need none).
	Aggregator *aggregator.Service
	// Settings are serve's resolved settings by flag name, e.g.
	// "websub": "true": a service reads its own switches here (nil: every
	// default).
	Settings map[string]string
	// Documents serves this slogfeed's own published feeds in process
	// (GET /sensors/{sensor}.rss, /feeds/{slug}.json, …): a hub renders
	// what it distributes with it. Nil when there are none.
	Documents http.Handler
}

// A Service runs beside the server: a sink, a hub, a subscriber.
type Service interface {
	// Routes are the HTTP handlers it mounts (may be empty).
	Routes() []web.Route
	// Notify is told of a feed's newly stored items: remote feeds after a
	// fetch, sensor readings, pipe outputs. It must return quickly (queue
	// the work).
	Notify(f storage.Feed, items []storage.Item)
	// Run does the service's background work until ctx ends.
	Run(ctx context.Context) error
}

// ServiceFactory builds a service. It may return nil, nil when the
// service is switched off by its settings.
type ServiceFactory func(Env) (Service, error)

// RegisterService registers a service factory under a name. It panics on
// an empty or duplicate name.
func RegisterService(name string, f ServiceFactory) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if name == "" || f == nil {
		panic("plugins: service without a name or factory")
	}
	if _, dup := registry.services[name]; dup {
		panic("plugins: service " + name + " registered twice")
	}
	if registry.services == nil {
		registry.services = make(map[string]ServiceFactory)
	}
	registry.services[name] = f
}

// Services are the running services of one server.
type Services struct {
	names []string
	list  []Service
}

// NewServices builds every registered service, in name order.
func NewServices(env Env) (*Services, error) {
	registry.mu.RLock()
	names := make([]string, 0, len(registry.services))
	for n := range registry.services {
		names = append(names, n)
	}
	factories := make(map[string]ServiceFactory, len(names))
	for n, f := range registry.services {
		factories[n] = f
	}
	registry.mu.RUnlock()
	slices.Sort(names)
	s := &Services{}
	for _, n := range names {
		svc, err := factories[n](env)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", n, err)
		}
		if svc != nil {
			s.names = append(s.names, n)
			s.list = append(s.list, svc)
		}
	}
	return s, nil
}

// Names lists the services that run, in order.
func (s *Services) Names() []string { return slices.Clone(s.names) }

// Routes are every service's routes.
func (s *Services) Routes() []web.Route {
	var out []web.Route
	for _, svc := range s.list {
		out = append(out, svc.Routes()...)
	}
	return out
}

// Notify tells every service of a feed's new items.
func (s *Services) Notify(f storage.Feed, items []storage.Item) {
	for _, svc := range s.list {
		svc.Notify(f, items)
	}
}

// Run runs every service until ctx ends and returns the first error.
func (s *Services) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.list))
	for i, svc := range s.list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = svc.Run(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("plugin %s: %w", s.names[i], err)
		}
	}
	return nil
}
