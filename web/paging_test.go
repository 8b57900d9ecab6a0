package web

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/parser"
)

// followPages reads a paged feed from first, following each document's
// link to the older page (as slogfeed's fetcher finds it), and returns
// every item id, newest first, and the number of pages.
func followPages(t *testing.T, get func(target string) *http.Response, first, base string) ([]string, int) {
	t.Helper()
	var ids []string
	pages := 0
	for next := first; next != ""; pages++ {
		if pages > 20 {
			t.Fatal("more than 20 pages: the links loop")
		}
		resp := get(strings.TrimPrefix(next, base))
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", next, resp.StatusCode, body.String())
		}
		p, err := parser.Parse(body.Bytes(), resp.Header.Get("Content-Type"), parser.Options{MaxItems: 1000, BaseURL: base + "/"})
		if err != nil {
			t.Fatalf("GET %s: %v", next, err)
		}
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		if ct := resp.Header.Get("Content-Type"); strings.Contains(ct, "xml") {
			// Each page names itself; an older page links back to the
			// subscription document and is no WebSub topic.
			links := feedLinks(t, body.Bytes())
			doc, _, _ := strings.Cut(first, "?")
			want := map[string]string{"self": base + doc} // the subscription document, whatever its limit
			if pages > 0 {
				want["self"], want["current"], want["first"] = next, base+doc, base+doc
			}
			for rel, href := range want {
				if !strings.HasPrefix(href, base) {
					href = base + href
				}
				if links[rel] != href {
					t.Errorf("page %d (%s): rel=%q links %q, want %q", pages, next, rel, links[rel], href)
				}
			}
			if pages == 0 && links["current"] != "" || pages > 0 && (links["hub"] != "" || resp.Header.Get("Link") != "") {
				t.Errorf("page %d (%s): links %v, Link header %q", pages, next, links, resp.Header.Get("Link"))
			}
		}
		next = p.Older
	}
	return ids, pages
}

// feedLinks returns the href of each rel of the links of a feed's channel
// or feed element (RSS atom:link, Atom link).
func feedLinks(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	d := xml.NewDecoder(bytes.NewReader(doc))
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			return out
		}
		switch e := tok.(type) {
		case xml.StartElement:
			depth++
			// rss > channel > atom:link, feed > link
			if e.Name.Local == "link" && (depth == 3 && e.Name.Space == "http://www.w3.org/2005/Atom" || depth == 2) {
				var rel, href string
				for _, a := range e.Attr {
					switch a.Name.Local {
					case "rel":
						rel = a.Value
					case "href":
						href = a.Value
					}
				}
				if rel != "" {
					out[rel] = href
				}
			}
		case xml.EndElement:
			depth--
		}
	}
}

// A pipe feed's pages, followed by their rel="next" (JSON Feed next_url)
// links, hold every item once, newest first; the first page of each
// format is pinned by a golden file.
func TestPipeFeedPages(t *testing.T) {
	fx := newPipeFixture(t)
	h := fx.handler(PipeFeedOptions{})
	for _, ext := range []string{"rss", "atom", "json"} {
		t.Run(ext, func(t *testing.T) {
			want := pipeExpected(ext)
			get := func(target string) *http.Response { return pipeGet(h, "GET", target, nil).Result() }
			ids, pages := followPages(t, get, "/feeds/"+pipeSlug+"."+ext+"?limit=2", "https://slog.example.org")
			if pages != 3 || len(ids) != len(want) {
				t.Fatalf("%d pages, ids %v; want 3 pages of %d items", pages, ids, len(want))
			}
			first := pipeGet(h, "GET", "/feeds/"+pipeSlug+"."+ext+"?limit=2", nil).Body.Bytes()
			path := filepath.Join("testdata", "golden", "pipe-page."+ext)
			if updatePipeGolden() {
				if err := os.WriteFile(path, first, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(first, golden) {
				t.Errorf("%s differs from the golden file:\n%s", path, first)
			}
			checkPipeDoc(t, ext, first, want[:2])
		})
	}
}

// Slogfeed-More is sent on the subscription document when the request's
// If-Modified-Since lies before its oldest item and older ones exist (the
// subscriber missed some), and only then.
func TestPipeFeedMore(t *testing.T) {
	fx := newPipeFixture(t)
	h := fx.handler(PipeFeedOptions{})
	all := pipeGet(h, "GET", "/feeds/"+pipeSlug+".rss", nil)
	newest := all.Header().Get("Last-Modified")
	long := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Format(http.TimeFormat)
	tests := []struct {
		name, target, ims string
		more              bool
	}{
		{"missed items", "/feeds/" + pipeSlug + ".rss?limit=2", long, true},
		{"no conditional request", "/feeds/" + pipeSlug + ".rss?limit=2", "", false},
		{"up to date", "/feeds/" + pipeSlug + ".rss?limit=2", newest, false},
		{"the whole feed fits", "/feeds/" + pipeSlug + ".rss", long, false},
		{"an older page", "/feeds/" + pipeSlug + ".rss?limit=2&before=3", long, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.ims != "" {
				hdr["If-Modified-Since"] = tt.ims
			}
			w := pipeGet(h, "GET", tt.target, hdr)
			if got := w.Header().Get(feedext.HeaderMore) == "1"; got != tt.more {
				t.Errorf("status %d, %s: %q, want set %v", w.Code, feedext.HeaderMore, w.Header().Get(feedext.HeaderMore), tt.more)
			}
		})
	}
	if w := pipeGet(h, "GET", "/feeds/"+pipeSlug+".rss?before=x", nil); w.Code != http.StatusBadRequest {
		t.Errorf("before=x: status %d, want 400", w.Code)
	}
}

// A sensor feed's pages hold every stored reading once; the subscriber
// that missed readings is told so.
func TestSensorFeedPages(t *testing.T) {
	e := newSensorEnv(t)
	last := e.postSeries(t, "lab-1", 7, sensorT0)
	e.clock.Set(last.Add(time.Second))
	for _, ext := range []string{"rss", "atom", "json"} {
		t.Run(ext, func(t *testing.T) {
			get := func(target string) *http.Response {
				resp, _ := e.get(t, target, nil)
				_, body := e.get(t, target, nil)
				resp.Body = nopCloser{bytes.NewReader(body)}
				return resp
			}
			ids, pages := followPages(t, get, "/sensors/lab-1."+ext+"?limit=3", "https://slog.example.org")
			slices.Reverse(ids)
			if pages != 3 || len(ids) != 7 || !strings.HasSuffix(ids[0], readingID("lab-1", sensorT0, 1)) {
				t.Fatalf("%d pages, ids %v; want 3 pages, the 7 readings", pages, ids)
			}
		})
	}
	resp, _ := e.get(t, "/sensors/lab-1.rss?limit=3", map[string]string{"If-Modified-Since": sensorT0.Format(http.TimeFormat)})
	if resp.Header.Get(feedext.HeaderMore) != "1" {
		t.Errorf("a subscriber that missed readings gets no %s", feedext.HeaderMore)
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
