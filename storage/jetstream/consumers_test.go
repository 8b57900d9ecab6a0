package jetstream_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// The items and observations streams state their own consumer limit, so
// the server's default (1,000 per stream on nats-server) does not cap the
// saved pipes, each of which keeps a durable consumer on the items stream.
func TestStreamsTakeMoreConsumersThanServerDefault(t *testing.T) {
	c := jstest.NewServer(t)
	_, js := openStore(t, c)
	ctx := testCtx(t)
	for _, name := range []string{sjs.ItemsStream, sjs.ObsStream} {
		t.Run(name, func(t *testing.T) {
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.CachedInfo().Config.MaxConsumers; got != sjs.MaxStreamConsumers {
				t.Fatalf("MaxConsumers %d, want %d", got, sjs.MaxStreamConsumers)
			}
		})
	}
	if testing.Short() {
		t.Skip("creating 1,001 consumers skipped in -short")
	}
	// One more durable consumer than the server's default allows.
	st, err := js.Stream(ctx, sjs.ItemsStream)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1001
	for i := range n {
		if _, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("pipe-test-%d", i), AckPolicy: jetstream.AckExplicitPolicy,
		}); err != nil {
			t.Fatalf("consumer %d of %d: %v", i+1, n, err)
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers < n {
		t.Fatalf("%d consumers on the items stream, want at least %d", info.State.Consumers, n)
	}
}
