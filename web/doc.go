// Package web is slogfeed's HTTP face: the JSON API, the sensor store, the
// republished feeds, health and metrics.
//
// Routes:
//
//	POST   /api/v1/feeds                  subscribe {"url": ..., "policy": "auto", ...} → 201 with the feed
//	POST   /api/v1/feeds/bulk             subscribe up to 10,000 feeds {"feeds": [...]} → a result per feed;
//	                                      their first fetches paced (SubscribePaced)
//	GET    /api/v1/feeds                  a page of feeds with their status (?limit=&cursor=|before=&q=&kind=&status=&policy=)
//	                                      → {feeds, total, next_cursor, prev_cursor}
//	GET    /api/v1/feeds/{id}             one feed
//	GET    /api/v1/fleet                  every feed summed up: counts, polls, hit rate, erroring, starved,
//	                                      quantiles of the feeds' mean latencies
//	DELETE /api/v1/feeds/{id}             unsubscribe (items and observations go too); 409 for a pipe's
//	                                      output or input
//	PUT    /api/v1/feeds/{id}/sleep       replace the feed's own sleep windows → its schedule
//	GET    /api/v1/feeds/{id}/items       items, newest arrival first (?limit=, ≤ 1000; ?before=SEQ; Link rel="next")
//	GET    /api/v1/feeds/{id}/schedule    median, σ, mode, next fetch, recent polls (?polls=)
//	GET    /api/v1/opml                   the remote feeds and their settings as OPML, credentials kept
//	                                      (needs the token on a token-protected server)
//	POST   /api/v1/pipes                  create a pipe (body: its definition, ≤ 256 KiB) → 201 with the pipe
//	GET    /api/v1/pipes                  a page of the pipes with their inputs, output feeds and status (?limit=&cursor=)
//	GET    /api/v1/pipes/{id}             one pipe
//	PUT    /api/v1/pipes/{id}             replace its definition (body: the definition) → the pipe
//	DELETE /api/v1/pipes/{id}             delete it with its output feed → 204
//	POST   /api/v1/pipes/{id}/preview     every node's output from a fresh state, nothing saved (empty
//	                                      body: the saved definition; else the body's)
//	POST   /api/v1/pipes/preview          the same for an unsaved definition
//	POST   /api/v1/pipes/{id}/run         run it now → what the run did (no body: one is a 400)
//	GET    /api/v1/operators              the operator catalogue, item fields, triggers and formats
//	GET    /api/v1/sensors                redirects to /api/v1/feeds?kind=sensor
//	POST   /api/v1/sensors/{sensor}/readings   the sensor store (see SensorHandler)
//	GET    /sensors/{sensor}.rss|.atom|.json  a sensor's readings as a feed
//	GET    /feeds/{slug}.rss|.atom|.json  a pipe's output, republished (see PipeFeedHandler)
//	GET    /sensors/{sensor}, /feeds/{slug}  redirects to the feed's page in the web UI, its site link
//	GET    /api/v1/cluster                the cluster: nodes (name, addr, shards, feeds, last_seen), shards,
//	                                      unowned, lease_ttl_s (ClusterStatus; one node, mode "single",
//	                                      without a cluster)
//	GET    /healthz                       {"status": "ok"} when the node can take writes (Options.Ready
//	                                      returns nil; without Ready, the store answers); else 503 with
//	                                      the reason; always within Options.HealthTimeout (slogfeed serve
//	                                      answers "starting" and "loading" around it)
//	GET    /metrics                       Prometheus metrics
//	GET    /                              the list of routes; a browser (Accept: text/html) is sent to /ui/feeds
//
// The web UI (Options.UI, package web/ui) serves every path under /ui/:
//
//	GET    /ui/feeds, /ui/feeds/{id}      the feeds with their status; one feed's polls, latency and values
//	POST   /ui/feeds, /ui/feeds/import    subscribe by URL; import an OPML file
//	GET    /ui/pipes, /ui/pipes/new, /ui/pipes/{id}   the pipes; the chain builder
//	GET    /ui/sensors, /ui/sensors/{name}            the sensors; post a reading (POST /ui/sensors)
//	GET    /ui/login, POST /ui/login, POST /ui/logout  sessions (token mode)
//	GET    /ui/assets/{file}, /ui/static/{file}        the UI's scripts and styles
//
// The pipe routes exist when Options.Pipes is set. Plugins mount their
// own routes (Options.Routes): the WebAssembly module store under
// /api/v1/wasm, webhooks under /api/v1/webhooks, and WebSub's
// /websub/hub, /websub/callback/... and /api/v1/websub.
//
// Security (see Auth): with a token, changes need "Authorization: Bearer
// TOKEN" (the scheme in any case) or a logged-in UI session with its CSRF
// token (X-CSRF-Token header), and UI pages need a login. Every read shows
// feed URLs with their credentials masked (sanitize.RedactURL), except
// the OPML export, which needs the token. Cross-origin changes from browsers
// are refused everywhere (http.CrossOriginProtection), and a server on
// loopback answers only requests for a loopback host (DNS-rebinding
// guard).
//
// Errors are JSON: {"error": "what went wrong"}. An invalid pipe
// definition is a 400 that also lists each problem with the node and
// field concerned: {"error": ..., "details": [{"node": "hot", "op":
// "filter", "field": "rules[0].value", "error": ...}]}.
package web
