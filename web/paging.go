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
	q := url.Values{}
	q.Set("before", strconv.FormatUint((*items)[limit-1].Seq, 10))
	if withLimit {
		q.Set("limit", strconv.Itoa(limit))
	}
	return self + "?" + q.Encode()
}

// missed reports whether the subscriber making conditional request r
// missed items of a subscription document whose oldest item was
// published at oldest and which links an older page: its
// If-Modified-Since (the newest publish time it has) lies before that
// oldest item. The publisher then sends Slogfeed-More.
func missed(r *http.Request, oldest time.Time) bool {
	ims, err := http.ParseTime(r.Header.Get("If-Modified-Since"))
	return err == nil && ims.Before(oldest.Truncate(time.Second))
}
