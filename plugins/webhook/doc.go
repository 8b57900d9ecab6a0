// Package webhook is slogfeed's webhook sink, the plugins.Service
// "webhook": it POSTs the new items of chosen feeds (a pipe's output, a
// sensor, a subscribed feed) to URLs, signed, with retries.
//
// Subscriptions are made through the API (changes need the token like the
// rest of it):
//
//	POST   /api/v1/webhooks        {"feed": "pipe/SLUG", "url": "https://…", "secret": "…"} → 201 with the hook
//	GET    /api/v1/webhooks        {"webhooks": [...]}: every hook with its delivery status
//	GET    /api/v1/webhooks/{id}   one hook
//	DELETE /api/v1/webhooks/{id}   delete it and its pending deliveries → 204
//
// The secret is write-only: no answer ever contains it.
//
// When a feed a hook names gains items, the service queues a delivery (at
// most MaxDeliveryItems items each; more make several) and keeps it in the
// store's plugin data until it is done, so a restart loses nothing. The
// deliveries of one Notify, for all its hooks, are stored in one write
// (storage.PluginApply: one transaction on bbolt), made without the
// service's lock, and queued once stored: the API and the delivery loop
// do not wait for the store. A failed write is logged, its deliveries
// are not queued, and those a store writing one record at a time
// (JetStream) kept are deleted again. Each
// delivery is a POST of {"feed": {...}, "items": [...]} (items as the API
// shows them) with the headers
//
//	Content-Type: application/json
//	Slogfeed-Event: items
//	Slogfeed-Delivery: <delivery id>
//	Slogfeed-Signature: sha256=<hex HMAC-SHA256 of the body under the secret>
//	User-Agent: slogfeed/<version> (+https://slogfeed.org)
//
// A 2xx answer completes it. Anything else (another status, a timeout, a
// refused connection) is retried with exponential backoff and jitter, from
// MinBackoff doubling to MaxBackoff, or later when the receiver sends
// Retry-After, until MaxAttempts attempts; then the delivery is given up
// and its error stays visible on the hook (last status, last error,
// attempts). A 410 Gone, an address the SSRF guard refuses or a URL that
// cannot be requested gives up at once: retrying cannot help. Redirects
// are not followed.
//
// A hook's deliveries go out one at a time and in order (concurrent
// Notify calls included: a delivery is queued after every one numbered
// before it); a hook holds at most MaxPending of them. When a new
// delivery finds the queue full, the oldest pending one is dropped
// (counted in the hook's "dropped", and said in its last error): for
// sensor data the newest readings matter most.
//
// Requests go through plugins.Env.Client, the fetcher's client with its
// SSRF guard: a hook to a loopback or private address fails with the
// guard's error unless serve's --allow lists the address.
package webhook
