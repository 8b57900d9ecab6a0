package storage_test

import (
	"path/filepath"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/storagetest"
)

// TestContracts runs the storage contract suite against the bbolt Store;
// a restart closes the file and opens it again.
func TestContracts(t *testing.T) {
	closed := map[*storage.Store]bool{} // by a restart
	open := func(t *testing.T, path string) *storage.Store {
		st, err := storage.Open(path, storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if closed[st] {
				return
			}
			if err := st.Check(); err != nil {
				t.Error(err)
			}
			st.Close()
		})
		return st
	}
	storagetest.Run(t, func(t *testing.T) any {
		return storage.Backend(open(t, filepath.Join(t.TempDir(), "contracts.db")))
	}, storagetest.WithReopen(func(t *testing.T, b any) any {
		st := b.(*storage.Store)
		path := st.Path()
		if err := st.Check(); err != nil {
			t.Error(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		closed[st] = true
		return storage.Backend(open(t, path))
	}))
}
