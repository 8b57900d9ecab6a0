package web

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web/publish"
)

// updatePipeGolden rewrites testdata/golden (the flag -update is shared
// with the package's other golden tests).
var updatePipeGolden = lookupOrDefineBool("update", "rewrite golden files")

// pipeT0 is when the fixture pipe's output feed was created; its items
// were published every quarter of an hour from pipeItemsAt.
var (
	pipeT0      = time.Date(2026, 11, 21, 17, 58, 0, 0, time.UTC)
	pipeItemsAt = time.Date(2026, 11, 21, 18, 0, 0, 0, time.UTC)
	pipeNow     = time.Date(2026, 11, 21, 19, 5, 30, 0, time.UTC)
)

const (
	pipeSlug    = "lab-means"
	pipeBaseURL = "https://slog.example.org"
	pipeFeedID  = "tag:slog.example.org,2026-11-21:feeds/lab-means"
)

func ptr[T any](v T) *T { return &v }

// pipeFixture is a store holding one pipe output feed with the items
// testdata/golden/README.md describes.
type pipeFixture struct {
	st    *storage.Store
	clock *testClock
	feed  storage.Feed
}

func newPipeFixture(t testing.TB) *pipeFixture {
	t.Helper()
	fx := &pipeFixture{clock: &testClock{t: pipeT0}}
	st, err := storage.Open(filepath.Join(t.TempDir(), "slogfeed.db"), storage.Options{NoSync: true, Now: fx.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fx.st = st
	fx.feed = storage.Feed{Kind: storage.KindPipe, Slug: pipeSlug, Title: "Lab means & alerts", Policy: "pipe",
		Description: "Hourly means of the <b>lab</b> sensors"}
	if err := st.CreateFeed(&fx.feed); err != nil {
		t.Fatal(err)
	}
	at := func(i int) time.Time { return pipeItemsAt.Add(time.Duration(i) * 15 * time.Minute) }
	items := []storage.Item{
		{
			ID: "lab-1/2026-11-21T17:59:58Z/1", Title: "lab-1: 21.5 °C", Summary: "21.5 C at 2026-11-21 17:59:58 UTC",
			Published: at(0), Reading: &storage.Reading{Value: 21.5, Unit: "C", Sensor: "lab-1", Time: at(0).Add(-2 * time.Second)},
		},
		{
			ID: "buoy-7/2026-11-21T18:15:00Z/9", Title: "buoy-7: 1013.25 hPa",
			Summary:   "1013.25 hPa at 2026-11-21 18:15:00 UTC, position 50.81, -4.38",
			Published: at(1),
			Reading:   &storage.Reading{Value: 1013.25, Unit: "hPa", Sensor: "buoy-7", Time: at(1), Lat: ptr(50.81), Lon: ptr(-4.38)},
		},
		{
			ID: "digest/lab-1/2026-11-21T17:00:00Z", Published: at(2),
			Digest: &storage.Digest{Field: "value", Count: 12, Sum: 258, Min: 20.5, Max: 22.75,
				From: pipeItemsAt.Add(-time.Hour), To: pipeItemsAt, Items: []string{"lab-1/a", "lab-1/b"}},
		},
		{
			ID: "alerts/lab-1 #1", Title: "Alert: lab-1 above 25 °C", Link: "https://lab.example.org/alerts/1",
			Summary:   `<p>Temperature <b>high</b> &amp; rising: <a href="https://lab.example.org/lab-1">lab-1</a></p>`,
			Published: at(3), Categories: []string{"alert", "lab-1"},
			Reading: &storage.Reading{Value: 25.5, Unit: "C", Sensor: "lab-1", Time: at(3)},
		},
		{
			ID: "door/2026-11-21T19:00:00Z", Title: "Door\x01 opened & closed\x1b", Summary: "The lab door opened.",
			Published: at(4), Updated: at(4).Add(30 * time.Second),
		},
	}
	for i, it := range items { // one run of the pipe each
		fx.clock.Set(it.Published.Add(time.Second))
		if added, err := st.AddItems(fx.feed.ID, []storage.Item{it}); err != nil || len(added) != 1 {
			t.Fatalf("item %d: %v %v", i, added, err)
		}
	}
	fx.clock.Set(pipeNow)
	return fx
}

// pipeExpect is what a reader must find of one entry.
type pipeExpect struct {
	Title     string           `json:"title"`
	ID        string           `json:"id"`
	Published time.Time        `json:"-"`
	Updated   time.Time        `json:"-"`
	Reading   *storage.Reading `json:"-"`
}

// pipeExpected returns the fixture's entries as the document in format ext
// shows them, newest first.
func pipeExpected(ext string) []pipeExpect {
	at := func(i int) time.Time { return pipeItemsAt.Add(time.Duration(i) * 15 * time.Minute) }
	e := []pipeExpect{
		{Title: "Door opened & closed", ID: "door/2026-11-21T19:00:00Z", Published: at(4), Updated: at(4).Add(30 * time.Second)},
		{Title: "Alert: lab-1 above 25 °C", ID: "alerts/lab-1 #1", Published: at(3),
			Reading: &storage.Reading{Value: 25.5, Unit: "C", Sensor: "lab-1", Time: at(3)}},
		{Title: "digest of 12 readings: mean 21.5, min 20.5, max 22.75", ID: "digest/lab-1/2026-11-21T17:00:00Z", Published: at(2)},
		{Title: "buoy-7: 1013.25 hPa", ID: "buoy-7/2026-11-21T18:15:00Z/9", Published: at(1),
			Reading: &storage.Reading{Value: 1013.25, Unit: "hPa", Sensor: "buoy-7", Time: at(1), Lat: ptr(50.81), Lon: ptr(-4.38)}},
		{Title: "lab-1: 21.5 °C", ID: "lab-1/2026-11-21T17:59:58Z/1", Published: at(0),
			Reading: &storage.Reading{Value: 21.5, Unit: "C", Sensor: "lab-1", Time: at(0).Add(-2 * time.Second)}},
	}
	for i := range e {
		if e[i].Updated.IsZero() {
			e[i].Updated = e[i].Published
		}
		if ext == "atom" {
			e[i].ID = publish.EntryID(pipeFeedID, e[i].ID)
		}
	}
	return e
}

// pipeHints is the fixture pipe's prediction: every quarter of an hour.
func pipeHints(feed storage.Feed, now time.Time) runner.FeedHints {
	if feed.Slug == "rss-only" {
		return runner.FeedHints{Formats: []string{"rss", "json"}}
	}
	return runner.FeedHints{Next: now.Truncate(15 * time.Minute).Add(15 * time.Minute)}
}

func (fx *pipeFixture) handler(opt PipeFeedOptions) http.Handler {
	if opt.BaseURL == "" {
		opt.BaseURL = pipeBaseURL + "/"
	}
	if opt.Now == nil {
		opt.Now = fx.clock.Now
	}
	if opt.Load == nil {
		opt.Load = publish.NewLoad(2*time.Second, 60*time.Second, time.Minute) // +1 s per request in the last minute
	}
	if opt.Hints == nil {
		opt.Hints = pipeHints
	}
	return PipeFeedHandler(fx.st, opt)
}

// renderCounter counts the documents a handler renders, from its debug log.
type renderCounter struct{ n atomic.Int64 }

func (c *renderCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *renderCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "pipe feed rendered" {
		c.n.Add(1)
	}
	return nil
}
func (c *renderCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *renderCounter) WithGroup(string) slog.Handler      { return c }

// pipeGet runs one request through h.
func pipeGet(h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var pipeContentTypes = map[string]string{"rss": publish.ContentTypeRSS, "atom": publish.ContentTypeAtom, "json": publish.ContentTypeJSON}

func TestPipeFeedFormats(t *testing.T) {
	fx := newPipeFixture(t)
	renders := &renderCounter{}
	h := fx.handler(PipeFeedOptions{Logger: slog.New(renders)})
	newest := pipeItemsAt.Add(time.Hour)
	// The document last changed when its newest item was updated, 30 s
	// after it was published.
	modified := newest.Add(30 * time.Second)
	for _, ext := range []string{"rss", "atom", "json"} {
		t.Run(ext, func(t *testing.T) {
			path := "/feeds/" + pipeSlug + "." + ext
			w := pipeGet(h, "GET", path, nil)
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			body := w.Body.Bytes()
			etag := w.Header().Get("ETag")
			want := map[string]string{
				"Content-Type":      pipeContentTypes[ext],
				"ETag":              publish.ETag(body),
				"Last-Modified":     modified.Format(http.TimeFormat),
				"Cache-Control":     "public, max-age=570", // 19:05:30 → 19:15:00
				feedext.HeaderPhase: "330.000",
				feedext.HeaderNext:  "2026-11-21T19:15:00Z",
				feedext.HeaderMore:  "",
				"Content-Length":    strconv.Itoa(len(body)),
			}
			for k, v := range want {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if d, err := strconv.ParseFloat(w.Header().Get(feedext.HeaderDesync), 64); err != nil || d < 2 || d > 60 {
				t.Errorf("%s = %q", feedext.HeaderDesync, w.Header().Get(feedext.HeaderDesync))
			}
			checkPipeDoc(t, ext, body, pipeExpected(ext))
			if !bytes.Contains(body, []byte(pipeBaseURL+path)) {
				t.Errorf("no self link %s", pipeBaseURL+path)
			}
			if ext == "rss" && !bytes.Contains(body, []byte("<ttl>15</ttl>")) {
				t.Error("no <ttl>15</ttl> (items every 15 minutes)")
			}

			tests := []struct {
				name, method string
				header       map[string]string
				code         int
				body         bool
			}{
				{"If-None-Match", "GET", map[string]string{"If-None-Match": etag}, 304, false},
				{"If-None-Match among others", "GET", map[string]string{"If-None-Match": `"x", ` + etag}, 304, false},
				{"stale If-None-Match", "GET", map[string]string{"If-None-Match": `"x"`}, 200, true},
				{"If-Modified-Since Last-Modified", "GET", map[string]string{"If-Modified-Since": modified.Format(http.TimeFormat)}, 304, false},
				{"If-Modified-Since later", "GET", map[string]string{"If-Modified-Since": pipeNow.Format(http.TimeFormat)}, 304, false},
				{"If-Modified-Since the newest publish, before its update", "GET", map[string]string{"If-Modified-Since": newest.Format(http.TimeFormat)}, 200, true},
				{"If-Modified-Since earlier", "GET", map[string]string{"If-Modified-Since": newest.Add(-time.Second).Format(http.TimeFormat)}, 200, true},
				{"HEAD", "HEAD", nil, 200, false},
				{"HEAD conditional", "HEAD", map[string]string{"If-None-Match": etag}, 304, false},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					w := pipeGet(h, tt.method, path, tt.header)
					if w.Code != tt.code {
						t.Fatalf("status %d, want %d", w.Code, tt.code)
					}
					if tt.body && !bytes.Equal(w.Body.Bytes(), body) || !tt.body && w.Body.Len() != 0 {
						t.Errorf("body of %d bytes", w.Body.Len())
					}
					// Hints come with every answer, 304s included.
					for _, k := range []string{"ETag", "Cache-Control", feedext.HeaderPhase, feedext.HeaderNext} {
						if w.Header().Get(k) != want[k] {
							t.Errorf("%s = %q, want %q", k, w.Header().Get(k), want[k])
						}
					}
				})
			}
		})
	}
	// One rendering per format, whatever the number of requests.
	if n := renders.n.Load(); n != 3 {
		t.Errorf("%d renderings, want 3", n)
	}
}

func TestPipeFeedErrors(t *testing.T) {
	fx := newPipeFixture(t)
	only := storage.Feed{Kind: storage.KindPipe, Slug: "rss-only"}
	if err := fx.st.CreateFeed(&only); err != nil {
		t.Fatal(err)
	}
	sensor := storage.Feed{Kind: storage.KindSensor, Slug: "lab-1"}
	if err := fx.st.CreateFeed(&sensor); err != nil {
		t.Fatal(err)
	}
	h := fx.handler(PipeFeedOptions{})
	tests := []struct {
		name, method, path string
		code               int
		msg                string // part of the error
	}{
		{"unknown slug", "GET", "/feeds/nope.rss", 404, `unknown pipe feed "nope"`},
		{"sensor slug is not a pipe", "GET", "/feeds/lab-1.rss", 404, "unknown pipe feed"},
		{"unknown format", "GET", "/feeds/lab-means.xml", 404, "want /feeds/{pipe}.rss, .atom or .json"},
		{"no format, unknown pipe", "GET", "/feeds/nope", 404, "unknown pipe feed"},
		{"empty slug", "GET", "/feeds/.rss", 404, "no such feed"},
		{"dot dot", "GET", "/feeds/...rss", 404, "no such feed"},
		{"nested", "GET", "/feeds/a/lab-means.rss", 404, "no such feed"},
		{"bad slug", "GET", "/feeds/lab%20means.rss", 404, "no such feed"},
		{"slug too long", "GET", "/feeds/" + strings.Repeat("a", storage.MaxSlugLen+1) + ".rss", 404, "no such feed"},
		{"outside the prefix", "GET", "/sensors/lab-means.rss", 404, "no such feed"},
		{"format not served", "GET", "/feeds/rss-only.atom", 404, `pipe "rss-only" is served as /feeds/rss-only.rss and /feeds/rss-only.json only`},
		{"limit zero", "GET", "/feeds/lab-means.rss?limit=0", 400, "limit must be an integer from 1 to 500"},
		{"limit too large", "GET", "/feeds/lab-means.rss?limit=501", 400, "limit must"},
		{"limit not a number", "GET", "/feeds/lab-means.rss?limit=ten", 400, "limit must"},
		{"POST", "POST", "/feeds/lab-means.rss", 405, "not allowed"},
		{"DELETE", "DELETE", "/feeds/lab-means.rss", 405, "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := pipeGet(h, tt.method, tt.path, nil)
			if w.Code != tt.code {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.code, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			var v map[string]string
			if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || !strings.Contains(v["error"], tt.msg) {
				t.Errorf("error %q (%v), want it to mention %q", w.Body, err, tt.msg)
			}
			if tt.code == 405 && w.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow %q", w.Header().Get("Allow"))
			}
		})
	}
	// The formats it serves work, without a prediction; the document
	// was last modified when the feed was made: no Last-Modified in that
	// second, that time from the next one on.
	w := pipeGet(h, "GET", "/feeds/rss-only.json", nil)
	if w.Code != 200 || w.Header().Get("Cache-Control") != "no-cache" || w.Header().Get(feedext.HeaderNext) != "" ||
		w.Header().Get(feedext.HeaderPhase) != "" || w.Header().Values("Last-Modified") != nil {
		t.Errorf("empty feed: %d %v", w.Code, w.Header())
	}
	fx.clock.Set(pipeNow.Add(time.Second))
	if w := pipeGet(h, "GET", "/feeds/rss-only.json", nil); w.Code != 200 || w.Header().Get("Last-Modified") != only.Updated.UTC().Format(http.TimeFormat) {
		t.Errorf("empty feed a second later: %d %v", w.Code, w.Header())
	}
	checkPipeDoc(t, "json", w.Body.Bytes(), nil)
}

func TestPipeFeedLimit(t *testing.T) {
	fx := newPipeFixture(t)
	all := pipeExpected("json")
	tests := []struct {
		name   string
		limit  int // PipeFeedOptions.Limit
		query  string
		titles int
	}{
		{"default", 0, "", 5},
		{"option", 3, "", 3},
		{"option above the maximum", 10_000, "", 5},
		{"query", 0, "?limit=2", 2},
		{"query one", 0, "?limit=1", 1},
		{"query max", 0, "?limit=500", 5},
		{"query over option", 2, "?limit=4", 4},
		{"other parameters ignored", 0, "?x=1&limit=3", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fx.handler(PipeFeedOptions{Limit: tt.limit})
			w := pipeGet(h, "GET", "/feeds/lab-means.json"+tt.query, nil)
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			checkPipeDoc(t, "json", w.Body.Bytes(), all[:tt.titles])
		})
	}
	// The option is capped at MaxPipeFeedLimit.
	if h := fx.handler(PipeFeedOptions{Limit: 10_000}).(*pfHandler); h.limit != MaxPipeFeedLimit {
		t.Errorf("limit %d", h.limit)
	}
	// Documents of different limits are cached apart.
	h := fx.handler(PipeFeedOptions{})
	a := pipeGet(h, "GET", "/feeds/lab-means.rss?limit=2", nil).Header().Get("ETag")
	b := pipeGet(h, "GET", "/feeds/lab-means.rss", nil).Header().Get("ETag")
	if a == b {
		t.Error("limit=2 and the default give the same document")
	}
}

// TestPipeFeedInvalidation changes the output feed in every way the store
// allows and checks that the document follows, rendered once per change.
func TestPipeFeedInvalidation(t *testing.T) {
	fx := newPipeFixture(t)
	renders := &renderCounter{}
	h := fx.handler(PipeFeedOptions{Logger: slog.New(renders)})
	const path = "/feeds/lab-means.atom"
	get := func(t *testing.T) (etag string, doc *gofeed.Feed) {
		t.Helper()
		w := pipeGet(h, "GET", path, nil)
		if w.Code != 200 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		strictXML(t, w.Body.Bytes())
		f, err := gofeed.NewParser().Parse(bytes.NewReader(w.Body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		return w.Header().Get("ETag"), f
	}
	etag, _ := get(t)
	renders.n.Store(0)

	steps := []struct {
		name    string
		change  func(t *testing.T)
		same    bool // the document stays the same
		renders int64
		check   func(t *testing.T, f *gofeed.Feed)
	}{
		{"nothing", func(t *testing.T) {}, true, 0, nil},
		{"another feed", func(t *testing.T) {
			other := storage.Feed{Kind: storage.KindPipe, Slug: "other"}
			if err := fx.st.CreateFeed(&other); err != nil {
				t.Fatal(err)
			}
			if _, err := fx.st.AddItems(other.ID, []storage.Item{{ID: "x", Title: "x", Published: pipeNow}}); err != nil {
				t.Fatal(err)
			}
		}, true, 0, nil},
		{"new item", func(t *testing.T) {
			fx.clock.Set(pipeNow.Add(time.Minute))
			if _, err := fx.st.AddItems(fx.feed.ID, []storage.Item{{ID: "new", Title: "fresh", Published: pipeNow.Add(time.Minute)}}); err != nil {
				t.Fatal(err)
			}
		}, false, 1, func(t *testing.T, f *gofeed.Feed) {
			if len(f.Items) != 6 || f.Items[0].Title != "fresh" {
				t.Errorf("%d items, first %q", len(f.Items), f.Items[0].Title)
			}
		}},
		{"item updated in place", func(t *testing.T) {
			if added, err := fx.st.AddItems(fx.feed.ID, []storage.Item{{ID: "new", Title: "fresher", Published: pipeNow.Add(time.Minute)}}); err != nil || len(added) != 0 {
				t.Fatal(added, err)
			}
		}, false, 1, func(t *testing.T, f *gofeed.Feed) {
			if f.Items[0].Title != "fresher" {
				t.Errorf("first %q", f.Items[0].Title)
			}
		}},
		{"rename", func(t *testing.T) {
			if _, err := fx.st.UpdateFeed(fx.feed.ID, func(f *storage.Feed) error { f.Title = "Lab summary"; return nil }); err != nil {
				t.Fatal(err)
			}
		}, false, 1, func(t *testing.T, f *gofeed.Feed) {
			if f.Title != "Lab summary" {
				t.Errorf("title %q", f.Title)
			}
		}},
		{"feed record change the document does not show", func(t *testing.T) {
			if _, err := fx.st.UpdateFeed(fx.feed.ID, func(f *storage.Feed) error { f.Retention.MaxAge = 100 * time.Minute; return nil }); err != nil {
				t.Fatal(err)
			}
		}, true, 1, nil},
		{"retention deletes", func(t *testing.T) {
			fx.clock.Set(pipeItemsAt.Add(100*time.Minute + 20*time.Minute)) // the items of 18:00 and 18:15 are older than 100 min
			if n, err := fx.st.ApplyRetention(fx.feed.ID); err != nil || n != 2 {
				t.Fatal(n, err)
			}
		}, false, 1, func(t *testing.T, f *gofeed.Feed) {
			if len(f.Items) != 4 {
				t.Errorf("%d items, want 4", len(f.Items))
			}
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			renders.n.Store(0)
			st.change(t)
			got, f := get(t)
			get(t)
			if w := pipeGet(h, "GET", path, map[string]string{"If-None-Match": got}); w.Code != 304 {
				t.Errorf("conditional GET: %d", w.Code)
			}
			if (got == etag) != st.same {
				t.Errorf("ETag %s → %s, want same = %v", etag, got, st.same)
			}
			if st.check != nil {
				st.check(t, f)
			}
			if n := renders.n.Load(); n != st.renders {
				t.Errorf("%d renderings, want %d", n, st.renders)
			}
			etag = got
		})
	}

	// A deleted feed is gone at once.
	if err := fx.st.DeleteFeed(fx.feed.ID); err != nil {
		t.Fatal(err)
	}
	if w := pipeGet(h, "GET", path, map[string]string{"If-None-Match": etag}); w.Code != 404 {
		t.Errorf("deleted feed: %d", w.Code)
	}
	// A new feed under the same slug starts afresh.
	again := storage.Feed{Kind: storage.KindPipe, Slug: pipeSlug, Title: "again"}
	if err := fx.st.CreateFeed(&again); err != nil {
		t.Fatal(err)
	}
	if _, f := get(t); f.Title != "again" || len(f.Items) != 0 {
		t.Errorf("recreated feed: %q, %d items", f.Title, len(f.Items))
	}
}

// TestPipeFeedDesync checks that the desynchronisation hint grows with
// the load of each pipe feed.
func TestPipeFeedDesync(t *testing.T) {
	fx := newPipeFixture(t)
	h := fx.handler(PipeFeedOptions{})
	var last float64
	for i := range 3 {
		w := pipeGet(h, "GET", "/feeds/lab-means.rss", nil)
		d, err := strconv.ParseFloat(w.Header().Get(feedext.HeaderDesync), 64)
		if err != nil || i > 0 && d != last+1 {
			t.Errorf("request %d: desync %q after %v", i, w.Header().Get(feedext.HeaderDesync), last)
		}
		last = d
	}
	// A nil Load gets the sensor store's defaults: 2 s at rest.
	h = PipeFeedHandler(fx.st, PipeFeedOptions{Now: fx.clock.Now})
	w := pipeGet(h, "GET", "/feeds/lab-means.json", nil)
	if got := w.Header().Get(feedext.HeaderDesync); got != "2.033" {
		t.Errorf("default desync %q, want 2.033 (2 s + 2 s × 1/60 rps)", got)
	}
	// Without a BaseURL: relative links, a URN.
	var jf struct {
		FeedURL string `json:"feed_url"`
		Items   []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &jf); err != nil || jf.FeedURL != "/feeds/lab-means.json" {
		t.Errorf("feed_url %q (%v)", jf.FeedURL, err)
	}
	if w := pipeGet(h, "GET", "/feeds/lab-means.atom", nil); !bytes.Contains(w.Body.Bytes(), []byte("<id>urn:slogfeed:pipe:lab-means</id>")) {
		t.Errorf("no URN id in\n%s", w.Body)
	}
}

// TestPipeFeedDue checks the planned-update hint: Slogfeed-Due is the
// pipe's plan, spread per request over the desynchronisation interval, so
// subscribers polling right at the plan do not all arrive at once; with no
// plan there is no header.
func TestPipeFeedDue(t *testing.T) {
	fx := newPipeFixture(t)
	const plan = 40 * time.Second
	h := fx.handler(PipeFeedOptions{
		Load: publish.NewLoad(10*time.Second, 0, 10*time.Second),
		Hints: func(feed storage.Feed, now time.Time) runner.FeedHints {
			return runner.FeedHints{Next: now.Add(plan), Due: now.Add(plan)}
		},
	})
	seen := map[float64]bool{}
	for i := range 50 {
		w := pipeGet(h, "GET", "/feeds/lab-means.rss", nil)
		d, err := strconv.ParseFloat(w.Header().Get(feedext.HeaderDue), 64)
		if err != nil || d < plan.Seconds() || d >= plan.Seconds()+10 {
			t.Fatalf("request %d: %s %q, want within [40, 50) s", i, feedext.HeaderDue, w.Header().Get(feedext.HeaderDue))
		}
		if cc := w.Header().Get("Cache-Control"); cc != "public, max-age=40" {
			t.Fatalf("request %d: Cache-Control %q, want until the plan", i, cc)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("50 requests got %d distinct due times, want them spread", len(seen))
	}
	w := pipeGet(fx.handler(PipeFeedOptions{}), "GET", "/feeds/lab-means.rss", nil)
	if got := w.Header().Get(feedext.HeaderDue); got != "" {
		t.Errorf("%s %q without a plan", feedext.HeaderDue, got)
	}
}

// TestPipeFeedConcurrent reads the feed from many goroutines while the pipe
// publishes: every answer is a whole, valid document.
func TestPipeFeedConcurrent(t *testing.T) {
	fx := newPipeFixture(t)
	renders := &renderCounter{}
	h := fx.handler(PipeFeedOptions{Logger: slog.New(renders)})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ext := []string{"rss", "atom", "json"}[g%3]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				w := pipeGet(h, "GET", "/feeds/lab-means."+ext+[]string{"", "?limit=3"}[i%2], nil)
				if w.Code != 200 || w.Header().Get("ETag") != publish.ETag(w.Body.Bytes()) {
					t.Errorf("status %d, ETag %s", w.Code, w.Header().Get("ETag"))
					return
				}
				if _, err := gofeed.NewParser().Parse(bytes.NewReader(w.Body.Bytes())); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 20 {
		at := pipeNow.Add(time.Duration(i) * time.Minute)
		if _, err := fx.st.AddItems(fx.feed.ID, []storage.Item{{ID: fmt.Sprint("c", i), Title: fmt.Sprint("c", i), Published: at}}); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	// After the last change, one more rendering per (format, limit) at most.
	before := renders.n.Load()
	for _, ext := range []string{"rss", "atom", "json"} {
		for range 3 {
			pipeGet(h, "GET", "/feeds/lab-means."+ext, nil)
		}
	}
	if n := renders.n.Load() - before; n > 3 {
		t.Errorf("%d renderings for 9 requests of 3 unchanged documents", n)
	}
}

func TestPipeFeedCacheBounds(t *testing.T) {
	v := storage.Version{FeedID: 1, LastSeq: 1}
	doc := func(n int) func() (*pfDoc, storage.Version, error) {
		return func() (*pfDoc, storage.Version, error) {
			return &pfDoc{doc: publish.Doc{Bytes: make([]byte, n)}}, v, nil
		}
	}
	t.Run("entries", func(t *testing.T) {
		var c pfCache
		c.entries = map[pfKey]*pfEntry{}
		for i := range pfCacheEntries + 100 {
			if _, err := c.get(context.Background(), pfKey{feed: 1, limit: i}, v, doc(10)); err != nil {
				t.Fatal(err)
			}
		}
		if n, b := c.stats(); n != pfCacheEntries || b != 10*pfCacheEntries {
			t.Errorf("%d entries of %d bytes, want %d", n, b, pfCacheEntries)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		var c pfCache
		c.entries = map[pfKey]*pfEntry{}
		for i := range 100 {
			c.get(context.Background(), pfKey{feed: 1, limit: i}, v, doc(1<<20))
			if _, b := c.stats(); b > pfCacheBytes {
				t.Fatalf("%d bytes cached", b)
			}
		}
		c.get(context.Background(), pfKey{feed: 1, limit: 1000}, v, doc(pfMaxCachedDoc+1))
		if _, ok := c.entries[pfKey{feed: 1, limit: 1000}]; ok {
			t.Error("a document over pfMaxCachedDoc was cached")
		}
	})
	t.Run("errors are not cached", func(t *testing.T) {
		var c pfCache
		c.entries = map[pfKey]*pfEntry{}
		boom := errors.New("boom")
		calls := 0
		fail := func() (*pfDoc, storage.Version, error) { calls++; return nil, storage.Version{}, boom }
		for range 2 {
			if _, err := c.get(context.Background(), pfKey{}, v, fail); !errors.Is(err, boom) {
				t.Errorf("error %v", err)
			}
		}
		if calls != 2 {
			t.Errorf("%d calls, want 2", calls)
		}
	})
	t.Run("one rendering for concurrent requests", func(t *testing.T) {
		var c pfCache
		c.entries = map[pfKey]*pfEntry{}
		started, release := make(chan struct{}), make(chan struct{})
		var calls atomic.Int64
		slow := func() (*pfDoc, storage.Version, error) {
			calls.Add(1)
			close(started)
			<-release
			return &pfDoc{}, v, nil
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); c.get(context.Background(), pfKey{feed: 1}, v, slow) }()
		<-started
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if d, err := c.get(context.Background(), pfKey{feed: 1}, v, slow); d == nil || err != nil {
					t.Errorf("waiter: %v %v", d, err)
				}
			}()
		}
		// A waiter whose request ends stops waiting.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.get(ctx, pfKey{feed: 1}, v, slow); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled waiter: %v", err)
		}
		close(release)
		wg.Wait()
		if calls.Load() != 1 {
			t.Errorf("%d renderings", calls.Load())
		}
	})
}

func TestTypicalPeriod(t *testing.T) {
	at := func(mins ...int) []storage.Item {
		var items []storage.Item
		for _, m := range mins {
			it := storage.Item{}
			if m >= 0 {
				it.Published = pipeItemsAt.Add(time.Duration(m) * time.Minute)
			}
			items = append(items, it)
		}
		return items
	}
	tests := []struct {
		name  string
		items []storage.Item
		want  time.Duration
	}{
		{"none", nil, 0},
		{"one", at(0), 0},
		{"same time", at(5, 5, 5), 0},
		{"regular, newest first", at(30, 15, 0), 15 * time.Minute},
		{"a gap", at(0, 10, 20, 60, 70), 10 * time.Minute},
		{"even count", at(0, 10, 30), 15 * time.Minute},
		{"undated ignored", at(0, -1, 15), 15 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := typicalPeriod(tt.items); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPipeFeedGolden pins the three documents of the fixture pipe
// (testdata/golden/README.md) and checks each as a reader would.
func TestPipeFeedGolden(t *testing.T) {
	fx := newPipeFixture(t)
	h := fx.handler(PipeFeedOptions{})
	for _, ext := range []string{"rss", "atom", "json"} {
		t.Run(ext, func(t *testing.T) {
			w := pipeGet(h, "GET", "/feeds/"+pipeSlug+"."+ext, nil)
			if w.Code != 200 {
				t.Fatalf("status %d", w.Code)
			}
			body := w.Body.Bytes()
			path := filepath.Join("testdata", "golden", "pipe."+ext)
			if updatePipeGolden() {
				if err := os.WriteFile(path, body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(body, want) {
				t.Errorf("%s differs from the golden file (run with -update after checking):\n%s", path, body)
			}
			checkPipeDoc(t, ext, want, pipeExpected(ext))
			gf, err := gofeed.NewParser().Parse(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if want := "Hourly means of the lab sensors"; gf.Description != want {
				t.Errorf("description %q, want the pipe's %q as plain text", gf.Description, want)
			}
		})
	}
}

// checkPipeDoc checks doc, of format ext, strictly and through gofeed and
// slogfeed's own parser, against the entries it should hold (newest first;
// nil: none).
func checkPipeDoc(t *testing.T, ext string, doc []byte, want []pipeExpect) {
	t.Helper()
	switch ext {
	case "rss", "atom":
		strictXML(t, doc)
	case "json":
		checkJSONFeed(t, doc)
	}
	gf, err := gofeed.NewParser().Parse(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("gofeed: %v", err)
	}
	if gf.Title == "" {
		t.Error("no feed title")
	}
	if len(gf.Items) != len(want) {
		t.Fatalf("gofeed: %d items, want %d", len(gf.Items), len(want))
	}
	if want != nil && ext == "atom" && (gf.UpdatedParsed == nil || !gf.UpdatedParsed.Equal(want[0].Updated)) {
		t.Errorf("feed updated %v, want %v", gf.UpdatedParsed, want[0].Updated)
	}
	for i, it := range gf.Items {
		w := want[i]
		if it.Title != w.Title {
			t.Errorf("item %d: title %q, want %q", i, it.Title, w.Title)
		}
		if it.GUID != w.ID {
			t.Errorf("item %d: id %q, want %q", i, it.GUID, w.ID)
		}
		if it.PublishedParsed == nil || !it.PublishedParsed.Equal(w.Published) {
			t.Errorf("item %d: published %v, want %v", i, it.PublishedParsed, w.Published)
		}
		// Atom always has <updated>; JSON Feed date_modified only when it
		// differs from date_published; RSS has no item update date.
		checkUpdated := ext == "atom" || ext == "json" && !w.Updated.Equal(w.Published)
		if checkUpdated && (it.UpdatedParsed == nil || !it.UpdatedParsed.Equal(w.Updated)) {
			t.Errorf("item %d: updated %v, want %v", i, it.UpdatedParsed, w.Updated)
		}
	}
	// slogfeed's own parser reads the readings back, typed.
	p, err := parser.Parse(doc, pipeContentTypes[ext], parser.Options{})
	if err != nil {
		t.Fatalf("parser.Parse: %v", err)
	}
	if len(p.Items) != len(want) {
		t.Fatalf("parser.Parse: %d items, want %d", len(p.Items), len(want))
	}
	for i, it := range p.Items {
		w := want[i]
		if it.ID != w.ID || it.Title != w.Title || !it.Published.Equal(w.Published) {
			t.Errorf("parsed item %d: %q %q %v, want %q %q %v", i, it.ID, it.Title, it.Published, w.ID, w.Title, w.Published)
		}
		if !sameTestReading(it.Reading, w.Reading) {
			t.Errorf("parsed item %d: reading %+v, want %+v", i, it.Reading, w.Reading)
		}
	}
}

func sameTestReading(a, b *storage.Reading) bool {
	if a == nil || b == nil {
		return a == b
	}
	samePtr := func(x, y *float64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.Value == b.Value && a.Unit == b.Unit && a.Sensor == b.Sensor && a.Time.Equal(b.Time) &&
		samePtr(a.Lat, b.Lat) && samePtr(a.Lon, b.Lon)
}

// strictXML decodes doc token by token with a strict decoder: well-formed,
// only characters XML allows, every namespace prefix declared.
func strictXML(t *testing.T, doc []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("strict XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, n := range append([]xml.Name{se.Name}, attrNames(se.Attr)...) {
				if n.Space != "" && !strings.Contains(n.Space, "/") && n.Space != "xmlns" {
					t.Errorf("undeclared prefix %q on %s", n.Space, n.Local)
				}
			}
		}
	}
}

func attrNames(attrs []xml.Attr) []xml.Name {
	names := make([]xml.Name, len(attrs))
	for i, a := range attrs {
		names[i] = a.Name
	}
	return names
}

// checkJSONFeed checks what JSON Feed 1.1 requires.
func checkJSONFeed(t *testing.T, doc []byte) {
	t.Helper()
	var jf map[string]any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&jf); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if jf["version"] != "https://jsonfeed.org/version/1.1" {
		t.Errorf("version %v", jf["version"])
	}
	if s, _ := jf["title"].(string); s == "" {
		t.Error("no title")
	}
	items, ok := jf["items"].([]any)
	if !ok {
		t.Fatalf("items %T", jf["items"])
	}
	for i, raw := range items {
		it, _ := raw.(map[string]any)
		if id, _ := it["id"].(string); id == "" {
			t.Errorf("item %d: no id", i)
		}
		html, _ := it["content_html"].(string)
		text, _ := it["content_text"].(string)
		if html == "" && text == "" {
			t.Errorf("item %d: neither content_html nor content_text", i)
		}
		if ext, ok := it[feedext.JSONKey].(map[string]any); ok {
			if _, ok := ext[feedext.AttrValue].(json.Number); !ok {
				t.Errorf("item %d: %s without a numeric value: %v", i, feedext.JSONKey, ext)
			}
		}
	}
}

// A document whose title changed is not "not modified" to a reader that
// asks If-Modified-Since the time it last read it.
func TestPipeFeedTitleChangeModifies(t *testing.T) {
	fx := newPipeFixture(t)
	h := fx.handler(PipeFeedOptions{})
	path := "/feeds/" + pipeSlug + ".rss"
	first := pipeGet(h, "GET", path, nil)
	lm := first.Header().Get("Last-Modified")
	if first.Code != 200 || lm == "" {
		t.Fatalf("first read: %d, Last-Modified %q", first.Code, lm)
	}
	if w := pipeGet(h, "GET", path, map[string]string{"If-Modified-Since": lm}); w.Code != http.StatusNotModified {
		t.Fatalf("unchanged: %d", w.Code)
	}
	fx.clock.Set(fx.clock.Now().Add(time.Hour))
	if _, err := fx.st.UpdateFeed(fx.feed.ID, func(f *storage.Feed) error { f.Title = "Lab means"; return nil }); err != nil {
		t.Fatal(err)
	}
	w := pipeGet(h, "GET", path, map[string]string{"If-Modified-Since": lm})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "<title>Lab means</title>") {
		t.Errorf("after a new title: %d %.200s", w.Code, w.Body)
	}
}
