package publish

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/slogfeed/slogfeed/feedext"
)

// MaxAge caps the Cache-Control max-age Serve sends: a prediction further
// out than this is not trusted to hold, and a cache that kept the document
// longer would hide readings that arrive early.
const MaxAge = 24 * time.Hour

// Hints are what the publisher tells subscribers besides the document.
type Hints struct {
	// Newest is the publish time of the feed's newest item (zero when the
	// feed has none). It gives the phase header, and Last-Modified unless
	// Changed is later.
	Newest time.Time
	// Changed, when later than Newest, is when the document last changed
	// otherwise (an item that arrived or was updated after its publish
	// time, a new title or description; see Changes): it gives
	// Last-Modified then, so that a reader asking If-Modified-Since sees
	// the change.
	Changed time.Time
	// Next is the publisher's prediction of its next publish (zero when it
	// has none). It gives Cache-Control max-age and the next header.
	Next time.Time
	// Desync is the interval over which subscribers should spread their
	// polls after Next (zero: no header); see Load.
	Desync time.Duration
	// Due is the update the publisher plans, when its own schedule says
	// when the feed changes next (zero when it only has a prediction).
	// It gives the due header, relative to now, so a subscriber needs no
	// clock agreement; the publisher spreads it over Desync itself.
	Due time.Time
	// More tells subscribers that more data is waiting than the document
	// holds and that they should poll again at once. Set it only when a
	// second request would return something new (a paged backlog), never
	// for a feed that is simply a window over a longer history.
	More bool
}

// ETag returns the strong entity tag of doc: a quoted hash of its bytes.
func ETag(doc []byte) string {
	sum := sha256.Sum256(doc)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// Doc is a rendered document ready to serve: its bytes, its strong entity
// tag and its media type. A publisher that caches rendered documents keeps
// a Doc, so the hash of the bytes is computed once per document rather
// than once per request.
type Doc struct {
	// Bytes is the document.
	Bytes []byte
	// ETag is the strong entity tag of Bytes, quoted, as ETag returns
	// (ServeDoc computes it when empty).
	ETag string
	// ContentType is the media type, e.g. ContentTypeRSS.
	ContentType string
}

// NewDoc returns the Doc of b with its ETag computed.
func NewDoc(b []byte, contentType string) Doc {
	return Doc{Bytes: b, ETag: ETag(b), ContentType: contentType}
}

// Serve writes doc, a feed document of media type contentType, answering
// conditional requests (If-None-Match with the strong ETag, else
// If-Modified-Since against Last-Modified) with 304 Not Modified, and HEAD
// without a body. Last-Modified is h.Newest, or h.Changed when later, in
// whole seconds; it is left out, and If-Modified-Since ignored, while
// that time lies in the second of now or later: a change later in the
// same second would not move it (RFC 9110 §8.8.2.2: a Last-Modified is
// only a strong enough validator a second after the change). Besides
// ETag and Last-Modified it sets:
//
//   - Cache-Control: "public, max-age=N" with N the whole seconds from now
//     until h.Next (at most MaxAge), or "no-cache" when that is zero or
//     unknown;
//   - feedext.HeaderPhase: now − h.Newest in seconds with three decimals;
//   - feedext.HeaderDesync: h.Desync in seconds;
//   - feedext.HeaderNext: h.Next as RFC 3339;
//   - feedext.HeaderDue: h.Due − now in seconds with three decimals (0
//     when h.Due has passed);
//   - feedext.HeaderMore: "1" when h.More.
//
// The hint headers are sent on 304 responses too, so a subscriber that
// found nothing new still learns the phase. now is when the request
// arrived. Serve is ServeDoc with the ETag computed from doc.
func Serve(w http.ResponseWriter, r *http.Request, contentType string, doc []byte, h Hints, now time.Time) {
	ServeDoc(w, r, Doc{Bytes: doc, ETag: ETag(doc), ContentType: contentType}, h, now)
}

// ServeDoc is Serve for a document whose entity tag is already known
// (d.ETag must then be ETag(d.Bytes), or another strong tag that changes
// whenever the bytes do). Its answers are those of Serve.
func ServeDoc(w http.ResponseWriter, r *http.Request, d Doc, h Hints, now time.Time) {
	etag := d.ETag
	if etag == "" {
		etag = ETag(d.Bytes)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", d.ContentType)
	hdr.Set("ETag", etag)
	hdr.Set("Cache-Control", CacheControl(h.Next, now))
	if !h.Newest.IsZero() {
		phase := max(now.Sub(h.Newest), 0)
		hdr.Set(feedext.HeaderPhase, strconv.FormatFloat(phase.Seconds(), 'f', 3, 64))
	}
	if h.Desync > 0 {
		hdr.Set(feedext.HeaderDesync, strconv.FormatFloat(h.Desync.Round(time.Millisecond).Seconds(), 'f', -1, 64))
	}
	if !h.Next.IsZero() {
		hdr.Set(feedext.HeaderNext, h.Next.UTC().Format(time.RFC3339))
	}
	if !h.Due.IsZero() {
		due := max(h.Due.Sub(now), 0)
		hdr.Set(feedext.HeaderDue, strconv.FormatFloat(due.Seconds(), 'f', 3, 64))
	}
	if h.More {
		hdr.Set(feedext.HeaderMore, "1")
	}
	// ServeContent implements the conditional-request rules of RFC 9110
	// (If-None-Match before If-Modified-Since, weak comparison for GET),
	// HEAD and ranges; it sends Last-Modified from the time given, none
	// and no 304 to If-Modified-Since for a zero one.
	http.ServeContent(w, r, "", LastModified(h, now), bytes.NewReader(d.Bytes))
}

// LastModified returns the Last-Modified Serve sends for h at now: the
// later of h.Newest and h.Changed, or zero (none) while it lies in the
// whole second of now or later.
func LastModified(h Hints, now time.Time) time.Time {
	modified := h.Newest
	if h.Changed.After(modified) {
		modified = h.Changed
	}
	if modified.IsZero() || !modified.Truncate(time.Second).Before(now.Truncate(time.Second)) {
		return time.Time{}
	}
	return modified
}

// CacheControl returns the Cache-Control value for a document whose next
// publish is predicted at next: "public, max-age=N" with N the whole
// seconds from now until next (at most MaxAge), else "no-cache".
func CacheControl(next, now time.Time) string {
	if next.IsZero() {
		return "no-cache"
	}
	d := min(next.Sub(now), MaxAge)
	secs := int64(d / time.Second)
	if secs <= 0 {
		return "no-cache"
	}
	return "public, max-age=" + strconv.FormatInt(secs, 10)
}
