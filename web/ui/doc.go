// Package ui is slogfeed's web UI: server-rendered pages (html/template)
// for feeds, pipes and sensors, served under /ui/ by web.New (see
// web.Options.UI), with the chain builder and the feed page's charts as
// JavaScript modules built into dist/assets and embedded in the binary.
//
// Pages:
//
//	GET  /ui/feeds              every feed with its status; subscribe by URL; import OPML
//	POST /ui/feeds              subscribe (form: url, policy, title)
//	POST /ui/feeds/import       import an OPML file (multipart: opml, policy)
//	GET  /ui/feeds/{id}         one feed: polls vs publish times, latency, values, newest items
//	GET  /ui/feeds/{id}/delete  confirm; POST to unsubscribe
//	GET  /ui/pipes              every pipe with its republished feed URLs
//	GET  /ui/pipes/new          the chain builder for a new pipe
//	GET  /ui/pipes/{id}         the chain builder for pipe {id}, with its feed URLs
//	GET  /ui/pipes/{id}/delete  confirm; POST to delete
//	GET  /ui/sensors            every sensor; post a reading (POST /ui/sensors)
//	GET  /ui/sensors/{name}     a sensor's readings and feeds
//	GET  /ui/login              log in with the token (token mode); POST to log in
//	POST /ui/logout             log out
//	GET  /ui/assets/{file}      the JavaScript build (dist/assets)
//	GET  /ui/static/{file}      the hand-written CSS and script (static)
//
// Contract with the scripts: every page has <meta name="csrf-token">,
// whose value scripts send as X-CSRF-Token with their changes to the JSON
// API. Builder pages hold <div id="builder" data-pipe-id="ID or empty">
// and load builder.js and builder.css. The feed page holds the JSON of
// feedData in <script type="application/json" id="feed-data"> and the
// empty chart containers chart-timeline, chart-latency and (when the feed
// has readings) chart-values, and loads feed.js and feed.css.
//
// Security: pages are sent with a Content-Security-Policy allowing only
// this server's own scripts, styles and connections (no inline script or
// style anywhere), X-Frame-Options DENY, nosniff and a same-origin
// referrer policy. Every form carries the session's CSRF token and every
// POST handler checks it (web.Auth.CheckCSRF) after reading the form
// within its size limit. Item HTML is sanitised again when shown, its
// images shown as links to them (the policy loads no remote image). Forms
// follow Post/Redirect/Get with a flash message kept in a short-lived
// cookie.
package ui
