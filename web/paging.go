package web

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

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
