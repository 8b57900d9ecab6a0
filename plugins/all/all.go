// Package all registers every plugin that ships with slogfeed: import it
// for its side effects.
//
//	import _ "github.com/slogfeed/slogfeed/plugins/all"
package all

import (
	_ "github.com/slogfeed/slogfeed/plugins/csvsource"  // source "csv"
	_ "github.com/slogfeed/slogfeed/plugins/jsonsource" // source "json"
	_ "github.com/slogfeed/slogfeed/plugins/ulb"        // source "ulb": trace replay
	_ "github.com/slogfeed/slogfeed/plugins/wasm"       // operator "wasm" and service "wasm": WebAssembly operators and their store
	_ "github.com/slogfeed/slogfeed/plugins/webhook"    // service "webhook": POSTs new items to subscribed URLs
	_ "github.com/slogfeed/slogfeed/plugins/websub"     // service "websub": hub and subscriber
)
