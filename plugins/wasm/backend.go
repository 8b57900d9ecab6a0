package wasm

import "github.com/slogfeed/slogfeed/storage"

// store is what the module store needs of storage: its plugin records,
// and the pipes whose nodes name modules.
type store interface {
	storage.PluginStore
	storage.PipeReader
}
