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

// A module's binary is kept under its name and content, written before
// the record that names it: a replacement removes the name's earlier
// binary, a delete the name's binaries, and neither touches another
// module's, even one with the same binary; a binary a failed put left
// goes at the name's next put; a module stored under its name alone (the
// layout before) is still read, and moves at its next put.
func TestStoreKeepsBinariesByNameAndContent(t *testing.T) {
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
	want := func(what string, keys ...string) {
		t.Helper()
		if got := binaries(t, e.st); !slices.Equal(got, keys) {
			t.Errorf("%s: binaries %v, want %v", what, got, keys)
		}
	}
	want("two modules of one binary", binKey("a", a.SHA256), binKey("b", a.SHA256))
	c := put("a", echo)
	want("a replaced", binKey("a", c.SHA256), binKey("b", a.SHA256))
	if err := e.mod.Delete("a"); err != nil {
		t.Fatal(err)
	}
	want("a deleted", binKey("b", a.SHA256))
	if bin, err := e.mod.Wasm("b"); err != nil || !bytes.Equal(bin, despike) {
		t.Errorf("b's binary: %d bytes, %v", len(bin), err)
	}

	// A binary a failed put of b left, and a module stored under its
	// name alone.
	if err := e.st.PluginPut(pluginName, binKey("b", strings.Repeat("0", 64)), []byte("left")); err != nil {
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
	if bin, err := again.mod.Wasm("old"); err != nil || !bytes.Equal(bin, despike) {
		t.Errorf("a module stored under its name: %d bytes, %v", len(bin), err)
	}
	if _, _, err := again.mod.Put(ctx, "old", despike); err != nil {
		t.Fatal(err)
	}
	if _, _, err := again.mod.Put(ctx, "b", despike); err != nil {
		t.Fatal(err)
	}
	want("after the next puts", binKey("b", a.SHA256), binKey("old", a.SHA256))
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
