// Package feedlist pages and filters the list of feeds for the HTTP API
// and the web UI: a page of feeds in order of ID after an opaque cursor,
// filtered by status, policy and text, with the count of all that match
// and aggregates of the whole fleet.
//
// It is pure: the feeds, the planned fetches and the time are passed in.
package feedlist

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
)

const (
	// DefaultLimit is a page's size when the request names none.
	DefaultLimit = 100
	// MaxLimit is the largest page a request may ask for.
	MaxLimit = 1000
	// maxText bounds the text filter and the policy name, in bytes.
	maxText = 256
	// StarvedLag is how far past its planned fetch a remote feed must be
	// to count as starved: the scheduler is not reaching it (a fetch
	// budget too small for the fleet, or a loop that has stalled).
	StarvedLag = time.Minute
)

// The statuses a filter may ask for.
const (
	Erroring = "erroring"
	Starved  = "starved"
)

// QueryError is Parse's error: what is wrong with which parameter, in
// words fit for the client.
type QueryError struct{ Msg string }

func (e *QueryError) Error() string { return e.Msg }

// Filter is what a request for a page of feeds asks for.
type Filter struct {
	Limit  int
	After  uint64 // the page starts after this feed ID (0: at the start)
	Text   string // text sought, any case, in the title, slug or URL
	Status string // "", Erroring or Starved
	Policy string
}

// Next tells when a feed's next fetch is planned (ok false: not planned).
type Next func(id uint64) (t time.Time, ok bool)

// Parse reads a filter from a request's query (limit, cursor, q, status,
// policy). Its error is a *QueryError naming the bad parameter.
func Parse(q url.Values) (Filter, error) {
	f := Filter{Limit: DefaultLimit}
	bad := func(format string, args ...any) (Filter, error) {
		return f, &QueryError{fmt.Sprintf(format, args...)}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return bad("limit must be an integer from 1 to %d", MaxLimit)
		}
		f.Limit = n
	}
	if s := q.Get("cursor"); s != "" {
		id, ok := decodeCursor(s)
		if !ok {
			return bad("cursor is not one this server gave (take next_cursor from the previous page)")
		}
		f.After = id
	}
	if s := strings.TrimSpace(q.Get("q")); s != "" {
		if len(s) > maxText || !utf8.ValidString(s) {
			return bad("q must be valid UTF-8 of at most %d bytes", maxText)
		}
		f.Text = strings.ToLower(s)
	}
	switch s := q.Get("status"); s {
	case "", Erroring, Starved:
		f.Status = s
	default:
		return bad("status must be %s or %s", Erroring, Starved)
	}
	f.Policy = q.Get("policy")
	if len(f.Policy) > maxText {
		return bad("policy is too long")
	}
	return f, nil
}

// Query is the filter's query without the page bounds, for links.
func (ff Filter) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"q": ff.Text, "status": ff.Status, "policy": ff.Policy} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if ff.Limit != DefaultLimit {
		q.Set("limit", strconv.Itoa(ff.Limit))
	}
	return q
}

// Match reports whether feed f passes the filters (not the page bounds).
// Text is sought in the URL as the API shows it, credentials masked, so
// that a search cannot probe a secret.
func (ff Filter) Match(f *storage.Feed, next Next, now time.Time) bool {
	if ff.Policy != "" && f.Policy != ff.Policy {
		return false
	}
	switch ff.Status {
	case Erroring:
		if !IsErroring(f) {
			return false
		}
	case Starved:
		if !IsStarved(f, next, now) {
			return false
		}
	}
	if ff.Text != "" &&
		!strings.Contains(strings.ToLower(f.Title), ff.Text) &&
		!strings.Contains(strings.ToLower(f.Slug), ff.Text) &&
		!strings.Contains(strings.ToLower(sanitize.RedactURL(f.URL)), ff.Text) {
		return false
	}
	return true
}

// IsErroring reports whether f's last fetch failed.
func IsErroring(f *storage.Feed) bool { return f.LastError != "" || f.ErrorCount > 0 }

// IsStarved reports whether remote feed f is overdue by more than
// StarvedLag: its planned fetch has passed and the scheduler has not
// granted it.
func IsStarved(f *storage.Feed, next Next, now time.Time) bool {
	if f.Kind != storage.KindRemote || next == nil {
		return false
	}
	t, ok := next(f.ID)
	return ok && now.Sub(t) > StarvedLag
}

// Page is one page of the feeds that match a filter.
type Page struct {
	Feeds []storage.Feed
	// Total counts every feed that matches the filter, on all pages.
	Total int
	// Cursor asks for the page after this one; "" on the last page.
	Cursor string
}

// Cut filters feeds (in order of ID) and cuts the page: the matching
// feeds after ff.After, at most ff.Limit of them.
func Cut(feeds []storage.Feed, ff Filter, next Next, now time.Time) Page {
	var p Page
	more := false
	for i := range feeds {
		f := &feeds[i]
		if !ff.Match(f, next, now) {
			continue
		}
		p.Total++
		if f.ID <= ff.After {
			continue
		}
		if len(p.Feeds) == ff.Limit {
			more = true
			continue
		}
		p.Feeds = append(p.Feeds, *f)
	}
	if more {
		p.Cursor = EncodeCursor(p.Feeds[len(p.Feeds)-1].ID)
	}
	return p
}

// Fleet sums up every feed.
type Fleet struct {
	Feeds, Remote     int
	Polls, Hits       int64
	Erroring, Starved int
	HitPct            float64 // of all polls; 0 before any
	LatencyFeeds      int     // feeds with a measured latency
	// Quantiles over feeds of each feed's mean use latency, in seconds.
	MeanP50, MeanP90, MeanP99, MeanMax float64
}

// Summarise sums up feeds.
func Summarise(feeds []storage.Feed, next Next, now time.Time) Fleet {
	var s Fleet
	means := make([]float64, 0, len(feeds))
	for i := range feeds {
		f := &feeds[i]
		s.Feeds++
		if f.Kind == storage.KindRemote {
			s.Remote++
		}
		s.Polls += f.Polls
		s.Hits += f.Hits
		if IsErroring(f) {
			s.Erroring++
		}
		if IsStarved(f, next, now) {
			s.Starved++
		}
		if f.LatencyCount > 0 {
			means = append(means, f.LatencySumS/float64(f.LatencyCount))
		}
	}
	if s.Polls > 0 {
		s.HitPct = 100 * float64(s.Hits) / float64(s.Polls)
	}
	if n := len(means); n > 0 {
		slices.Sort(means)
		q := func(p float64) float64 { return means[min(n-1, int(p*float64(n)))] }
		s.LatencyFeeds = n
		s.MeanP50, s.MeanP90, s.MeanP99, s.MeanMax = q(0.5), q(0.9), q(0.99), means[n-1]
	}
	return s
}

// A cursor is opaque to clients: the last feed ID of a page, behind a
// prefix that versions the form.
const cursorPrefix = "f1:"

// EncodeCursor is the cursor of the page after the one that ends at id.
func EncodeCursor(id uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatUint(id, 10)))
}

func decodeCursor(s string) (uint64, bool) {
	if len(s) > 64 {
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	return id, err == nil && id > 0
}
