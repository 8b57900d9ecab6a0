package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/pack"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web"
	"github.com/slogfeed/slogfeed/web/demo"
	"github.com/slogfeed/slogfeed/web/ui"
)

// serveSettings is the configuration table of `slogfeed serve`:
//
//	flag        environment variable  default                       meaning
//	--addr      SLOGFEED_ADDR         127.0.0.1:8080                HTTP listen address
//	--data      SLOGFEED_DATA         $XDG_DATA_HOME/slogfeed       data directory (bbolt file slogfeed.db);
//	                                  (~/.local/share/slogfeed)
//	--demo      SLOGFEED_DEMO         false                         start simulated sensor publishers on loopback and subscribe to them
//	--allow     SLOGFEED_ALLOW        (none)                        comma-separated CIDRs the fetcher may reach despite the SSRF guard
//	--rate      SLOGFEED_RATE         0                             fetch budget, fetches per second (0 = unlimited)
//	--per-host  SLOGFEED_PER_HOST     4                             concurrent fetches per host
//	--workers   SLOGFEED_WORKERS      16                            fetch workers
//	--token     SLOGFEED_TOKEN        (none; generated off loopback) bearer token required for changes
//	--public-url SLOGFEED_PUBLIC_URL  http://ADDRESS                public base URL: self links, the WebSub hub and callbacks
//	--websub    SLOGFEED_WEBSUB       true                          WebSub hub for the sensor and pipe feeds, and subscriber
//	                                                                to the hubs remote feeds advertise (docs/websub.md)
//	--pipe-time SLOGFEED_PIPE_TIME    10s                           time limit of one pipe run or preview, checked by every
//	                                                                operator between items
//	--pipe-node-bytes SLOGFEED_PIPE_NODE_BYTES 32MiB                bytes one node of a run may materialise
//	--pipe-run-bytes  SLOGFEED_PIPE_RUN_BYTES  128MiB               bytes all the nodes of a run may materialise together
//	--regex-input     SLOGFEED_REGEX_INPUT     16KiB                bytes of a field a regex operator matches in (the rest
//	                                                                is kept as it is)
//	--previews  SLOGFEED_PREVIEWS     2                             pipe previews and requested runs at once (more: 429)
//
// and the cluster rows (clusterSettings; docs/cluster.md). Without --nats
// and --nats-embed, serve is a single slogfeed on its bbolt file:
//
//	--nats      SLOGFEED_NATS         (none)                        NATS server URLs: join a cluster, data in JetStream
//	--node      SLOGFEED_NODE         the host name                 this node's name, unique in the cluster
//	--nats-embed SLOGFEED_NATS_EMBED  false                         run a JetStream server in this process (data in DIR/nats)
//	--nats-listen SLOGFEED_NATS_LISTEN 127.0.0.1:4222               the embedded server's client address
//	--nats-cluster-listen SLOGFEED_NATS_CLUSTER_LISTEN (none)       the embedded server's route address
//	--nats-routes SLOGFEED_NATS_ROUTES (none)                       the other embedded servers' route URLs
//	--nats-replicas SLOGFEED_NATS_REPLICAS 0                        replicas of slogfeed's streams and buckets (0: 3 on a
//	                                                                cluster, 1 on a single server)
//	--shards    SLOGFEED_SHARDS       64                            shards of the feeds and pipes (fixed by the first node)
func serveSettings(getenv func(string) string) []setting {
	return append([]setting{
		{Name: "addr", Env: "SLOGFEED_ADDR", Default: "127.0.0.1:8080", Doc: "HTTP listen `ADDRESS`", Check: checkAddr},
		{Name: "data", Env: "SLOGFEED_DATA", Default: defaultDataDir(getenv), Doc: "data `DIR` (holds slogfeed.db)"},
		{Name: "demo", Env: "SLOGFEED_DEMO", Default: "false", Doc: "start simulated sensor publishers on loopback and subscribe to them", Check: checkBool, Bool: true},
		{Name: "allow", Env: "SLOGFEED_ALLOW", Default: "", Doc: "comma-separated `CIDRS` the fetcher may reach although they are private or loopback", Check: func(s string) error { _, err := parsePrefixes(s); return err }},
		{Name: "rate", Env: "SLOGFEED_RATE", Default: "0", Doc: "fetch budget in fetches per `SECOND` (0 = unlimited)", Check: checkFloat},
		{Name: "per-host", Env: "SLOGFEED_PER_HOST", Default: "4", Doc: "concurrent fetches per host (`N`)", Check: checkInt},
		{Name: "workers", Env: "SLOGFEED_WORKERS", Default: "16", Doc: "fetch workers (`N`)", Check: checkInt},
		{Name: "token", Env: "SLOGFEED_TOKEN", Default: "", Doc: "bearer `TOKEN` required for changes (generated and printed when listening off loopback without one)"},
		{Name: "public-url", Env: "SLOGFEED_PUBLIC_URL", Default: "", Doc: "public base `URL` of this slogfeed, for self links, the WebSub hub and callbacks (empty: http://ADDRESS)", Check: checkPublicURL},
		{Name: "websub", Env: "SLOGFEED_WEBSUB", Default: "true", Doc: "be the WebSub hub of the sensor and pipe feeds and subscribe to the hubs remote feeds advertise", Check: checkBool, Bool: true},
		{Name: "pipe-time", Env: "SLOGFEED_PIPE_TIME", Default: "10s", Doc: "time limit of one pipe run or preview (`DURATION`), checked by every operator between items", Check: checkPipeTime},
		{Name: "pipe-node-bytes", Env: "SLOGFEED_PIPE_NODE_BYTES", Default: "32MiB", Doc: "`BYTES` one node of a pipe run or preview may materialise (KiB, MiB, GiB suffixes)", Check: checkBytes},
		{Name: "pipe-run-bytes", Env: "SLOGFEED_PIPE_RUN_BYTES", Default: "128MiB", Doc: "`BYTES` all the nodes of a pipe run or preview may materialise together", Check: checkBytes},
		{Name: "regex-input", Env: "SLOGFEED_REGEX_INPUT", Default: "16KiB", Doc: "`BYTES` of a field a regex operator matches in; the rest of the field is kept as it is", Check: checkBytes},
		{Name: "previews", Env: "SLOGFEED_PREVIEWS", Default: "2", Doc: "pipe previews and requested runs (`N`) that run at once; one more is answered 429", Check: checkInt},
	}, clusterSettings()...)
}

// checkPipeTime accepts a duration from 100ms to 10m.
func checkPipeTime(s string) error {
	d, err := time.ParseDuration(s)
	if err == nil && (d < 100*time.Millisecond || d > 10*time.Minute) {
		err = errors.New("want 100ms to 10m")
	}
	return err
}

// checkBytes accepts a size parseBytes reads, from 1 KiB to 64 GiB.
func checkBytes(s string) error {
	n, err := parseBytes(s)
	if err == nil && (n < 1<<10 || n > 64<<30) {
		err = errors.New("want 1KiB to 64GiB")
	}
	return err
}

// parseBytes reads a size in bytes: an integer, maybe followed by KiB,
// MiB or GiB (or K, M, G, all powers of 1024).
func parseBytes(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a size such as 65536, 64KiB or 32MiB, not %q", s)
	}
	return n * mult, nil
}

// pipeLimits are the limits of pipe runs and previews the settings give.
func pipeLimits(v map[string]string) transform.Limits {
	lim := transform.Limits{}
	lim.RunTime, _ = time.ParseDuration(v["pipe-time"])
	lim.MaxNodeBytes, _ = parseBytes(v["pipe-node-bytes"])
	lim.MaxRunBytes, _ = parseBytes(v["pipe-run-bytes"])
	rx, _ := parseBytes(v["regex-input"])
	lim.MaxRegexInput = int(rx)
	return lim
}

// checkPublicURL accepts an empty value or an absolute http(s) URL without
// query or fragment.
func checkPublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("want an absolute http or https URL without query, e.g. https://slog.example.org")
	}
	return nil
}

// defaultDataDir is $XDG_DATA_HOME/slogfeed, else ~/.local/share/slogfeed,
// else ./slogfeed-data.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "slogfeed")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "share", "slogfeed")
	}
	return "slogfeed-data"
}

func checkAddr(s string) error {
	if _, _, err := net.SplitHostPort(s); err != nil {
		return fmt.Errorf("want HOST:PORT: %w", err)
	}
	return nil
}

func checkBool(s string) error { _, err := strconv.ParseBool(s); return err }

func checkFloat(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err == nil && (f < 0 || f > schedule.MaxRate) {
		err = fmt.Errorf("want 0 to %v", schedule.MaxRate)
	}
	return err
}

func checkInt(s string) error {
	n, err := strconv.Atoi(s)
	if err == nil && (n < 1 || n > 1024) {
		err = errors.New("want 1 to 1024")
	}
	return err
}

func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or CIDR", f)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

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
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runServe(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	b := bindSettings(fs, serveSettings(a.getenv))
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			serveUsage(a.stdout, a)
			return flag.ErrHelp
		}
		return &usageError{msg: err.Error(), cmd: "serve"}
	}
	if fs.NArg() > 0 {
		return &usageError{msg: "serve takes no arguments: " + quoteArg(fs.Arg(0)), cmd: "serve"}
	}
	v, err := b.resolve(a.getenv)
	if err != nil {
		return err
	}
	demoOn, _ := strconv.ParseBool(v["demo"])
	allow, _ := parsePrefixes(v["allow"])
	rate, _ := strconv.ParseFloat(v["rate"], 64)
	perHost, _ := strconv.Atoi(v["per-host"])
	workers, _ := strconv.Atoi(v["workers"])
	previews, _ := strconv.Atoi(v["previews"])
	log := a.log

	dir := v["data"]
	if demoOn && fs.Lookup("data") != nil && !flagGiven(fs, "data") && a.getenv("SLOGFEED_DATA") == "" {
		// The demo keeps its state apart from a real data directory.
		dir = filepath.Join(dir, "demo")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	ln, err := net.Listen("tcp", v["addr"])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The store: the bbolt file, or with --nats/--nats-embed JetStream,
	// with a lease node that says which feeds and pipes are this node's.
	var store storage.Backend
	owner := cluster.Everything
	userAgent := fetcher.UserAgent(versionString(), "")
	var node *clusterNode
	if clusterEnabled(v) {
		addr := v["public-url"]
		if addr == "" {
			addr = ln.Addr().String()
		}
		node, err = startCluster(ctx, v, dir, addr, log, reg)
		if err != nil {
			ln.Close()
			return err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			node.close(cctx)
		}()
		store, owner = node.backend, node.node
		userAgent = fetcher.UserAgent(versionString(), v["node"])
		log.Info("cluster node started", "node", v["node"], "shards", node.node.Shards())
	} else {
		bolt, err := storage.Open(filepath.Join(dir, "slogfeed.db"), storage.Options{LockTimeout: time.Second})
		if err != nil {
			ln.Close()
			return err
		}
		store = bolt
	}
	defer store.Close()

	token := v["token"]
	if !isLoopback(ln.Addr()) && token == "" {
		var buf [16]byte
		_, _ = rand.Read(buf[:])
		token = hex.EncodeToString(buf[:])
		fmt.Fprintf(a.stderr, "slogfeed: listening off loopback; log in to the web UI with this token, and send it with changes: Authorization: Bearer %s\n", token)
	}

	var pub *demo.Publishers
	if demoOn {
		pub, err = demo.Start(ctx, log)
		if err != nil {
			ln.Close()
			return fmt.Errorf("demo: %w", err)
		}
		defer pub.Close()
		allow = append(allow, pub.Prefix())
	}

	// PACK reduction policies (Feed.Reduce, a pipe's output.reduce) apply
	// when retention removes items.
	store.SetReducer(pack.NewReducer())
	// Plugin services (sinks, WebSub) hear of every feed's new items; they
	// are built once the aggregator exists.
	var services *plugins.Services
	notifyServices := func(f storage.Feed, items []storage.Item) {
		if services != nil {
			services.Notify(f, items)
		}
	}
	// The aggregator tells pipes when their inputs are fetched next, so
	// that a pipe can tell its subscribers when it plans to update; it is
	// built after the runner, whose Notify it calls.
	var svc *aggregator.Service
	plannedFetch := func(id uint64, now time.Time) (time.Time, bool) { return svc.PlannedFetch(id, now) }
	pipes, err := runner.New(runner.Options{Store: store, Logger: log, OnOutput: notifyServices, PlannedFetch: plannedFetch, Limits: pipeLimits(v), Owner: owner})
	if err != nil {
		ln.Close()
		return err
	}

	fetcher := fetcher.New(fetcher.Options{Allow: allow, UserAgent: userAgent})
	svc, err = aggregator.NewService(aggregator.ServiceOptions{
		Owner: owner,
		Store: store, Fetcher: fetcher, Logger: log,
		Scheduler: schedule.Config{Rate: rate, PerHost: perHost, Workers: workers},
		OnNewItems: func(f storage.Feed, items []storage.Item) {
			pipes.Notify(f, items)
			notifyServices(f, items)
		},
		Sources: plugins.Sources(),
	})
	if err != nil {
		ln.Close()
		return err
	}
	metrics := aggregator.NewMetrics(reg, svc.Scheduler(), rate)
	svc.SetMetrics(metrics)
	if err := svc.Load(); err != nil {
		ln.Close()
		return err
	}
	if err := pipes.Load(); err != nil {
		ln.Close()
		return err
	}
	listen := "http://" + ln.Addr().String()
	// Self links need an address a reader can open: localhost, not
	// 0.0.0.0, when listening on every interface without --public-url.
	base := strings.TrimSuffix(browserURL(ln.Addr(), ""), "/")
	if p := strings.TrimRight(v["public-url"], "/"); p != "" {
		base = p
	}
	// With WebSub on, the sensor and pipe feeds advertise the hub.
	hubURL := ""
	if on, _ := strconv.ParseBool(v["websub"]); on {
		hubURL = base + websub.HubPath
	}
	sensors := web.SensorHandler(store, web.SensorOptions{BaseURL: base, Logger: log, HubURL: hubURL, OnNewItems: func(f storage.Feed, items []storage.Item) {
		pipes.Notify(f, items)
		notifyServices(f, items)
	}})
	pipeFeeds := web.PipeFeedHandler(store, web.PipeFeedOptions{BaseURL: base, Logger: log, Hints: pipes.Hints, HubURL: hubURL})
	documents := http.NewServeMux() // what a hub distributes
	documents.Handle("GET /sensors/", sensors)
	documents.Handle("GET /feeds/", pipeFeeds)
	services, err = plugins.NewServices(plugins.Env{
		Store: store, Logger: log, BaseURL: base, Now: time.Now, Client: fetcher.Client(), Aggregator: svc,
		Settings: v, Documents: documents,
	})
	if err != nil {
		ln.Close()
		return err
	}
	// The web UI and the API share one guard: the token (off loopback),
	// sessions with CSRF tokens, and the DNS-rebinding guard on loopback.
	auth := web.NewAuth(web.AuthOptions{Token: token, Loopback: isLoopback(ln.Addr()), Hosts: urlHosts(v["public-url"]), Logger: log})
	webUI, err := ui.New(ui.Options{Store: store, Auth: auth, Aggregator: svc, Pipes: pipes, Sensors: sensors, BaseURL: base, Logger: log})
	if err != nil {
		ln.Close()
		return err
	}
	handler := web.New(web.Options{
		Store: store, Aggregator: svc, Logger: log, Token: token, Auth: auth, UI: webUI,
		Metrics:   promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Sensors:   sensors,
		Pipes:     pipes,
		PipeFeeds: pipeFeeds,
		Routes:    services.Routes(),

		MaxPreviews: previews,
		Node:        v["node"],
		Ready:       clusterReady(node),
		Cluster:     clusterStatusOf(node),
	})
	if pub != nil {
		existing, err := store.Feeds()
		if err != nil {
			ln.Close()
			return err
		}
		if err := pub.Subscribe(svc, existing); err != nil {
			ln.Close()
			return fmt.Errorf("demo: %w", err)
		}
		pub.Push(sensors)
		fmt.Fprintf(a.stderr, "slogfeed demo: %s\n", pub.Describe())
	}

	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	pipesDone := make(chan error, 1)
	go func() { pipesDone <- pipes.Run(runCtx) }()
	servicesDone := make(chan error, 1)
	go func() { servicesDone <- services.Run(runCtx) }()
	go func() { done <- svc.Run(runCtx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("slogfeed serving", "addr", listen, "public_url", base, "data", dir, "demo", demoOn, "websub", hubURL != "")
	fmt.Fprintf(a.stderr, "slogfeed: serving on %s (data in %s)\n", listenDescription(ln.Addr()), dir)
	fmt.Fprintf(a.stderr, "slogfeed: open %s in a browser\n", browserURL(ln.Addr(), v["public-url"]))
	if h := otherMachinesURL(ln.Addr(), v["public-url"], os.Hostname); h != "" {
		fmt.Fprintf(a.stderr, "slogfeed: from another machine: %s\n", h)
	}

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		stop()
		<-done
		<-pipesDone
		<-servicesDone
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("shutting down")
	stop()
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	err = <-done
	<-pipesDone
	if serr := <-servicesDone; serr != nil && err == nil {
		err = serr
	}
	return err
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
