package web

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
)

// Paging of GET /api/v1/feeds.
const (
	// feedPageDefault is a page's size when the request names none.
	feedPageDefault = 100
	// feedPageMax is the largest page a request may ask for.
	feedPageMax = 1000
	// feedQueryMax bounds the q filter, in bytes.
	feedQueryMax = 256
	// starvedLag is how far past its planned fetch a remote feed must be
	// to count as starved: the scheduler is not reaching it (a fetch
	// budget too small for the fleet, or a loop that has stalled).
	starvedLag = time.Minute
)

// FeedPage is GET /api/v1/feeds: one page of the feeds that match the
// request's filters, in order of ID.
type FeedPage struct {
	Feeds []FeedView `json:"feeds"`
	// Total counts every feed that matches the filters, on all pages.
	Total int `json:"total"`
	// NextCursor asks for the page after this one (?cursor=); it is
	// empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// feedFilter is what a request for a page of feeds asks for.
type feedFilter struct {
	limit  int
	after  uint64 // the page starts after this feed ID (0: at the start)
	text   string // lower-case text sought in the title or URL
	status string // "", "erroring" or "starved"
	policy string
}

// parseFeedFilter reads a page request's query, with a sensorError
// (400) naming the first bad parameter.
func parseFeedFilter(r *http.Request) (feedFilter, error) {
	q := r.URL.Query()
	f := feedFilter{limit: feedPageDefault}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > feedPageMax {
			return f, sensorBadRequest("limit must be an integer from 1 to %d", feedPageMax)
		}
		f.limit = n
	}
	if s := q.Get("cursor"); s != "" {
		id, ok := decodeFeedCursor(s)
		if !ok {
			return f, sensorBadRequest("cursor is not one this server gave (take next_cursor from the previous page)")
		}
		f.after = id
	}
	if s := q.Get("q"); s != "" {
		if len(s) > feedQueryMax || !utf8.ValidString(s) {
			return f, sensorBadRequest("q must be valid UTF-8 of at most %d bytes", feedQueryMax)
		}
		f.text = strings.ToLower(s)
	}
	switch s := q.Get("status"); s {
	case "", "erroring", "starved":
		f.status = s
	default:
		return f, sensorBadRequest("status must be erroring or starved")
	}
	f.policy = q.Get("policy")
	if len(f.policy) > feedQueryMax {
		return f, sensorBadRequest("policy is too long")
	}
	return f, nil
}

// match reports whether feed f passes the filters (not the page bounds).
// Text is sought in the title and in the URL as the API shows it, with
// its credentials masked, so that a search cannot probe a secret.
func (ff feedFilter) match(f *storage.Feed, next func(uint64) (time.Time, bool), now time.Time) bool {
	if ff.policy != "" && f.Policy != ff.policy {
		return false
	}
	switch ff.status {
	case "erroring":
		if f.LastError == "" && f.ErrorCount == 0 {
			return false
		}
	case "starved":
		if !starved(f, next, now) {
			return false
		}
	}
	if ff.text != "" &&
		!strings.Contains(strings.ToLower(f.Title), ff.text) &&
		!strings.Contains(strings.ToLower(sanitize.RedactURL(f.URL)), ff.text) &&
		!strings.Contains(strings.ToLower(f.Slug), ff.text) {
		return false
	}
	return true
}

// starved reports whether remote feed f is overdue by more than
// starvedLag: its planned fetch has passed and the scheduler has not
// granted it.
func starved(f *storage.Feed, next func(uint64) (time.Time, bool), now time.Time) bool {
	if f.Kind != storage.KindRemote || next == nil {
		return false
	}
	t, ok := next(f.ID)
	return ok && now.Sub(t) > starvedLag
}

// pageFeeds filters feeds (in order of ID) and cuts the page: the
// matching feeds after ff.after, at most ff.limit of them, the count of
// all matching feeds and the cursor of the next page ("" when none).
func pageFeeds(feeds []storage.Feed, ff feedFilter, next func(uint64) (time.Time, bool), now time.Time) (page []storage.Feed, total int, cursor string) {
	more := false
	for i := range feeds {
		f := &feeds[i]
		if !ff.match(f, next, now) {
			continue
		}
		total++
		if f.ID <= ff.after {
			continue
		}
		if len(page) == ff.limit {
			more = true
			continue
		}
		page = append(page, *f)
	}
	if more {
		cursor = encodeFeedCursor(page[len(page)-1].ID)
	}
	return page, total, cursor
}

// A cursor is opaque to clients: the last feed ID of a page, behind a
// prefix that versions the form.
const feedCursorPrefix = "f1:"

func encodeFeedCursor(id uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(feedCursorPrefix + strconv.FormatUint(id, 10)))
}

func decodeFeedCursor(s string) (uint64, bool) {
	if len(s) > 64 {
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(b), feedCursorPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	return id, err == nil && id > 0
}
