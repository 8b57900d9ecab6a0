package web

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// page is what paging decided for one feed document.
type page struct {
	next string // URL of the page of older items ("" when none)
	more bool   // the subscriber missed items: send Slogfeed-More
}

// pageOf pages a feed document (RFC 5005) served at self. *items holds up
// to limit+1 items newest first, read with BeforeSeq before (0 for the
// subscription document); it is cut to limit. When an item is left over,
// older items exist: the page links the next page, ?before=<Seq of its
// oldest item> (with the request's limit, when it gave one). On the
// subscription document, a conditional request whose If-Modified-Since
// lies before the page's oldest item missed items the page does not
// hold: more is set.
func pageOf(r *http.Request, self string, items *[]storage.Item, limit int, before uint64) page {
	var p page
	if len(*items) <= limit {
		return p
	}
	*items = (*items)[:limit]
	if limit == 0 {
		return p
	}
	oldest := (*items)[limit-1]
	q := url.Values{}
	q.Set("before", strconv.FormatUint(oldest.Seq, 10))
	if l := r.URL.Query().Get("limit"); l != "" {
		q.Set("limit", l)
	}
	p.next = self + "?" + q.Encode()
	if before == 0 {
		if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && ims.Before(oldest.Published.Truncate(time.Second)) {
			p.more = true
		}
	}
	return p
}
