// Package fetcher fetches feeds over HTTP, safely and politely.
//
// A Fetcher makes one conditional GET (If-None-Match, If-Modified-Since)
// per Fetch, follows at most MaxRedirects redirects, decompresses gzip and
// deflate, reads at most MaxBody bytes of the decompressed body and stops
// the whole request at Timeout. It reads what the server says about the
// feed's schedule: the validators, Cache-Control and Expires (CacheFor),
// Retry-After on 429 and 503, and slogfeed's own publisher hints (package
// feedext: Slogfeed-Phase, Slogfeed-Desync, Slogfeed-More, …).
//
// The SSRF guard (dial.go) is on by default: a feed URL and every redirect
// target is user input, so the fetcher refuses to connect to loopback,
// private, link-local and other non-public addresses (checked on the
// address actually dialled, so DNS rebinding does not get through), and to
// any scheme but http and https, unless an address is on the Allow list.
// Client returns an http.Client with the same guard for slogfeed's other
// outgoing requests (webhooks, WebSub).
//
// Errors are grouped sentinels (ErrBlocked, ErrTooLarge, ErrTimeout,
// ErrHTTPStatus, …) wrapped with the URL and what happened, so callers
// branch with errors.Is and users read a clear message.
//
// Imports: schedule (for the delay caps and hint types), feedext and
// reader/sanitize. It must not import the parser, storage or anything
// above it.
package fetcher
