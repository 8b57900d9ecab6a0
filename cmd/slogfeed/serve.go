package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/plugins"
	_ "github.com/slogfeed/slogfeed/plugins/all" // slogfeed's own source adapters, operators and services
	"github.com/slogfeed/slogfeed/plugins/websub"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	"github.com/slogfeed/slogfeed/transform/pack"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web"
	"github.com/slogfeed/slogfeed/web/demo"
	"github.com/slogfeed/slogfeed/web/feedlist"
	"github.com/slogfeed/slogfeed/web/ui"
)

func serveUsage(w io.Writer, a *app) {
	fmt.Fprint(w, `Usage:
  slogfeed serve [flags]

Runs the aggregator: fetches every subscribed feed when its policy predicts
new data, stores items in the data directory, and serves the JSON API, the
sensor store, /healthz and /metrics. With --demo it also starts simulated
sensor publishers on loopback and subscribes to them, so adaptive scheduling
can be watched with no network. Open the printed address in a browser for
the web UI (feeds, the chain builder, sensors), or: curl http://ADDRESS/api/v1/feeds

Flags:
`)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	bindSettings(fs, serveSettings(a.getenv))
	writeFlagHelp(w, fs, [2]string{"-h, --help", "show this help"})
}

// runServe runs `slogfeed serve` in three stages: open the store (the
// bbolt file, or JetStream with the node's lease), build the services on
// it (the polling service, the pipe runner, the plugin services, the web
// handler), then run them until ctx ends.
func runServe(ctx context.Context, a *app, args []string) error {
	cfg, err := parseServe(a, args)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if err := checkDataDir(a.log, cfg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.values["addr"])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// The address answers from now on: 503s while the store opens (a
	// cluster node may wait for its JetStream cluster) and the services
	// are built (a cluster node loads its shards' feeds).
	starting := &startingHandler{}
	starting.setStage("opening the store")
	if clusterEnabled(cfg.values) {
		starting.setStage("joining the cluster: waiting for its JetStream servers to elect their leaders")
	}
	srv := newHTTPServer(starting)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	defer srv.Close() // after run's shutdown, or on a failed start
	st, err := openStore(ctx, a, cfg, ln.Addr())
	if err != nil {
		return err
	}
	defer st.close()
	defer srv.Close() // before the store closes: no handler left running on it
	starting.setStage("building its services")
	if clusterEnabled(cfg.values) {
		starting.setStage("loading the feeds of this node's shards")
	}
	sv, err := buildServices(ctx, a, cfg, st, ln.Addr())
	if err != nil {
		return err
	}
	defer sv.close()
	starting.next.Store(&sv.handler)
	return sv.run(ctx, a, cfg, ln.Addr(), srv, serveErr)
}

// newHTTPServer is serve's HTTP server, with its bounds.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// startingHandler answers for serve until its services are built (next):
// every request a 503 with Retry-After, /healthz's saying what the node
// is doing (stage), so that a load balancer or a client gets a clear
// answer rather than a connection that hangs.
type startingHandler struct {
	next  atomic.Pointer[http.Handler]
	stage atomic.Pointer[string]
}

func (h *startingHandler) setStage(what string) { h.stage.Store(&what) }

func (h *startingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if next := h.next.Load(); next != nil {
		(*next).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "starting", "error": "slogfeed is starting: " + *h.stage.Load()})
}

// serveConfig is the resolved configuration of `slogfeed serve`.
type serveConfig struct {
	values   map[string]string // every setting by name, as resolved
	dir      string            // the data directory
	demo     bool
	allow    []netip.Prefix
	rate     float64
	perHost  int
	workers  int
	previews int
	// keepItems is the retention of new remote feeds
	// (storage.Options.DefaultRetention); 0 keeps every item.
	keepItems int
}

// parseServe reads serve's flags and environment into a serveConfig.
func parseServe(a *app, args []string) (*serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	b := bindSettings(fs, serveSettings(a.getenv))
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			serveUsage(a.stdout, a)
			return nil, flag.ErrHelp
		}
		return nil, &usageError{msg: err.Error(), cmd: "serve"}
	}
	if fs.NArg() > 0 {
		return nil, &usageError{msg: "serve takes no arguments: " + quoteArg(fs.Arg(0)), cmd: "serve"}
	}
	v, err := b.resolve(a.getenv)
	if err != nil {
		return nil, err
	}
	cfg := &serveConfig{values: v, dir: v["data"]}
	cfg.demo, _ = strconv.ParseBool(v["demo"])
	cfg.allow, _ = parsePrefixes(v["allow"])
	cfg.rate, _ = strconv.ParseFloat(v["rate"], 64)
	cfg.perHost, _ = strconv.Atoi(v["per-host"])
	cfg.workers, _ = strconv.Atoi(v["workers"])
	cfg.previews, _ = strconv.Atoi(v["previews"])
	cfg.keepItems, _ = strconv.Atoi(v["keep-items"])
	if cfg.demo && clusterEnabled(v) {
		return nil, &usageError{msg: "--demo runs a single node: its simulated publishers listen on this machine's loopback, which the other nodes of a cluster cannot fetch", cmd: "serve"}
	}
	if cfg.demo && !flagGiven(fs, "data") && a.getenv("SLOGFEED_DATA") == "" {
		// The demo keeps its state apart from a real data directory.
		cfg.dir = filepath.Join(cfg.dir, "demo")
	}
	return cfg, nil
}

// checkDataDir refuses a data directory that holds the other kind of
// node's data: a single node's slogfeed.db for a node with --nats-embed
// (which keeps its data in DIR/nats and never reads the file), or an
// embedded JetStream server's DIR/nats without a slogfeed.db for a single
// node. Either would start empty beside data the operator meant it to
// use. A directory that already holds both is only warned about, and so
// is a slogfeed.db beside a node of an external NATS cluster (--nats),
// which keeps nothing in the directory.
func checkDataDir(log *slog.Logger, cfg *serveConfig) error {
	db := filepath.Join(cfg.dir, "slogfeed.db")
	js := filepath.Join(cfg.dir, "nats")
	_, err := os.Stat(db)
	hasDB := err == nil
	st, err := os.Stat(js)
	hasJS := err == nil && st.IsDir()
	embed, _ := strconv.ParseBool(cfg.values["nats-embed"])
	switch {
	case !clusterEnabled(cfg.values) && hasJS && !hasDB:
		return fmt.Errorf("--data %s holds a cluster node's JetStream data (%s), which a single node does not read: "+
			"it would start with no feeds. Start this node with --nats-embed and its cluster settings, or give another --data "+
			"(to move a cluster's subscriptions to one node: slogfeed export, then slogfeed import)", cfg.dir, js)
	case !clusterEnabled(cfg.values) && hasJS:
		log.Warn("the data directory also holds a cluster node's JetStream data, which a single node does not read", "data", cfg.dir, "ignored", js)
	case embed && hasDB && !hasJS:
		return fmt.Errorf("--data %s holds a single node's %s, which a cluster node does not read: "+
			"it would join the cluster without those feeds. Give this node another --data (or move the file away), "+
			"and move the subscriptions with slogfeed export on the single node and slogfeed import into the cluster "+
			"(docs/cluster.md, From one node to a cluster)", cfg.dir, db)
	case clusterEnabled(cfg.values) && hasDB:
		log.Warn("the data directory holds a single node's data file, which a cluster node does not read", "data", cfg.dir, "ignored", db)
	}
	return nil
}

// storeStage is serve's first stage: where the data lives, and which
// feeds and pipes are this node's.
type storeStage struct {
	backend   storage.Backend
	owner     cluster.Owner
	node      *clusterNode // nil on a single node
	userAgent string
	reg       *prometheus.Registry
}

// openStore opens the bbolt file, or with --nats/--nats-embed joins the
// cluster: JetStream, with a lease node that says which feeds and pipes
// are this node's (addr is this node's address in the cluster's status).
func openStore(ctx context.Context, a *app, cfg *serveConfig, addr net.Addr) (*storeStage, error) {
	v := cfg.values
	st := &storeStage{owner: cluster.Everything, userAgent: fetcher.UserAgent(versionString(), ""), reg: prometheus.NewRegistry()}
	st.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if !clusterEnabled(v) {
		bolt, err := storage.Open(filepath.Join(cfg.dir, "slogfeed.db"), storage.Options{LockTimeout: time.Second,
			DefaultRetention: storage.Retention{MaxItems: cfg.keepItems}})
		if err != nil {
			return nil, err
		}
		st.backend = bolt
		return st, nil
	}
	public := v["public-url"]
	if public == "" {
		public = addr.String()
	}
	node, err := startCluster(ctx, v, cfg.dir, public, a.log, st.reg)
	if err != nil {
		return nil, err
	}
	st.node, st.backend, st.owner = node, node.backend, node.node
	st.userAgent = fetcher.UserAgent(versionString(), v["node"])
	a.log.Info("cluster node started", "node", v["node"], "shards", node.node.Shards())
	return st, nil
}

// close closes the store, then leaves the cluster.
func (st *storeStage) close() {
	st.backend.Close()
	if st.node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st.node.close(ctx)
	}
}

// itemsFanout hands the items added to a feed (fetched, posted to the
// sensor store, or a pipe's output) to every service that subscribed. The
// services are built one after another; each subscribes once it exists,
// and nothing is added before run starts them.
type itemsFanout struct {
	subs []func(storage.Feed, []storage.Item)
}

func (o *itemsFanout) subscribe(fn func(storage.Feed, []storage.Item)) { o.subs = append(o.subs, fn) }

func (o *itemsFanout) notify(f storage.Feed, items []storage.Item) {
	for _, fn := range o.subs {
		fn(f, items)
	}
}

// services is serve's second stage: everything that runs on the store.
type services struct {
	svc      *aggregator.Service
	pipes    *runner.Runner
	plugins  *plugins.Services
	demo     *demo.Publishers // nil without --demo
	handler  http.Handler
	base     string // the public base URL
	websubOn bool
	loaded   bool // the polling service's feeds are loaded (else run loads them)
	store    storage.Backend
}

// buildServices builds the polling service, the pipe runner, the plugin
// services and the web handler on the store. Items a feed gains reach the
// pipes and the plugin services through one fan-out (added), and a pipe's
// output reaches the plugin services through another (outputs).
func buildServices(ctx context.Context, a *app, cfg *serveConfig, st *storeStage, addr net.Addr) (*services, error) {
	v, log, store := cfg.values, a.log, st.backend
	sv := &services{store: store}
	token := v["token"]
	if !isLoopback(addr) && token == "" {
		var buf [16]byte
		_, _ = rand.Read(buf[:])
		token = hex.EncodeToString(buf[:])
		fmt.Fprintf(a.stderr, "slogfeed: listening off loopback; log in to the web UI with this token, and send it with changes: Authorization: Bearer %s\n", token)
	}
	var endpoints []netip.AddrPort
	if cfg.demo {
		pub, err := demo.Start(ctx, log)
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		sv.demo = pub
		endpoints = append(endpoints, pub.Endpoint())
	}
	// PACK reduction policies (Feed.Reduce, a pipe's output.reduce) apply
	// when retention removes items.
	store.SetReducer(pack.NewReducer())

	var added, outputs itemsFanout
	fetch := fetcher.New(fetcher.Options{Allow: cfg.allow, AllowEndpoints: endpoints, UserAgent: st.userAgent})
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Owner: st.owner,
		Store: store, Fetcher: fetch, Logger: log,
		Scheduler:  schedule.Config{Rate: cfg.rate, PerHost: cfg.perHost, Workers: cfg.workers},
		OnNewItems: added.notify,
		Sources:    plugins.Sources(),
	})
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.svc = svc
	if st.node != nil {
		st.node.setPolled(func() int { return svc.Ownership().Feeds() })
	}
	svc.SetMetrics(aggregator.NewMetrics(st.reg, svc.Scheduler(), cfg.rate))
	// Self links need an address a reader can open: localhost, not
	// 0.0.0.0, when listening on every interface without --public-url.
	sv.base = strings.TrimSuffix(browserURL(addr, ""), "/")
	if p := strings.TrimRight(v["public-url"], "/"); p != "" {
		sv.base = p
	}
	// The runner asks the polling service when a pipe's inputs are
	// fetched next, so that a pipe can tell its subscribers when it plans
	// to update. A source naming one of this server's own feed URLs reads
	// that feed directly.
	pipes, err := runner.New(runner.Options{
		Store: store, Logger: log, OnOutput: outputs.notify, PlannedFetch: svc.PlannedFetch,
		Subscribe: svc.Subscribe, // a source naming a feed URL subscribes to it
		Local:     web.LocalFeeds(sv.base, browserURL(addr, "")),
		Limits:    pipeLimits(v), Owner: st.owner,
	})
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.pipes = pipes
	added.subscribe(pipes.Notify)
	if st.node != nil {
		// A cluster node loads the feeds of its shards before it serves;
		// a single node loads them while it serves (run).
		if err := svc.Load(); err != nil {
			sv.close()
			return nil, err
		}
		sv.loaded = true
	}
	if err := pipes.Load(); err != nil {
		sv.close()
		return nil, err
	}

	// With WebSub on, the sensor and pipe feeds advertise the hub.
	hubURL := ""
	if sv.websubOn, _ = strconv.ParseBool(v["websub"]); sv.websubOn {
		hubURL = sv.base + websub.HubPath
	}
	// The ids of the published feeds keep one tag authority for good:
	// --id-authority, else the one stored at the installation's first
	// start, else the public URL's host, stored now.
	authority := v["id-authority"]
	if authority == "" {
		if authority, err = web.IDAuthority(store, web.AuthorityOf(sv.base)); err != nil {
			sv.close()
			return nil, err
		}
	}
	sensors := web.SensorHandler(store, web.SensorOptions{BaseURL: sv.base, IDAuthority: authority, Logger: log, HubURL: hubURL, OnNewItems: added.notify})
	pipeFeeds := web.PipeFeedHandler(store, web.PipeFeedOptions{BaseURL: sv.base, IDAuthority: authority, Logger: log, Hints: pipes.Hints, HubURL: hubURL})
	documents := http.NewServeMux() // what a hub distributes
	documents.Handle("GET /sensors/", sensors)
	documents.Handle("GET /feeds/", pipeFeeds)
	// Plugin services (sinks, WebSub) hear of every feed's new items and
	// every pipe's output.
	plug, err := plugins.NewServices(plugins.Env{
		Store: store, Logger: log, BaseURL: sv.base, Now: time.Now, Client: fetch.Client(), Aggregator: svc,
		Settings: v, Documents: documents,
	})
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.plugins = plug
	added.subscribe(plug.Notify)
	outputs.subscribe(plug.Notify)

	// The web UI and the API share one guard: the token (off loopback),
	// sessions with CSRF tokens, and the DNS-rebinding guard on loopback.
	auth := web.NewAuth(web.AuthOptions{Token: token, Loopback: isLoopback(addr), Hosts: urlHosts(v["public-url"]), Logger: log})
	webUI, err := ui.New(ui.Options{Store: store, Auth: auth, Aggregator: svc, Pipes: pipes, Sensors: sensors, BaseURL: sv.base, Logger: log})
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.handler = healthzWhileLoading(svc.LoadProgress, web.New(web.Options{
		Store: store, Aggregator: svc, Logger: log, Token: token, Auth: auth, UI: webUI,
		Metrics:   promhttp.HandlerFor(st.reg, promhttp.HandlerOpts{}),
		Sensors:   sensors,
		Pipes:     pipes,
		PipeFeeds: pipeFeeds,
		Routes:    plug.Routes(),

		MaxPreviews: cfg.previews,
		Node:        v["node"],
		Ready:       clusterReady(st.node),
		Cluster:     clusterStatusOf(st.node),
	}))
	if sv.demo != nil {
		existing, err := store.Feeds()
		if err != nil {
			sv.close()
			return nil, err
		}
		if err := sv.demo.Subscribe(svc, existing); err != nil {
			sv.close()
			return nil, fmt.Errorf("demo: %w", err)
		}
		sv.demo.Push(sensors)
		fmt.Fprintf(a.stderr, "slogfeed demo: %s\n", sv.demo.Describe())
	}
	return sv, nil
}

// close stops the demo publishers.
func (sv *services) close() {
	if sv.demo != nil {
		sv.demo.Close()
		sv.demo = nil
	}
}

// run is serve's last stage: the polling service, the pipe runner and the
// plugin services run, beside the HTTP server srv (serving since the
// start, serveErr its end), until ctx ends or the server fails; then
// everything stops, the server within 10 s.
func (sv *services) run(ctx context.Context, a *app, cfg *serveConfig, addr net.Addr, srv *http.Server, serveErr <-chan error) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, run := range []func(context.Context) error{sv.svc.Run, sv.pipes.Run, sv.plugins.Run} {
		wg.Go(func() { errs[i] = run(runCtx) })
	}
	if !sv.loaded {
		// The feeds are scheduled while the node serves, those due first
		// (/healthz says "loading" meanwhile).
		began := time.Now()
		loaded := sv.svc.LoadInBackground(runCtx)
		wg.Go(func() {
			if err := <-loaded; err != nil {
				if runCtx.Err() == nil {
					a.log.Error("cannot load the feeds", "err", err)
				}
				return
			}
			p := sv.svc.LoadProgress()
			a.log.Info("feeds loaded", "feeds", p.Done, "replayed", p.Replayed, "took", time.Since(began).Round(time.Millisecond))
			warmFeedList(runCtx, a.log, sv.store)
		})
	} else {
		wg.Go(func() { warmFeedList(runCtx, a.log, sv.store) })
	}
	public := cfg.values["public-url"]
	a.log.Info("slogfeed serving", "addr", "http://"+addr.String(), "public_url", sv.base, "data", cfg.dir, "demo", cfg.demo, "websub", sv.websubOn)
	fmt.Fprintf(a.stderr, "slogfeed: serving on %s (data in %s)\n", listenDescription(addr), cfg.dir)
	fmt.Fprintf(a.stderr, "slogfeed: open %s in a browser\n", browserURL(addr, public))
	if h := otherMachinesURL(addr, public, os.Hostname); h != "" {
		fmt.Fprintf(a.stderr, "slogfeed: from another machine: %s\n", h)
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		stop()
		wg.Wait()
		return fmt.Errorf("http server: %w", err)
	}
	a.log.Info("shutting down")
	stop()
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	wg.Wait()
	// The polling service's error first, then the plugin services'; the
	// runner stops with its context only.
	return errors.Join(errs[0], errs[2])
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}

// urlHosts returns the host name of rawURL, as a list (empty when it has
// none).
func urlHosts(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	return []string{u.Hostname()}
}

// browserURL is the address of the web UI to print: the public URL when
// there is one, else the listening address (localhost for a wildcard
// address, which browsers cannot open).
func browserURL(a net.Addr, publicURL string) string {
	if publicURL != "" {
		return strings.TrimRight(publicURL, "/") + "/"
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err == nil && ap.Addr().IsUnspecified() {
		return "http://localhost:" + strconv.Itoa(int(ap.Port())) + "/"
	}
	return "http://" + a.String() + "/"
}

// listenDescription is the listening address as printed: a wildcard
// address (0.0.0.0, [::]) is said to be every interface, for the lines
// after it give the URLs to open.
func listenDescription(a net.Addr) string {
	ap, err := netip.ParseAddrPort(a.String())
	if err == nil && ap.Addr().IsUnspecified() {
		return "http://" + a.String() + " (every interface)"
	}
	return "http://" + a.String()
}

// otherMachinesURL is the address another machine opens when the server
// listens on a wildcard address without a public URL: this machine's
// host name and the port; "" otherwise.
func otherMachinesURL(a net.Addr, publicURL string, hostname func() (string, error)) string {
	ap, err := netip.ParseAddrPort(a.String())
	if publicURL != "" || err != nil || !ap.Addr().IsUnspecified() {
		return ""
	}
	h, err := hostname()
	if err != nil || h == "" || strings.ContainsAny(h, "/:@ ") {
		return ""
	}
	return "http://" + net.JoinHostPort(h, strconv.Itoa(int(ap.Port()))) + "/"
}

func isLoopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().IsLoopback()
}

// healthzWhileLoading answers GET /healthz, while the polling service
// still loads its feeds (progress), with 200 and the body
// {"status": "loading", "loaded": n, "feeds": total} when next answers
// 200 (the node can take writes), and as next does otherwise.
func healthzWhileLoading(progress func() aggregator.LoadProgress, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := progress()
		if r.Method != http.MethodGet || r.URL.Path != "/healthz" || !p.Loading {
			next.ServeHTTP(w, r)
			return
		}
		rec := &healthRecorder{header: http.Header{}, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		if rec.code != http.StatusOK {
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.code)
			_, _ = w.Write(rec.body.Bytes())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "loading", "loaded": p.Done, "feeds": p.Total})
	})
}

// healthRecorder keeps the answer of /healthz's own handler (a small
// JSON body).
type healthRecorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (h *healthRecorder) Header() http.Header { return h.header }

func (h *healthRecorder) WriteHeader(code int) { h.code = code }

func (h *healthRecorder) Write(b []byte) (int, error) {
	if h.body.Len()+len(b) > 64<<10 {
		return 0, errors.New("healthz: answer too long")
	}
	return h.body.Write(b)
}

// warmFeedList builds the feed summaries of a store that keeps them
// (feedlist.Warm) once the feeds are scheduled, so that the first feeds
// page or list after a start does not wait for a walk of every record;
// /healthz and the polls already run meanwhile.
func warmFeedList(ctx context.Context, log *slog.Logger, store feedlist.Lister) {
	if ctx.Err() != nil {
		return
	}
	began := time.Now()
	n, ok, err := feedlist.Warm(store)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			log.Error("cannot build the feed list", "err", err)
		}
	case ok:
		log.Info("feed list ready", "feeds", n, "took", time.Since(began).Round(time.Millisecond))
	}
}
