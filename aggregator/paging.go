package aggregator

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
)

// Bounds of following a paged feed (RFC 5005) after one fetch: at most
// MaxPages older pages and MaxPagedBytes of their bodies.
const (
	MaxPages      = 20
	MaxPagedBytes = 16 << 20
)

// ErrPagingStopped is the feed's warning when a gap could not be closed
// within MaxPages and MaxPagedBytes, or a page failed: older items may be
// missing.
var ErrPagingStopped = errors.New("aggregator: paging stopped before the gap closed")

// sameOrigin reports whether u has the scheme and host of feedURL: a
// feed's pages are followed only on its own server.
func sameOrigin(u, feedURL string) bool {
	a, err1 := url.Parse(u)
	b, err2 := url.Parse(feedURL)
	return err1 == nil && err2 == nil && a.Scheme == b.Scheme && strings.EqualFold(a.Host, b.Host)
}

// follow completes a fetch that shows a gap. The document of feed f shows
// one when the feed held items before and none of the document's items is
// stored (its oldest new item is newer than anything seen before), or
// when the publisher says more is waiting (Slogfeed-More). Then the older
// pages it links (Parsed.Older) are fetched, one after the other, until a
// page holds an item already stored, links no older page, or a bound is
// reached (MaxPages, MaxPagedBytes); their new items join parsed.Items.
// Pages are fetched through the fetcher, so the SSRF guard applies, and
// only on the feed's own origin. A gap left open (a bound, a failed page)
// is reported as the feed's warning (ErrPagingStopped); the items found
// are kept. A gap it closed clears resp.More, so that the scheduler does
// not pull the feed again at once for what the pages brought.
func (s *Service) follow(ctx context.Context, f storage.Feed, resp *fetcher.Response, parsed *parser.Parsed) {
	if parsed == nil || parsed.Older == "" || len(parsed.Items) == 0 {
		return
	}
	gap := resp.More
	if !gap {
		if n, err := s.opt.Store.CountItems(f.ID); err != nil || n == 0 {
			return // a first fetch takes what the document holds
		}
		// Items cut before parsing as unchanged (Parsed.Unchanged) are
		// stored ones: the document overlaps what is held, no gap.
		gap = parsed.Unchanged == 0 && !s.anyStored(f.ID, parsed.Items)
	}
	if !gap {
		return
	}
	seen := make(map[string]bool, len(parsed.Items))
	for _, it := range parsed.Items {
		seen[it.ID] = true
	}
	next, bytes := parsed.Older, 0
	visited := map[string]bool{resp.FinalURL: true, f.URL: true}
	var stop error
	for pages := 0; ; pages++ {
		if next == "" {
			resp.More = false // the oldest page: nothing is missing
			return
		}
		if pages >= MaxPages || bytes >= MaxPagedBytes {
			stop = fmt.Errorf("%w: %d pages, %d bytes read", ErrPagingStopped, pages, bytes)
			break
		}
		if visited[next] {
			stop = fmt.Errorf("%w: page %s links back to a page read", ErrPagingStopped, sanitize.Excerpt(next, maxQuote))
			break
		}
		visited[next] = true
		if !sameOrigin(next, f.URL) && !sameOrigin(next, resp.FinalURL) {
			stop = fmt.Errorf("%w: page %s is on another server", ErrPagingStopped, sanitize.Excerpt(next, maxQuote))
			break
		}
		r, err := s.opt.Fetcher.Fetch(ctx, fetcher.Request{URL: next})
		if err != nil {
			stop = fmt.Errorf("%w: %w", ErrPagingStopped, err)
			break
		}
		bytes += len(r.Body)
		p, err := s.parseBody(f, r.Body, r.ContentType, parser.Options{
			MaxItems: s.opt.MaxItems, Extract: f.Extract, Now: resp.ReceivedAt, BaseURL: r.FinalURL,
		})
		if err != nil {
			stop = fmt.Errorf("%w: page %s: %w", ErrPagingStopped, sanitize.Excerpt(next, maxQuote), err)
			break
		}
		closed := false
		for _, it := range p.Items {
			if seen[it.ID] {
				continue
			}
			if s.anyStored(f.ID, []storage.Item{it}) {
				closed = true
				continue
			}
			seen[it.ID] = true
			parsed.Items = append(parsed.Items, it)
		}
		if closed {
			resp.More = false // what was waiting is here: no pull again
			return
		}
		next = p.Older
	}
	s.log.Warn("paged feed: gap not closed", "feed", f.ID, "err", stop)
	parsed.Skipped = errors.Join(parsed.Skipped, stop)
}

// anyStored reports whether feed id holds one of items.
func (s *Service) anyStored(id uint64, items []storage.Item) bool {
	for _, it := range items {
		if _, err := s.opt.Store.Item(id, it.ID); err == nil {
			return true
		}
	}
	return false
}
