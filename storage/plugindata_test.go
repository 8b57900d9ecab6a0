package storage

import (
	"errors"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func TestPluginData(t *testing.T) {
	s := openTest(t)
	tests := []struct {
		name           string
		plugin, key    string
		value          string
		wantErr        error
		wantGet        string
		wantGetMissing bool
	}{
		{name: "put and get", plugin: "websub", key: "sub/1", value: "a", wantGet: "a"},
		{name: "replace", plugin: "websub", key: "sub/1", value: "b", wantGet: "b"},
		{name: "namespaces are apart", plugin: "webhook", key: "sub/1", value: "c", wantGet: "c"},
		{name: "empty plugin", plugin: "", key: "k", value: "x", wantErr: ErrInvalid},
		{name: "long plugin", plugin: strings.Repeat("p", MaxPluginName+1), key: "k", value: "x", wantErr: ErrInvalid},
		{name: "empty key", plugin: "websub", key: "", value: "x", wantErr: ErrInvalid},
		{name: "long key", plugin: "websub", key: strings.Repeat("k", MaxPluginKey+1), value: "x", wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.PluginPut(tt.plugin, tt.key, []byte(tt.value))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("PluginPut: %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			got, err := s.PluginGet(tt.plugin, tt.key)
			if err != nil || string(got) != tt.wantGet {
				t.Fatalf("PluginGet = %q, %v; want %q", got, err, tt.wantGet)
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		err := s.PluginPut("wasm", "big", make([]byte, MaxPluginValue+1))
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("PluginPut of %d bytes: %v", MaxPluginValue+1, err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		for _, p := range []string{"websub", "never-used"} {
			if _, err := s.PluginGet(p, "nope"); !errors.Is(err, ErrPluginKeyNotFound) {
				t.Errorf("PluginGet(%s, nope): %v", p, err)
			}
		}
	})
	t.Run("list and delete", func(t *testing.T) {
		for _, k := range []string{"sub/3", "sub/2"} {
			if err := s.PluginPut("websub", k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PluginDelete("websub", "sub/2"); err != nil {
			t.Fatal(err)
		}
		if err := s.PluginDelete("never-used", "x"); err != nil {
			t.Fatal(err)
		}
		var keys []string
		if err := s.PluginList("websub", func(k string, v []byte) error { keys = append(keys, k+"="+string(v)); return nil }); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(keys, ","); got != "sub/1=b,sub/3=sub/3" {
			t.Errorf("PluginList = %s", got)
		}
		stop := errors.New("stop")
		n := 0
		err := s.PluginList("websub", func(string, []byte) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Errorf("PluginList stopping: %v after %d", err, n)
		}
	})
}

// A data file of schema 2 gains the plugin bucket on Open.
func TestPluginDataAfterMigrationFromSchema2(t *testing.T) {
	path := copyFixture(t, "schema2.db")
	if v := storedSchema(t, path); v != 2 {
		t.Fatalf("fixture has schema %d", v)
	}
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PluginPut("websub", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	closeAndCheck(t, s)
	if v := storedSchema(t, path); v != SchemaVersion {
		t.Errorf("schema after Open: %d, want %d", v, SchemaVersion)
	}
}

// PluginApply makes its writes in one transaction, however many they
// are; a refused batch makes none.
func TestPluginApplyOneTransaction(t *testing.T) {
	s := openTest(t)
	txid := func() int {
		t.Helper()
		var id int
		if err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	if err := s.PluginPut("webhook", "delivery/old", []byte("o")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		ops     []PluginOp
		wantErr error
		wantTx  int
	}{
		{"puts and a delete", []PluginOp{
			{Key: "delivery/h1/1", Value: []byte("1")},
			{Key: "delivery/h2/1", Value: []byte("2")},
			{Key: "delivery/h3/1", Value: []byte("3")},
			{Key: "delivery/old", Delete: true},
		}, nil, 1},
		{"empty", nil, nil, 0},
		{"refused", []PluginOp{{Key: "delivery/h4/1", Value: []byte("4")}, {Key: ""}}, ErrInvalid, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := txid()
			if err := s.PluginApply("webhook", tt.ops); !errors.Is(err, tt.wantErr) {
				t.Fatalf("PluginApply: %v, want %v", err, tt.wantErr)
			}
			if got := txid() - before; got != tt.wantTx {
				t.Errorf("%d write transactions, want %d", got, tt.wantTx)
			}
		})
	}
	var keys []string
	if err := s.PluginList("webhook", func(k string, _ []byte) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, ","); got != "delivery/h1/1,delivery/h2/1,delivery/h3/1" {
		t.Errorf("records %s", got)
	}
}
