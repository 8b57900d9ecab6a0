package jetstream_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// TestOpenReturnsAnsweringAssets: on a cluster that has just started, the
// streams and buckets Open returns already answer a bare publish, a
// direct get and a KV get (no retry around them), so a node's first
// write cannot meet "no responders" while a new stream elects a leader.
func TestOpenReturnsAnsweringAssets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB) *jstest.Cluster
	}{
		{"single", jstest.NewServer},
		{"cluster", func(t testing.TB) *jstest.Cluster { return jstest.NewCluster(t, 3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, js := openStore(t, tc.start(t))
			ctx := testCtx(t)
			for _, name := range []string{sjs.ItemsStream, sjs.ObsStream} {
				s, err := js.Stream(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				info := s.CachedInfo()
				if info.Cluster != nil && info.Cluster.Leader == "" {
					t.Errorf("stream %s has no leader after Open", name)
				}
				subject := info.Config.Subjects[0][:len(info.Config.Subjects[0])-1] + "999999"
				if _, err := s.GetLastMsgForSubject(ctx, subject); !errors.Is(err, jetstream.ErrMsgNotFound) {
					t.Errorf("direct get on %s after Open: %v; want not found", name, err)
				}
				if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte("{}")}); err != nil {
					t.Errorf("publish to %s after Open: %v", name, err)
				}
			}
			for _, bucket := range []string{sjs.DefsBucket, sjs.IndexBucket, sjs.PluginsBucket} {
				kv, err := js.KeyValue(ctx, bucket)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := kv.Get(ctx, "probe"); !errors.Is(err, jetstream.ErrKeyNotFound) {
					t.Errorf("get from bucket %s after Open: %v; want not found", bucket, err)
				}
			}
		})
	}
}
