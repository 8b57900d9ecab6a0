package jstest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
)

// TestClusterSurvivesLeaderStop starts 3 servers, writes to an R3 KV
// bucket, stops the server leading that bucket, writes again through the
// same client (after JetStream's re-election), restarts the server and
// checks it rejoins with its data.
func TestClusterSurvivesLeaderStop(t *testing.T) {
	start := time.Now()
	c := NewCluster(t, 3)
	t.Logf("3-server cluster ready in %s", time.Since(start).Round(time.Millisecond))
	c.WaitReady()
	nc := c.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	// The meta group may still be settling its leader: a create it
	// leaves unanswered is sent again.
	kv, err := sjs.RetryUnanswered(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "jstest", Replicas: 3})
	})
	if err != nil {
		t.Fatal(err)
	}
	// A new R3 bucket's stream may still be electing its first leader:
	// the first write is answered once it has one.
	if err := putOnce(ctx, kv, "a", "1"); err != nil {
		t.Fatalf("no write accepted by the new bucket: %v", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("bucket cluster info = %+v, want a leader and 2 replicas", info.Cluster)
	}
	leader := -1
	for i := range c.Size() {
		if "s"+strconv.Itoa(i) == info.Cluster.Leader {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatalf("bucket leader %q is none of the servers", info.Cluster.Leader)
	}

	stopped := time.Now()
	c.Stop(leader)
	// Writes fail until the bucket has a new leader; retry within the
	// bounded context.
	if err := putOnce(ctx, kv, "b", "2"); err != nil {
		t.Fatalf("no write accepted after stopping the bucket leader: %v", err)
	}
	t.Logf("first write after stopping the leader accepted after %s", time.Since(stopped).Round(time.Millisecond))

	c.Restart(leader)
	c.WaitReady()
	if c.Server(leader) == nil {
		t.Fatal("restarted server missing")
	}
	for _, k := range []string{"a", "b"} {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("Get %s after restart: %v", k, err)
		}
		if len(e.Value()) != 1 {
			t.Fatalf("Get %s = %q", k, e.Value())
		}
	}
}

func TestSingleServer(t *testing.T) {
	c := NewServer(t)
	nc := c.Connect(t)
	if !nc.IsConnected() || c.Size() != 1 || len(c.URLs()) != 1 {
		t.Fatalf("connected %v, size %d, URLs %v", nc.IsConnected(), c.Size(), c.URLs())
	}
	c.Stop(0)
	c.Restart(0)
	c.WaitReady()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "solo"}); err != nil {
		t.Fatalf("KV after restart: %v", err)
	}
}

// putOnce writes key until a write is accepted, each try bounded to 2 s,
// or ctx ends (its last error).
func putOnce(ctx context.Context, kv jetstream.KeyValue, key, value string) error {
	for {
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := kv.Put(wctx, key, []byte(value))
		wcancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}
