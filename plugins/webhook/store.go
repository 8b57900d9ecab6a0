package webhook

import "github.com/slogfeed/slogfeed/storage"

// Store keeps the hooks and pending deliveries (plugin records "webhook").
type Store = storage.PluginStore
