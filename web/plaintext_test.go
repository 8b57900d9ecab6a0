package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	nethtml "golang.org/x/net/html"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/sanitize/sanitizetest"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
	_ "github.com/slogfeed/slogfeed/transform/pipes" // union, template
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web"
	"github.com/slogfeed/slogfeed/web/ui"
)

// The plain-text suite: every value of sanitizetest (its testdata), in
// every encoding a feed may use, goes through a fetch from an HTTP
// server, the store, a pipe that builds titles and summaries from the
// items' fields, and out through the API, the web UI and the pipe's
// RSS, Atom and JSON Feed documents. No plain-text field of any output
// may hold a tag or an event handler after any number of decodings
// (sanitizetest.Check), and ordinary text ("temperature < 5 & rising",
// "a<b") reads as it was meant everywhere.

const plainToken = "plain-token"

// plainFeeds serves one RSS and one Atom document per value, with an item
// per encoding (in Atom, one with a title of type html and one of type
// text): the value is its title, author, category and summary.
func plainFeeds(t *testing.T) *httptest.Server {
	t.Helper()
	docs := map[string]string{}
	for _, v := range sanitizetest.Values() {
		var rss, atom strings.Builder
		rss.WriteString(`<?xml version="1.0" encoding="UTF-8"?><rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel><title>values</title><link>https://example.org/</link><description>d</description>`)
		atom.WriteString(`<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>values</title><id>urn:values</id><updated>2026-11-21T19:00:00Z</updated>`)
		for i, c := range sanitizetest.Cases() {
			if c.Value.Name != v.Name {
				continue
			}
			date := fmt.Sprintf("Sat, 21 Nov 2026 18:%02d:00 GMT", i%60)
			fmt.Fprintf(&rss, `<item><guid isPermaLink="false">rss/%s</guid><title>%s</title><dc:creator>%s</dc:creator><category>%s</category><description>%s</description><content:encoded>&lt;p&gt;body&lt;/p&gt;</content:encoded><pubDate>%s</pubDate></item>`,
				c.Name(), c.XML, c.XML, c.XML, c.XML, date)
			for _, typ := range []string{"html", "text"} {
				cat := ""
				if !strings.Contains(c.XML, "<![CDATA[") { // no CDATA in an attribute
					cat = fmt.Sprintf(`<category term="%s"/>`, strings.ReplaceAll(c.XML, `"`, "&quot;"))
				}
				fmt.Fprintf(&atom, `<entry><id>urn:atom:%s/%s</id><title type="%s">%s</title><author><name>%s</name></author>%s<summary type="html">%s</summary><content type="html">&lt;p&gt;body&lt;/p&gt;</content><updated>2026-11-21T18:%02d:00Z</updated></entry>`,
					c.Name(), typ, typ, c.XML, c.XML, cat, c.XML, i%60)
			}
		}
		rss.WriteString(`</channel></rss>`)
		atom.WriteString(`</feed>`)
		docs["/"+v.Name+".rss"], docs["/"+v.Name+".atom"] = rss.String(), atom.String()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(doc))
	}))
	t.Cleanup(srv.Close)
	return srv
}

type plainEnv struct {
	st  *storage.Store
	svc *aggregator.Service
	run *runner.Runner
	h   http.Handler
}

func newPlainEnv(t *testing.T) *plainEnv {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "plain.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &plainEnv{st: st}
	log := slog.New(slog.DiscardHandler)
	if e.run, err = runner.New(runner.Options{Store: st, Logger: log}); err != nil {
		t.Fatal(err)
	}
	e.svc, err = aggregator.NewService(aggregator.ServiceOptions{
		Store:     st,
		Fetcher:   fetcher.New(fetcher.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}),
		Scheduler: schedule.Config{Workers: 2},
		Logger:    log,
	})
	if err != nil {
		t.Fatal(err)
	}
	auth := web.NewAuth(web.AuthOptions{Token: plainToken, Logger: log})
	u, err := ui.New(ui.Options{Store: st, Auth: auth, Aggregator: e.svc, Pipes: e.run, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	e.h = web.New(web.Options{
		Store: st, Aggregator: e.svc, Pipes: e.run, Auth: auth, UI: u, Logger: log,
		PipeFeeds: web.PipeFeedHandler(st, web.PipeFeedOptions{BaseURL: "http://slog.test", Logger: log}),
	})
	return e
}

func (e *plainEnv) get(t *testing.T, path string) []byte {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+plainToken)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %.300s", path, rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// subscribe subscribes to url through the API and fetches it once.
func (e *plainEnv) subscribe(t *testing.T, url string) uint64 {
	t.Helper()
	req := httptest.NewRequest("POST", "/api/v1/feeds", strings.NewReader(fmt.Sprintf(`{"url":%q}`, url)))
	req.Header.Set("Authorization", "Bearer "+plainToken)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("subscribing to %s: %d %s", url, rec.Code, rec.Body)
	}
	var f web.FeedView
	if err := json.Unmarshal(rec.Body.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.FetchNow(context.Background(), f.ID); err != nil {
		t.Fatalf("fetching %s: %v", url, err)
	}
	return f.ID
}

// pipeOver creates and runs a pipe over feeds: their union, with titles
// "title ~ author" and summaries "<p>title</p>" (a plain-text field
// written from two plain-text fields, an HTML field from a plain one).
func (e *plainEnv) pipeOver(t *testing.T, slug string, feeds []uint64) {
	t.Helper()
	nodes := []string{`{"id":"u","op":"union"}`,
		`{"id":"t","op":"template","config":{"field":"title","template":"{title} ~ {author}"}}`,
		`{"id":"s","op":"template","config":{"field":"summary","template":"<p>{title}</p>"}}`}
	edges := []string{`{"from":"u","to":"t"}`, `{"from":"t","to":"s"}`}
	for i, id := range feeds {
		nodes = append(nodes, fmt.Sprintf(`{"id":"f%d","op":"source","config":{"feed":"feed/%d"}}`, i, id))
		edges = append(edges, fmt.Sprintf(`{"from":"f%d","to":"u"}`, i))
	}
	var def transform.Pipe
	if err := json.Unmarshal([]byte(fmt.Sprintf(`{"name":%q,"nodes":[%s],"edges":[%s],"output":{"slug":%q}}`,
		slug, strings.Join(nodes, ","), strings.Join(edges, ","), slug)), &def); err != nil {
		t.Fatal(err)
	}
	info, err := e.run.Create(context.Background(), def)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.run.RunNow(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
}

// plainWant is what ordinary values look like in the outputs, by the
// case's item id (rss/value/encoding, urn:atom:value/encoding/type).
type plainWant map[string]string

func ordinary() plainWant {
	w := plainWant{}
	for _, c := range sanitizetest.Cases() {
		if !c.Hostile && c.Same {
			w["rss/"+c.Name()] = c.Text
			w["urn:atom:"+c.Name()+"/html"] = c.Text
			w["urn:atom:"+c.Name()+"/text"] = c.Text
		}
	}
	return w
}

// checkField fails the test when value, shown in a plain-text field at
// where, holds markup.
func checkField(t *testing.T, where, value string) {
	t.Helper()
	if err := sanitizetest.Check(value); err != nil {
		t.Errorf("%s: %v", where, err)
	}
}

func TestPlainTextEndToEnd(t *testing.T) {
	srv := plainFeeds(t)
	e := newPlainEnv(t)
	want := ordinary()
	var rssFeeds, atomFeeds []uint64
	for _, v := range sanitizetest.Values() {
		rssFeeds = append(rssFeeds, e.subscribe(t, srv.URL+"/"+v.Name+".rss"))
		atomFeeds = append(atomFeeds, e.subscribe(t, srv.URL+"/"+v.Name+".atom"))
	}
	e.pipeOver(t, "rss-values", rssFeeds)
	e.pipeOver(t, "atom-values", atomFeeds)

	// The API: each feed's items and the feed itself.
	items, checked := 0, 0
	for _, id := range slices.Concat(rssFeeds, atomFeeds) {
		var list []storage.Item
		if err := json.Unmarshal(e.get(t, fmt.Sprintf("/api/v1/feeds/%d/items?limit=100", id)), &list); err != nil {
			t.Fatal(err)
		}
		for _, it := range list {
			items++
			where := fmt.Sprintf("API item %s", it.GUID)
			for _, f := range slices.Concat([]string{it.Title, it.Author}, it.Categories) {
				checkField(t, where, f)
			}
			if w, ok := want[it.GUID]; ok {
				checked++
				cats := []string{w}
				if strings.HasPrefix(it.GUID, "urn:atom:") && strings.Contains(it.GUID, "/cdata") {
					cats = nil // no CDATA in the term attribute
				}
				if it.Title != w || it.Author != w || !slices.Equal(it.Categories, cats) {
					t.Errorf("%s: title %q author %q categories %q, want %q", where, it.Title, it.Author, it.Categories, w)
				}
			}
		}
		var f web.FeedView
		if err := json.Unmarshal(e.get(t, fmt.Sprintf("/api/v1/feeds/%d", id)), &f); err != nil {
			t.Fatal(err)
		}
		checkField(t, "API feed title", f.Title)

		// The web UI's page of the feed: every item (at most 16 a feed)
		// with its title as text.
		titles := uiItemTitles(t, e.get(t, fmt.Sprintf("/ui/feeds/%d", id)))
		if len(titles) != len(list) {
			t.Errorf("UI feed %d: %d items, the API %d", id, len(titles), len(list))
		}
		for _, title := range titles {
			checkField(t, fmt.Sprintf("UI feed %d", id), title)
		}
		for _, it := range list {
			if w, ok := want[it.GUID]; ok && !slices.Contains(titles, w) {
				t.Errorf("UI feed %d: no item titled %q in %q", id, w, titles)
			}
		}
	}
	if cases := len(sanitizetest.Cases()); items != 3*cases {
		t.Errorf("the API shows %d items, want %d (an RSS and two Atom items per case)", items, 3*cases)
	}
	if checked == 0 {
		t.Fatal("no ordinary value checked")
	}

	// The pipes' republished documents, in every format, and the UI's
	// page of a pipe feed.
	for slug, prefix := range map[string]string{"rss-values": "rss/", "atom-values": "urn:atom:"} {
		for _, ext := range []string{"rss", "atom", "json"} {
			doc := e.get(t, "/feeds/"+slug+"."+ext+"?limit=500")
			fields, err := sanitizetest.PlainFields(doc)
			if err != nil {
				t.Fatalf("%s.%s: %v", slug, ext, err)
			}
			titled := map[string]bool{}
			for _, fd := range fields {
				checkField(t, slug+"."+ext+" "+fd.Path, fd.Value)
				titled[fd.Value] = true
			}
			// Ordinary values keep their meaning through the template,
			// unless the title it builds is no longer ordinary text
			// ("a<b ~ a<b" reads as the tag "<b ~ a<b" once a reader's
			// own '>' follows).
			for id, w := range want {
				title := w + " ~ " + w
				if strings.HasPrefix(id, prefix) && sanitizetest.Check(title) == nil && !titled[title] {
					t.Errorf("%s.%s: no title %q", slug, ext, title)
				}
			}
		}
		titles := uiItemTitles(t, e.get(t, fmt.Sprintf("/ui/feeds/%d", e.pipeFeed(t, slug))))
		if len(titles) == 0 {
			t.Errorf("UI pipe feed %s: no items", slug)
		}
		for _, title := range titles {
			checkField(t, "UI pipe feed "+slug, title)
		}
	}
}

// pipeFeed returns the id of the feed of pipe slug.
func (e *plainEnv) pipeFeed(t *testing.T, slug string) uint64 {
	t.Helper()
	f, err := e.st.FeedBySlug(storage.KindPipe, slug)
	if err != nil {
		t.Fatal(err)
	}
	return f.ID
}

// uiItemTitles returns the text of the item headings of a UI page, as a
// browser shows it.
func uiItemTitles(t *testing.T, page []byte) []string {
	t.Helper()
	doc, err := nethtml.Parse(strings.NewReader(string(page)))
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	var walk func(n *nethtml.Node, inItem bool)
	walk = func(n *nethtml.Node, inItem bool) {
		if n.Type == nethtml.ElementNode && n.Data == "article" && slices.ContainsFunc(n.Attr, func(a nethtml.Attribute) bool {
			return a.Key == "class" && a.Val == "item"
		}) {
			inItem = true
		}
		if inItem && n.Type == nethtml.ElementNode && n.Data == "h3" {
			titles = append(titles, textOf(n))
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inItem)
		}
	}
	walk(doc, false)
	return titles
}

func textOf(n *nethtml.Node) string {
	if n.Type == nethtml.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textOf(c))
	}
	return strings.TrimSpace(b.String())
}
