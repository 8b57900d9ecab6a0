package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
