package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web/feedlist"
)

var listT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// planAgg is an Aggregator whose planned fetches are set by the test.
type planAgg struct{ next map[uint64]time.Time }

func (p planAgg) Subscribe(f storage.Feed) (storage.Feed, error) { return f, nil }
func (p planAgg) Unsubscribe(uint64) error                       { return nil }
func (p planAgg) State(uint64) (schedule.State, bool)            { return schedule.State{}, false }
func (p planAgg) NextFetch(id uint64) (time.Time, bool) {
	t, ok := p.next[id]
	return t, ok
}

// overdueAgg is a planAgg that lists its overdue feeds, as the live
// aggregator does from its scheduler (here by a pass over them all).
type overdueAgg struct{ planAgg }

func (p overdueAgg) Overdue(before time.Time) []uint64 {
	var ids []uint64
	for id, t := range p.next {
		if t.Before(before) {
			ids = append(ids, id)
		}
	}
	return ids
}

// The live aggregator counts and lists the starved feeds from its
// scheduler.
var _ feedlist.OverduePlanner = (*aggregator.Service)(nil)

// listFixture is a store of n remote feeds: every third erroring, every
// fifth on fixed-15m, every seventh overdue by 10 min, feed 11's URL
// carrying a secret.
func listFixture(t *testing.T, n int) (*storage.Store, http.Handler) {
	t.Helper()
	st, h, _ := listFixtureOf(t, n, false)
	return st, h
}

// listFixtureOf is listFixture with the planned fetches it gives the
// handler, from a planAgg or, with overdue, an overdueAgg.
func listFixtureOf(t *testing.T, n int, overdue bool) (*storage.Store, http.Handler, planAgg) {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "list.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	agg := planAgg{next: map[uint64]time.Time{}}
	for i := 1; i <= n; i++ {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://sensors%d.example/s%d.rss", i%4, i), Title: fmt.Sprintf("Mote %d", i), Policy: "auto"}
		if i == 11 {
			f.URL = "https://user:hunter2@sensors.example/private.rss"
		}
		if i%5 == 0 {
			f.Policy = "fixed-15m"
		}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := st.UpdateFeed(f.ID, func(f *storage.Feed) error {
				f.LastError, f.ErrorCount = "HTTP 500", 2
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		next := listT0.Add(time.Duration(i) * time.Second)
		if i%7 == 0 {
			next = listT0.Add(-10 * time.Minute)
		}
		agg.next[f.ID] = next
	}
	var a Aggregator = agg
	if overdue {
		a = overdueAgg{agg}
	}
	return st, New(Options{Store: st, Aggregator: a, Now: func() time.Time { return listT0 }}), agg
}

// walk follows next_cursor from the first page of query, returning the
// IDs in the order served and the totals each page reported.
func walk(t *testing.T, h http.Handler, query string, between func(page int)) (ids []uint64, totals []int) {
	t.Helper()
	cursor := ""
	for page := 0; ; page++ {
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var p FeedPage
		getJSON(t, h, "/api/v1/feeds?"+q.Encode(), &p)
		for _, f := range p.Feeds {
			ids = append(ids, f.ID)
		}
		totals = append(totals, p.Total)
		if p.NextCursor == "" {
			return ids, totals
		}
		if page > 1000 {
			t.Fatal("the pages never end")
		}
		cursor = p.NextCursor
		if between != nil {
			between(page)
		}
	}
}

// walkBack pages forward through query, then back from the last page by
// each page's prev_cursor: each page back is the page served forward,
// with the same cursors, and only the first page has no prev_cursor.
func walkBack(t *testing.T, h http.Handler, query string) {
	t.Helper()
	page := func(key, cursor string) FeedPage {
		t.Helper()
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			q.Set(key, cursor)
		}
		var p FeedPage
		getJSON(t, h, "/api/v1/feeds?"+q.Encode(), &p)
		return p
	}
	pages := []FeedPage{page("", "")}
	for p := pages[0]; p.NextCursor != "" && len(pages) <= 1000; {
		p = page("cursor", p.NextCursor)
		pages = append(pages, p)
	}
	for i, p := range pages {
		if (p.PrevCursor == "") != (i == 0) {
			t.Fatalf("page %d of %d: prev_cursor %q", i, len(pages), p.PrevCursor)
		}
	}
	for i := len(pages) - 1; i > 0; i-- {
		back := page("before", pages[i].PrevCursor)
		if !reflect.DeepEqual(back, pages[i-1]) {
			t.Fatalf("back from page %d: %+v, want %+v", i, back, pages[i-1])
		}
	}
}

func TestFeedsPages(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  func(i int) bool // which of feeds 1..45 the filters keep
	}{
		{"every feed, default page", "", func(int) bool { return true }},
		{"pages of 7", "limit=7", func(int) bool { return true }},
		{"pages of 1", "limit=1", func(int) bool { return true }},
		{"erroring", "limit=4&status=erroring", func(i int) bool { return i%3 == 0 }},
		{"starved", "status=starved&limit=2", func(i int) bool { return i%7 == 0 }},
		{"starved, one page", "status=starved", func(i int) bool { return i%7 == 0 }},
		{"starved by text", "status=starved&q=mote%202&limit=1", func(i int) bool { return i == 21 || i == 28 }},
		{"starved by policy", "status=starved&policy=fixed-15m", func(i int) bool { return i == 35 }},
		{"policy", "policy=fixed-15m&limit=3", func(i int) bool { return i%5 == 0 }},
		{"text in the title, any case", "q=MOTE%204", func(i int) bool { return i == 4 || (i >= 40 && i <= 45) }},
		{"text in the URL", "q=sensors1.example", func(i int) bool { return i%4 == 1 && i != 11 }},
		{"filters together", "status=erroring&policy=fixed-15m", func(i int) bool { return i%15 == 0 }},
		{"nothing matches", "q=no-such-feed", func(int) bool { return false }},
		{"a secret in a URL is not searchable", "q=hunter2", func(int) bool { return false }},
		{"the masked URL is", "q=private.rss", func(i int) bool { return i == 11 }},
	}
	for _, overdue := range []bool{false, true} {
		_, h, _ := listFixtureOf(t, 45, overdue)
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/overdue=%v", tc.name, overdue), func(t *testing.T) {
				var want []uint64
				for i := 1; i <= 45; i++ {
					if tc.want(i) {
						want = append(want, uint64(i))
					}
				}
				got, totals := walk(t, h, tc.query, nil)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("feeds %v, want %v", got, want)
				}
				for _, n := range totals {
					if n != len(want) {
						t.Errorf("a page's total is %d, want %d", n, len(want))
					}
				}
				walkBack(t, h, tc.query)
			})
		}
	}
}

// A walk that meets inserts and deletes between pages serves every feed
// that stayed, once, in order; a feed added behind the cursor is not
// served, one added ahead of it is.
func TestFeedsPagesUnderChange(t *testing.T) {
	st, h := listFixture(t, 30)
	got, _ := walk(t, h, "limit=4", func(page int) {
		switch page {
		case 0: // the walk has served 1–4
			if err := st.DeleteFeed(2); err != nil { // behind the cursor
				t.Fatal(err)
			}
			if err := st.DeleteFeed(9); err != nil { // ahead of it
				t.Fatal(err)
			}
		case 2: // 1–12 served
			f := storage.Feed{Kind: storage.KindRemote, URL: "https://late.example/a.rss", Policy: "auto"}
			if err := st.CreateFeed(&f); err != nil { // ID 31, ahead
				t.Fatal(err)
			}
		}
	})
	seen := map[uint64]int{}
	for i, id := range got {
		seen[id]++
		if i > 0 && got[i-1] >= id {
			t.Fatalf("out of order at %d: %v", i, got)
		}
	}
	for id := uint64(1); id <= 31; id++ {
		want := 1
		if id == 9 {
			want = 0
		}
		if seen[id] != want {
			t.Errorf("feed %d served %d times, want %d (walk %v)", id, seen[id], want, got)
		}
	}
}

func TestFeedsPagesBadRequests(t *testing.T) {
	_, h := listFixture(t, 3)
	tests := []struct{ query, says string }{
		{"limit=0", "limit must be"},
		{"limit=1001", "limit must be"},
		{"limit=ten", "limit must be"},
		{"cursor=12", "cursor is not one this server gave"},
		{"cursor=" + feedlist.EncodeCursor(1) + "x", "cursor is not one"},
		{"cursor=" + strings.Repeat("A", 100), "cursor is not one"},
		{"before=12", "before is not a cursor this server gave"},
		{"before=" + feedlist.EncodeCursor(2) + "&cursor=" + feedlist.EncodeCursor(1), "not both"},
		{"status=ok", "status must be erroring or starved"},
		{"kind=sensors", "kind must be remote, sensor or pipe"},
		{"kind=Remote", "kind must be remote, sensor or pipe"},
		{"policy=bogus", `is not a policy slogfeed knows (auto, dpt-a`},
		{"policy=fixed-soon", `fixed-soon\" is not a policy`},
		{"q=" + strings.Repeat("x", 257), "q must be valid UTF-8"},
		{"q=%ff", "q must be valid UTF-8"},
		{"q=a%00b", "without control characters"},
		{"q=a%0Ab", "without control characters"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/feeds?"+tc.query, nil))
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.says) {
				t.Fatalf("%d %s, want 400 saying %q", rec.Code, rec.Body, tc.says)
			}
		})
	}
}
