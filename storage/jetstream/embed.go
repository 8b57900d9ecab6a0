package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Errors of the embedded server. Callers branch on them with errors.Is.
var (
	// ErrEmbedConfig: the options do not describe a server that can run
	// (a bad address, a missing store directory, a bad route URL).
	ErrEmbedConfig = errors.New("embedded nats: bad configuration")
	// ErrNotReady: the server did not accept clients, or JetStream did not
	// become ready, within EmbedOptions.ReadyTimeout.
	ErrNotReady = errors.New("embedded nats: not ready")
	// ErrStart: the server could not start (an address it listens on is
	// taken, or it reported another fatal error as it started).
	ErrStart = errors.New("embedded nats: cannot start")
)

// DefaultReadyTimeout is how long StartEmbedded waits for the server to be
// ready when EmbedOptions.ReadyTimeout is zero. A clustered server waits
// for enough peers to elect a JetStream meta leader, so this covers the
// other servers starting too.
const DefaultReadyTimeout = 30 * time.Second

// DefaultClusterName is the NATS cluster name when EmbedOptions.ClusterName
// is empty. Every server of one cluster must use the same name.
const DefaultClusterName = "slogfeed"

// EmbedOptions configure an embedded JetStream server. They map one to one
// onto `slogfeed serve --nats-embed` flags.
type EmbedOptions struct {
	// Name is the server's name, unique in the cluster (JetStream's Raft
	// groups name their peers by it). `serve` passes the node name.
	Name string
	// Listen is the client address, host:port (--nats-listen). Port 0
	// picks a free port; ClientURL tells which. Empty means
	// 127.0.0.1:4222.
	Listen string
	// ClusterListen is the route address, host:port
	// (--nats-cluster-listen). Empty runs a single server without routes.
	// Port 0 picks a free port; ClusterURL tells which.
	ClusterListen string
	// Routes are the other servers' cluster addresses (--nats-routes),
	// nats://host:port each. A server may list itself; it is ignored.
	Routes []string
	// ClusterName is the NATS cluster name; empty means DefaultClusterName.
	ClusterName string
	// StoreDir is where JetStream keeps its data. Required: a server
	// without it would lose every acknowledged write on restart.
	StoreDir string
	// MaxMemory and MaxStore bound JetStream's memory and file storage in
	// bytes; zero lets the server choose (a share of the machine).
	MaxMemory, MaxStore int64
	// ReadyTimeout bounds the wait for readiness; zero means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Logger receives the server's log lines; nil discards them.
	Logger *slog.Logger
	// Debug passes the server's debug lines to Logger.
	Debug bool
	// RepeatEvery bounds how often one warning or error of the server is
	// logged again while it repeats (a route to a dead peer failing to
	// connect several times a second): the first is logged, then at
	// most one per RepeatEvery, with how many were left out. Zero means
	// DefaultRepeatEvery; negative logs every line.
	RepeatEvery time.Duration
	// RoutePingInterval is how often the server pings each route to a
	// peer, and RouteMaxPingsOut how many pings may go unanswered: at
	// the next ping the route is closed as stale. Zero means
	// DefaultRoutePingInterval and DefaultRouteMaxPingsOut.
	RoutePingInterval time.Duration
	RouteMaxPingsOut  int
}

// DefaultRepeatEvery is EmbedOptions.RepeatEvery when it is zero.
const DefaultRepeatEvery = 30 * time.Second

// A route to a peer whose process is hung (stopped, swapping, a VM
// paused, packets dropped on the way) stays open: nothing closes the
// connection, and the server keeps the peer's subscriptions. The direct
// gets of every stream and bucket (each KV get, each stream read of a
// subject's last message) are answered by a queue group of all their
// replicas, picked at random for a client's request, so a third of them
// go to the hung peer and wait out their timeout until the route is
// closed. NATS's own defaults (a ping every 2 minutes, capped at 30 s
// for routes, two unanswered) close it 60 to 90 s after the hang; these
// close it 6 to 8 s after, past a JetStream Raft election's minimum
// timeout (4 s), so that a peer slow enough to close its routes has
// lost its Raft leaderships already.
const (
	DefaultRoutePingInterval = 2 * time.Second
	DefaultRouteMaxPingsOut  = 3
)

// Embedded is a running embedded JetStream server.
type Embedded struct {
	srv  *server.Server
	opts *server.Options
}

// StartEmbedded starts a JetStream server as described by opt and returns
// it once it accepts clients and JetStream is ready (see the package
// documentation). On error nothing is left running.
func StartEmbedded(opt EmbedOptions) (*Embedded, error) {
	return StartEmbeddedContext(context.Background(), opt)
}

// StartEmbeddedContext is StartEmbedded, giving up when ctx ends. The
// client and route addresses are bound once before the server starts, so
// that an address in use is an error at once rather than a server that
// makes its routes and never accepts a client; a fatal error the server
// reports as it starts ends the wait too. On error nothing is left
// running.
func StartEmbeddedContext(ctx context.Context, opt EmbedOptions) (*Embedded, error) {
	so, err := serverOptions(opt)
	if err != nil {
		return nil, err
	}
	if err := checkListen("client", so.Host, so.Port); err != nil {
		return nil, err
	}
	if opt.ClusterListen != "" {
		if err := checkListen("route", so.Cluster.Host, so.Cluster.Port); err != nil {
			return nil, err
		}
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEmbedConfig, err)
	}
	logger := opt.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	every := opt.RepeatEvery
	if every == 0 {
		every = DefaultRepeatEvery
	}
	fatal := make(chan string, 1)
	srv.SetLogger(&slogLogger{
		l:      logger.With("component", "nats-server", "server", so.ServerName),
		repeat: newRepeatLimiter(every, time.Now),
		fatal:  fatal,
	}, opt.Debug, false)
	e := &Embedded{srv: srv, opts: so}
	timeout := opt.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	started := make(chan struct{})
	go func() {
		defer close(started)
		srv.Start()
	}()
	err = e.wait(ctx, started, fatal, timeout, func() bool { return srv.Addr() != nil && (so.Cluster.Port == 0 || srv.ClusterAddr() != nil) },
		func() error {
			return fmt.Errorf("%w: server %s accepts no clients after %s", ErrNotReady, so.ServerName, timeout)
		})
	if err == nil {
		err = e.wait(ctx, started, fatal, timeout, e.JetStreamReady,
			func() error {
				return fmt.Errorf("%w: JetStream on server %s has no meta leader after %s", ErrNotReady, so.ServerName, timeout)
			})
	}
	if err != nil {
		<-started
		e.Shutdown()
		return nil, err
	}
	return e, nil
}

// wait polls ready every 20 ms, once the server's Start has returned
// (started closed), until it is true, the server reports a fatal error,
// ctx ends, or timeout has passed since Start returned (timedOut's error):
// Start itself may take long (it recovers a large JetStream store), and
// only ctx and a fatal error end the wait for it.
func (e *Embedded) wait(ctx context.Context, started <-chan struct{}, fatal <-chan string, timeout time.Duration, ready func() bool, timedOut func() error) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var deadline <-chan time.Time
	for {
		if started != nil {
			select {
			case <-started:
				started = nil // Start returned: the ready timeout counts from here
			default:
			}
		}
		if started == nil && deadline == nil {
			deadline = time.After(timeout)
		}
		if started == nil && ready() {
			return nil
		}
		select {
		case msg := <-fatal:
			return fmt.Errorf("%w: server %s: %s", ErrStart, e.opts.ServerName, msg)
		case <-ctx.Done():
			return fmt.Errorf("embedded nats: server %s starting: %w", e.opts.ServerName, ctx.Err())
		case <-deadline:
			return timedOut()
		case <-tick.C:
		}
	}
}

// checkListen binds host:port once and lets it go: a taken address is an
// ErrStart naming it. Port RANDOM_PORT (any free port) is not checked.
func checkListen(what, host string, port int) error {
	if port == server.RANDOM_PORT || port == 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: %s address %s: %w", ErrStart, what, addr, err)
	}
	return ln.Close()
}

// WaitReady waits up to d until JetStream on this server is ready: enabled
// and, when clustered, following (or being) a JetStream meta leader.
func (e *Embedded) WaitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if e.JetStreamReady() {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: JetStream on server %s has no meta leader after %s", ErrNotReady, e.opts.ServerName, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// JetStreamReady reports whether the server runs, has JetStream enabled
// and, when clustered, is current with a JetStream meta leader.
func (e *Embedded) JetStreamReady() bool {
	return e.srv.Running() && e.srv.JetStreamEnabled() && e.srv.JetStreamIsCurrent()
}

// metaGroupName is the JetStream meta group's Raft group.
const metaGroupName = "_meta_"

// metaGroup is this server's state of the JetStream meta group (read
// under the group's lock, without a request); false without a cluster.
func (e *Embedded) metaGroup() (server.RaftzGroup, bool) {
	if !e.srv.JetStreamIsClustered() {
		return server.RaftzGroup{}, false
	}
	st := e.srv.Raftz(&server.RaftzOptions{GroupFilter: metaGroupName})
	if st == nil {
		return server.RaftzGroup{}, false
	}
	for _, groups := range *st {
		if g, ok := groups[metaGroupName]; ok {
			return g, true
		}
	}
	return server.RaftzGroup{}, false
}

// HasMetaLeader reports whether JetStream on this server is ready and,
// when clustered, the meta group has a leader this server is or has
// heard from lately: without one, every JetStream API request (a stream
// or consumer created, looked up or changed) fails with "JetStream
// system temporarily unavailable". It asks the server's state, not the
// cluster.
func (e *Embedded) HasMetaLeader() bool {
	if !e.JetStreamReady() {
		return false
	}
	if !e.srv.JetStreamIsClustered() || e.srv.JetStreamIsLeader() {
		return true
	}
	g, ok := e.metaGroup()
	return ok && g.Leader != ""
}

// MetaPeers is how many servers the JetStream meta group counts as its
// peers, online or not, this one included (its quorum is a majority of
// them); 0 without a cluster.
func (e *Embedded) MetaPeers() int {
	g, ok := e.metaGroup()
	if !ok {
		return 0
	}
	return len(g.Peers) + 1
}

// IsMetaLeader reports whether this server is the JetStream meta leader.
func (e *Embedded) IsMetaLeader() bool { return e.srv.JetStreamIsLeader() }

// OnlinePeers is, on the JetStream meta leader, how many JetStream servers
// of the cluster are online (this one included); 0 on other servers. A
// server without a cluster counts itself.
func (e *Embedded) OnlinePeers() int {
	if !e.srv.JetStreamIsClustered() {
		if e.JetStreamReady() {
			return 1
		}
		return 0
	}
	return len(e.srv.JetStreamClusterPeers())
}

// Name is the server's name.
func (e *Embedded) Name() string { return e.opts.ServerName }

// ClientURL is the URL clients connect to, nats://host:port, with the
// port actually bound.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// ClusterURL is the route URL other servers list in their Routes,
// nats://host:port with the port actually bound; empty for a server
// without a cluster listener.
func (e *Embedded) ClusterURL() string {
	a := e.srv.ClusterAddr()
	if a == nil {
		return ""
	}
	return "nats://" + net.JoinHostPort(e.opts.Cluster.Host, strconv.Itoa(a.Port))
}

// Shutdown stops the server and waits until it has stopped. It is safe to
// call more than once.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// serverOptions checks opt and turns it into the server's options.
func serverOptions(opt EmbedOptions) (*server.Options, error) {
	if opt.StoreDir == "" {
		return nil, fmt.Errorf("%w: no JetStream store directory", ErrEmbedConfig)
	}
	if opt.Name == "" {
		return nil, fmt.Errorf("%w: no server name", ErrEmbedConfig)
	}
	if opt.Listen == "" {
		opt.Listen = "127.0.0.1:4222"
	}
	host, port, err := hostPort(opt.Listen)
	if err != nil {
		return nil, fmt.Errorf("%w: listen address %q: %v", ErrEmbedConfig, opt.Listen, err)
	}
	so := &server.Options{
		ServerName:         opt.Name,
		Host:               host,
		Port:               port,
		JetStream:          true,
		StoreDir:           opt.StoreDir,
		JetStreamMaxMemory: opt.MaxMemory,
		JetStreamMaxStore:  opt.MaxStore,
		NoSigs:             true,
		// The monitoring, websocket, MQTT and leaf listeners stay off.
		HTTPPort: 0,
	}
	if opt.ClusterListen == "" {
		if len(opt.Routes) > 0 {
			return nil, fmt.Errorf("%w: routes given without a cluster listen address", ErrEmbedConfig)
		}
		return so, nil
	}
	chost, cport, err := hostPort(opt.ClusterListen)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster listen address %q: %v", ErrEmbedConfig, opt.ClusterListen, err)
	}
	name := opt.ClusterName
	if name == "" {
		name = DefaultClusterName
	}
	so.Cluster = server.ClusterOpts{Name: name, Host: chost, Port: cport,
		PingInterval: opt.RoutePingInterval, MaxPingsOut: opt.RouteMaxPingsOut}
	if so.Cluster.PingInterval <= 0 {
		so.Cluster.PingInterval = DefaultRoutePingInterval
	}
	if so.Cluster.MaxPingsOut <= 0 {
		so.Cluster.MaxPingsOut = DefaultRouteMaxPingsOut
	}
	for _, r := range opt.Routes {
		u, err := url.Parse(strings.TrimSpace(r))
		if err != nil || u.Scheme != "nats" || u.Host == "" || u.Port() == "" {
			return nil, fmt.Errorf("%w: route %q is not nats://host:port", ErrEmbedConfig, r)
		}
		so.Routes = append(so.Routes, u)
	}
	return so, nil
}

// hostPort splits host:port; port 0 becomes the server's "any free port".
func hostPort(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		host = "0.0.0.0"
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// slogLogger passes the server's log lines to slog, its warnings and
// errors through a repeatLimiter.
type slogLogger struct {
	l      *slog.Logger
	repeat *repeatLimiter
	// fatal, when set, receives the first fatal error's line (a start
	// waiting for the server ends with it).
	fatal chan<- string
}

func (s *slogLogger) Noticef(format string, v ...any) { s.l.Info(fmt.Sprintf(format, v...)) }
func (s *slogLogger) Warnf(format string, v ...any)   { s.limited(slog.LevelWarn, format, v) }
func (s *slogLogger) Errorf(format string, v ...any)  { s.limited(slog.LevelError, format, v) }
func (s *slogLogger) Debugf(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s *slogLogger) Tracef(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }

// Fatalf is logged as an error: an embedded server must not exit the
// process. The line goes to fatal too: the server does not always stop
// after one (a client port it cannot bind leaves it running without
// clients), so the start waiting for it gives up.
func (s *slogLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.l.Error(msg, "fatal", true)
	if s.fatal != nil {
		select {
		case s.fatal <- msg:
		default:
		}
	}
}

// limited logs a warning or error unless the limiter holds it back; a
// line logged after some were held back says how many.
func (s *slogLogger) limited(level slog.Level, format string, v []any) {
	msg := fmt.Sprintf(format, v...)
	ok, skipped := s.repeat.allow(repeatKey(level, format, v))
	if !ok {
		return
	}
	if skipped > 0 {
		s.l.Log(context.Background(), level, msg, "repeated", skipped, "over", s.repeat.every)
		return
	}
	s.l.Log(context.Background(), level, msg)
}

// repeatKey is what makes two lines "the same": the level, the format and
// the arguments other than integers. A route's connect error names its
// peer's address in its error, but counts its attempts in an integer, so
// each peer's failures are one key.
func repeatKey(level slog.Level, format string, v []any) string {
	var b strings.Builder
	b.WriteString(level.String())
	b.WriteByte(0)
	b.WriteString(format)
	for _, a := range v {
		switch a.(type) {
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
			continue
		}
		b.WriteByte(0)
		b.WriteString(fmt.Sprint(a))
	}
	return b.String()
}

// maxRepeatKeys bounds the lines a repeatLimiter remembers; past it, the
// keys not logged within the last period are forgotten, and when none
// is, lines are logged without being counted.
const maxRepeatKeys = 256

// repeatLimiter lets a repeated line through once, then at most once per
// period, counting the ones it held back. It is driven by the clock now
// it is given.
type repeatLimiter struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]*repeatState
}

type repeatState struct {
	logged  time.Time // when the line was last let through
	skipped int       // held back since
}

func newRepeatLimiter(every time.Duration, now func() time.Time) *repeatLimiter {
	return &repeatLimiter{every: every, now: now, seen: map[string]*repeatState{}}
}

// allow reports whether a line with key is to be logged now and, if so,
// how many lines with that key it held back since the last one logged.
func (r *repeatLimiter) allow(key string) (ok bool, skipped int) {
	if r.every <= 0 {
		return true, 0
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.seen[key]
	if st == nil {
		if len(r.seen) >= maxRepeatKeys {
			for k, old := range r.seen {
				if now.Sub(old.logged) >= r.every {
					delete(r.seen, k)
				}
			}
			if len(r.seen) >= maxRepeatKeys {
				return true, 0
			}
		}
		r.seen[key] = &repeatState{logged: now}
		return true, 0
	}
	if now.Sub(st.logged) < r.every {
		st.skipped++
		return false, 0
	}
	skipped = st.skipped
	st.logged, st.skipped = now, 0
	return true, skipped
}
