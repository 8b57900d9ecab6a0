package storage_test

import (
	"path/filepath"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/storagetest"
)

// TestContracts runs the storage contract suite against the bbolt Store.
func TestContracts(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) any {
		st, err := storage.Open(filepath.Join(t.TempDir(), "contracts.db"), storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := st.Check(); err != nil {
				t.Error(err)
			}
			st.Close()
		})
		return storage.Backend(st)
	})
}
