package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
)

// binaries lists the keys of the module binaries the store holds.
func binaries(t *testing.T, st *storage.Store) []string {
	t.Helper()
	var keys []string
	if err := st.PluginList(pluginName, func(key string, _ []byte) error {
		if !strings.HasPrefix(key, "meta/") {
			keys = append(keys, key)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// Binaries are kept by content: two modules with one binary share it, a
// binary goes with the last module that names it, one a put or a delete
// left behind is removed at the next start, and a module stored under
// its name (the layout before) is still read and moves on its next put.
func TestStoreKeepsBinariesByContent(t *testing.T) {
	ctx := context.Background()
	e := newStoreEnv(t, nil)
	despike, echo := wat(t, "examples/despike.wat"), wat(t, "testdata/echo.wat")
	put := func(name string, bin []byte) ModuleInfo {
		t.Helper()
		mi, _, err := e.mod.Put(ctx, name, bin)
		if err != nil {
			t.Fatal(err)
		}
		return mi
	}
	a := put("a", despike)
	put("b", despike)
	if got := binaries(t, e.st); !slices.Equal(got, []string{binKey(a.SHA256)}) {
		t.Errorf("two modules of one binary: %v", got)
	}
	c := put("a", echo) // b still has the first binary
	if got := binaries(t, e.st); len(got) != 2 {
		t.Errorf("after a's replacement: %v", got)
	}
	if err := e.mod.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if got := binaries(t, e.st); !slices.Equal(got, []string{binKey(c.SHA256)}) {
		t.Errorf("after b's deletion: %v, want only a's", got)
	}
	if bin, err := e.mod.Wasm("a"); err != nil || !bytes.Equal(bin, echo) {
		t.Errorf("a's binary: %d bytes, %v", len(bin), err)
	}

	// A binary no record names (a put cut short after its binary), and a
	// module stored under its name.
	if err := e.st.PluginPut(pluginName, binKey(strings.Repeat("0", 64)), []byte("orphan")); err != nil {
		t.Fatal(err)
	}
	if err := e.st.PluginPut(pluginName, "wasm/old", despike); err != nil {
		t.Fatal(err)
	}
	old := a
	old.Name = "old"
	if err := e.st.PluginPut(pluginName, "meta/old", mustJSON(t, old)); err != nil {
		t.Fatal(err)
	}
	again := newStoreEnv(t, e.st)
	if got := binaries(t, e.st); !slices.Equal(got, []string{binKey(c.SHA256), "wasm/old"}) {
		t.Errorf("after a start: %v, want the orphan gone", got)
	}
	if bin, err := again.mod.Wasm("old"); err != nil || !bytes.Equal(bin, despike) {
		t.Errorf("a module stored under its name: %d bytes, %v", len(bin), err)
	}
	if _, _, err := again.mod.Put(ctx, "old", despike); err != nil {
		t.Fatal(err)
	}
	if got := binaries(t, e.st); !slices.Equal(got, []string{binKey(a.SHA256), binKey(c.SHA256)}) {
		t.Errorf("after the old module's put: %v", got)
	}
	if _, err := again.mod.Wasm("gone"); !errors.Is(err, ErrModuleNotFound) {
		t.Errorf("missing module: %v", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
