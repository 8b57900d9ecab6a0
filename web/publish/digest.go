package publish

import (
	"strconv"

	"github.com/slogfeed/slogfeed/storage"
)

// DigestTitle is the readable title of an item carrying digest d (made by
// a PACK digester), as in "digest of 12 readings: mean 21.5, min 20.1,
// max 23"; the summarised field is named when it is not "value". The
// writers give it to digest items that have no title of their own.
func DigestTitle(d storage.Digest) string {
	s := "digest of " + strconv.FormatInt(d.Count, 10)
	if d.Count == 1 {
		s += " reading"
	} else {
		s += " readings"
	}
	if d.Field != "" && d.Field != "value" {
		s += " of " + d.Field
	}
	if d.Count <= 0 {
		return s
	}
	return s + ": mean " + FormatValue(d.Sum/float64(d.Count)) + ", min " + FormatValue(d.Min) + ", max " + FormatValue(d.Max)
}

// DigestSummary is the readable plain-text summary of an item carrying
// digest d: its title with the span of the summarised items, as in
// "digest of 12 readings: mean 21.5, min 20.1, max 23, from 2026-11-21
// 19:00:00 UTC to 2026-11-21 20:00:00 UTC". Escape it before using it as
// HTML.
func DigestSummary(d storage.Digest) string {
	s := DigestTitle(d)
	const layout = "2006-01-02 15:04:05 UTC"
	switch {
	case !d.From.IsZero() && !d.To.IsZero():
		s += ", from " + d.From.UTC().Format(layout) + " to " + d.To.UTC().Format(layout)
	case !d.From.IsZero():
		s += ", from " + d.From.UTC().Format(layout)
	case !d.To.IsZero():
		s += ", until " + d.To.UTC().Format(layout)
	}
	return s
}
