package wasm

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// pluginName is the service's name and its namespace in the store's
// plugin data: "meta/NAME" holds a module's ModuleInfo as JSON, and
// "bin/NAME/SHA256" its binary, by name and content. A put writes the
// binary, then the record that names it; a delete removes the record,
// then the binary: a crash between the two leaves at most a binary of
// the name that no record names, removed at the name's next put or
// delete. ("wasm/NAME", the layout before, is still read.)
const pluginName = "wasm"

// binKey is the key of module name's binary whose SHA-256 is sum (hex).
func binKey(name, sum string) string { return "bin/" + name + "/" + sum }

// ModuleInfo is a stored module as the API shows it.
type ModuleInfo struct {
	Name string `json:"name"`
	Info
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Store is the module store: a plugins.Service that keeps modules in the
// store's plugin data and serves
//
//	GET    /api/v1/wasm          {"modules": [...]}: every module's ModuleInfo
//	PUT    /api/v1/wasm/{name}   upload a module (the body: its binary, at most MaxModuleBytes) → 201 (200 when replaced)
//	GET    /api/v1/wasm/{name}   its ModuleInfo (?format=wasm: the binary)
//	DELETE /api/v1/wasm/{name}   delete it → 204 (409 while a pipe uses it)
//
// A module is compiled and checked against the ABI before it is stored.
// Store is also a Library: the registered service installs itself with
// SetLibrary when it is built, so nodes find modules by name.
type Store struct {
	st  store
	log *slog.Logger
	now func() time.Time

	wmu   sync.Mutex   // serialises puts and deletes, held across their writes
	mu    sync.RWMutex // guards index and sums, never held across a write
	index map[string]ModuleInfo
	sums  map[string][32]byte
}

// NewStore returns the module store of env.Store, reading the index of
// the modules it holds. It does not install itself as the library.
func NewStore(env plugins.Env) (*Store, error) {
	if env.Store == nil {
		return nil, errors.New("wasm: no store")
	}
	s := &Store{st: env.Store, log: env.Logger, now: env.Now, index: map[string]ModuleInfo{}, sums: map[string][32]byte{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	err := s.st.PluginList(pluginName, func(key string, value []byte) error {
		name, ok := strings.CutPrefix(key, "meta/")
		if !ok {
			return nil
		}
		var mi ModuleInfo
		var sum []byte
		err := json.Unmarshal(value, &mi)
		if err == nil {
			sum, err = hex.DecodeString(mi.SHA256)
		}
		if err != nil || len(sum) != 32 || mi.Name != name {
			s.log.Warn("wasm: unreadable module record, skipped", "module", name, "err", err)
			return nil
		}
		s.index[name] = mi
		s.sums[name] = [32]byte(sum)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("wasm: reading the module index: %w", err)
	}
	return s, nil
}

func init() {
	plugins.RegisterService(pluginName, func(env plugins.Env) (plugins.Service, error) {
		s, err := NewStore(env)
		if err != nil {
			return nil, err
		}
		SetLibrary(s)
		return s, nil
	})
}

// Sum implements Library.
func (s *Store) Sum(name string) ([32]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sum, ok := s.sums[name]
	if !ok {
		return sum, fmt.Errorf("%w: %q (upload it with PUT /api/v1/wasm/%s)", ErrModuleNotFound, name, name)
	}
	return sum, nil
}

// Wasm implements Library.
func (s *Store) Wasm(name string) ([]byte, error) {
	// Twice: a put of the name may replace the binary between reading
	// the index and reading the binary.
	for range 2 {
		s.mu.RLock()
		mi, ok := s.index[name]
		s.mu.RUnlock()
		if !ok {
			break
		}
		bin, err := s.st.PluginGet(pluginName, binKey(name, mi.SHA256))
		if errors.Is(err, storage.ErrPluginKeyNotFound) {
			bin, err = s.st.PluginGet(pluginName, "wasm/"+name) // stored before binaries were kept by content
		}
		if !errors.Is(err, storage.ErrPluginKeyNotFound) {
			return bin, err
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrModuleNotFound, name)
}

// Modules lists the stored modules by name.
func (s *Store) Modules() []ModuleInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ModuleInfo, 0, len(s.index))
	for _, mi := range s.index {
		out = append(out, mi)
	}
	slices.SortFunc(out, func(a, b ModuleInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Put checks bin and stores it under name; created reports a new name.
func (s *Store) Put(ctx context.Context, name string, bin []byte) (mi ModuleInfo, created bool, err error) {
	if !NamePattern.MatchString(name) {
		return mi, false, fmt.Errorf("%w: %q is not a module name (lower-case letters, digits, '.', '_' and '-', at most 64)", errBadName, sanitize.Clip(name, 70))
	}
	if len(bin) > MaxModuleBytes {
		return mi, false, fmt.Errorf("%w: %d bytes, at most %d", errTooLarge, len(bin), MaxModuleBytes)
	}
	info, err := Validate(ctx, bin)
	if err != nil {
		return mi, false, err
	}
	// Puts and deletes are serialised, so the index matches the store.
	s.wmu.Lock()
	defer s.wmu.Unlock()
	now := s.now().UTC()
	s.mu.RLock()
	old, exists := s.index[name]
	s.mu.RUnlock()
	mi = ModuleInfo{Name: name, Info: info, Created: now, Updated: now}
	if exists {
		mi.Created = old.Created
	}
	meta, err := json.Marshal(mi)
	if err != nil {
		return mi, false, err
	}
	// The binary first: the record names it only once it is stored.
	if err := s.st.PluginPut(pluginName, binKey(name, info.SHA256), bin); err != nil {
		return mi, false, err
	}
	if err := s.st.PluginPut(pluginName, "meta/"+name, meta); err != nil {
		return mi, false, err // the binary is removed at the next start
	}
	sum, _ := hex.DecodeString(info.SHA256)
	s.mu.Lock()
	s.index[name] = mi
	s.sums[name] = [32]byte(sum)
	s.mu.Unlock()
	s.deleteBinaries(name, binKey(name, info.SHA256))
	return mi, !exists, nil
}

// deleteBinaries removes the binaries of module name but keep (its
// earlier ones, one a failed put left, one stored under its name alone);
// one a failure leaves is removed at the name's next put or delete.
func (s *Store) deleteBinaries(name, keep string) {
	keys := []string{"wasm/" + name}
	if err := s.st.PluginList(pluginName, func(key string, _ []byte) error {
		if strings.HasPrefix(key, "bin/"+name+"/") && key != keep {
			keys = append(keys, key)
		}
		return nil
	}); err != nil {
		s.log.Warn("wasm: cannot list a module's binaries", "module", name, "err", err)
		return
	}
	for _, key := range keys {
		if err := s.st.PluginDelete(pluginName, key); err != nil && !errors.Is(err, storage.ErrPluginKeyNotFound) {
			s.log.Warn("wasm: cannot remove a module binary no module names", "key", key, "err", err)
		}
	}
}

// Delete removes the module name; it refuses while a pipe uses it.
func (s *Store) Delete(name string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	_, ok := s.index[name]
	s.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrModuleNotFound, name)
	}
	if by, err := s.usedBy(name); err != nil {
		return err
	} else if by != "" {
		return fmt.Errorf("%w: pipe %q uses module %q; change the pipe first", errInUse, by, name)
	}
	// The record first: no module names a binary that is gone.
	if err := s.st.PluginDelete(pluginName, "meta/"+name); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.index, name)
	delete(s.sums, name)
	s.mu.Unlock()
	s.deleteBinaries(name, "")
	return nil
}

// usedBy returns the slug of a pipe with a "wasm" node naming module,
// inside loops too; "" when none does.
func (s *Store) usedBy(name string) (string, error) {
	pipes, err := s.st.Pipes()
	if err != nil {
		return "", err
	}
	for _, p := range pipes {
		var def any
		if json.Unmarshal(p.Def, &def) == nil && usesModule(def, name, 0) {
			return p.Slug, nil
		}
	}
	return "", nil
}

// usesModule reports whether the JSON value v holds a node {"op": "wasm",
// "config": {"module": name}} anywhere.
func usesModule(v any, name string, depth int) bool {
	if depth > 64 {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		if v["op"] == "wasm" {
			if cfg, ok := v["config"].(map[string]any); ok && cfg["module"] == name {
				return true
			}
		}
		for _, e := range v {
			if usesModule(e, name, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if usesModule(e, name, depth+1) {
				return true
			}
		}
	}
	return false
}

var (
	errBadName  = errors.New("bad module name")
	errTooLarge = errors.New("module too large")
	errInUse    = errors.New("module in use")
)

// Routes implements plugins.Service.
func (s *Store) Routes() []web.Route {
	return []web.Route{
		{Pattern: "GET /api/v1/wasm", Handler: http.HandlerFunc(s.handleList)},
		{Pattern: "PUT /api/v1/wasm/{name}", Handler: http.HandlerFunc(s.handlePut)},
		{Pattern: "GET /api/v1/wasm/{name}", Handler: http.HandlerFunc(s.handleGet)},
		{Pattern: "DELETE /api/v1/wasm/{name}", Handler: http.HandlerFunc(s.handleDelete)},
	}
}

// Notify implements plugins.Service: the module store has nothing to do
// with new items.
func (s *Store) Notify(storage.Feed, []storage.Item) {}

// Run implements plugins.Service: the store has no background work.
func (s *Store) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (s *Store) handleList(w http.ResponseWriter, r *http.Request) {
	web.RespondJSON(w, http.StatusOK, map[string]any{"modules": s.Modules()})
}

func (s *Store) handlePut(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	bin, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxModuleBytes+1))
	if err != nil {
		if _, ok := errorsAs[*http.MaxBytesError](err); ok {
			web.RespondError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("module too large: at most %d bytes", MaxModuleBytes))
			return
		}
		web.RespondError(w, http.StatusBadRequest, "reading the module: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ValidateTime)
	defer cancel()
	mi, created, err := s.Put(ctx, name, bin)
	switch {
	case errors.Is(err, errTooLarge):
		web.RespondError(w, http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, errBadName), errors.Is(err, ErrModule):
		web.RespondError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		s.log.Error("wasm: storing a module", "module", name, "err", err)
		web.RespondError(w, http.StatusInternalServerError, "storing the module failed")
	case created:
		web.RespondJSON(w, http.StatusCreated, mi)
	default:
		web.RespondJSON(w, http.StatusOK, mi)
	}
}

func (s *Store) handleGet(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.mu.RLock()
	mi, ok := s.index[name]
	s.mu.RUnlock()
	if !ok {
		web.RespondError(w, http.StatusNotFound, fmt.Sprintf("no module %q", sanitize.Clip(name, 70)))
		return
	}
	switch f := r.URL.Query().Get("format"); f {
	case "", "json":
		web.RespondJSON(w, http.StatusOK, mi)
	case "wasm":
		bin, err := s.Wasm(name)
		if err != nil {
			web.RespondError(w, http.StatusNotFound, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/wasm")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.wasm"`)
		_, _ = w.Write(bin)
	default:
		web.RespondError(w, http.StatusBadRequest, fmt.Sprintf("format %q: want json or wasm", sanitize.Clip(f, 20)))
	}
}

func (s *Store) handleDelete(w http.ResponseWriter, r *http.Request) {
	err := s.Delete(r.PathValue("name"))
	switch {
	case errors.Is(err, ErrModuleNotFound):
		web.RespondError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, errInUse):
		web.RespondError(w, http.StatusConflict, err.Error())
	case err != nil:
		s.log.Error("wasm: deleting a module", "err", err)
		web.RespondError(w, http.StatusInternalServerError, "deleting the module failed")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
