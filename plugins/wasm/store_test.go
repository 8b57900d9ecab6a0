package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/web"
)

// storeEnv is a module store behind slogfeed's HTTP handler.
type storeEnv struct {
	st  *storage.Store
	mod *Store
	srv *httptest.Server
}

func newStoreEnv(t *testing.T, st *storage.Store) *storeEnv {
	t.Helper()
	if st == nil {
		var err error
		st, err = storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
	}
	mod, err := NewStore(plugins.Env{Store: st, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.New(web.Options{Store: st, Routes: mod.Routes(), Token: "tok"}))
	t.Cleanup(srv.Close)
	return &storeEnv{st: st, mod: mod, srv: srv}
}

// do sends a request with the token and returns the status and body.
func (e *storeEnv) do(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestStoreAPI(t *testing.T) {
	e := newStoreEnv(t, nil)
	despike := wat(t, "examples/despike.wat")
	c2f := wat(t, "examples/c_to_f.wat")

	tests := []struct {
		name, method, path string
		body               []byte
		status             int
		says               string
	}{
		{"upload", "PUT", "/api/v1/wasm/despike", despike, http.StatusCreated, `"name": "despike"`},
		{"replace", "PUT", "/api/v1/wasm/despike", despike, http.StatusOK, `"sha256"`},
		{"upload another", "PUT", "/api/v1/wasm/c-to-f", c2f, http.StatusCreated, `"memory_mib": 1`},
		{"not WebAssembly", "PUT", "/api/v1/wasm/junk", []byte("(module)"), http.StatusBadRequest, "not a WebAssembly binary"},
		{"not the ABI", "PUT", "/api/v1/wasm/old", wat(t, "testdata/abi2.wat"), http.StatusBadRequest, "ABI version 1"},
		{"bad name", "PUT", "/api/v1/wasm/Bad%20Name", despike, http.StatusBadRequest, "not a module name"},
		{"too large", "PUT", "/api/v1/wasm/big", make([]byte, MaxModuleBytes+1), http.StatusRequestEntityTooLarge, "too large"},
		{"list", "GET", "/api/v1/wasm", nil, http.StatusOK, `"c-to-f"`},
		{"info", "GET", "/api/v1/wasm/despike", nil, http.StatusOK, `"stateful": true`},
		{"bad format", "GET", "/api/v1/wasm/despike?format=zip", nil, http.StatusBadRequest, "want json or wasm"},
		{"missing", "GET", "/api/v1/wasm/nothing", nil, http.StatusNotFound, "no module"},
		{"delete", "DELETE", "/api/v1/wasm/c-to-f", nil, http.StatusNoContent, ""},
		{"delete again", "DELETE", "/api/v1/wasm/c-to-f", nil, http.StatusNotFound, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := e.do(t, tt.method, tt.path, tt.body)
			if status != tt.status || !strings.Contains(string(body), tt.says) {
				t.Fatalf("%d %s, want %d saying %q", status, body, tt.status, tt.says)
			}
		})
	}
	// The binary comes back as it was uploaded.
	if status, body := e.do(t, "GET", "/api/v1/wasm/despike?format=wasm", nil); status != 200 || !bytes.Equal(body, despike) {
		t.Errorf("download: %d, %d bytes", status, len(body))
	}
	// Changes need the token like the rest of the API.
	req, _ := http.NewRequest("PUT", e.srv.URL+"/api/v1/wasm/x", bytes.NewReader(despike))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("PUT without the token: %v %v", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	var list struct{ Modules []ModuleInfo }
	_, body := e.do(t, "GET", "/api/v1/wasm", nil)
	if err := json.Unmarshal(body, &list); err != nil || len(list.Modules) != 1 || list.Modules[0].Name != "despike" || !list.Modules[0].Created.Equal(t0) {
		t.Errorf("list after the delete: %s", body)
	}
}

// The store is the library of named modules; it keeps them across a
// restart; it refuses to delete a module a pipe uses.
func TestStoreLibrary(t *testing.T) {
	e := newStoreEnv(t, nil)
	useLibrary(t, e.mod)
	if _, _, err := e.mod.Put(context.Background(), "despike", wat(t, "examples/despike.wat")); err != nil {
		t.Fatal(err)
	}
	op := build(t, json.RawMessage(`{"module":"despike","params":[1]}`))
	out, err := op.Apply(ctx(), [][]transform.Item{readings(10, 30, 10.5)})
	if err != nil || !slices.Equal(values(out), []float64{10, 10.5}) {
		t.Fatalf("run: %v %v", values(out), err)
	}

	// A new store over the same data finds the module.
	again := newStoreEnv(t, e.st)
	if s1, err := e.mod.Sum("despike"); err != nil {
		t.Fatal(err)
	} else if s2, err := again.mod.Sum("despike"); err != nil || s1 != s2 {
		t.Fatalf("after a restart: %x %v", s2, err)
	}
	if _, err := again.mod.Sum("nothing"); !errors.Is(err, ErrModuleNotFound) {
		t.Errorf("missing module: %v", err)
	}

	// A pipe that uses it (inside a loop, even) keeps it from deletion.
	def := `{"nodes":[{"id":"l","op":"loop","config":{"nodes":[{"id":"w","op":"wasm","config":{"module":"despike"}}]}}]}`
	if err := e.st.CreatePipe(&storage.Pipe{Slug: "uses", Def: json.RawMessage(def)}, &storage.Feed{Kind: storage.KindPipe, Slug: "uses", Policy: "auto"}); err != nil {
		t.Fatal(err)
	}
	if status, body := e.do(t, "DELETE", "/api/v1/wasm/despike", nil); status != http.StatusConflict || !strings.Contains(string(body), `pipe \"uses\"`) {
		t.Errorf("delete of a module in use: %d %s", status, body)
	}
}

// The registered service builds the store and installs it as the library.
func TestServiceRegistered(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Cleanup(SetLibrary(nil))
	svcs, err := plugins.NewServices(plugins.Env{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(svcs.Names(), "wasm") {
		t.Fatalf("services %v", svcs.Names())
	}
	if _, ok := currentLibrary().(*Store); !ok {
		t.Errorf("library %T, want the module store", currentLibrary())
	}
}
