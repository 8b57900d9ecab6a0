package ui

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web/feedlist"
)

var (
	feedRowRe  = regexp.MustCompile(`<td data-label="Feed" class="name-cell"><a href="/ui/feeds/(\d+)">`)
	nextPageRe = regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
)

// The feeds page shows the fleet's aggregates above a list that pages
// and filters: walking the pages lists every feed once, the filters keep
// what they say, and a bad filter is a 400 that names it.
func TestFeedsPagesUI(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	for i := range 230 {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://mote-%d.example/s.rss", i), Title: fmt.Sprintf("Mote %d", i), Policy: "auto"}
		if i%10 == 0 {
			f.LastError, f.ErrorCount = "HTTP 503", 1
		}
		if err := e.st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.st.Feeds()
	if err != nil {
		t.Fatal(err)
	}
	erroring := 0
	for _, f := range all {
		if f.LastError != "" || f.ErrorCount > 0 {
			erroring++
		}
	}
	rows := func(body string) []uint64 {
		var ids []uint64
		for _, m := range feedRowRe.FindAllStringSubmatch(body, -1) {
			id, _ := strconv.ParseUint(m[1], 10, 64)
			ids = append(ids, id)
		}
		return ids
	}

	t.Run("pages", func(t *testing.T) {
		seen := map[uint64]int{}
		path, pages := "/ui/feeds", 0
		for path != "" {
			r := c.get(t, path)
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d", path, r.status)
			}
			if pages == 0 && (!strings.Contains(r.body, `<h2 id="fleet-heading">Fleet</h2>`) ||
				!strings.Contains(r.body, fmt.Sprintf(">%d erroring</a>", erroring))) {
				t.Fatalf("first page lacks the fleet's aggregates (%d erroring)", erroring)
			}
			ids := rows(r.body)
			if len(ids) > 100 {
				t.Fatalf("%s: %d rows on a page", path, len(ids))
			}
			for _, id := range ids {
				seen[id]++
			}
			path = ""
			if m := nextPageRe.FindStringSubmatch(r.body); m != nil {
				path = html.UnescapeString(m[1])
			}
			if pages++; pages > 10 {
				t.Fatal("the pages never end")
			}
		}
		if pages != (len(all)+99)/100 || len(seen) != len(all) {
			t.Fatalf("%d pages listed %d feeds, want %d pages of %d", pages, len(seen), (len(all)+99)/100, len(all))
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("feed %d listed %d times", id, n)
			}
		}
	})

	tests := []struct {
		name, path string
		status     int
		rows       int    // -1: not checked
		has        string // in the body
	}{
		{"erroring", "/ui/feeds?status=erroring", http.StatusOK, erroring, fmt.Sprintf("%d matching feeds", erroring)},
		{"search", "/ui/feeds?q=mote-17.example", http.StatusOK, 1, "1 matching feed<"},
		{"search, no match", "/ui/feeds?q=nowhere", http.StatusOK, 0, "No feed matches"},
		{"policy", "/ui/feeds?policy=fixed-1h", http.StatusOK, 0, "No feed matches"},
		{"search as typed", "/ui/feeds?q=MOTE-17.example", http.StatusOK, 1, `value="MOTE-17.example"`},
		{"a refused search kept in its box", "/ui/feeds?q=Mote&limit=0", http.StatusBadRequest, -1, `value="Mote"`},
		{"policy spelt otherwise", "/ui/feeds?policy=fixed-60m", http.StatusOK, 0, `<option value="fixed-1h" selected>`},
		{"policy not offered", "/ui/feeds?policy=fixed-7m", http.StatusOK, 0, `<option value="fixed-7m" selected>`},
		{"auto", "/ui/feeds?policy=auto&limit=1", http.StatusOK, 1, `<option value="auto" selected>`},
		{"kind", "/ui/feeds?kind=remote&limit=1", http.StatusOK, 1, `<option value="remote" selected>subscriptions</option>`},
		{"kind, filtered", "/ui/feeds?kind=pipe", http.StatusOK, -1, `matching feed`},
		{"bad kind", "/ui/feeds?kind=sensors", http.StatusBadRequest, -1, "kind must be remote, sensor or pipe"},
		{"bad status", "/ui/feeds?status=asleep", http.StatusBadRequest, -1, "status must be erroring or starved"},
		{"bad cursor", "/ui/feeds?cursor=zzz", http.StatusBadRequest, -1, "cursor is not one this server gave"},
		{"past the end", "/ui/feeds?cursor=" + feedlist.EncodeCursor(1<<40), http.StatusOK, 0, `No more feeds on this page.</p>
<nav class="pager" aria-label="Pages of feeds"><a href="/ui/feeds">First page</a><a href="/ui/feeds?before=`},
		{"before", "/ui/feeds?limit=3&before=" + feedlist.EncodeCursor(all[9].ID), http.StatusOK, 3,
			fmt.Sprintf(`<a href="/ui/feeds/%d">`, all[6].ID)},
		{"bad before", "/ui/feeds?before=zzz", http.StatusBadRequest, -1, "before is not a cursor this server gave"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := c.get(t, tc.path)
			if r.status != tc.status || !strings.Contains(r.body, tc.has) {
				t.Fatalf("%d, want %d with %q; body %.400s", r.status, tc.status, tc.has, r.body)
			}
			if tc.rows >= 0 && len(rows(r.body)) != tc.rows {
				t.Fatalf("%d rows, want %d", len(rows(r.body)), tc.rows)
			}
		})
	}
}

// The fleet's starved count, from an aggregator that lists its overdue
// feeds, follows the planned fetches at once, as the other aggregates
// follow every write; the starved filter lists the same feeds.
func TestFeedsPageStarvedRecount(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	var ids []uint64
	for i := range 12 {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://late-%d.example/s.rss", i), Policy: "auto"}
		if err := e.st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
		next := t0.Add(time.Hour)
		if i < 3 {
			next = t0.Add(-time.Hour)
		}
		e.agg.set(f.ID, schedule.State{}, next)
	}
	page := func() string {
		t.Helper()
		r := c.get(t, "/ui/feeds")
		if r.status != http.StatusOK {
			t.Fatalf("%d", r.status)
		}
		return r.body
	}
	if b := page(); !strings.Contains(b, ">3 starved</a>") {
		t.Fatalf("want 3 starved: %.2000s", b)
	}
	for _, id := range ids[3:6] {
		e.agg.set(id, schedule.State{}, t0.Add(-time.Hour))
	}
	if _, err := e.st.UpdateFeed(ids[0], func(f *storage.Feed) error { f.LastError = "HTTP 500"; return nil }); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(feedlist.StarvedEvery / 2)
	b := page()
	if !strings.Contains(b, ">6 starved</a>") || !strings.Contains(b, ">1 erroring</a>") {
		t.Fatal("want the starved count (6) and the erroring one (1) current")
	}
	r := c.get(t, "/ui/feeds?status=starved")
	if got := len(feedRowRe.FindAllStringSubmatch(r.body, -1)); r.status != http.StatusOK || got != 6 || !strings.Contains(r.body, "6 matching feeds") {
		t.Fatalf("starved filter: %d, %d rows, want 6: %.400s", r.status, got, r.body)
	}
	e.clock.Add(2 * time.Hour) // every planned fetch is now overdue
	e.agg.mu.Lock()
	planned := len(e.agg.next) // these 12 and the env's own remote feed
	e.agg.mu.Unlock()
	if b := page(); planned < 12 || !strings.Contains(b, fmt.Sprintf(">%d starved</a>", planned)) {
		t.Fatalf("two hours on: want all %d planned feeds starved", planned)
	}
}

var (
	prevPageRe = regexp.MustCompile(`<a href="([^"]+)" rel="prev">`)
	hrefRe     = regexp.MustCompile(`href="([^"]+)"`)
	pagerRe    = regexp.MustCompile(`(?s)<nav class="pager" aria-label="Pages of feeds">.*?</nav>`)
)

// The feeds list pages back: from the last page, each page's Previous
// link leads to the page before, the one paging forward showed (the same
// rows and the same links), with the list's filters and page size; the
// first page has none, the others all do.
func TestFeedsPagesBackUI(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	for i := range 230 {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://mote-%d.example/s.rss", i), Title: fmt.Sprintf("Mote %d", i), Policy: "auto"}
		if i%10 == 0 {
			f.LastError, f.ErrorCount = "HTTP 503", 1
		}
		if i%3 == 0 {
			f.Policy = "fixed-15m"
		}
		if err := e.st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		if i%11 == 0 { // gaps in the IDs
			if err := e.st.DeleteFeed(f.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name, path string
		pages      int    // at least 3
		has        string // in every link of a page
	}{
		{"every feed", "/ui/feeds", 3, ""},
		{"page size", "/ui/feeds?limit=30", 8, "limit=30"},
		{"erroring", "/ui/feeds?status=erroring&limit=4", 5, "limit=4&status=erroring"},
		{"search", "/ui/feeds?q=mote+1&limit=9", 12, "limit=9&q=mote+1"},
		{"policy", "/ui/feeds?policy=fixed-15m&limit=25", 3, "limit=25&policy=fixed-15m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type seen struct{ rows, pager string }
			get := func(path string) (seen, string, string) {
				t.Helper()
				r := c.get(t, path)
				if r.status != http.StatusOK {
					t.Fatalf("%s: %d", path, r.status)
				}
				var rows []string
				for _, m := range feedRowRe.FindAllStringSubmatch(r.body, -1) {
					rows = append(rows, m[1])
				}
				s := seen{strings.Join(rows, ","), pagerRe.FindString(r.body)}
				for _, m := range hrefRe.FindAllStringSubmatch(s.pager, -1) {
					if !strings.Contains(html.UnescapeString(m[1]), tc.has) {
						t.Fatalf("%s: link %s lacks %q", path, m[1], tc.has)
					}
				}
				link := func(re *regexp.Regexp) string {
					if m := re.FindStringSubmatch(r.body); m != nil {
						return html.UnescapeString(m[1])
					}
					return ""
				}
				return s, link(prevPageRe), link(nextPageRe)
			}
			var forward []seen
			path, last := tc.path, ""
			for path != "" && len(forward) <= tc.pages {
				s, prev, next := get(path)
				if (prev == "") != (len(forward) == 0) {
					t.Fatalf("%s: page %d has previous link %q", path, len(forward), prev)
				}
				forward = append(forward, s)
				path, last = next, path
			}
			if len(forward) != tc.pages {
				t.Fatalf("%d pages forward, want %d", len(forward), tc.pages)
			}
			s, prev, _ := get(last) // the last page again
			for i := tc.pages - 1; i > 0; i-- {
				if prev == "" {
					t.Fatalf("page %d has no previous link", i)
				}
				s, prev, _ = get(prev)
				if s != forward[i-1] {
					t.Fatalf("back from page %d:\n%+v\nwant\n%+v", i, s, forward[i-1])
				}
			}
			if prev != "" {
				t.Fatalf("back on the first page, a previous link %q", prev)
			}
		})
	}
}
