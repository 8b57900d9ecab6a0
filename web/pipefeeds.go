package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web/publish"
)

// Limits of the republished pipe feeds.
const (
	// DefaultPipeFeedLimit is how many items a pipe feed document holds
	// when PipeFeedOptions.Limit is zero; MaxPipeFeedLimit bounds ?limit=.
	DefaultPipeFeedLimit = 50
	MaxPipeFeedLimit     = 500
	// pfCacheEntries and pfCacheBytes bound the cache of rendered
	// documents; pfMaxCachedDoc is the largest document it keeps (a larger
	// one, from items near storage.MaxItemSize, is rendered per request).
	pfCacheEntries = 1024
	pfCacheBytes   = 64 << 20
	pfMaxCachedDoc = 8 << 20
)

// PipeFeedOptions configure PipeFeedHandler.
type PipeFeedOptions struct {
	// BaseURL is the public URL of the server, as SensorOptions.BaseURL:
	// it makes the feeds' links absolute.
	BaseURL string
	// IDAuthority is the tag authority of the feeds' ids, as
	// SensorOptions.IDAuthority (empty: BaseURL's host).
	IDAuthority string
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// Logger receives the handler's log records (default: discarded).
	Logger *slog.Logger
	// Limit is how many of the newest items a document holds (default
	// DefaultPipeFeedLimit; a request may ask for up to MaxPipeFeedLimit
	// with ?limit=).
	Limit int
	// Load measures request load for the desynchronisation hint (default:
	// a Load of its own with DefaultDesyncBase, DefaultDesyncPerRPS and
	// DefaultDesyncMax, as the sensor store's).
	Load *publish.Load
	// Hints gives the pipe's earliest expected next update (Next; zero:
	// no prediction; it should lie after now), the update it plans (Due;
	// zero: no plan) and the formats it serves, by extension ("rss",
	// "atom", "json"; nil: all of them), as runner.Runner.Hints does. It
	// is called on every request, so it should be quick, and must not
	// modify feed.
	Hints func(feed storage.Feed, now time.Time) runner.FeedHints
	// HubURL, when set, is the WebSub hub the feeds advertise, as
	// SensorOptions.HubURL.
	HubURL string
}

// PipeFeedHandler returns the republished feeds of slogfeed's pipes:
//
//	GET /feeds/{pipe}.rss, .atom, .json
//	    The newest items of the pipe's output feed (storage.KindPipe with
//	    the pipe's slug), newest arrival (for pipe outputs: publish order)
//	    first, as RSS 2.0, Atom or JSON Feed 1.1 (?limit=N), written by
//	    package publish with stable ids, the items' typed readings and
//	    <ttl> from the typical gap between the items' publish times; served
//	    with ETag/Last-Modified, 304s, Cache-Control from the pipe's
//	    predicted next update and slogfeed's hint headers, Slogfeed-Due
//	    among them when the pipe plans its next update (spread over the
//	    desynchronisation interval per request). Paged as the sensor
//	    feeds are (RFC 5005): rel="next" and rel="prev-archive" (JSON
//	    Feed next_url) to ?before=SEQ while older items are stored, and
//	    Slogfeed-More when If-Modified-Since lies before the document's
//	    oldest item (see SensorHandler). The feeds' site link is the
//	    output feed's page in the web UI, /ui/feeds/{id}, unless the
//	    feed names a site of its own.
//	GET /feeds/{pipe}
//	    A redirect to that page.
//
// HEAD is answered too. Errors are JSON objects {"error": "..."}: 400 for a
// bad ?limit=, 404 for an unknown pipe or a format the pipe does not serve
// (the message names those it does), 405 for other methods. The handler
// matches whole request paths: mount it at "/feeds/" without stripping
// the prefix.
//
// Documents are rendered once per change: each is cached per (feed,
// format, limit) under the storage.Version of the feed and of the items it
// shows, which one short read transaction returns on every request (it
// hashes the stored records, without decoding them), so repeated and
// conditional requests cost that read and a map lookup: no decoding, no
// rendering, no hashing of the document. The cache holds at most 1024 documents and 64 MiB (a document
// over 8 MiB is rendered per request); concurrent requests for a document
// being rendered wait for that rendering instead of repeating it.
func PipeFeedHandler(st Store, opt PipeFeedOptions) http.Handler {
	h := &pfHandler{
		feedServer: feedServer{
			base: strings.TrimRight(opt.BaseURL, "/"), now: opt.Now, log: opt.Logger,
			limit: opt.Limit, load: opt.Load, hub: opt.HubURL,
		}.withDefaults(DefaultPipeFeedLimit, MaxPipeFeedLimit),
		st:    st,
		hints: opt.Hints,
		cache: pfCache{entries: make(map[pfKey]*pfEntry)},
	}
	h.id = pipeFeedIRI(cmp.Or(opt.IDAuthority, AuthorityOf(h.base)))
	return h
}

type pfHandler struct {
	feedServer
	st    Store
	id    func(storage.Feed) string // pipeFeedIRI of the id authority
	hints func(storage.Feed, time.Time) runner.FeedHints
	cache pfCache
}

const pfNoSuchFeed = "no such feed: want /feeds/{pipe}.rss, .atom or .json"

// pfSlug reports whether s may be a pipe feed's slug (storage's rule:
// 1 to storage.MaxSlugLen of A–Z a–z 0–9 - . _ ~, not "." or "..").
func pfSlug(s string) bool {
	if s == "" || len(s) > storage.MaxSlugLen || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

func (h *pfHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeSensorError(w, &sensorError{http.StatusMethodNotAllowed, "method " + r.Method + " not allowed: feeds are read with GET or HEAD"})
		return
	}
	file, ok := strings.CutPrefix(r.URL.Path, "/feeds/")
	if !ok {
		writeSensorError(w, &sensorError{http.StatusNotFound, pfNoSuchFeed})
		return
	}
	slug, ext := file, ""
	if dot := strings.LastIndexByte(file, '.'); dot >= 0 {
		slug, ext = file[:dot], file[dot+1:]
	}
	fi := feedFormatIndex(ext)
	if fi < 0 && pfSlug(file) {
		h.redirectToPage(w, r, file)
		return
	}
	if fi < 0 || !pfSlug(slug) {
		writeSensorError(w, &sensorError{http.StatusNotFound, pfNoSuchFeed})
		return
	}
	limit, before, err := pageQuery(r, h.limit, MaxPipeFeedLimit)
	if err != nil {
		writeSensorError(w, err)
		return
	}
	now := h.now().UTC()
	var d *pfDoc
	if before > 0 {
		d, err = h.archive(slug, fi, limit, before)
	} else {
		d, err = h.document(r.Context(), slug, fi, limit)
	}
	if errors.Is(err, storage.ErrFeedNotFound) {
		writeSensorError(w, &sensorError{http.StatusNotFound, fmt.Sprintf("unknown pipe feed %q", slug)})
		return
	}
	if err != nil {
		err = unavailable(h.st, err)
		if r.Context().Err() == nil {
			logFailure(h.log, err, "pipe feed", "pipe", slug, "format", ext)
		}
		writeSensorError(w, err)
		return
	}
	var hints runner.FeedHints
	if h.hints != nil {
		hints = h.hints(d.feed, now)
		if hints.Formats != nil && !slices.Contains(hints.Formats, ext) {
			writeSensorError(w, &sensorError{http.StatusNotFound, pfNotServed(slug, hints.Formats)})
			return
		}
	}
	desync := h.load.Hit("pipe/"+slug, now)
	if !hints.Due.IsZero() && desync > 0 {
		// Subscribers poll right at the planned update: spread them over
		// the desynchronisation interval here, since they do not add it.
		hints.Due = hints.Due.Add(rand.N(desync))
	}
	if before == 0 { // an older page is no topic
		WebSubLinks(w.Header(), h.hub, h.base+"/feeds/"+slug+"."+ext)
	}
	more := before == 0 && d.next != "" && missed(r, d.oldest)
	// The document changed when its items last did, when the feed did (a
	// new title or description), or when its bytes did (an item removed).
	changed := later(d.changed, d.feed.Updated)
	publish.ServeDoc(w, r, d.doc, publish.Hints{
		Newest:  d.newest,
		Changed: h.changes.Since(docKey("pipe/"+slug, ext, limit, before), d.doc.ETag, changed, now),
		Next:    hints.Next,
		Desync:  desync,
		Due:     hints.Due,
		More:    more,
	}, now)
}

// pipeFeedPage is the path of the web UI's page of the pipe output feed
// id (its items, and a link to the pipe): the site its feeds link.
func pipeFeedPage(id uint64) string { return "/ui/feeds/" + strconv.FormatUint(id, 10) }

// redirectToPage answers /feeds/{pipe}, the site link its feeds once had,
// with a redirect to the pipe feed's page in the web UI (not a permanent
// one: a pipe made later with the slug has another page); an unknown pipe
// feed is a 404.
func (h *pfHandler) redirectToPage(w http.ResponseWriter, r *http.Request, slug string) {
	feed, err := h.st.FeedBySlug(storage.KindPipe, slug)
	if errors.Is(err, storage.ErrFeedNotFound) {
		writeSensorError(w, &sensorError{http.StatusNotFound, fmt.Sprintf("unknown pipe feed %q (%s)", slug, pfNoSuchFeed)})
		return
	}
	if err != nil {
		err = unavailable(h.st, err)
		logFailure(h.log, err, "pipe feed", "pipe", slug)
		writeSensorError(w, err)
		return
	}
	http.Redirect(w, r, h.base+pipeFeedPage(feed.ID), http.StatusFound)
}

// pfNotServed is the error message for a format the pipe does not serve.
func pfNotServed(slug string, formats []string) string {
	var served []string
	for _, f := range feedFormats {
		if slices.Contains(formats, f.ext) {
			served = append(served, "/feeds/"+slug+"."+f.ext)
		}
	}
	if len(served) == 0 {
		return fmt.Sprintf("pipe %q serves no feed", slug)
	}
	return fmt.Sprintf("pipe %q is served as %s only", slug, strings.Join(served, " and "))
}

// pfDoc is a rendered document with what each request needs besides it.
type pfDoc struct {
	feed    storage.Feed // the output feed the document was rendered from
	doc     publish.Doc
	newest  time.Time // the newest publish time among its items
	changed time.Time // the latest arrival or update among its items
	oldest  time.Time // the publish time of its oldest item
	next    string    // the link to the page of older items, if any
}

// document returns the document of the pipe feed slug in format fi with
// limit items: the cached one when the feed's Version has not changed
// since it was rendered, else a new rendering.
//
// The version and the snapshot cover one item more than the document
// holds: whether it exists decides the link to the older page.
func (h *pfHandler) document(ctx context.Context, slug string, fi, limit int) (*pfDoc, error) {
	v, err := h.st.FeedVersionBySlug(storage.KindPipe, slug, limit+1)
	if err != nil {
		return nil, err
	}
	key := pfKey{feed: v.FeedID, format: uint8(fi), limit: limit}
	return h.cache.get(ctx, key, v, func() (*pfDoc, storage.Version, error) {
		feed, items, v, err := h.st.FeedSnapshot(storage.KindPipe, slug, limit+1)
		if err != nil {
			return nil, storage.Version{}, err
		}
		d, err := h.render(feed, items, slug, fi, limit, 0)
		return d, v, err
	})
}

// archive renders the page of the pipe feed slug with the limit items
// before Seq before (not cached: subscribers read it once, to fill a gap).
func (h *pfHandler) archive(slug string, fi, limit int, before uint64) (*pfDoc, error) {
	feed, err := h.st.FeedBySlug(storage.KindPipe, slug)
	if err != nil {
		return nil, err
	}
	items, err := h.st.Items(feed.ID, storage.ItemQuery{Limit: limit + 1, Order: storage.ByArrival, BeforeSeq: before})
	if err != nil {
		return nil, err
	}
	return h.render(feed, items, slug, fi, limit, before)
}

// render renders feed with items, up to limit+1 of them newest first: the
// page of the first limit, linking the older page when there is one more
// (nextPage; the link names the limit when it is not the default).
func (h *pfHandler) render(feed storage.Feed, items []storage.Item, slug string, fi, limit int, before uint64) (*pfDoc, error) {
	format := &feedFormats[fi]
	self := h.base + "/feeds/" + slug + "." + format.ext
	older := nextPage(self, &items, limit, limit != h.limit)
	pageSelf, current, hub := pageLinks(self, before, limit, limit != h.limit, h.hub)
	var newest time.Time
	for i := range items {
		if items[i].Published.After(newest) {
			newest = items[i].Published
		}
	}
	// The title and description are the definition's, written by a
	// user: read as remote feeds' titles are (markup removed, entities
	// decoded once), so that "AT&amp;T" reads "AT&T" as "<b>AT</b>"
	// reads "AT". A title with no text left is the slug, not the feed's
	// id, which publish would use.
	title := publish.PlainTitle(feed.Title)
	if title == "" {
		title = slug
	}
	link := feed.Site
	if link == "" {
		link = h.base + pipeFeedPage(feed.ID)
	}
	b, err := format.render(publish.Feed{
		Title:       title,
		Link:        link,
		SelfURL:     pageSelf,
		Next:        older,
		Current:     current,
		Description: cmp.Or(publish.PlainTitle(feed.Description), "Items republished by slogfeed's pipe "+slug),
		ID:          h.feedID(feed),
		Updated:     feed.Updated, // a new title or description; the date of a feed without items
		TTL:         typicalPeriod(items),
		Items:       items,
		HubURL:      hub,
	})
	if err != nil {
		return nil, fmt.Errorf("rendering pipe feed %q as %s: %w", slug, format.ext, err)
	}
	h.log.Debug("pipe feed rendered", "pipe", slug, "format", format.ext, "items", len(items), "bytes", len(b))
	d := &pfDoc{feed: feed, doc: publish.NewDoc(b, format.contentType), newest: newest, changed: lastChange(items), next: older}
	if len(items) > 0 {
		d.oldest = items[len(items)-1].Published
	}
	return d, nil
}

// feedID is the pipe feed's permanent id: a tag URI of the id authority
// and the day the feed was created, or a URN without an authority.
func (h *pfHandler) feedID(f storage.Feed) string {
	return h.id(f)
}

// typicalPeriod is the median gap between the distinct publish times of
// items (zero with fewer than two): the <ttl> of a document is a property
// of its items alone, so the same items give the same bytes.
func typicalPeriod(items []storage.Item) time.Duration {
	times := make([]time.Time, 0, len(items))
	for i := range items {
		if t := items[i].Published; !t.IsZero() {
			times = append(times, t)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var gaps []time.Duration
	for i := 1; i < len(times); i++ {
		if g := times[i].Sub(times[i-1]); g > 0 {
			gaps = append(gaps, g)
		}
	}
	if len(gaps) == 0 {
		return 0
	}
	slices.Sort(gaps)
	m := len(gaps) / 2
	if len(gaps)%2 == 1 {
		return gaps[m]
	}
	return gaps[m-1] + (gaps[m]-gaps[m-1])/2
}

// pfKey identifies a cached document.
type pfKey struct {
	feed   uint64
	format uint8
	limit  int
}

// pfEntry is a cached document, or one being rendered.
type pfEntry struct {
	version storage.Version // what it was rendered from (guarded by pfCache.mu)
	size    int             // its bytes once counted in pfCache.bytes (guarded by pfCache.mu)
	ready   chan struct{}   // closed when doc or err is set
	doc     *pfDoc
	err     error
}

// pfCache holds rendered documents by key. Its lock is held only to look
// up and update the map, never while rendering.
type pfCache struct {
	mu      sync.Mutex
	entries map[pfKey]*pfEntry
	bytes   int
}

// get returns the document for key at version v: the cached one when its
// version is v (waiting for it when it is being rendered), else the one
// render returns, which is cached under the version render read.
func (c *pfCache) get(ctx context.Context, key pfKey, v storage.Version, render func() (*pfDoc, storage.Version, error)) (*pfDoc, error) {
	c.mu.Lock()
	if e := c.entries[key]; e != nil && e.version == v {
		c.mu.Unlock()
		select {
		case <-e.ready:
			return e.doc, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e := &pfEntry{version: v, ready: make(chan struct{})}
	c.removeLocked(key)
	c.entries[key] = e
	for k := range c.entries { // bound the count; any other entry goes
		if len(c.entries) <= pfCacheEntries {
			break
		}
		if k != key {
			c.removeLocked(k)
		}
	}
	c.mu.Unlock()

	doc, rv, err := render()
	size := 0
	if doc != nil {
		size = len(doc.doc.Bytes)
	}
	c.mu.Lock()
	e.doc, e.err = doc, err
	if c.entries[key] == e {
		if err != nil || size > pfMaxCachedDoc || rv.FeedID != key.feed {
			// Not worth keeping: an error is retried by the next request,
			// a huge document rendered again, a feed replaced meanwhile
			// (same slug, another id) is cached under its own id.
			delete(c.entries, key)
		} else {
			e.version, e.size = rv, size
			c.bytes += size
			for k := range c.entries {
				if c.bytes <= pfCacheBytes {
					break
				}
				if k != key {
					c.removeLocked(k)
				}
			}
		}
	}
	close(e.ready)
	c.mu.Unlock()
	return doc, err
}

// removeLocked drops key's entry; requests waiting for it still get it.
func (c *pfCache) removeLocked(key pfKey) {
	if e := c.entries[key]; e != nil {
		c.bytes -= e.size
		delete(c.entries, key)
	}
}

// stats returns the number of cached entries and their bytes (for tests).
func (c *pfCache) stats() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}
