package wasm

import (
	"regexp"
	"sync"
)

// A Library finds modules by name for the nodes that name one
// ("module": "despike"). The module store service (Store) is the
// library of a running slogfeed; tests install their own.
type Library interface {
	// Sum returns the SHA-256 of the module stored under name, or an
	// error wrapping ErrModuleNotFound. It is called before every run,
	// so it must be cheap: a node recompiles only when the sum changes.
	Sum(name string) ([32]byte, error)
	// Wasm returns the module's binary.
	Wasm(name string) ([]byte, error)
}

// The process's library. It is the one piece of process state of this
// package besides the compiled-module cache: nodes are built by
// transform.Compile, which knows nothing of services, while modules live
// in the store a service owns. The service installs itself when it is
// built (plugins.NewServices); nodes built before that (a pipe loaded at
// start) resolve their module at their first run.
var library struct {
	mu  sync.RWMutex
	lib Library
}

// SetLibrary makes l the library named modules are resolved with (nil:
// none) and returns a function that restores the previous one.
func SetLibrary(l Library) (restore func()) {
	library.mu.Lock()
	prev := library.lib
	library.lib = l
	library.mu.Unlock()
	return func() {
		library.mu.Lock()
		library.lib = prev
		library.mu.Unlock()
	}
}

func currentLibrary() Library {
	library.mu.RLock()
	defer library.mu.RUnlock()
	return library.lib
}

// NamePattern is what a module's name may look like.
var NamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
