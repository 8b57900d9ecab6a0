package jetstream_test

import (
	"testing"

	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
	"github.com/slogfeed/slogfeed/storage/storagetest"
)

// TestContracts runs the storage contract suite against the JetStream
// backend, each case on its own embedded JetStream server. Cases needing
// methods the backend lacks are skipped, naming them.
func TestContracts(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) any {
		st, _ := openStore(t, jstest.NewServer(t))
		b := sjs.NewBackend(st, 0)
		t.Cleanup(func() { b.Close() })
		return b
	})
}

// TestContractsOnCluster runs the suite on a 3-server JetStream cluster
// (R3 assets), one cluster for every case: each case's assets are deleted
// after it.
func TestContractsOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("3-server cluster")
	}
	c := jstest.NewCluster(t, 3)
	storagetest.Run(t, func(t *testing.T) any {
		st, js := openStore(t, c)
		b := sjs.NewBackend(st, 0)
		t.Cleanup(func() {
			b.Close()
			ctx := testCtx(t)
			for _, name := range []string{sjs.ItemsStream, sjs.ObsStream} {
				if err := js.DeleteStream(ctx, name); err != nil {
					t.Errorf("delete stream %s: %v", name, err)
				}
			}
			for _, name := range []string{sjs.DefsBucket, sjs.IndexBucket, sjs.PluginsBucket} {
				if err := js.DeleteKeyValue(ctx, name); err != nil {
					t.Errorf("delete bucket %s: %v", name, err)
				}
			}
		})
		return b
	})
}
