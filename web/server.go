package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/storage/cluster"
)

// Options configure the HTTP handler.
type Options struct {
	Store      Store
	Aggregator Aggregator
	Sensors    http.Handler // the sensor store (SensorHandler); nil disables it
	Pipes      Pipes        // the pipe runner (/api/v1/pipes, /api/v1/operators); nil disables them
	PipeFeeds  http.Handler // the republished pipe outputs (PipeFeedHandler); nil disables /feeds/
	Metrics    http.Handler // e.g. promhttp.HandlerFor(registry, ...); nil disables /metrics
	// Routes are extra handlers, mounted by plugins (a WebSub hub, its
	// callbacks, …) without this package knowing them.
	Routes []Route
	Logger *slog.Logger
	// Token, when set, is required as "Authorization: Bearer TOKEN" on every
	// request that changes something (POST, PUT, PATCH, DELETE). serve sets
	// it whenever it listens on a non-loopback address. It is used only
	// when Auth is nil.
	Token string
	// Auth guards the server (see Auth); nil means NewAuth with Token.
	// Pass the same Auth to the web UI.
	Auth *Auth
	// UI is the web UI, mounted at /ui/ (see package web/ui); nil
	// disables it.
	UI  http.Handler
	Now func() time.Time
	// Ready, when set, tells whether the node can take writes (a cluster
	// node: NATS connected, its lease writes succeed); /healthz answers
	// 503 with its error until it returns nil. It should answer from
	// state the node keeps, not from a request to the cluster: /healthz
	// then does not ask the store (on a cluster, a stream electing a
	// leader would hold the answer up). Without Ready, /healthz reads
	// the store's last item sequence.
	Ready func() error
	// HealthTimeout bounds GET /healthz (default DefaultHealthTimeout):
	// when Ready and the store's answer have not both come within it,
	// /healthz answers 503 saying so. Concurrent requests share one
	// check, so a slow store is asked once, not once per request.
	HealthTimeout time.Duration
	// Cluster, when set, is the lease view of a cluster node
	// (the lease node's Status) that GET /api/v1/cluster shows; nil means a
	// single slogfeed, shown as one node named Node.
	Cluster func() cluster.Status
	// Node names this node in GET /api/v1/cluster (default "local").
	Node string
	// MaxPreviews bounds the pipe previews and requested runs (POST
	// /api/v1/pipes/preview, /api/v1/pipes/{id}/preview and
	// /api/v1/pipes/{id}/run) that run at once (default
	// DefaultMaxPreviews); one more is answered 429 with Retry-After.
	MaxPreviews int
}

// DefaultMaxPreviews is Options.MaxPreviews when it is not set: a run
// may keep a core busy for its whole time limit.
const DefaultMaxPreviews = 2

// DefaultHealthTimeout is Options.HealthTimeout when it is not set: well
// within the second a load balancer's health check waits.
const DefaultHealthTimeout = 500 * time.Millisecond

// Route is one extra handler of Options.Routes.
type Route struct {
	// Pattern is an http.ServeMux pattern, e.g. "POST /websub/hub".
	Pattern string
	Handler http.Handler
	// Public routes take changes without the token: the handler
	// authenticates its callers itself (a hub's callback checks the
	// HMAC signature of what it is sent). Cross-origin browser requests
	// are refused all the same.
	Public bool
}

// New returns slogfeed's HTTP handler.
func New(opt Options) http.Handler {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Auth == nil {
		opt.Auth = NewAuth(AuthOptions{Token: opt.Token, Now: opt.Now, Logger: opt.Logger})
	}
	mux := http.NewServeMux()
	if opt.Node == "" {
		opt.Node = "local"
	}
	a := &api{store: opt.Store, agg: opt.Aggregator, pipes: opt.Pipes, auth: opt.Auth, log: opt.Logger, now: opt.Now,
		clusterStatus: opt.Cluster, node: opt.Node, ready: opt.Ready}
	a.routes(mux)
	index := []string{"/api/v1/feeds", "/api/v1/fleet", "/api/v1/cluster", "/healthz", "/metrics"}
	if opt.Sensors != nil {
		index = append(index, "/api/v1/sensors", "/api/v1/sensors/{sensor}/readings", "/sensors/{sensor}.rss")
	}
	if opt.Pipes != nil {
		(&pipeAPI{pipes: opt.Pipes, log: opt.Logger, slots: newSlots(opt.MaxPreviews), store: opt.Store}).routes(mux)
		index = append(index, "/api/v1/pipes", "/api/v1/operators")
	}
	if opt.PipeFeeds != nil {
		index = append(index, "/feeds/{slug}.rss")
	}
	hc := newHealthCheck(opt.Ready, opt.Store, opt.HealthTimeout)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := hc.check(r); err != nil {
			respondJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
			return
		}
		respondJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	if opt.Metrics != nil {
		mux.Handle("GET /metrics", opt.Metrics)
	}
	if opt.Sensors != nil {
		mux.Handle("/api/v1/sensors", opt.Sensors)
		mux.Handle("/api/v1/sensors/", opt.Sensors)
		mux.Handle("/sensors/", opt.Sensors)
	}
	if opt.PipeFeeds != nil {
		mux.Handle("/feeds/", opt.PipeFeeds)
	}
	public := make(map[string]bool)
	for _, rt := range opt.Routes {
		mux.Handle(rt.Pattern, rt.Handler)
		if rt.Public {
			public[rt.Pattern] = true
		}
	}
	if opt.UI != nil {
		mux.Handle("/ui/", opt.UI)
		mux.Handle("/ui", opt.UI)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			if opt.UI != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
				strings.Contains(r.Header.Get("Accept"), "text/html") {
				http.Redirect(w, r, "/ui/feeds", http.StatusSeeOther)
				return
			}
			respondJSON(w, http.StatusOK, map[string]any{
				"name": "slogfeed",
				"api":  index,
			})
			return
		}
		// A path served for other methods only is a 405 naming them.
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
			other := r.Clone(r.Context())
			other.Method = m
			if _, pattern := mux.Handler(other); m != r.Method && pattern != "/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			respondError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		respondError(w, http.StatusNotFound, "no such page: "+r.URL.Path)
	})
	var h http.Handler = mux
	h = opt.Auth.protect(h, func(r *http.Request) bool {
		_, pattern := mux.Handler(r)
		return public[pattern]
	})
	h = recoverer(h, opt.Logger)
	h = logRequests(h, opt.Logger, opt.Now)
	return h
}

// healthCheck answers /healthz: Options.Ready, or without it a read of
// the store (its last item sequence), run by one goroutine that concurrent requests
// share, each waiting for it at most timeout. A store that blocks (a
// JetStream stream electing a leader) costs one goroutine until its own
// call timeout, however many requests came meanwhile.
type healthCheck struct {
	ready   func() error
	store   Store
	timeout time.Duration

	mu  sync.Mutex
	cur *healthRun // the check under way; nil when none
}

// healthRun is one check: err is set before done is closed.
type healthRun struct {
	done chan struct{}
	err  error
}

func newHealthCheck(ready func() error, store Store, timeout time.Duration) *healthCheck {
	if timeout <= 0 {
		timeout = DefaultHealthTimeout
	}
	return &healthCheck{ready: ready, store: store, timeout: timeout}
}

// errHealthTimeout wraps the answer of a check that took too long.
var errHealthTimeout = errors.New("no answer in time")

// check returns the result of the check under way, or of one it starts,
// or an error once timeout has passed without one.
func (h *healthCheck) check(r *http.Request) error {
	run := h.start()
	t := time.NewTimer(h.timeout)
	defer t.Stop()
	select {
	case <-run.done:
		return run.err
	case <-t.C:
		return fmt.Errorf("%w: the node's readiness and its store did not answer within %s", errHealthTimeout, h.timeout)
	case <-r.Context().Done():
		return r.Context().Err()
	}
}

func (h *healthCheck) start() *healthRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur != nil {
		return h.cur
	}
	run := &healthRun{done: make(chan struct{})}
	h.cur = run
	go func() {
		run.err = h.probe()
		h.mu.Lock()
		h.cur = nil
		h.mu.Unlock()
		close(run.done)
	}()
	return run
}

// probe is one check: Ready (the node's own state), else the store.
func (h *healthCheck) probe() error {
	if h.ready != nil {
		return h.ready()
	}
	if _, err := h.store.LastSeq(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// recoverer turns a handler panic into a 500 for that request only.
func recoverer(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
				respondError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// logRequests logs each request at debug level (errors at info).
func logRequests(next http.Handler, log *slog.Logger, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		level := slog.LevelDebug
		if sw.status >= 500 {
			level = slog.LevelInfo
		}
		log.Log(r.Context(), level, "http", "method", r.Method, "path", strings.ToValidUTF8(r.URL.Path, "?"), "status", sw.status, "took", now().Sub(start))
	})
}
