package jetstream_test

import (
	"errors"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// A batch with a record larger than one NATS message holds (within the
// bbolt store's limit) is refused whole, before any of it is written.
func TestPluginApplyRefusesRecordsOverAMessage(t *testing.T) {
	st, _ := openStore(t, jstest.NewServer(t))
	b := sjs.NewBackend(st, 0)
	t.Cleanup(func() { b.Close() })
	if err := b.PluginPut("webhook", "kept", []byte("k")); err != nil {
		t.Fatal(err)
	}
	err := b.PluginApply("webhook", []storage.PluginOp{
		{Key: "first", Value: []byte("1")},
		{Key: "kept", Delete: true},
		{Key: "big", Value: make([]byte, 2<<20)},
	})
	if !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("PluginApply: %v, want ErrInvalid", err)
	}
	if _, err := b.PluginGet("webhook", "first"); !errors.Is(err, storage.ErrPluginKeyNotFound) {
		t.Errorf("the refused batch's first put was made: %v", err)
	}
	if v, err := b.PluginGet("webhook", "kept"); err != nil || string(v) != "k" {
		t.Errorf("the refused batch's delete was made: %q, %v", v, err)
	}
}
