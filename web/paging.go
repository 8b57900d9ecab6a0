package web

import (
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web/publish"
)

// feedServer is what the sensor and pipe feed handlers share: the
// server's base URL (no trailing slash), their clock and log, the items a
// document holds by default, the request load, the WebSub hub and when
// each document last changed.
type feedServer struct {
	base    string
	now     func() time.Time
	log     *slog.Logger
	limit   int
	load    *publish.Load
	hub     string
	changes *publish.Changes
}

// maxTrackedDocs bounds the documents a feed handler remembers the last
// change of (publish.Changes).
const maxTrackedDocs = 4096

// withDefaults fills in what a handler's options left out: time.Now, a
// log that discards, def items a document (and at most most) and a Load
// of its own with DefaultDesyncBase, DefaultDesyncPerRPS and
// DefaultDesyncMax.
func (s feedServer) withDefaults(def, most int) feedServer {
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.limit <= 0 {
		s.limit = def
	}
	s.limit = min(s.limit, most)
	if s.load == nil {
		s.load = publish.NewLoad(DefaultDesyncBase, DefaultDesyncPerRPS, DefaultDesyncMax)
	}
	if s.changes == nil {
		s.changes = publish.NewChanges(maxTrackedDocs)
	}
	return s
}

// feedFormat is one of the formats of the feed documents the sensor and
// pipe feed handlers serve.
type feedFormat struct {
	ext         string
	render      func(publish.Feed) ([]byte, error)
	contentType string
}

var feedFormats = [...]feedFormat{
	{"rss", publish.RSS, publish.ContentTypeRSS},
	{"atom", publish.Atom, publish.ContentTypeAtom},
	{"json", publish.JSON, publish.ContentTypeJSON},
}

// feedFormatIndex returns the index of the format of file extension ext
// in feedFormats, or -1.
func feedFormatIndex(ext string) int {
	for i := range feedFormats {
		if feedFormats[i].ext == ext {
			return i
		}
	}
	return -1
}

// nextPage pages a feed document (RFC 5005) served at self. *items holds
// up to limit+1 items newest first (read with ItemQuery.BeforeSeq for a
// page after the first); it is cut to limit. When an item was left over,
// older items exist and nextPage returns the link to their page,
// self?before=<Seq of the document's oldest item>, with &limit=limit when
// withLimit (a limit the request chose); else "".
func nextPage(self string, items *[]storage.Item, limit int, withLimit bool) string {
	if len(*items) <= limit || limit <= 0 {
		return ""
	}
	*items = (*items)[:limit]
	return pageURL(self, (*items)[limit-1].Seq, limit, withLimit)
}

// pageURL is the URL of the page of the document at self with the items
// before Seq before, naming the limit when withLimit is set.
func pageURL(self string, before uint64, limit int, withLimit bool) string {
	q := url.Values{}
	q.Set("before", strconv.FormatUint(before, 10))
	if withLimit {
		q.Set("limit", strconv.Itoa(limit))
	}
	return self + "?" + q.Encode()
}

// pageLinks returns the self URL, the subscription document's URL (empty
// on the subscription document itself) and the hub of the page of the
// document at self with the items before Seq before (0: the subscription
// document): an older page names itself, links back to the document, and
// is no WebSub topic.
func pageLinks(self string, before uint64, limit int, withLimit bool, hub string) (pageSelf, current, pageHub string) {
	if before == 0 {
		return self, "", hub
	}
	return pageURL(self, before, limit, withLimit), self, ""
}

// pageQuery reads the page a request for a feed document asks for: its
// ?limit= (def when there is none; a 400 error when it is not an integer
// from 1 to most) and its ?before= (see pageBefore).
func pageQuery(r *http.Request, def, most int) (limit int, before uint64, err error) {
	if r.URL.RawQuery == "" {
		return def, 0, nil
	}
	limit = def
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > most {
			return 0, 0, sensorBadRequest("limit must be an integer from 1 to %d", most)
		}
		limit = n
	}
	before, err = pageBefore(r)
	return limit, before, err
}

// pageBefore reads the ?before= of a request for an older page: 0 when
// there is none, a 400 error when it is not a positive integer.
func pageBefore(r *http.Request) (uint64, error) {
	q := r.URL.Query().Get("before")
	if q == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(q, 10, 64)
	if err != nil || n == 0 {
		return 0, sensorBadRequest("before must be a positive integer (an item's seq)")
	}
	return n, nil
}

// missed reports whether the subscriber making conditional request r
// missed items of a subscription document whose oldest item was
// published at oldest and which links an older page: its
// If-Modified-Since (the newest publish time it has) lies before that
// oldest item. The publisher then sends Slogfeed-More. HTTP dates have
// whole seconds, so a subscriber whose newest item is in the oldest
// item's second is told too: an extra page costs it less than a loss.
func missed(r *http.Request, oldest time.Time) bool {
	ims, err := http.ParseTime(r.Header.Get("If-Modified-Since"))
	return err == nil && !ims.After(oldest.Truncate(time.Second))
}

// lastChange returns when the newest of items arrived or was last updated
// (zero for none): a document changes when they do, whatever their
// publish dates.
func lastChange(items []storage.Item) time.Time {
	var t time.Time
	for i := range items {
		for _, u := range [...]time.Time{items[i].Published, items[i].Updated, items[i].Fetched} {
			if u.After(t) {
				t = u
			}
		}
	}
	return t
}

// docKey names a document in feedServer.changes: the feed (kind/name),
// its format and its page.
func docKey(feed, ext string, limit int, before uint64) string {
	return feed + "." + ext + "?" + strconv.Itoa(limit) + "&" + strconv.FormatUint(before, 10)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
