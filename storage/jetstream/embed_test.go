package jetstream

import (
	"context"
	"errors"
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
