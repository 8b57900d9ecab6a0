package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"html"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
)

// Errors returned by RSS, Atom and JSON. Other failures (an encoder error)
// are wrapped with %w.
var (
	// ErrNoID means the feed has no identity at all: ID, SelfURL and Link
	// are all empty, so no stable id can be built for it or its entries.
	ErrNoID = errors.New("publish: feed has no id, self URL or link")
)

// Generator is the name slogfeed writes as the documents' generator.
const Generator = "slogfeed"

// Media types of the three formats, for Serve.
const (
	ContentTypeRSS  = "application/rss+xml; charset=utf-8"
	ContentTypeAtom = "application/atom+xml; charset=utf-8"
	ContentTypeJSON = "application/feed+json; charset=utf-8"
)

// Feed is one document to publish. Items are written in the order given
// (callers pass newest first).
type Feed struct {
	// Title is the feed's name (default: ID).
	Title string
	// Link is the feed's site, its web page (default: SelfURL).
	Link string
	// SelfURL is where this very document is served.
	SelfURL string
	// Description says what the feed holds (default: Title).
	Description string
	// ID identifies the feed for good. An absolute URI (a tag URI, say) is
	// used as is for the Atom id; anything else is made a URN. Default:
	// SelfURL, then Link.
	ID string
	// Updated is when the feed last changed besides its items; the
	// documents use the later of it and the newest item's date.
	Updated time.Time
	// TTL is how long readers may cache the document (RSS <ttl>, in whole
	// minutes, rounded to the nearest and at least one); zero leaves it
	// out.
	TTL time.Duration
	// Items are the entries, newest first.
	Items []storage.Item
	// HubURL is an optional WebSub hub.
	HubURL string
	// Next, when set, is the URL of the page of older items (RFC 5005):
	// RSS and Atom link it as rel="next" (a paged feed) and
	// rel="prev-archive" (an archived feed), JSON Feed as next_url.
	Next string
	// Current, set on a page of older items (whose SelfURL is then the
	// page's own URL), is the URL of the feed's subscription document
	// (RFC 5005): RSS and Atom link it as rel="current" (an archived
	// feed) and rel="first" (a paged feed), so that a reader that walked
	// back can return.
	Current string
	// Author is the feed's author for Atom, which requires one
	// (default: Generator).
	Author string
}

// prepared is a Feed with every string cleaned, every default applied and
// every id and date decided, shared by the three writers.
type prepared struct {
	title, link, self, desc, hub, author string
	next, current                        string
	id                                   string // the feed's id as an IRI
	updated                              time.Time
	ttlMinutes                           int
	entries                              []entry
}

type entry struct {
	id, iri                       string
	title, summary, content, link string
	author                        string
	categories                    []string
	enclosures                    []storage.Enclosure
	published, updated            time.Time
	reading                       *storage.Reading
}

// prepare cleans f and fills in everything the formats require.
func prepare(f Feed) (*prepared, error) {
	p := &prepared{
		title:   plain(f.Title),
		link:    clean(f.Link),
		self:    clean(f.SelfURL),
		desc:    plain(f.Description),
		hub:     clean(f.HubURL),
		next:    clean(f.Next),
		current: clean(f.Current),
		author:  plain(f.Author),
	}
	raw := clean(f.ID)
	if raw == "" {
		raw = p.self
	}
	if raw == "" {
		raw = p.link
	}
	if raw == "" {
		return nil, ErrNoID
	}
	p.id = feedIRI(raw)
	if p.title == "" {
		p.title = raw
	}
	if p.link == "" {
		p.link = p.self
	}
	if p.link == "" {
		p.link = p.id
	}
	if p.desc == "" {
		p.desc = p.title
	}
	if p.author == "" {
		p.author = Generator
	}
	if f.TTL > 0 {
		m := max(math.Round(f.TTL.Minutes()), 1)
		p.ttlMinutes = int(min(m, math.MaxInt32))
	}
	p.updated = utc(f.Updated)
	p.entries = make([]entry, 0, len(f.Items))
	for i := range f.Items {
		e := prepareItem(&f.Items[i], p.id)
		if e.updated.After(p.updated) {
			p.updated = e.updated
		}
		p.entries = append(p.entries, e)
	}
	if p.updated.IsZero() {
		p.updated = time.Unix(0, 0).UTC() // nothing dated at all; still a valid date
	}
	for i := range p.entries {
		if e := &p.entries[i]; e.updated.IsZero() { // an item without any date
			e.updated, e.published = p.updated, p.updated
		}
	}
	return p, nil
}

func prepareItem(it *storage.Item, feedID string) entry {
	e := entry{
		id:        clean(it.ID),
		title:     plain(it.Title),
		summary:   clean(it.Summary),
		content:   clean(it.Content),
		link:      clean(it.Link),
		author:    plain(it.Author),
		published: utc(it.Published),
		updated:   utc(it.Updated),
		reading:   cleanReading(it.Reading),
	}
	if e.id == "" {
		e.id = derivedID(it)
	}
	e.iri = EntryID(feedID, e.id)
	if e.updated.IsZero() {
		e.updated = e.published
	}
	if e.updated.IsZero() {
		e.updated = utc(it.Fetched)
	}
	if e.published.IsZero() {
		e.published = e.updated
	}
	for _, c := range it.Categories {
		if c = plain(c); c != "" {
			e.categories = append(e.categories, c)
		}
	}
	for _, enc := range it.Enclosures {
		enc.URL, enc.Type = clean(enc.URL), plain(enc.Type)
		if enc.URL != "" {
			e.enclosures = append(e.enclosures, enc)
		}
	}
	if d := it.Digest; d != nil {
		if e.title == "" {
			e.title = plain(DigestTitle(*d))
		}
		if e.summary == "" {
			e.summary = html.EscapeString(clean(DigestSummary(*d)))
		}
	}
	if e.reading != nil {
		if e.title == "" {
			e.title = plain(ReadingTitle(*e.reading))
		}
		if e.summary == "" {
			e.summary = html.EscapeString(ReadingSummary(*e.reading))
		}
	}
	if e.title == "" && e.summary == "" && e.content == "" {
		e.title = e.id
	}
	return e
}

// derivedID is the id of an item that came without one (storage always
// sets ID; this only keeps documents valid and stable when it does not):
// a hash of its link, title and dates.
func derivedID(it *storage.Item) string {
	h := sha256.New()
	for _, s := range []string{it.Link, it.Title, it.Published.UTC().Format(time.RFC3339Nano), it.Updated.UTC().Format(time.RFC3339Nano)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// cleanReading returns a copy of r fit for publishing, or nil when there
// is nothing to publish (no reading or a value that is not finite). A
// position is kept only when both coordinates are finite and in range.
func cleanReading(r *storage.Reading) *storage.Reading {
	if r == nil || math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
		return nil
	}
	c := &storage.Reading{Value: r.Value, Unit: plain(r.Unit), Sensor: plain(r.Sensor), Time: utc(r.Time)}
	if r.Lat != nil && r.Lon != nil && validCoord(*r.Lat, 90) && validCoord(*r.Lon, 180) {
		lat, lon := *r.Lat, *r.Lon
		c.Lat, c.Lon = &lat, &lon
	}
	return c
}

func validCoord(v, limit float64) bool {
	return !math.IsNaN(v) && v >= -limit && v <= limit
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// MaxPlainValue is the longest value FormatValue writes without an
// exponent.
const MaxPlainValue = 24

// FormatValue writes a reading's value as feedext specifies it: the
// shortest decimal number that reads back as exactly v, without exponent
// ("21.3", "0.0000001") unless that takes more than MaxPlainValue
// characters ("1.2345678901234567e-50", "1.23456789e+68"), so that it is
// never longer than feedext.MaxNumberLen.
func FormatValue(v float64) string {
	if s := strconv.FormatFloat(v, 'f', -1, 64); len(s) <= MaxPlainValue {
		return s
	}
	return strconv.FormatFloat(v, 'e', -1, 64)
}

// formatTime writes t as RFC 3339 in UTC, with a fraction only when t has
// one.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// displayUnits are the units ordinary readers see written differently.
var displayUnits = map[string]string{"C": "°C", "F": "°F", "degC": "°C", "degF": "°F"}

// ReadingTitle is the readable title of an item carrying r, as in
// "lab-1: 21.3 °C".
func ReadingTitle(r storage.Reading) string {
	v := FormatValue(r.Value)
	if u := r.Unit; u != "" {
		if d, ok := displayUnits[u]; ok {
			u = d
		}
		v += " " + u
	}
	if r.Sensor != "" {
		return r.Sensor + ": " + v
	}
	return v
}

// ReadingSummary is the readable plain-text summary of an item carrying r,
// as in "21.3 C at 2026-11-21 19:30:00 UTC" (with ", position 50.81, 4.38"
// when r has one). Escape it before using it as HTML.
func ReadingSummary(r storage.Reading) string {
	s := FormatValue(r.Value)
	if r.Unit != "" {
		s += " " + r.Unit
	}
	if !r.Time.IsZero() {
		s += " at " + r.Time.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	if r.Lat != nil && r.Lon != nil {
		s += ", position " + FormatValue(*r.Lat) + ", " + FormatValue(*r.Lon)
	}
	return s
}

// feedIRI makes raw an absolute IRI: raw itself when it has a scheme,
// otherwise a URN in slogfeed's namespace.
func feedIRI(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Opaque+u.Host+u.Path != "" &&
		!strings.ContainsAny(raw, " \t\r\n<>\"{}|\\^`") {
		return raw
	}
	return "urn:slogfeed:" + escapeID(raw)
}

// EntryID returns the Atom id of the item itemID in the feed whose id (an
// absolute IRI) is feedID. Tag URIs and URNs are extended with
// ":<item id>", other IRIs get the item id as fragment, so that
// "tag:example.org,2026-11-21:sensor/lab-1" and item "lab-1/…/7" give
// "tag:example.org,2026-11-21:sensor/lab-1:lab-1/…/7". Characters outside
// the URI pchar set are percent-encoded, so the result is stable and
// distinct ids stay distinct.
func EntryID(feedID, itemID string) string {
	lower := strings.ToLower(feedID)
	if strings.HasPrefix(lower, "tag:") || strings.HasPrefix(lower, "urn:") || strings.Contains(feedID, "#") {
		return feedID + ":" + escapeID(itemID)
	}
	return feedID + "#" + escapeID(itemID)
}

// escapeID percent-encodes every byte of s that is not an unreserved
// character or one of "/:@!$()*+,;=".
func escapeID(s string) string {
	const hexdig = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			strings.IndexByte("-._~/:@!$()*+,;=", c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexdig[c>>4])
			b.WriteByte(hexdig[c&15])
		}
	}
	return b.String()
}

// xmlChar reports whether r may appear in an XML 1.0 document.
func xmlChar(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD ||
		(r >= 0x20 && r <= 0xD7FF) ||
		(r >= 0xE000 && r <= 0xFFFD) ||
		(r >= 0x10000 && r <= 0x10FFFF)
}

// clean removes invalid UTF-8 and every character XML 1.0 forbids.
func clean(s string) string {
	ok := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !xmlChar(r) {
			ok = false
			break
		}
		i += n
	}
	if ok {
		return s
	}
	s = strings.ToValidUTF8(s, "")
	return strings.Map(func(r rune) rune {
		if xmlChar(r) {
			return r
		}
		return -1
	}, s)
}

// plain is clean for a plain-text field (a title, an author, a category,
// a unit): its white space folded and, should it hold markup, the markup
// removed (sanitize.Text), so that no reader that renders the field as
// HTML finds a tag or an event handler in it, however often it decodes
// its entities.
func plain(s string) string { return sanitize.Text(clean(s), 0) }

// PlainTitle is a title or description a user wrote (a pipe's name, its
// output's title) as every output shows it: plain text, markup removed
// and entities decoded once, as a fetched title is read
// (sanitize.PlainText), without what Clean removes.
func PlainTitle(s string) string { return sanitize.PlainText(clean(s), 0) }

// Clean returns s without invalid UTF-8 and without the characters XML 1.0
// forbids; the writers apply it to every string they publish.
func Clean(s string) string { return clean(s) }
