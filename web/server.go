// Package web is slogfeed's HTTP face: the JSON API, the sensor store, the
// republished feeds, health and metrics.
//
// Routes:
//
//	POST   /api/v1/feeds                  subscribe {"url": ..., "policy": "auto", ...} → 201 with the feed
//	GET    /api/v1/feeds                  every feed with its status
//	GET    /api/v1/feeds/{id}             one feed
//	DELETE /api/v1/feeds/{id}             unsubscribe (items and observations go too)
//	GET    /api/v1/feeds/{id}/items       newest items (?limit=, ≤ 1000)
//	GET    /api/v1/feeds/{id}/schedule    median, σ, mode, next fetch, recent polls (?polls=)
//	POST   /api/v1/pipes                  create a pipe (body: its definition, ≤ 256 KiB) → 201 with the pipe
//	GET    /api/v1/pipes                  {"pipes": [...]}: every pipe with its inputs, output feeds and status
//	GET    /api/v1/pipes/{id}             one pipe
//	PUT    /api/v1/pipes/{id}             replace its definition (body: the definition) → the pipe
//	DELETE /api/v1/pipes/{id}             delete it with its output feed → 204
//	POST   /api/v1/pipes/{id}/preview     every node's output, nothing saved (empty body: the saved
//	                                      definition; else the body's definition with the saved state)
//	POST   /api/v1/pipes/preview          the same for an unsaved definition
//	POST   /api/v1/pipes/{id}/run         run it now → what the run did
//	GET    /api/v1/operators              the operator catalogue, item fields, triggers and formats
//	POST   /api/v1/sensors/{sensor}/readings   the sensor store (see SensorHandler)
//	GET    /sensors/{sensor}.rss|.atom|.json  a sensor's readings as a feed
//	GET    /feeds/{slug}.rss|.atom|.json  a pipe's output, republished (see PipeFeedHandler)
//	GET    /healthz                       {"status": "ok"} when the store answers
//	GET    /metrics                       Prometheus metrics
//
// The pipe routes exist when Options.Pipes is set.
//
// Errors are JSON: {"error": "what went wrong"}. An invalid pipe
// definition is a 400 that also lists each problem with the node and
// field concerned: {"error": ..., "details": [{"node": "hot", "op":
// "filter", "field": "rules[0].value", "error": ...}]}.
package web

import (
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// Options configure the HTTP handler.
type Options struct {
	Store      *storage.Store
	Aggregator Aggregator
	Sensors    http.Handler // the sensor store (SensorHandler); nil disables it
	Pipes      Pipes        // the pipe runner (/api/v1/pipes, /api/v1/operators); nil disables them
	PipeFeeds  http.Handler // the republished pipe outputs (PipeFeedHandler); nil disables /feeds/
	Metrics    http.Handler // e.g. promhttp.HandlerFor(registry, ...); nil disables /metrics
	// Routes are extra handlers, mounted by plugins (a WebSub hub, its
	// callbacks, …) without this package knowing them.
	Routes []Route
	Logger     *slog.Logger
	// Token, when set, is required as "Authorization: Bearer TOKEN" on every
	// request that changes something (POST, PUT, PATCH, DELETE). serve sets
	// it whenever it listens on a non-loopback address.
	Token string
	Now   func() time.Time
}

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
	mux := http.NewServeMux()
	a := &api{store: opt.Store, agg: opt.Aggregator, log: opt.Logger}
	a.routes(mux)
	index := []string{"/api/v1/feeds", "/api/v1/sensors/{sensor}/readings", "/sensors/{sensor}.rss", "/healthz", "/metrics"}
	if opt.Pipes != nil {
		(&pipeAPI{pipes: opt.Pipes, log: opt.Logger}).routes(mux)
		index = append(index, "/api/v1/pipes", "/api/v1/operators")
	}
	if opt.PipeFeeds != nil {
		index = append(index, "/feeds/{slug}.rss")
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := opt.Store.LastSeq(); err != nil {
			respondJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
			return
		}
		respondJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	if opt.Metrics != nil {
		mux.Handle("GET /metrics", opt.Metrics)
	}
	if opt.Sensors != nil {
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
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			respondJSON(w, http.StatusOK, map[string]any{
				"name": "slogfeed",
				"api":  index,
			})
			return
		}
		respondError(w, http.StatusNotFound, "no such page: "+r.URL.Path)
	})
	var h http.Handler = mux
	h = authWrites(h, opt.Token, func(r *http.Request) bool {
		_, pattern := mux.Handler(r)
		return public[pattern]
	})
	h = recoverer(h, opt.Logger)
	h = logRequests(h, opt.Logger, opt.Now)
	return h
}

// authWrites requires the bearer token on requests that change state.
// Requests for which public reports true pass without it.
func authWrites(next http.Handler, token string, public func(*http.Request) bool) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if public(r) {
				break
			}
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="slogfeed"`)
				respondError(w, http.StatusUnauthorized, "this slogfeed requires a token for changes: send Authorization: Bearer TOKEN")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
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
