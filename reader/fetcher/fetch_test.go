package fetcher

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/reader/parser/parsertest"
	"github.com/slogfeed/slogfeed/storage"
)

// testNow is the fixed clock of the fetch and parse tests.
var testNow = time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)

// labs are the two loopback publishers of the fetch tests: good on
// 127.0.0.1 (allow-listed, exactly that address) and evil on 127.0.0.2
// (a loopback address the SSRF guard must refuse). Both serve the same
// routes, so a fetch of evil that succeeded would prove the guard broken.
type labs struct {
	good, evil *httptest.Server
	mux        *http.ServeMux
	resolver   *net.Resolver
}

func newLabs(t *testing.T) *labs {
	t.Helper()
	l := &labs{mux: http.NewServeMux()}
	l.good = httptest.NewServer(l.mux)
	t.Cleanup(l.good.Close)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2 (needed for the refusal tests): %v", err)
	}
	l.evil = httptest.NewUnstartedServer(l.mux)
	l.evil.Listener.Close()
	l.evil.Listener = ln
	l.evil.Start()
	t.Cleanup(l.evil.Close)
	l.resolver = fakeResolver(map[string][]netip.Addr{
		"feeds.test":  {netip.MustParseAddr("127.0.0.1")},
		"evil.test":   {netip.MustParseAddr("127.0.0.2")},
		"rebind.test": {netip.MustParseAddr("::1")},
	})
	return l
}

// port returns the port of s.
func port(s *httptest.Server) string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

// fetcher returns a Fetcher that can reach exactly 127.0.0.1.
func (l *labs) fetcher(tweak func(*Options)) *Fetcher {
	opt := Options{
		Timeout:  10 * time.Second,
		MaxBody:  1 << 20,
		Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Resolver: l.resolver,
		Now:      func() time.Time { return testNow },
	}
	if tweak != nil {
		tweak(&opt)
	}
	return New(opt)
}

func serveFile(name, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(filepath.Join("..", "parser", "testdata", name))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Write(b)
	}
}

func serveBytes(b []byte, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(b)
	}
}

var (
	manyItems = sync.OnceValue(func() []byte { return parsertest.RSSItems(200_000) })
	gzipBomb  = sync.OnceValue(func() []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zero := make([]byte, 1<<20)
		for range 64 { // 64 MiB of zeros in ~64 KiB
			zw.Write(zero)
		}
		zw.Close()
		return b.Bytes()
	})
	deflateBomb = sync.OnceValue(func() []byte {
		var b bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&b, zlib.BestCompression)
		zero := make([]byte, 1<<20)
		for range 64 { // 64 MiB of zeros in ~64 KiB
			zw.Write(zero)
		}
		zw.Close()
		return b.Bytes()
	})
)

// TestHostile is the hostile-input table: every case ends in a clear error
// (a sentinel and readable words) or a clean feed, never a crash, within a
// bounded amount of memory.
func TestHostile(t *testing.T) {
	// The hostile bodies are built before any fetch: compressing 64 MiB
	// inside a handler (slow under -race) would eat the fetch's timeout.
	gzipBomb()
	deflateBomb()
	manyItems()
	l := newLabs(t)
	goodBase := l.good.URL
	evilBase := l.evil.URL
	var bigWritten atomic.Int64
	bigDone := make(chan struct{}, 1)

	type hostileCase struct {
		name     string
		handler  http.HandlerFunc
		url      string // default: the good server's /hostile/<name>
		opt      func(*Options)
		parse    parser.Options
		fetchErr error
		parseErr error
		msg      string // in the error message
		check    func(t *testing.T, p *parser.Parsed)
		maxAlloc uint64 // bytes allocated by Fetch and Parse (default 64 MiB)
		after    func(t *testing.T)
	}
	cases := []hostileCase{
		{
			name:    "billion laughs",
			handler: serveFile("hostile/billion-laughs.xml", "application/rss+xml"),
			check: func(t *testing.T, p *parser.Parsed) {
				if len(p.Items) != 1 || strings.Contains(p.Items[0].Title+p.Items[0].Summary+p.Title, "lollol") {
					t.Errorf("entities expanded: %+v", p)
				}
				if p.Items[0].Title != "&lol9;" {
					t.Errorf("title %q, want the reference left as is", p.Items[0].Title)
				}
			},
			maxAlloc: 4 << 20,
		},
		{
			name:    "external entity",
			handler: serveFile("hostile/xxe.xml", "application/rss+xml"),
			check: func(t *testing.T, p *parser.Parsed) {
				passwd, _ := os.ReadFile("/etc/passwd")
				first, _, _ := strings.Cut(string(passwd), "\n")
				for _, it := range p.Items {
					all := p.Title + it.Title + it.Summary + it.Content
					if strings.Contains(all, "root:") || (first != "" && strings.Contains(all, first)) {
						t.Errorf("external entity loaded: %q", all)
					}
				}
				if len(p.Items) != 1 || p.Items[0].Title != "&xxe;" {
					t.Errorf("items %+v", p.Items)
				}
			},
			maxAlloc: 4 << 20,
		},
		{
			name:    "200000 items",
			handler: serveBytes(manyItems(), "application/rss+xml"),
			opt:     func(o *Options) { o.MaxBody = 10 << 20 },
			check: func(t *testing.T, p *parser.Parsed) {
				if !p.Truncated || len(p.Items) != parser.DefaultMaxItems {
					t.Errorf("truncated=%v, %d items; want true, %d", p.Truncated, len(p.Items), parser.DefaultMaxItems)
				}
				if p.Items[0].ID != "i0" || p.Items[len(p.Items)-1].ID != fmt.Sprintf("i%d", parser.DefaultMaxItems-1) {
					t.Errorf("kept %s…%s, want the first items", p.Items[0].ID, p.Items[len(p.Items)-1].ID)
				}
			},
		},
		{
			name: "50 MB body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				defer func() { bigDone <- struct{}{} }()
				w.Header().Set("Content-Type", "application/rss+xml")
				chunk := bytes.Repeat([]byte("<!-- padding -->"), 2048)
				for bigWritten.Load() < 50<<20 {
					n, err := w.Write(chunk)
					bigWritten.Add(int64(n))
					if err != nil {
						return
					}
				}
			},
			fetchErr: ErrTooLarge,
			msg:      "more than 1048576 bytes",
			maxAlloc: 16 << 20,
			after: func(t *testing.T) {
				<-bigDone // the handler stops when the client hangs up
				if n := bigWritten.Load(); n >= 50<<20 {
					t.Errorf("the client read the whole 50 MB body (%d bytes)", n)
				}
			},
		},
		{
			name: "50 MB announced",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(50<<20))
				w.WriteHeader(200)
			},
			fetchErr: ErrTooLarge,
			msg:      "announced 52428800 bytes",
			maxAlloc: 4 << 20,
		},
		{
			name: "gzip bomb",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Accept-Encoding") != "gzip" {
					t.Errorf("Accept-Encoding %q", r.Header.Get("Accept-Encoding"))
				}
				w.Header().Set("Content-Encoding", "gzip")
				w.Write(gzipBomb())
			},
			fetchErr: ErrTooLarge,
			msg:      "decompressed",
			maxAlloc: 16 << 20,
		},
		{
			name: "deflate bomb",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "deflate")
				w.Write(deflateBomb())
			},
			fetchErr: ErrTooLarge,
			msg:      "decompressed",
			maxAlloc: 16 << 20,
		},
		{
			name: "corrupt deflate",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "deflate")
				w.Write(deflateBomb()[:1000])
			},
			fetchErr: ErrEncoding,
			msg:      "deflate",
		},
		{
			name: "gzip without Content-Encoding",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Write(gzipBomb())
			},
			fetchErr: ErrTooLarge,
			maxAlloc: 16 << 20,
		},
		{
			name: "corrupt gzip",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "gzip")
				w.Write(gzipBomb()[:1000])
			},
			fetchErr: ErrEncoding,
			msg:      "gzip",
		},
		{
			name: "unasked encoding",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "br")
				w.Write([]byte("xx"))
			},
			fetchErr: ErrEncoding,
			msg:      `"br"`,
		},
		{
			name: "1 byte per second",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/rss+xml")
				w.WriteHeader(200)
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for {
					if _, err := w.Write([]byte("<")); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					select {
					case <-r.Context().Done():
						return
					case <-tick.C:
					}
				}
			},
			opt:      func(o *Options) { o.Timeout = 300 * time.Millisecond },
			fetchErr: ErrTimeout,
			msg:      "timed out after 300ms",
		},
		{
			name: "headers never come",
			handler: func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			},
			opt:      func(o *Options) { o.Timeout = 300 * time.Millisecond },
			fetchErr: ErrTimeout,
		},
		{
			name: "redirect to loopback",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, evilBase+"/hostile/ok", http.StatusFound)
			},
			fetchErr: ErrBlocked,
			msg:      "127.0.0.2 is a loopback address",
		},
		{
			name: "redirect to a name of loopback",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "http://evil.test:"+port(l.evil)+"/hostile/ok", http.StatusFound)
			},
			fetchErr: ErrBlocked,
			msg:      "127.0.0.2",
		},
		{
			name:     "name resolving to loopback",
			url:      "http://evil.test:" + port(l.evil) + "/hostile/ok",
			fetchErr: ErrBlocked,
			msg:      "127.0.0.2 is a loopback address",
		},
		{
			name:     "name resolving to IPv6 loopback",
			url:      "http://rebind.test:" + port(l.good) + "/hostile/ok",
			fetchErr: ErrBlocked,
			msg:      "::1 is a loopback address",
		},
		{
			name:     "literal loopback",
			url:      evilBase + "/hostile/ok",
			fetchErr: ErrBlocked,
		},
		{
			name:     "IPv4-mapped loopback",
			url:      "http://[::ffff:127.0.0.2]:" + port(l.evil) + "/hostile/ok",
			fetchErr: ErrBlocked,
			msg:      "IPv4-mapped loopback",
		},
		{
			name:     "cloud metadata",
			url:      "http://169.254.169.254/latest/meta-data/",
			fetchErr: ErrBlocked,
			msg:      "link-local",
		},
		{
			name:  "allow-listed name",
			url:   "http://feeds.test:" + port(l.good) + "/hostile/ok",
			check: func(t *testing.T, p *parser.Parsed) { checkItems(t, p, 6) },
		},
		{
			name:     "file URL",
			url:      "file:///etc/passwd",
			fetchErr: ErrScheme,
			msg:      "fetch file:///etc/passwd: only http and https URLs can be fetched, not file:",
		},
		{
			name: "redirect to file URL",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
			},
			fetchErr: ErrScheme,
		},
		{
			name:     "gopher URL",
			url:      "gopher://127.0.0.1/",
			fetchErr: ErrScheme,
		},
		{
			name:     "no scheme",
			url:      "feeds.test/feed.xml",
			fetchErr: ErrInvalidURL,
		},
		{
			name: "redirect loop",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, r.URL.Path, http.StatusFound)
			},
			fetchErr: ErrTooManyRedirects,
			msg:      "stopped after 5",
		},
		{
			name:    "control characters",
			handler: serveFile("hostile/control-chars.xml", "application/rss+xml"),
			check: func(t *testing.T, p *parser.Parsed) {
				checkItems(t, p, 1)
				if got := p.Items[0].Title; got != "bell and null and [31m escape done" {
					t.Errorf("title %q", got)
				}
			},
		},
		{
			name:    "bad and missing dates",
			handler: serveFile("hostile/dates.xml", "application/rss+xml"),
			check: func(t *testing.T, p *parser.Parsed) {
				checkItems(t, p, 6)
				for _, it := range p.Items {
					want := time.Time{}
					if it.ID == "d-good" {
						want = time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)
					}
					if !it.Published.Equal(want) {
						t.Errorf("%s: published %v, want %v", it.ID, it.Published, want)
					}
				}
			},
		},
		{
			name:     "HTML instead of a feed",
			handler:  serveFile("hostile/html-page.html", "text/html; charset=utf-8"),
			parseErr: parser.ErrNotFeed,
			msg:      "not a feed: the server sent an HTML page",
		},
		{
			name:     "HTML labelled as XML",
			handler:  serveFile("hostile/html-page.html", "application/rss+xml"),
			parseErr: parser.ErrNotFeed,
			msg:      "HTML page",
		},
		{
			name:    "invalid UTF-8",
			handler: serveFile("hostile/invalid-utf8.xml", "application/rss+xml"),
			check: func(t *testing.T, p *parser.Parsed) {
				checkItems(t, p, 1)
				if !strings.HasPrefix(p.Items[0].Title, "a") || !strings.HasSuffix(p.Items[0].Title, "e") {
					t.Errorf("title %q", p.Items[0].Title)
				}
			},
		},
		{
			name:    "Latin-1 labelled UTF-8",
			handler: serveFile("hostile/latin1-labelled-utf8.xml", "application/rss+xml; charset=utf-8"),
			check: func(t *testing.T, p *parser.Parsed) {
				checkItems(t, p, 1)
				if got := p.Items[0].Title; got != "Température à Liège: 21,5 °C" || p.Title != "Météo" {
					t.Errorf("title %q, feed %q", got, p.Title)
				}
			},
		},
		{
			name:    "UTF-8 labelled ISO-8859-1",
			handler: serveFile("hostile/utf8-labelled-latin1.xml", "application/rss+xml; charset=iso-8859-1"),
			check: func(t *testing.T, p *parser.Parsed) {
				checkItems(t, p, 1)
				if got := p.Items[0].Title; got != "Température à Liège: 21,5 °C" || p.Title != "Météo" {
					t.Errorf("title %q, feed %q", got, p.Title)
				}
			},
		},
		{
			name:     "truncated XML",
			handler:  serveFile("hostile/truncated.xml", "application/rss+xml"),
			parseErr: parser.ErrMalformed,
			msg:      "malformed feed: XML syntax error",
		},
		{
			name:     "deep nesting",
			handler:  serveBytes([]byte(`<rss xmlns:x="urn:x"><channel><item>`+strings.Repeat("<x:a>", 100_000)), "application/rss+xml"),
			parseErr: parser.ErrMalformed,
			msg:      "nested deeper than 128",
			maxAlloc: 8 << 20,
		},
		{
			name:     "a million empty elements",
			handler:  serveBytes([]byte(`<rss xmlns:x="urn:x"><channel><item>`+strings.Repeat("<x:a/>", 1_000_000)+`</item></channel></rss>`), "application/rss+xml"),
			opt:      func(o *Options) { o.MaxBody = 10 << 20 },
			parseErr: parser.ErrMalformed,
			msg:      "more than 100000 elements and attributes",
			maxAlloc: 48 << 20,
		},
		{
			name:     "a million attributes",
			handler:  serveBytes([]byte(`<rss><channel><item><guid `+strings.Repeat(`a="" `, 1_000_000)+`/></item></channel></rss>`), "application/rss+xml"),
			opt:      func(o *Options) { o.MaxBody = 10 << 20 },
			parseErr: parser.ErrMalformed,
			msg:      "a tag of 5000",
			maxAlloc: 48 << 20,
		},
		{
			name:     "empty body",
			handler:  serveBytes(nil, "application/rss+xml"),
			parseErr: parser.ErrNotFeed,
			msg:      "empty",
		},
		{
			name:     "garbage",
			handler:  serveBytes([]byte("\x00\x01binary\xff\xfe garbage"), "application/octet-stream"),
			parseErr: parser.ErrNotFeed,
			msg:      "neither XML nor JSON",
		},
		{
			name:     "other XML",
			handler:  serveBytes([]byte(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>`), "image/svg+xml"),
			parseErr: parser.ErrNotFeed,
			msg:      "root element is <svg>",
		},
		{
			name:     "JSON that is not a feed",
			handler:  serveBytes([]byte(`{"hello": "world"}`), "application/json"),
			parseErr: parser.ErrNotFeed,
			msg:      "not a JSON Feed",
		},
		{
			name:     "broken JSON",
			handler:  serveBytes([]byte(`{"version": "https://jsonfeed.org/version/1.1", "items": [`), "application/feed+json"),
			parseErr: parser.ErrMalformed,
		},
	}

	l.mux.HandleFunc("/hostile/ok", serveFile("hostile/dates.xml", "application/rss+xml"))
	l.mux.HandleFunc("/hostile/dates-one", serveBytes([]byte(`<rss><channel><item><guid>x</guid></item></channel></rss>`), "application/rss+xml"))
	for i, c := range cases {
		if c.handler != nil {
			l.mux.HandleFunc(fmt.Sprintf("/hostile/%d", i), c.handler)
		}
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := c.url
			if target == "" {
				target = fmt.Sprintf("%s/hostile/%d", goodBase, i)
			}
			f := l.fetcher(c.opt)
			defer f.CloseIdleConnections()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)

			resp, err := f.Fetch(context.Background(), Request{URL: target})
			var p *parser.Parsed
			if err == nil {
				opt := c.parse
				if opt.Now.IsZero() {
					opt.Now = resp.ReceivedAt
				}
				p, err = parser.Parse(resp.Body, resp.ContentType, opt)
			}

			runtime.ReadMemStats(&after)
			budget := c.maxAlloc
			if budget == 0 {
				budget = 64 << 20
			}
			if used := after.TotalAlloc - before.TotalAlloc; used > budget {
				t.Errorf("allocated %d MiB, budget %d MiB", used>>20, budget>>20)
			}

			if c.after != nil {
				defer c.after(t)
			}
			want := c.fetchErr
			if want == nil {
				want = c.parseErr
			}
			switch {
			case want == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case want != nil && !errors.Is(err, want):
				t.Fatalf("error %v, want %v", err, want)
			case want != nil && c.fetchErr != nil && p != nil:
				t.Fatalf("fetch succeeded, want %v", want)
			}
			if err != nil {
				if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
					t.Errorf("message %q does not say %q", err, c.msg)
				}
				if len(err.Error()) > 400 || !utf8.ValidString(err.Error()) {
					t.Errorf("message not readable: %q", err)
				}
				return
			}
			parsertest.CheckText(t, p)
			if c.check != nil {
				c.check(t, p)
			}
		})
	}
}

func checkItems(t *testing.T, p *parser.Parsed, n int) {
	t.Helper()
	if len(p.Items) != n {
		t.Fatalf("%d items, want %d: %+v", len(p.Items), n, p.Items)
	}
}

func TestFetchConditional(t *testing.T) {
	l := newLabs(t)
	const etag = `"v42"`
	const lm = "Sat, 21 Nov 2026 19:30:00 GMT"
	var got http.Header
	l.mux.HandleFunc("/feed", func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Date", "Sat, 21 Nov 2026 20:00:00 GMT")
		w.Header().Set("Cache-Control", "max-age=300")
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Header().Set("Last-Modified", lm)
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Write([]byte(`<rss><channel><item><guid>a</guid></item></channel></rss>`))
	})
	f := l.fetcher(nil)
	ctx := context.Background()

	r1, err := f.Fetch(ctx, Request{URL: l.good.URL + "/feed"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.NotModified || r1.Status != 200 || len(r1.Body) == 0 || r1.ETag != etag || r1.LastModified != lm {
		t.Fatalf("first fetch: %+v", r1)
	}
	if !r1.LastModifiedTime.Equal(time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)) || !r1.ReceivedAt.Equal(testNow) {
		t.Errorf("times: %v %v", r1.LastModifiedTime, r1.ReceivedAt)
	}
	if r1.CacheFor != 5*time.Minute || r1.Hints.CacheFor != 5*time.Minute {
		t.Errorf("CacheFor %v", r1.CacheFor)
	}
	if ua := got.Get("User-Agent"); !strings.HasPrefix(ua, "slogfeed/") {
		t.Errorf("User-Agent %q", ua)
	}
	if a := got.Get("Accept"); !strings.Contains(a, "application/rss+xml") || !strings.Contains(a, "application/feed+json") {
		t.Errorf("Accept %q", a)
	}
	if got.Get("If-None-Match") != "" || got.Get("If-Modified-Since") != "" {
		t.Errorf("validators sent on the first fetch: %v", got)
	}

	r2, err := f.Fetch(ctx, Request{URL: l.good.URL + "/feed", ETag: r1.ETag, LastModified: r1.LastModified})
	if err != nil {
		t.Fatal(err)
	}
	if got.Get("If-None-Match") != etag || got.Get("If-Modified-Since") != lm {
		t.Errorf("conditional headers: %v", got)
	}
	if !r2.NotModified || r2.Status != 304 || r2.Body != nil {
		t.Errorf("second fetch: %+v", r2)
	}
	if r2.ETag != etag || r2.LastModified != lm {
		t.Errorf("validators lost on 304: %q %q", r2.ETag, r2.LastModified)
	}
}

// A server that ignores conditional requests but repeats the ETag is a miss.
func TestFetchUnchangedETag(t *testing.T) {
	l := newLabs(t)
	l.mux.HandleFunc("/feed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"same"`)
		w.Write([]byte(`<rss><channel/></rss>`))
	})
	r, err := l.fetcher(nil).Fetch(context.Background(), Request{URL: l.good.URL + "/feed", ETag: `"same"`})
	if err != nil {
		t.Fatal(err)
	}
	if !r.NotModified || r.Status != 200 {
		t.Errorf("%+v", r)
	}
}

func TestFetchHTTPError(t *testing.T) {
	l := newLabs(t)
	l.mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	l.mux.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusGone)
	})
	f := l.fetcher(nil)
	_, err := f.Fetch(context.Background(), Request{URL: l.good.URL + "/busy"})
	var he *HTTPError
	if !errors.Is(err, ErrHTTPStatus) || !errors.As(err, &he) {
		t.Fatalf("%v", err)
	}
	if he.Status != 503 || he.RetryAfter != 2*time.Minute {
		t.Errorf("%+v", he)
	}
	if !strings.Contains(err.Error(), "server answered 503 Service Unavailable; retry after 2m0s") {
		t.Errorf("message %q", err)
	}
	_, err = f.Fetch(context.Background(), Request{URL: l.good.URL + "/gone"})
	if !errors.As(err, &he) || he.Status != 410 || he.RetryAfter != 0 || !strings.HasSuffix(err.Error(), "server answered 410 Gone") {
		t.Errorf("%v", err)
	}
}

func TestFetchHints(t *testing.T) {
	l := newLabs(t)
	l.mux.HandleFunc("/feed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Slogfeed-Phase", "12.5")
		w.Header().Set("Slogfeed-Desync", "4")
		w.Header().Set("Slogfeed-More", "1")
		w.Header().Set("Slogfeed-Next", "2026-11-21T20:30:00Z")
		w.Header().Set("Slogfeed-Due", "31.25")
		w.Header().Set("Cache-Control", "public, max-age=60")
		w.Write([]byte(`<rss><channel/></rss>`))
	})
	r, err := l.fetcher(nil).Fetch(context.Background(), Request{URL: l.good.URL + "/feed"})
	if err != nil {
		t.Fatal(err)
	}
	h := r.Hints
	if !h.HasPhase || h.Phase != 12500*time.Millisecond || h.Desync != 4*time.Second || h.CacheFor != time.Minute ||
		!h.HasDue || h.Due != 31250*time.Millisecond {
		t.Errorf("hints %+v", h)
	}
	if !r.More || !r.Next.Equal(time.Date(2026, 11, 21, 20, 30, 0, 0, time.UTC)) {
		t.Errorf("more %v next %v", r.More, r.Next)
	}
	if r.FinalURL != l.good.URL+"/feed" {
		t.Errorf("final URL %q", r.FinalURL)
	}
}

func TestHintHeaders(t *testing.T) {
	for _, c := range []struct {
		phase, desync, more, due string
		wantPhase                time.Duration
		hasPhase                 bool
		wantDesync               time.Duration
		wantMore                 bool
		wantDue                  time.Duration
		hasDue                   bool
	}{
		{"0", "0", "0", "0", 0, true, 0, false, 0, true},
		{"3600", "2.5", "true", "12.125", time.Hour, true, 2500 * time.Millisecond, true, 12125 * time.Millisecond, true},
		{"-1", "-3", "no", "-2", 0, false, 0, false, 0, false},
		{"NaN", "Inf", "", "NaN", 0, false, 0, false, 0, false},
		{"1e300", "1e300", "yes", "1e300", 0, false, 0, true, 0, false},
		{" 7 ", "abc", "1", "soon", 7 * time.Second, true, 0, true, 0, false},
		{"", "", "", "172800", 0, false, 0, false, 48 * time.Hour, true},
		{"", "", "", "172801", 0, false, 0, false, 0, false},
	} {
		h := http.Header{}
		h.Set("Slogfeed-Phase", c.phase)
		h.Set("Slogfeed-Desync", c.desync)
		h.Set("Slogfeed-More", c.more)
		h.Set("Slogfeed-Due", c.due)
		hs, more, _ := hints(h)
		if hs.Phase != c.wantPhase || hs.HasPhase != c.hasPhase || hs.Desync != c.wantDesync || more != c.wantMore ||
			hs.Due != c.wantDue || hs.HasDue != c.hasDue {
			t.Errorf("%q %q %q %q: got %+v more=%v", c.phase, c.desync, c.more, c.due, hs, more)
		}
	}
}

func TestCacheFor(t *testing.T) {
	date := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	httpDate := func(d time.Duration) string { return date.Add(d).Format(http.TimeFormat) }
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    time.Duration
	}{
		{"none", nil, 0},
		{"max-age", map[string]string{"Cache-Control": "max-age=300"}, 5 * time.Minute},
		{"max-age quoted, mixed case", map[string]string{"Cache-Control": `Public, MAX-AGE="120"`}, 2 * time.Minute},
		{"s-maxage larger", map[string]string{"Cache-Control": "max-age=0, s-maxage=60"}, time.Minute},
		{"Age subtracted", map[string]string{"Cache-Control": "max-age=300", "Age": "100"}, 200 * time.Second},
		{"Age beyond max-age", map[string]string{"Cache-Control": "max-age=300", "Age": "400"}, 0},
		{"no-cache", map[string]string{"Cache-Control": "no-cache, max-age=300", "Expires": httpDate(time.Hour)}, 0},
		{"no-store", map[string]string{"Cache-Control": "max-age=300, no-store"}, 0},
		{"Expires", map[string]string{"Expires": httpDate(10 * time.Minute)}, 10 * time.Minute},
		{"Expires larger than max-age", map[string]string{"Cache-Control": "max-age=60", "Expires": httpDate(10 * time.Minute)}, 10 * time.Minute},
		{"Expires past", map[string]string{"Expires": httpDate(-time.Hour)}, 0},
		{"Expires 0", map[string]string{"Expires": "0"}, 0},
		{"Expires garbage", map[string]string{"Expires": "tomorrow-ish"}, 0},
		{"capped", map[string]string{"Cache-Control": "max-age=31536000"}, MaxCacheFor},
		{"huge", map[string]string{"Cache-Control": "max-age=99999999999999999999999"}, MaxCacheFor},
		{"negative", map[string]string{"Cache-Control": "max-age=-5"}, 0},
		{"garbage", map[string]string{"Cache-Control": "max-age=soon, ,,="}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.headers {
				h.Set(k, v)
			}
			if got := cacheFor(h, date); got != c.want {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	date := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"120", 2 * time.Minute},
		{" 0 ", 0},
		{"-10", 0},
		{"1.5", 0},
		{"999999999999", MaxCacheFor},
		{date.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{date.Add(-time.Hour).Format(http.TimeFormat), 0},
		{date.Add(100 * time.Hour).Format(http.TimeFormat), MaxCacheFor},
		{"Sunday, 06-Nov-94 08:49:37 GMT", 0}, // RFC 850 form, in the past
		{"next week", 0},
	} {
		if got := retryAfter(c.v, date); got != c.want {
			t.Errorf("%q: got %v, want %v", c.v, got, c.want)
		}
	}
}

func TestFetchRetryAfterOn429Date(t *testing.T) {
	l := newLabs(t)
	l.mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", "Sat, 21 Nov 2026 20:00:00 GMT")
		w.Header().Set("Retry-After", "Sat, 21 Nov 2026 20:10:00 GMT")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	_, err := l.fetcher(nil).Fetch(context.Background(), Request{URL: l.good.URL + "/slow"})
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 429 || he.RetryAfter != 10*time.Minute {
		t.Errorf("%v", err)
	}
}

func TestFetchRedirects(t *testing.T) {
	l := newLabs(t)
	for i := range 6 {
		l.mux.HandleFunc(fmt.Sprintf("/r%d", i), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, fmt.Sprintf("/r%d", i+1), http.StatusMovedPermanently)
		})
	}
	l.mux.HandleFunc("/r6", serveBytes([]byte(`<rss><channel/></rss>`), "application/rss+xml"))
	// Five redirects are followed, six are not; none with MaxRedirects < 0.
	r, err := l.fetcher(nil).Fetch(context.Background(), Request{URL: l.good.URL + "/r1"})
	if err != nil || r.FinalURL != l.good.URL+"/r6" {
		t.Fatalf("%v %+v", err, r)
	}
	if _, err := l.fetcher(nil).Fetch(context.Background(), Request{URL: l.good.URL + "/r0"}); !errors.Is(err, ErrTooManyRedirects) {
		t.Errorf("six redirects: %v", err)
	}
	noRedirects := func(o *Options) { o.MaxRedirects = -1 }
	if _, err := l.fetcher(noRedirects).Fetch(context.Background(), Request{URL: l.good.URL + "/r5"}); !errors.Is(err, ErrTooManyRedirects) {
		t.Errorf("no redirects: %v", err)
	}
}

func TestFetchAllowAll(t *testing.T) {
	l := newLabs(t)
	l.mux.HandleFunc("/feed", serveBytes([]byte(`<rss><channel/></rss>`), "application/rss+xml"))
	f := l.fetcher(func(o *Options) { o.Allow, o.AllowAll = nil, true })
	if _, err := f.Fetch(context.Background(), Request{URL: l.evil.URL + "/feed"}); err != nil {
		t.Errorf("AllowAll: %v", err)
	}
	f = l.fetcher(func(o *Options) { o.Allow = nil })
	if _, err := f.Fetch(context.Background(), Request{URL: l.good.URL + "/feed"}); !errors.Is(err, ErrBlocked) {
		t.Errorf("empty allow-list: %v", err)
	}
}

// The proxy from the environment is never used.
func TestFetchIgnoresEnvironmentProxy(t *testing.T) {
	l := newLabs(t)
	l.mux.HandleFunc("/feed", serveBytes([]byte(`<rss><channel/></rss>`), "application/rss+xml"))
	t.Setenv("HTTP_PROXY", "http://127.0.0.2:1")
	t.Setenv("http_proxy", "http://127.0.0.2:1")
	if _, err := l.fetcher(nil).Fetch(context.Background(), Request{URL: l.good.URL + "/feed"}); err != nil {
		t.Errorf("%v", err)
	}
	// A configured proxy is used (and must pass the guard itself).
	proxied := false
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied = true
		w.Write([]byte(`<rss><channel/></rss>`))
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	if _, err := l.fetcher(func(o *Options) { o.Proxy = pu }).Fetch(context.Background(), Request{URL: "http://feeds.test/feed"}); err != nil || !proxied {
		t.Errorf("proxy: %v, used %v", err, proxied)
	}
}

func TestFetchCancelled(t *testing.T) {
	l := newLabs(t)
	l.mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.fetcher(nil).Fetch(ctx, Request{URL: l.good.URL + "/hang"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Errorf("%v", err)
	}
}

func TestDefaultUserAgent(t *testing.T) {
	ua := DefaultUserAgent()
	if !strings.HasPrefix(ua, "slogfeed/") || !strings.HasSuffix(ua, "(+https://slogfeed.org)") {
		t.Errorf("%q", ua)
	}
}

// UserAgent names the cluster node that fetches, and no host name on a
// single node.
func TestUserAgent(t *testing.T) {
	tests := []struct{ version, node, want string }{
		{"1.2.0", "", "slogfeed/1.2.0 (+https://slogfeed.org)"},
		{"1.2.0", "n1", "slogfeed/1.2.0 (node n1; +https://slogfeed.org)"},
		{"dev", "host.example", "slogfeed/dev (node host.example; +https://slogfeed.org)"},
	}
	for _, tt := range tests {
		t.Run(tt.version+"/"+tt.node, func(t *testing.T) {
			if got := UserAgent(tt.version, tt.node); got != tt.want {
				t.Errorf("UserAgent(%q, %q) = %q, want %q", tt.version, tt.node, got, tt.want)
			}
		})
	}
}

// Parse and fetch meet in the service; a round trip through both keeps the
// feed's items.
func TestFetchThenParse(t *testing.T) {
	l := newLabs(t)
	l.mux.HandleFunc("/feed", serveFile("readings/rss.xml", "application/rss+xml"))
	r, err := l.fetcher(nil).Fetch(context.Background(), Request{URL: l.good.URL + "/feed"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := parser.Parse(r.Body, r.ContentType, parser.Options{Now: r.ReceivedAt, BaseURL: r.FinalURL, Extract: &storage.ExtractRule{Regex: `(\d+)`}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) == 0 {
		t.Fatal("no items")
	}
}

// Fetcher.Client carries the SSRF guard to other outgoing requests.
func TestFetcherClientGuard(t *testing.T) {
	l := newLabs(t)
	l.mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	tests := []struct {
		name    string
		tweak   func(*Options)
		url     string
		blocked bool
	}{
		{"allowed target", nil, l.good.URL + "/hook", false},
		{"not allowed", func(o *Options) { o.Allow = nil }, l.good.URL + "/hook", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := l.fetcher(tt.tweak).Client()
			resp, err := c.Post(tt.url, "application/json", strings.NewReader("{}"))
			if resp != nil {
				resp.Body.Close()
			}
			if got := errors.Is(err, ErrBlocked); got != tt.blocked {
				t.Fatalf("blocked = %v (%v), want %v", got, err, tt.blocked)
			}
			if !tt.blocked && resp.StatusCode != http.StatusNoContent {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
}
