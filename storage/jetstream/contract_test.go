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
