package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// compiled holds the binaries wat2wasm made, by source path.
var compiled sync.Map

// wat compiles the WebAssembly text file path (relative to the package)
// with wat2wasm. Without wat2wasm the test is skipped, unless
// SLOGFEED_REQUIRE_WABT=1 asks for a failure instead.
func wat(t testing.TB, path string) []byte {
	t.Helper()
	tool, err := exec.LookPath("wat2wasm")
	if err != nil {
		if os.Getenv("SLOGFEED_REQUIRE_WABT") == "1" {
			t.Fatalf("wat2wasm (Debian package wabt) is required: %v", err)
		}
		t.Skip("wat2wasm (Debian package wabt) is not installed; SLOGFEED_REQUIRE_WABT=1 makes this a failure")
	}
	if b, ok := compiled.Load(path); ok {
		return b.([]byte)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path)+".wasm")
	if msg, err := exec.Command(tool, path, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", path, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	compiled.Store(path, b)
	return b
}

// inline returns a node configuration with bin given inline and the
// other fields of extra (a JSON object's members, without braces).
func inline(bin []byte, extra string) json.RawMessage {
	s := fmt.Sprintf(`{"module_base64":%q`, base64.StdEncoding.EncodeToString(bin))
	if extra != "" {
		s += "," + extra
	}
	return json.RawMessage(s + "}")
}

// build makes a "wasm" operator from cfg, failing the test on an error.
func build(t testing.TB, cfg json.RawMessage) transform.Operator {
	t.Helper()
	op, err := newOperator(cfg)
	if err != nil {
		t.Fatalf("building %.200s: %v", cfg, err)
	}
	return op
}

// reading returns an item of sensor lab-1 with value v observed at at.
func reading(id string, v float64, at time.Time) transform.Item {
	return transform.Item{FeedID: 1, ID: id, Title: fmt.Sprint(v), Published: at, Fetched: at,
		Reading: &storage.Reading{Value: v, Unit: "C", Sensor: "lab-1", Time: at}}
}

// readings returns items r0, r1, … with the values vs, a minute apart.
func readings(vs ...float64) []transform.Item {
	out := make([]transform.Item, len(vs))
	for i, v := range vs {
		out[i] = reading(fmt.Sprint("r", i), v, t0.Add(time.Duration(i)*time.Minute))
	}
	return out
}

// ctx returns the context of a test run at t0.
func ctx() *transform.Context {
	return transform.NewContext(context.Background(), t0, "test-pipe", "w", transform.Limits{})
}

// values returns the reading values of items (NaN-free: -1 for none).
func values(items []transform.Item) []float64 {
	out := make([]float64, len(items))
	for i, it := range items {
		out[i] = -1
		if it.Reading != nil {
			out[i] = it.Reading.Value
		}
	}
	return out
}

// memLibrary is a Library over a map, for tests.
type memLibrary struct {
	mu   sync.Mutex
	mods map[string][]byte
}

func (l *memLibrary) put(name string, bin []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mods == nil {
		l.mods = map[string][]byte{}
	}
	l.mods[name] = bin
}

func (l *memLibrary) Sum(name string) ([32]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.mods[name]
	if !ok {
		return [32]byte{}, fmt.Errorf("%w: %q", ErrModuleNotFound, name)
	}
	return sha256.Sum256(b), nil
}

func (l *memLibrary) Wasm(name string) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.mods[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrModuleNotFound, name)
	}
	return b, nil
}

// useLibrary installs l for the test.
func useLibrary(t testing.TB, l Library) {
	t.Helper()
	t.Cleanup(SetLibrary(l))
}
