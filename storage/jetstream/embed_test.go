package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

func TestServerOptionsRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		opt  EmbedOptions
	}{
		{"no store dir", EmbedOptions{Name: "a"}},
		{"no name", EmbedOptions{StoreDir: dir}},
		{"listen without port", EmbedOptions{Name: "a", StoreDir: dir, Listen: "127.0.0.1"}},
		{"listen port out of range", EmbedOptions{Name: "a", StoreDir: dir, Listen: "127.0.0.1:70000"}},
		{"routes without cluster listen", EmbedOptions{Name: "a", StoreDir: dir, Routes: []string{"nats://127.0.0.1:6222"}}},
		{"bad cluster listen", EmbedOptions{Name: "a", StoreDir: dir, ClusterListen: "nohost"}},
		{"route without scheme", EmbedOptions{Name: "a", StoreDir: dir, ClusterListen: "127.0.0.1:0", Routes: []string{"127.0.0.1:6222"}}},
		{"route of another scheme", EmbedOptions{Name: "a", StoreDir: dir, ClusterListen: "127.0.0.1:0", Routes: []string{"http://127.0.0.1:6222"}}},
		{"route without port", EmbedOptions{Name: "a", StoreDir: dir, ClusterListen: "127.0.0.1:0", Routes: []string{"nats://127.0.0.1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := StartEmbedded(tt.opt)
			if !errors.Is(err, ErrEmbedConfig) {
				t.Fatalf("StartEmbedded = %v, want ErrEmbedConfig", err)
			}
		})
	}
}

func TestServerOptionsMapsFlags(t *testing.T) {
	so, err := serverOptions(EmbedOptions{
		Name: "n1", StoreDir: "/data", Listen: "127.0.0.1:0", ClusterListen: "127.0.0.1:6222",
		Routes: []string{"nats://127.0.0.1:6223", " nats://127.0.0.1:6224 "},
	})
	if err != nil {
		t.Fatal(err)
	}
	if so.ServerName != "n1" || so.Host != "127.0.0.1" || so.Port != -1 || !so.JetStream || so.StoreDir != "/data" || !so.NoSigs {
		t.Errorf("server options = %+v", so)
	}
	if so.Cluster.Name != DefaultClusterName || so.Cluster.Host != "127.0.0.1" || so.Cluster.Port != 6222 {
		t.Errorf("cluster options = %+v", so.Cluster)
	}
	if len(so.Routes) != 2 || so.Routes[1].Host != "127.0.0.1:6224" {
		t.Errorf("routes = %v", so.Routes)
	}
}

// TestStartEmbeddedStandalone runs one server on a free port, stores a key
// in a KV bucket through a client, and stops it.
func TestStartEmbeddedStandalone(t *testing.T) {
	e, err := StartEmbedded(EmbedOptions{Name: "solo", StoreDir: t.TempDir(), Listen: "127.0.0.1:0", MaxMemory: 32 << 20, MaxStore: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	if !e.JetStreamReady() || e.ClusterURL() != "" {
		t.Fatalf("ready %v, cluster URL %q", e.JetStreamReady(), e.ClusterURL())
	}
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, njs.KeyValueConfig{Bucket: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	got, err := kv.Get(ctx, "k")
	if err != nil || string(got.Value()) != "v" {
		t.Fatalf("Get = %v, %v", got, err)
	}
	e.Shutdown()
	e.Shutdown() // twice is fine
	if e.JetStreamReady() {
		t.Error("ready after Shutdown")
	}
}

// lineCounter counts the log records whose message contains sub.
type lineCounter struct {
	sub string
	n   atomic.Int64
}

func (c *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError && strings.Contains(r.Message, c.sub) {
		c.n.Add(1)
	}
	return nil
}
func (c *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *lineCounter) WithGroup(string) slog.Handler      { return c }

// freePort is a TCP port on 127.0.0.1 nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestRouteErrorsBounded: while a peer is down, a survivor says so once
// per route, then about once a minute, not at every reconnect attempt
// (one a second).
func TestRouteErrorsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for route reconnect attempts")
	}
	ports := []int{freePort(t), freePort(t), freePort(t)}
	count := &lineCounter{sub: "Error trying to connect to route"}
	servers := make([]*Embedded, 3)
	errs := make(chan error, 3)
	for i := range servers {
		go func() {
			opt := EmbedOptions{
				Name: fmt.Sprintf("r%d", i), StoreDir: t.TempDir(), Listen: "127.0.0.1:0",
				ClusterListen: fmt.Sprintf("127.0.0.1:%d", ports[i]),
				MaxMemory:     32 << 20, MaxStore: 64 << 20, ReadyTimeout: 30 * time.Second,
			}
			// r0 dials both others (and retries r2 once it is gone); they
			// dial r0 only.
			opt.Routes = []string{fmt.Sprintf("nats://127.0.0.1:%d", ports[0])}
			if i == 0 {
				opt.Routes = []string{fmt.Sprintf("nats://127.0.0.1:%d", ports[1]), fmt.Sprintf("nats://127.0.0.1:%d", ports[2])}
				opt.Logger = slog.New(count)
			}
			var err error
			servers[i], err = StartEmbedded(opt)
			errs <- err
		}()
	}
	for range servers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, e := range servers {
			e.Shutdown()
		}
	}()
	count.n.Store(0) // the peers that were not up yet at the start
	servers[2].Shutdown()
	// r0 retries each of its routes to r2 once a second: unbounded, that
	// was about four ERROR lines a second (28 in these 8 s); bounded, it
	// is at most one a route (the first attempt).
	time.Sleep(8 * time.Second)
	if n := count.n.Load(); n > 4 {
		t.Fatalf("%d route error lines in 8 s while a peer is down: not bounded", n)
	}
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)} }
func routeErr(peer string) error {
	return errors.New("dial tcp " + peer + ": connect: connection refused")
}
func routeConnect(l *slogLogger, attempt int, peer string) {
	l.Errorf("Error trying to connect to route (attempt %v): %v", attempt, routeErr(peer))
}

// While two peers are down, the server reports a failed route connect to
// each about four times a second: each peer's error is logged at once,
// then once per RepeatEvery with the count held back; other lines and
// other levels are not held back by them.
func TestSlogLoggerLimitsRepeats(t *testing.T) {
	tests := []struct {
		name  string
		every time.Duration
		// lines logged per peer over 65 s, and the "repeated" counts
		// of those after the first
		wantPerPeer  int
		wantRepeated []int64
	}{
		{"every 30 s", 30 * time.Second, 3, []int64{119, 119}},
		{"every 10 s", 10 * time.Second, 7, []int64{39, 39, 39, 39, 39, 39}},
		{"every line", -1, 260, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			clock := newFakeClock()
			l := &slogLogger{
				l:      slog.New(slog.NewJSONHandler(&buf, nil)),
				repeat: newRepeatLimiter(tt.every, clock.now),
			}
			peers := []string{"127.0.0.1:6222", "127.0.0.1:6223"}
			for i := range 260 { // 65 s at 4 a second
				for _, p := range peers {
					routeConnect(l, i+1, p)
				}
				if i == 100 {
					l.Warnf("JetStream cluster stream %q has NO quorum", "KV_slogfeed_cluster")
					l.Noticef("Server is ready")
				}
				clock.add(250 * time.Millisecond)
			}
			per := map[string][]map[string]any{}
			other := 0
			dec := json.NewDecoder(&buf)
			for dec.More() {
				var rec map[string]any
				if err := dec.Decode(&rec); err != nil {
					t.Fatal(err)
				}
				msg, _ := rec["msg"].(string)
				matched := false
				for _, p := range peers {
					if strings.Contains(msg, p) {
						per[p] = append(per[p], rec)
						matched = true
					}
				}
				if !matched {
					other++
				}
			}
			if other != 2 {
				t.Errorf("%d other lines logged, want the warning and the notice", other)
			}
			for _, p := range peers {
				recs := per[p]
				if len(recs) != tt.wantPerPeer {
					t.Fatalf("peer %s: %d lines logged, want %d", p, len(recs), tt.wantPerPeer)
				}
				if _, ok := recs[0]["repeated"]; ok || !strings.Contains(recs[0]["msg"].(string), "(attempt 1)") {
					t.Errorf("peer %s: first line %v, want attempt 1 without a count", p, recs[0])
				}
				for i, want := range tt.wantRepeated {
					if got, _ := recs[i+1]["repeated"].(float64); int64(got) != want || recs[i+1]["level"] != "ERROR" {
						t.Errorf("peer %s line %d: %v, want an error repeated %d times", p, i+1, recs[i+1], want)
					}
				}
			}
		})
	}
}

// The limiter forgets lines not logged within a period once it holds
// maxRepeatKeys, and lets lines through uncounted while every key is
// recent: a flood of distinct lines is logged, not dropped.
func TestRepeatLimiterBounded(t *testing.T) {
	clock := newFakeClock()
	r := newRepeatLimiter(time.Minute, clock.now)
	for i := range maxRepeatKeys {
		if ok, _ := r.allow("k" + strconv.Itoa(i)); !ok {
			t.Fatalf("first line %d held back", i)
		}
	}
	if ok, _ := r.allow("k0"); ok {
		t.Error("a repeat within the period let through")
	}
	if ok, _ := r.allow("new"); !ok || len(r.seen) != maxRepeatKeys {
		t.Errorf("a new line with the limiter full: let through %v, %d keys kept", ok, len(r.seen))
	}
	clock.add(time.Minute)
	if ok, _ := r.allow("new"); !ok || len(r.seen) != 1 {
		t.Errorf("a new line after a period: let through %v, %d keys kept, want the old ones forgotten", ok, len(r.seen))
	}
	if ok, skipped := r.allow("new"); ok || skipped != 0 {
		t.Errorf("its repeat: let through %v (%d)", ok, skipped)
	}
}

// A server whose client or route address is taken fails at once, naming
// the address, instead of waiting out its ready timeout (making its
// routes meanwhile).
func TestStartEmbeddedAddressInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	free := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	tests := []struct {
		name string
		opt  EmbedOptions
	}{
		{"client address", EmbedOptions{Listen: addr, ClusterListen: free, Routes: []string{"nats://" + free}}},
		{"route address", EmbedOptions{Listen: "127.0.0.1:0", ClusterListen: addr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := tt.opt
			opt.Name, opt.StoreDir, opt.ReadyTimeout = "busy", t.TempDir(), 30*time.Second
			began := time.Now()
			e, err := StartEmbedded(opt)
			if err == nil {
				e.Shutdown()
				t.Fatal("started on a taken address")
			}
			if took := time.Since(began); took > 2*time.Second {
				t.Errorf("failed after %s, want at once", took.Round(time.Millisecond))
			}
			if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "address already in use") {
				t.Errorf("err = %v, want ErrStart naming %s in use", err, addr)
			}
		})
	}
}

// A fatal error the server reports ends the start's wait with it.
func TestStartWaitEndsOnFatal(t *testing.T) {
	fatal := make(chan string, 1)
	l := &slogLogger{l: slog.New(slog.DiscardHandler), repeat: newRepeatLimiter(-1, time.Now), fatal: fatal}
	e := &Embedded{opts: &server.Options{ServerName: "f"}}
	started := make(chan struct{})
	close(started)
	go l.Fatalf("Error listening on port: %s, %q", "127.0.0.1:4222", "bind: address already in use")
	err := e.wait(context.Background(), started, fatal, time.Minute, func() bool { return false }, func() error { return ErrNotReady })
	if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("wait = %v, want the fatal error", err)
	}
}

// The ready timeout counts from the return of the server's Start, which
// may itself take longer (it recovers a large JetStream store): a server
// ready once Start returns is ready, one that is not times out after it.
func TestStartWaitCountsFromStart(t *testing.T) {
	e := &Embedded{opts: &server.Options{ServerName: "slow"}}
	for _, tc := range []struct {
		name  string
		ready bool
		want  error
	}{
		{"ready when Start returns", true, nil},
		{"never ready", false, ErrNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})
			time.AfterFunc(300*time.Millisecond, func() { close(started) }) // Start outlasts the timeout
			err := e.wait(context.Background(), started, make(chan string), 100*time.Millisecond,
				func() bool { return tc.ready }, func() error { return ErrNotReady })
			if !errors.Is(err, tc.want) {
				t.Fatalf("wait = %v, want %v", err, tc.want)
			}
		})
	}
}

// A start waiting for its peers ends as soon as its context is cancelled
// (serve's SIGTERM), not at its ready timeout.
func TestStartEmbeddedCancelled(t *testing.T) {
	dead := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	began := time.Now()
	e, err := StartEmbeddedContext(ctx, EmbedOptions{
		Name: "alone", StoreDir: t.TempDir(), Listen: "127.0.0.1:0", ClusterListen: "127.0.0.1:0",
		Routes: []string{dead}, ReadyTimeout: time.Minute,
	})
	if err == nil {
		e.Shutdown()
		t.Fatal("ready without its peers")
	}
	if took := time.Since(began); took > 5*time.Second || !errors.Is(err, context.Canceled) {
		t.Fatalf("after %s: %v, want context.Canceled soon after the cancel", took.Round(time.Millisecond), err)
	}
}

func TestServerOptionsRoutePings(t *testing.T) {
	opt := EmbedOptions{Name: "n1", StoreDir: "/data", Listen: "127.0.0.1:0", ClusterListen: "127.0.0.1:6222"}
	so, err := serverOptions(opt)
	if err != nil {
		t.Fatal(err)
	}
	if so.Cluster.PingInterval != DefaultRoutePingInterval || so.Cluster.MaxPingsOut != DefaultRouteMaxPingsOut {
		t.Errorf("route pings every %v, %d out; want every %v, %d out", so.Cluster.PingInterval, so.Cluster.MaxPingsOut, DefaultRoutePingInterval, DefaultRouteMaxPingsOut)
	}
	// A hung peer's route is closed before a lease (9 s) runs out.
	if d := so.Cluster.PingInterval * time.Duration(so.Cluster.MaxPingsOut+1); d > 8*time.Second {
		t.Errorf("a hung peer's route is closed up to %v after it hangs", d)
	}
	opt.RoutePingInterval, opt.RouteMaxPingsOut = 500*time.Millisecond, 5
	if so, err = serverOptions(opt); err != nil {
		t.Fatal(err)
	}
	if so.Cluster.PingInterval != 500*time.Millisecond || so.Cluster.MaxPingsOut != 5 {
		t.Errorf("route pings every %v, %d out; want the options' 500ms, 5", so.Cluster.PingInterval, so.Cluster.MaxPingsOut)
	}
}

// freezeProxy forwards TCP connections to an address until frozen; then
// it keeps every connection open and passes nothing either way, and
// accepts new connections without answering them, as a stopped process
// whose sockets stay open does.
type freezeProxy struct {
	ln     net.Listener
	to     string
	frozen atomic.Bool
	stop   chan struct{}
}

func newFreezeProxy(t *testing.T, to string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln, to: to, stop: make(chan struct{})}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
			if p.frozen.Load() {
				continue
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			conns = append(conns, up)
			go p.pipe(c, up)
			go p.pipe(up, c)
		}
	}()
	t.Cleanup(func() {
		close(p.stop)
		ln.Close()
		<-done
	})
	return p
}

func (p *freezeProxy) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if p.frozen.Load() {
			<-p.stop
			return
		}
		if n > 0 {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			to.Close()
			return
		}
	}
}

func (p *freezeProxy) addr() string { return p.ln.Addr().String() }

// TestHungPeerRouteClosed: a peer that stops answering with its
// connections open (a SIGSTOP, a paused VM) has its routes closed within
// (RouteMaxPingsOut+1) × RoutePingInterval, and not before
// RouteMaxPingsOut of them: its subscriptions (the replicas' direct-get
// queue groups) then stop drawing requests it will never answer.
func TestHungPeerRouteClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a route to go stale")
	}
	portA, portB := freePort(t), freePort(t)
	proxy := newFreezeProxy(t, fmt.Sprintf("127.0.0.1:%d", portB))
	// Only a dials, through the proxy; b lists only itself (a JetStream
	// cluster needs a route configured) and accepts.
	opts := []EmbedOptions{
		{Name: "a", ClusterListen: fmt.Sprintf("127.0.0.1:%d", portA), Routes: []string{"nats://" + proxy.addr()}},
		{Name: "b", ClusterListen: fmt.Sprintf("127.0.0.1:%d", portB), Routes: []string{fmt.Sprintf("nats://127.0.0.1:%d", portB)}},
	}
	servers := make([]*Embedded, len(opts))
	errs := make(chan error, len(opts))
	for i := range opts {
		go func() {
			o := opts[i]
			o.StoreDir, o.Listen, o.MaxMemory, o.MaxStore, o.ReadyTimeout = t.TempDir(), "127.0.0.1:0", 32<<20, 64<<20, 30*time.Second
			var err error
			servers[i], err = StartEmbedded(o)
			errs <- err
		}()
	}
	var err error
	for range opts {
		err = errors.Join(err, <-errs)
	}
	for _, e := range servers {
		if e != nil {
			defer e.Shutdown()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	a := servers[0].srv
	if a.NumRoutes() == 0 {
		t.Fatal("a has no route to b")
	}
	frozen := time.Now()
	proxy.frozen.Store(true)
	limit := DefaultRoutePingInterval*time.Duration(DefaultRouteMaxPingsOut+1) + time.Second
	for a.NumRoutes() > 0 {
		if time.Since(frozen) > limit {
			t.Fatalf("a still has %d routes to its hung peer %v after it hung", a.NumRoutes(), limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(frozen)
	if took < DefaultRoutePingInterval*time.Duration(DefaultRouteMaxPingsOut-1) {
		t.Errorf("routes closed %v after the peer hung: before %d pings went unanswered", took, DefaultRouteMaxPingsOut)
	}
	t.Logf("the hung peer's routes closed %v after it hung", took.Round(10*time.Millisecond))
}
