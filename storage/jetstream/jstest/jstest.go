// Package jstest runs NATS JetStream servers in-process for tests: one
// server, or a cluster of several on loopback ports, each with its own
// temporary store directory. Servers can be stopped abruptly and
// restarted on the same ports with the same data, so tests can take one
// JetStream server down and bring it back.
//
// Everything is torn down by t.Cleanup. Server logs are discarded unless
// the environment variable SLOGFEED_JSTEST_LOG is set (then they go to
// standard error).
package jstest

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/slogfeed/slogfeed/storage/jetstream"
)

// ReadyTimeout bounds every wait for a server or the cluster to be ready.
const ReadyTimeout = 30 * time.Second

// Cluster is a set of in-process JetStream servers routed to each other.
type Cluster struct {
	t       testing.TB
	mu      sync.Mutex
	servers []*jetstream.Embedded // nil while stopped
	opts    []jetstream.EmbedOptions
	mods    []Option
	dir     string // the servers' store directories are made in it
}

// NewServer starts a single JetStream server without routes.
func NewServer(t testing.TB) *Cluster {
	t.Helper()
	// The directory is made before the shutdown is registered, so that
	// cleanups (last in, first out) stop the servers before they remove
	// the files the servers write.
	c := &Cluster{t: t, servers: make([]*jetstream.Embedded, 1), opts: make([]jetstream.EmbedOptions, 1), dir: t.TempDir()}
	c.opts[0] = c.baseOptions("s0")
	c.opts[0].Listen = "127.0.0.1:0"
	t.Cleanup(c.shutdownAll)
	c.start(0)
	c.pinClientPort(0)
	return c
}

// Option adjusts the servers of NewCluster.
type Option func(*jetstream.EmbedOptions)

// WithMaxStore sets each server's JetStream file-store limit (256 MiB
// by default); the scale benchmarks need more.
func WithMaxStore(bytes int64) Option {
	return func(o *jetstream.EmbedOptions) { o.MaxStore = bytes }
}

// NewCluster starts n JetStream servers (n ≥ 1) routed to each other on
// loopback ports and returns once every one follows a JetStream meta
// leader.
func NewCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("jstest: cluster of %d servers", n)
	}
	c := &Cluster{t: t, servers: make([]*jetstream.Embedded, n), opts: make([]jetstream.EmbedOptions, n), mods: opts, dir: t.TempDir()}
	t.Cleanup(c.shutdownAll) // after TempDir's cleanup: runs before it
	// The cluster ports are free when picked, but an outgoing connection
	// may take one before its server binds it: a start that fails is
	// tried again on other ports.
	var errs []error
	for try := 0; try < startTries; try++ {
		if errs = c.startOn(freePorts(t, n)); errs == nil {
			break
		}
		c.shutdownAll()
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("jstest: start server %d (after %d tries): %v", i, startTries, err)
		}
	}
	for i := range n {
		c.pinClientPort(i)
	}
	c.WaitReady()
	return c
}

// startTries is how many times NewCluster starts its servers, on fresh
// ports, before it fails the test.
const startTries = 3

// startOn starts c's servers together with cluster ports ports (a
// clustered server is ready only once a quorum is up); nil when every
// one started, else the error of each.
func (c *Cluster) startOn(ports []int) []error {
	n := len(ports)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(p)
	}
	for i := range n {
		o := c.baseOptions("s" + strconv.Itoa(i))
		o.Listen = "127.0.0.1:0"
		o.ClusterListen = "127.0.0.1:" + strconv.Itoa(ports[i])
		o.ClusterName = "jstest"
		o.Routes = routes
		for _, m := range c.mods {
			m(&o)
		}
		c.mu.Lock()
		c.opts[i] = o
		c.mu.Unlock()
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = c.startErr(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

// baseOptions are server name's options, with a store directory of its
// own under c.dir (a new one on each call: a start tried again begins
// empty).
func (c *Cluster) baseOptions(name string) jetstream.EmbedOptions {
	t := c.t
	dir, err := os.MkdirTemp(c.dir, name+"-")
	if err != nil {
		t.Fatalf("jstest: store directory: %v", err)
	}
	o := jetstream.EmbedOptions{
		Name:         name,
		StoreDir:     dir,
		MaxMemory:    64 << 20,
		MaxStore:     256 << 20,
		ReadyTimeout: ReadyTimeout,
	}
	if os.Getenv("SLOGFEED_JSTEST_LOG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("test", t.Name())
	}
	return o
}

// freePorts asks the kernel for n free loopback ports. They are free when
// returned; a server binds them moments later.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ls := make([]net.Listener, n)
	ports := make([]int, n)
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("jstest: reserve port: %v", err)
		}
		ls[i] = l
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	if err := c.startErr(i); err != nil {
		c.t.Fatalf("jstest: start server %d: %v", i, err)
	}
}

func (c *Cluster) startErr(i int) error {
	c.mu.Lock()
	o := c.opts[i]
	c.mu.Unlock()
	e, err := jetstream.StartEmbedded(o)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.servers[i] = e
	c.mu.Unlock()
	return nil
}

// pinClientPort makes a restart of server i listen on the client port it
// has now, so clients holding the cluster's URL list find it again.
func (c *Cluster) pinClientPort(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.servers[i].ClientURL()
	c.opts[i].Listen = strings.TrimPrefix(u, "nats://")
}

func (c *Cluster) shutdownAll() {
	var wg sync.WaitGroup
	c.mu.Lock()
	for i, s := range c.servers {
		if s != nil {
			wg.Go(s.Shutdown)
			c.servers[i] = nil
		}
	}
	c.mu.Unlock()
	wg.Wait()
}

// Size is the number of servers, running or stopped.
func (c *Cluster) Size() int { return len(c.opts) }

// Server returns server i, or nil while it is stopped.
func (c *Cluster) Server(i int) *jetstream.Embedded {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// URLs lists every server's client URL, running or not (a restarted
// server keeps its URL).
func (c *Cluster) URLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = "nats://" + o.Listen
	}
	return urls
}

// URL is URLs joined by commas, as nats.Connect takes them.
func (c *Cluster) URL() string { return strings.Join(c.URLs(), ",") }

// Connect opens a client connection to the cluster that reconnects
// quickly and forever (a test's server stops are short), closed by
// t.Cleanup.
func (c *Cluster) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	all := append([]nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond),
		nats.ReconnectJitter(50*time.Millisecond, 50*time.Millisecond),
		nats.Timeout(2 * time.Second),
	}, opts...)
	nc, err := nats.Connect(c.URL(), all...)
	if err != nil {
		t.Fatalf("jstest: connect %s: %v", c.URL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Stop shuts server i down at once (its clients are disconnected, its
// Raft groups lose a peer) and waits until it has stopped.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s == nil {
		c.t.Fatalf("jstest: server %d is not running", i)
	}
	s.Shutdown()
}

// Restart starts the stopped server i again, on its ports and with its
// data, and waits until it follows a meta leader.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Server(i) != nil {
		c.t.Fatalf("jstest: server %d is running", i)
	}
	c.start(i)
}

// WaitReady waits until every running server follows a JetStream meta
// leader, one of them is that leader, and the leader sees every running
// server online (so assets can be placed on all of them).
func (c *Cluster) WaitReady() {
	c.t.Helper()
	deadline := time.Now().Add(ReadyTimeout)
	for time.Now().Before(deadline) {
		if err := c.ready(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("jstest: cluster not ready after %s: %v", ReadyTimeout, c.ready())
}

func (c *Cluster) ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	leaders, running, online := 0, 0, 0
	for i, s := range c.servers {
		if s == nil {
			continue
		}
		running++
		if !s.JetStreamReady() {
			return fmt.Errorf("server %d not current", i)
		}
		if s.IsMetaLeader() {
			leaders++
			online = s.OnlinePeers()
		}
	}
	if leaders != 1 {
		return fmt.Errorf("%d meta leaders", leaders)
	}
	if len(c.servers) > 1 && online != running {
		return fmt.Errorf("meta leader sees %d of %d running servers online", online, running)
	}
	return nil
}
