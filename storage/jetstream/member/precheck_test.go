package member_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
	"github.com/slogfeed/slogfeed/storage/jetstream/member"
)

// TestRefusedBeforeJoining: a node with --nats-embed that the running
// cluster refuses (another shard count, the name of a running server or
// of a live node) fails before its server joins: the JetStream meta
// group keeps its three peers (a fourth that never comes back would cost
// the cluster its quorum at the next server lost), and the refusal comes
// within a few renewals, not after a wait for the cluster.
func TestRefusedBeforeJoining(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-server cluster")
	}
	c := jstest.NewCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// A live node, n1, on the cluster: it writes the shard count (8) and
	// renews its member key.
	n1, err := member.Join(ctx, member.Options{Name: "n1", URLs: c.URLs(), Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n1.Close(context.Background()) })
	var routes []string
	for i := range c.Size() {
		routes = append(routes, c.Server(i).ClusterURL())
	}
	tests := []struct {
		name   string
		node   string
		shards int
		want   error
		within time.Duration
	}{
		{"another shard count", "n4", 16, cluster.ErrConfigMismatch, 5 * time.Second},
		{"a server's name", "s1", 8, cluster.ErrDuplicateNode, 5 * time.Second},
		{"a live node's name", "n1", 8, cluster.ErrDuplicateNode, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			began := time.Now()
			m, err := member.Join(ctx, member.Options{
				Name: tt.node, Shards: tt.shards, StartTimeout: 30 * time.Second,
				Embed: &sjs.EmbedOptions{
					Listen: "127.0.0.1:0", ClusterListen: "127.0.0.1:0", ClusterName: "jstest",
					Routes: routes, StoreDir: t.TempDir(), MaxMemory: 32 << 20, MaxStore: 64 << 20,
				},
			})
			if err == nil {
				m.Close(context.Background())
				t.Fatal("joined")
			}
			took := time.Since(began)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Join = %v, want %v", err, tt.want)
			}
			if took > tt.within {
				t.Errorf("refused after %s, want within %s", took.Round(time.Millisecond), tt.within)
			}
			for i := range c.Size() {
				if n := c.Server(i).MetaPeers(); n != 3 {
					t.Errorf("server s%d: the meta group has %d peers after the refusal, want 3", i, n)
				}
			}
			t.Logf("refused after %s: %v", took.Round(time.Millisecond), err)
		})
	}
}
