package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

var (
	scriptTag  = regexp.MustCompile(`(?is)<script\b[^>]*>`)
	eventAttr  = regexp.MustCompile(`(?i)<[^>]+\son[a-z]+\s*=`)
	styleAttr  = regexp.MustCompile(`(?i)<[^>]+\sstyle\s*=`)
	styleTag   = regexp.MustCompile(`(?i)<style\b`)
	jsURL      = regexp.MustCompile(`(?i)(href|src)\s*=\s*"\s*javascript:`)
	feedDataRe = regexp.MustCompile(`(?s)<script type="application/json" id="feed-data">(.*?)</script>`)
)

// checkPage asserts what every UI page must be: the security headers, a
// CSRF token, the navigation and landmarks, and no inline script, style
// or event handler.
func checkPage(t *testing.T, r response) {
	t.Helper()
	if got := r.header.Get("Content-Security-Policy"); got != ContentSecurityPolicy {
		t.Errorf("Content-Security-Policy %q", got)
	}
	for k, want := range map[string]string{
		"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin",
		"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store",
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if m := csrfMeta.FindStringSubmatch(r.body); m == nil || len(m[1]) < 32 {
		t.Errorf("no csrf-token meta")
	}
	for _, want := range []string{`<main id="main"`, `<nav aria-label="Main">`, `<a class="skip" href="#main">`,
		`>Feeds</a>`, `>Pipes</a>`, `>Sensors</a>`, `<h1>`, `<html lang="en">`, `href="/ui/static/app.css?v=`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	for _, tag := range scriptTag.FindAllString(r.body, -1) {
		switch {
		case tag == `<script type="application/json" id="feed-data">`:
		case strings.HasPrefix(tag, `<script type="module" src="/ui/`) && strings.Contains(tag, "?v="):
		default:
			t.Errorf("script tag %s: want only <script type=\"module\" src=...> (or the feed data)", tag)
		}
	}
	if strings.Contains(r.body, "<script>") {
		t.Error(`page has a "<script>" without src`)
	}
	for name, re := range map[string]*regexp.Regexp{"style attribute": styleAttr, "style element": styleTag, "event handler": eventAttr, "javascript: URL": jsURL} {
		if m := re.FindString(r.body); m != "" {
			t.Errorf("page has a %s: %s", name, m)
		}
	}
}

// TestPages renders every page: statuses, landmarks, the contract with
// the scripts, security headers, no inline script or style.
func TestPages(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	remote, sensor := strconv.FormatUint(e.remote.ID, 10), strconv.FormatUint(e.sensor.ID, 10)
	pipeID, pipeFeed := strconv.FormatUint(e.pipe.ID, 10), strconv.FormatUint(e.pipe.FeedID, 10)
	tests := []struct {
		path   string
		status int
		want   []string
		absent []string
	}{
		{"/ui/feeds", 200, []string{"<h1>Feeds</h1>", `<label for="feed-url">Feed URL</label>`, `>Subscribe</button>`,
			`<label for="opml-file">OPML file</label>`, `>Import</button>`, `href="/ui/feeds/` + remote + `"`,
			"North &amp; co", "70.0 s ± 2.00 s", "73.3\u00a0%", `<time datetime="2026-11-21T19:01:02Z"`, "in 12 s",
			"sensor lab-1", "pipe lab-mean", `aria-current="page">Feeds`, `class="table-wrap"`}, nil},
		{"/ui/feeds/" + remote, 200, []string{`<div id="chart-timeline"`, `<div id="chart-latency"`, `<div id="chart-values"`,
			"<h2 id=\"timeline-heading\">Publish times and polls</h2>", "<h2 id=\"latency-heading\">Latency</h2>", "<h2 id=\"values-heading\">Values</h2>",
			`<script type="module" src="/ui/assets/feed.js?v=`, `href="/ui/assets/feed.css?v=`, `id="feed-data"`,
			"<td data-label=\"Result\">miss</td>", "<td data-label=\"Result\">hit</td>", "90th percentile", "Reading 29",
			"HTTP 503 &lt;b&gt;busy&lt;/b&gt;", `href="/ui/feeds/` + remote + `/delete"`}, nil},
		{"/ui/feeds/" + sensor, 200, []string{`<div id="chart-values"`, "http://127.0.0.1:8080/sensors/lab-1.rss</a> <button type=\"button\" class=\"copy\""},
			nil},
		{"/ui/feeds/" + pipeFeed, 200, []string{"http://127.0.0.1:8080/feeds/lab-mean.atom", `href="/ui/pipes/` + pipeID + `"`}, []string{`id="chart-values"`, "/delete"}},
		{"/ui/feeds/" + remote + "/delete", 200, []string{`action="/ui/feeds/` + remote + `/delete"`, ">Delete feed</button>", ">Cancel</a>"}, nil},
		{"/ui/pipes", 200, []string{"<h1>Pipes</h1>", `<a href="/ui/pipes/new" class="button">New pipe</a>`, "Lab mean",
			`http://127.0.0.1:8080/feeds/lab-mean.rss</a> <button type="button" class="copy" data-copy="http://127.0.0.1:8080/feeds/lab-mean.rss">Copy</button>`,
			".json</a> <button", "on update"}, nil},
		{"/ui/pipes/new", 200, []string{`<div id="builder" data-pipe-id=""></div>`, `id="trigger-note" hidden>Trigger mdpt: in this slogfeed it runs like update`, `<script type="module" src="/ui/assets/builder.js?v=`, `href="/ui/assets/builder.css?v=`}, nil},
		{"/ui/pipes/" + pipeID, 200, []string{`<div id="builder" data-pipe-id="` + pipeID + `"></div>`, "<h1>Lab mean</h1>", "lab-mean.rss</a> <button"}, nil},
		{"/ui/pipes/" + pipeID + "/delete", 200, []string{">Delete pipe</button>"}, nil},
		{"/ui/sensors", 200, []string{"<h1>Sensors</h1>", `<label for="reading-sensor">Sensor</label>`, `<label for="reading-value">Value</label>`,
			`<label for="reading-unit">Unit</label>`, ">Post reading</button>", `href="/ui/sensors/lab-1"`, "24.5 C", `<td data-label="Readings">5</td>`}, nil},
		{"/ui/sensors/lab-1", 200, []string{"<h1>Sensor lab-1</h1>", "/sensors/lab-1.json</a>", "5 readings stored", "<td data-label=\"Value\">24.5</td>", `href="/ui/feeds/` + sensor + `"`}, nil},
		{"/ui/nope", 404, []string{"There is no page at /ui/nope."}, nil},
		{"/ui/feeds/999", 404, []string{"There is no feed 999."}, nil},
		{"/ui/feeds/abc", 404, []string{"There is no feed abc."}, nil},
		{"/ui/pipes/77", 404, []string{"There is no pipe 77."}, nil},
		{"/ui/sensors/nobody", 404, []string{"There is no sensor “nobody”"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := c.get(t, tt.path)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %.500s", r.status, tt.status, r.body)
			}
			checkPage(t, r)
			for _, w := range tt.want {
				if !strings.Contains(r.body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, w := range tt.absent {
				if strings.Contains(r.body, w) {
					t.Errorf("page has %q", w)
				}
			}
		})
	}
}

func TestRedirects(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	tests := []struct {
		name, path, accept string
		status             int
		location           string
	}{
		{"root, browser", "/", "text/html,application/xhtml+xml", http.StatusSeeOther, "/ui/feeds"},
		{"root, API client", "/", "application/json", http.StatusOK, ""},
		{"ui", "/ui", "text/html", http.StatusSeeOther, "/ui/feeds"},
		{"ui slash", "/ui/", "text/html", http.StatusSeeOther, "/ui/feeds"},
		{"login without token", "/ui/login?next=/ui/pipes", "text/html", http.StatusSeeOther, "/ui/pipes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.do(t, "GET", tt.path, nil, map[string]string{"Accept": tt.accept})
			if r.status != tt.status || r.header.Get("Location") != tt.location {
				t.Fatalf("%d %q, want %d %q", r.status, r.header.Get("Location"), tt.status, tt.location)
			}
			if tt.status == http.StatusOK && !strings.Contains(r.body, `"/api/v1/feeds"`) {
				t.Errorf("not the JSON index: %s", r.body)
			}
		})
	}
}

// TestFeedData checks the JSON the charts read.
func TestFeedData(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	r := c.get(t, "/ui/feeds/"+strconv.FormatUint(e.remote.ID, 10))
	m := feedDataRe.FindStringSubmatch(r.body)
	if m == nil {
		t.Fatal("no feed-data")
	}
	if strings.Contains(m[1], "<") {
		t.Errorf("feed data holds a raw '<': %s", m[1])
	}
	var d struct {
		Feed struct {
			ID     uint64 `json:"id"`
			Title  string `json:"title"`
			Policy string `json:"policy"`
			Unit   string `json:"unit"`
		} `json:"feed"`
		Polls []struct {
			T         int64     `json:"t"`
			Hit       bool      `json:"hit"`
			LatencyS  []float64 `json:"latency_s"`
			Published []int64   `json:"published"`
		} `json:"polls"`
		Readings []struct {
			T int64   `json:"t"`
			V float64 `json:"v"`
		} `json:"readings"`
	}
	if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
		t.Fatalf("%v: %s", err, m[1])
	}
	if d.Feed.ID != e.remote.ID || d.Feed.Title != "North & co" || d.Feed.Policy != "auto" || d.Feed.Unit != "C" {
		t.Errorf("feed %+v", d.Feed)
	}
	obs, err := e.st.Observations(e.remote.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Polls) != len(obs) {
		t.Fatalf("%d polls, want %d", len(d.Polls), len(obs))
	}
	for i, p := range d.Polls {
		o := obs[i]
		if p.T != o.At.UnixMilli() || p.Hit != o.Hit || len(p.LatencyS) != len(o.LatencyS) || len(p.Published) != len(o.Published) ||
			p.LatencyS == nil || p.Published == nil {
			t.Fatalf("poll %d: %+v, stored %+v", i, p, o)
		}
		if o.Hit && p.Published[0] != o.Published[0].UnixMilli() {
			t.Errorf("poll %d published %d, want %d", i, p.Published[0], o.Published[0].UnixMilli())
		}
	}
	items, err := e.st.Items(e.remote.ID, storage.ItemQuery{Order: storage.ByArrivalAsc})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Readings) != len(items) {
		t.Fatalf("%d readings, want %d", len(d.Readings), len(items))
	}
	for i, rd := range d.Readings {
		if rd.T != items[i].Reading.Time.UnixMilli() || rd.V != items[i].Reading.Value {
			t.Errorf("reading %d: %+v, want %v at %v", i, rd, items[i].Reading.Value, items[i].Reading.Time)
		}
		if i > 0 && rd.T < d.Readings[i-1].T {
			t.Errorf("readings not oldest first at %d", i)
		}
	}
}

// TestItemHTMLSanitised: item HTML with a script, handlers, a javascript:
// link, styles and a frame is shown without them.
func TestItemHTMLSanitised(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	r := c.get(t, "/ui/feeds/"+strconv.FormatUint(e.remote.ID, 10))
	if r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	checkPage(t, r)
	for _, bad := range []string{"document.cookie", "onerror", "alert(", "javascript:", "<iframe", "position:fixed"} {
		if strings.Contains(r.body, bad) {
			t.Errorf("page holds %q", bad)
		}
	}
	// The image is a link to it: the page's policy loads no remote image.
	for _, good := range []string{"<b>north mast</b>", `<a href="https://img.example.org/mast.png" rel="nofollow noopener noreferrer" class="item-image">mast</a>`, "click me"} {
		if !strings.Contains(r.body, good) {
			t.Errorf("page lacks %q", good)
		}
	}
	if strings.Contains(r.body, "<img") {
		t.Error("page holds an <img>, which its Content-Security-Policy blocks")
	}
}

// TestImagesAsLinks: item images become links to them, named by their alt
// text; inside a link, their alt text.
func TestImagesAsLinks(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"none", `<p>21.5 <b>C</b></p>`, `<p>21.5 <b>C</b></p>`},
		{"alt", `<p>a <img src="https://i.example/x.png" alt="mast"> b</p>`,
			`<p>a <a href="https://i.example/x.png" rel="nofollow noopener noreferrer" class="item-image">mast</a> b</p>`},
		{"no alt", `<img src="http://i.example/x.png?a=1&amp;b=2"/>`,
			`<a href="http://i.example/x.png?a=1&amp;b=2" rel="nofollow noopener noreferrer" class="item-image">image</a>`},
		{"alt escaped", `<img src="https://i.example/x.png" alt="a &lt;b&gt; &amp; c">`,
			`<a href="https://i.example/x.png" rel="nofollow noopener noreferrer" class="item-image">a &lt;b&gt; &amp; c</a>`},
		{"in a link", `<a href="https://e.example/" rel="nofollow noopener"><img src="https://i.example/x.png" alt="logo"></a>`,
			`<a href="https://e.example/" rel="nofollow noopener">logo</a>`},
		{"no source", `<p><img alt="gone"></p>`, `<p></p>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := imagesAsLinks(tt.in); got != tt.want {
				t.Errorf("imagesAsLinks(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSubscribe(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	tests := []struct {
		name   string
		form   url.Values
		status int
		want   string
		field  string // the id of the control the error is tied to
	}{
		{"bad scheme", url.Values{"url": {"ftp://example.org/feed"}, "policy": {"auto"}}, 422, "is not a feed URL: give an absolute http:// or https:// URL", "feed-url"},
		{"already subscribed", url.Values{"url": {"https://example.org/already.rss"}}, 422, "You are already subscribed to https://example.org/already.rss.", "feed-url"},
		{"address not allowed", url.Values{"url": {"http://127.0.0.1:9/feed.rss"}}, 422,
			"Could not subscribe to http://127.0.0.1:9/feed.rss: address not allowed: 127.0.0.1 is a loopback address", "feed-url"},
		{"unknown policy", url.Values{"url": {"https://example.org/new.rss"}, "policy": {"sometimes"}}, 422, "Unknown policy", "feed-policy"},
		{"empty URL", url.Values{"url": {"  "}}, 422, "Give the URL of the feed", "feed-url"},
		{"bad sleep window", url.Values{"url": {"https://example.org/sleepy.rss"}, "sleep": {"dusk-dawn"}}, 422, "Sleep windows: schedule: invalid sleep plan: daily window", "feed-sleep"},
		{"hostile value kept escaped", url.Values{"url": {`https://x.example/"><script>alert(1)</script>`}, "policy": {"nope"}}, 422,
			`value="https://x.example/&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`, "feed-policy"},
	}
	control := regexp.MustCompile(`<(?:input|select) id="([^"]+)"[^>]*>`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.client(t)
			r := c.post(t, "/ui/feeds", tt.form, true)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, tt.status, r.body)
			}
			checkPage(t, r)
			if !strings.Contains(r.body, tt.want) {
				t.Errorf("page lacks %q", tt.want)
			}
			if !strings.Contains(r.body, `role="alert" id="form-error"`) {
				t.Error("error not shown as an alert")
			}
			// The message is tied to its control, and to no other.
			for _, m := range control.FindAllStringSubmatch(r.body, -1) {
				tied := strings.Contains(m[0], `aria-invalid="true"`) && regexp.MustCompile(`aria-describedby="[^"]*\bform-error\b`).MatchString(m[0])
				if tied != (m[1] == tt.field) {
					t.Errorf("control %s: tied to the error %v: %s", m[1], tied, m[0])
				}
			}
		})
	}
	t.Run("with sleep windows", func(t *testing.T) {
		c := e.client(t)
		r := c.post(t, "/ui/feeds", url.Values{"url": {"https://example.org/solar.rss"}, "sleep": {"20:00-06:00"}}, true)
		f, err := e.st.FeedByURL("https://example.org/solar.rss")
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Sleep.SleepText(); got != "20:00-06:00" {
			t.Errorf("stored sleep %q, want 20:00-06:00", got)
		}
		page := c.get(t, r.header.Get("Location"))
		checkPage(t, page)
		if !strings.Contains(page.body, "<dt>Sleep (UTC)</dt><dd>20:00-06:00</dd>") {
			t.Errorf("feed page does not show the sleep window: %.3000s", page.body)
		}
	})
	t.Run("success, with a flash message", func(t *testing.T) {
		c := e.client(t)
		// The title's markup is removed, its ordinary '<' and '&' escaped.
		r := c.post(t, "/ui/feeds", url.Values{"url": {"https://example.org/new.rss"}, "title": {"<script>alert(1)</script>1 < 2 & c"}, "policy": {"fixed-15m"}}, true)
		f, err := e.st.FeedByURL("https://example.org/new.rss")
		if err != nil {
			t.Fatal(err)
		}
		if f.Policy != "fixed-15m" {
			t.Errorf("policy %q", f.Policy)
		}
		want := "/ui/feeds/" + strconv.FormatUint(f.ID, 10)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
			t.Fatalf("%d %q, want 303 %q", r.status, r.header.Get("Location"), want)
		}
		page := c.get(t, want)
		checkPage(t, page)
		if !strings.Contains(page.body, `<p class="flash flash-ok" role="status">Subscribed to 1 &lt; 2 &amp; c.`) {
			t.Errorf("no escaped flash message: %.2000s", page.body)
		}
		if !strings.Contains(page.body, `<h1>1 &lt; 2 &amp; c</h1>`) || strings.Contains(page.body, "alert(1)") {
			t.Error("not the new feed's page, or its title's script shown")
		}
		if again := c.get(t, want); strings.Contains(again.body, "flash-ok") {
			t.Error("flash message shown twice")
		}
	})
}

func TestImportOPML(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	good, err := os.ReadFile("testdata/subscriptions.opml")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := os.ReadFile("testdata/malformed.opml")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("happy path", func(t *testing.T) {
		c := e.client(t)
		r := c.upload(t, "/ui/feeds/import", map[string]string{"csrf_token": c.csrf(t), "policy": "dpt-l"}, "opml", "subs.opml", good)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/feeds" {
			t.Fatalf("%d %q: %.300s", r.status, r.header.Get("Location"), r.body)
		}
		page := c.get(t, "/ui/feeds")
		checkPage(t, page)
		for _, want := range []string{"Imported 2 feeds; 1 already subscribed; 2 failed.", "ftp://stations.example.org/east.rss", "https://stations.example.org/west.rss: reduce", "North mast", "South mast"} {
			if !strings.Contains(page.body, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		f, err := e.st.FeedByURL("https://stations.example.org/north.rss")
		if err != nil {
			t.Fatal(err)
		}
		if f.Policy != "dpt-l" || f.Title != "North mast" || strings.Join(f.Category, "/") != "Weather" {
			t.Errorf("imported %+v", f)
		}
	})
	t.Run("one feed", func(t *testing.T) {
		c := e.client(t)
		one := []byte(`<opml version="2.0"><body><outline type="rss" text="Solo" xmlUrl="https://stations.example.org/solo.rss"/></body></opml>`)
		r := c.upload(t, "/ui/feeds/import", map[string]string{"csrf_token": c.csrf(t)}, "opml", "one.opml", one)
		if r.status != http.StatusSeeOther {
			t.Fatalf("%d: %.300s", r.status, r.body)
		}
		if page := c.get(t, "/ui/feeds"); !strings.Contains(page.body, "Imported 1 feed; 0 already subscribed; 0 failed.") {
			t.Errorf("no singular message: %.2000s", page.body)
		}
	})
	// A file that cannot be imported is said on the feeds list the form
	// redirects to, as the import's result is: a reload sends nothing again.
	errTests := []struct {
		name     string
		fields   map[string]string
		file     []byte
		status   int
		want     string
		noCSRF   bool
		urlCoded bool
	}{
		{name: "malformed", file: bad, status: 303, want: "The file could not be imported: it is not well-formed XML"},
		{name: "not OPML", file: []byte(`<rss version="2.0"><channel/></rss>`), status: 303, want: "it is not an OPML document"},
		{name: "unknown policy", file: good, fields: map[string]string{"policy": "whenever"}, status: 303, want: "Unknown policy"},
		{name: "no CSRF token", file: good, status: 403, want: "This form has expired", noCSRF: true},
		{name: "not multipart", status: 400, want: "multipart/form-data", urlCoded: true},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.client(t)
			var r response
			if tt.urlCoded {
				r = c.post(t, "/ui/feeds/import", url.Values{}, true)
			} else {
				fields := map[string]string{}
				for k, v := range tt.fields {
					fields[k] = v
				}
				if !tt.noCSRF {
					fields["csrf_token"] = c.csrf(t)
				}
				r = c.upload(t, "/ui/feeds/import", fields, "opml", "x.opml", tt.file)
			}
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, tt.status, r.body)
			}
			if r.status == http.StatusSeeOther {
				if loc := r.header.Get("Location"); loc != "/ui/feeds" {
					t.Fatalf("redirected to %q", loc)
				}
				r = c.get(t, "/ui/feeds")
				if !strings.Contains(r.body, `<p class="flash flash-error" role="alert">`) {
					t.Error("no error flash")
				}
			}
			checkPage(t, r)
			if !strings.Contains(r.body, tt.want) {
				t.Errorf("page lacks %q: %.3000s", tt.want, r.body)
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		c := e.client(t)
		huge := []byte(`<opml version="2.0"><body>` + strings.Repeat(" ", maxUploadBody) + `</body></opml>`)
		r := c.upload(t, "/ui/feeds/import", map[string]string{"csrf_token": c.csrf(t)}, "opml", "x.opml", huge)
		if r.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d: %.300s", r.status, r.body)
		}
		checkPage(t, r)
	})
}

func TestPostReading(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	tests := []struct {
		name     string
		form     url.Values
		status   int
		location string
		want     string
	}{
		{"stored", url.Values{"sensor": {"lab-2"}, "value": {"21,5"}, "unit": {"C"}}, 303, "/ui/sensors/lab-2", ""},
		{"not a number", url.Values{"sensor": {"lab-2"}, "value": {"warm"}}, 422, "", "The value “warm” is not a number."},
		{"infinite", url.Values{"sensor": {"lab-2"}, "value": {"1e999"}}, 422, "", "is not a number"},
		{"bad name", url.Values{"sensor": {"../etc"}, "value": {"1"}}, 422, "", "The reading was not stored: sensor name must match"},
		{"no name", url.Values{"value": {"1"}}, 422, "", "Give the sensor&#39;s name."},
		{"unit too long", url.Values{"sensor": {"lab-2"}, "value": {"1"}, "unit": {strings.Repeat("u", 40)}}, 422, "", "unit longer than 32 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.client(t)
			r := c.post(t, "/ui/sensors", tt.form, true)
			if r.status != tt.status || r.header.Get("Location") != tt.location {
				t.Fatalf("%d %q, want %d %q: %.300s", r.status, r.header.Get("Location"), tt.status, tt.location, r.body)
			}
			if tt.want != "" {
				checkPage(t, r)
				if !strings.Contains(r.body, tt.want) {
					t.Errorf("page lacks %q: %.3000s", tt.want, r.body)
				}
			}
		})
	}
	f, err := e.st.FeedBySlug(storage.KindSensor, "lab-2")
	if err != nil {
		t.Fatal(err)
	}
	items, err := e.st.Items(f.ID, storage.ItemQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Reading == nil || items[0].Reading.Value != 21.5 || items[0].Reading.Unit != "C" {
		t.Fatalf("stored %+v", items)
	}
	c := e.client(t)
	page := c.get(t, "/ui/sensors/lab-2")
	checkPage(t, page)
	if !strings.Contains(page.body, "<td data-label=\"Value\">21.5</td>") {
		t.Error("reading not on the sensor page")
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	remote := strconv.FormatUint(e.remote.ID, 10)
	pipeFeed := strconv.FormatUint(e.pipe.FeedID, 10)
	pipeID := strconv.FormatUint(e.pipe.ID, 10)
	tests := []struct {
		name, path, location, flash string
		csrf                        bool
		status                      int
	}{
		{"without CSRF token", "/ui/feeds/" + remote + "/delete", "", "", false, 403},
		{"a pipe's output", "/ui/feeds/" + pipeFeed + "/delete", "/ui/feeds/" + pipeFeed, "This feed is the output of a pipe", true, 303},
		{"a feed", "/ui/feeds/" + remote + "/delete", "/ui/feeds", "Deleted the feed “North &amp; co”.", true, 303},
		{"the feed again", "/ui/feeds/" + remote + "/delete", "", "", true, 404},
		{"a pipe", "/ui/pipes/" + pipeID + "/delete", "/ui/pipes", "Deleted the pipe “Lab mean”.", true, 303},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.post(t, tt.path, url.Values{}, tt.csrf)
			if r.status != tt.status || r.header.Get("Location") != tt.location {
				t.Fatalf("%d %q, want %d %q: %.300s", r.status, r.header.Get("Location"), tt.status, tt.location, r.body)
			}
			if tt.flash != "" {
				page := c.get(t, tt.location)
				if !strings.Contains(page.body, tt.flash) {
					t.Errorf("no flash %q", tt.flash)
				}
			}
		})
	}
	if _, err := e.st.Feed(e.remote.ID); err == nil {
		t.Error("feed not deleted")
	}
	if _, err := e.pipes.Get(e.pipe.ID); err == nil {
		t.Error("pipe not deleted")
	}
}

func TestAssets(t *testing.T) {
	e := newEnv(t, envOptions{token: "s3cret"}) // served without a login
	c := e.client(t)
	feedJS := e.ui.assets.url("feed.js")
	appCSS := e.ui.static.url("app.css")
	tests := []struct {
		path, ctype, cache string
		status             int
	}{
		{feedJS, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", 200},
		{"/ui/assets/feed.js", "text/javascript; charset=utf-8", "no-cache", 200},
		{"/ui/assets/feed.js?v=0000", "text/javascript; charset=utf-8", "no-cache", 200},
		{appCSS, "text/css; charset=utf-8", "public, max-age=31536000, immutable", 200},
		{e.ui.static.url("app.js"), "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", 200},
		{e.ui.assets.url("builder.css"), "text/css; charset=utf-8", "public, max-age=31536000, immutable", 200},
		{"/ui/assets/nope.js", "", "", 404},
		{"/ui/assets/", "", "", 404},
		{"/ui/static/../ui.go", "", "", 307}, // the mux cleans the path: /ui.go, not a file
		{"/ui/static/%2e%2e/ui.go", "", "", 404},
		{"/ui/static/x/../../ui.go", "", "", 307},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := c.get(t, tt.path)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d", r.status, tt.status)
			}
			if tt.status != 200 {
				return
			}
			if got := r.header.Get("Content-Type"); got != tt.ctype {
				t.Errorf("Content-Type %q, want %q", got, tt.ctype)
			}
			if got := r.header.Get("Cache-Control"); got != tt.cache {
				t.Errorf("Cache-Control %q, want %q", got, tt.cache)
			}
			if r.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no nosniff")
			}
		})
	}
	t.Run("revalidation", func(t *testing.T) {
		r := c.get(t, appCSS)
		r2 := c.do(t, "GET", appCSS, nil, map[string]string{"If-None-Match": r.header.Get("ETag")})
		if r2.status != http.StatusNotModified {
			t.Errorf("status %d, want 304", r2.status)
		}
	})
}

func TestFormat(t *testing.T) {
	now := t0
	stamps := []struct {
		at   time.Time
		want string
	}{
		{now, "now"},
		{now.Add(-3 * time.Second), "3 s ago"},
		{now.Add(12 * time.Second), "in 12 s"},
		{now.Add(-90 * time.Minute), "1 h ago"},
		{now.Add(-5 * 24 * time.Hour), "5 d ago"},
		{now.Add(30 * time.Minute), "in 30 min"},
	}
	for _, tt := range stamps {
		if got := newStamp(tt.at, now); got.Human != tt.want || got.ISO != tt.at.Format(time.RFC3339) {
			t.Errorf("newStamp(%v) = %+v, want %q", tt.at, got, tt.want)
		}
	}
	if s := newStamp(time.Time{}, now); s.ISO != "" {
		t.Errorf("zero time: %+v", s)
	}
	secs := []struct {
		s    float64
		want string
	}{
		{0.4237, "0.42 s"}, {12.34, "12.3 s"}, {270, "4.5 min"}, {7560, "2.1 h"}, {0.0004, "0.4 ms"}, {-3, "−3.00 s"}, {200000, "2.3 d"},
	}
	for _, tt := range secs {
		if got := seconds(tt.s); got != tt.want {
			t.Errorf("seconds(%v) = %q, want %q", tt.s, got, tt.want)
		}
	}
	st, ok := summarise([]float64{5, 1, 4, 2, 3})
	if !ok || st.Median != "3.00 s" || st.Min != "1.00 s" || st.Max != "5.00 s" || st.P90 != "4.60 s" || st.N != 5 {
		t.Errorf("summarise: %+v", st)
	}
	if _, ok := summarise(nil); ok {
		t.Error("summary of nothing")
	}
	if got := fmt.Sprint(median([]float64{1, 2, 3, 10})); got != "2.5" {
		t.Errorf("median %s", got)
	}
}

// TestFeedsListLatency: the list's median latency follows new polls (its
// cache is keyed by the feed's poll count).
func TestFeedsListLatency(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	cell := func() string {
		t.Helper()
		r := c.get(t, "/ui/feeds")
		i := strings.Index(r.body, `href="/ui/feeds/`+strconv.FormatUint(e.remote.ID, 10)+`"`)
		if i < 0 {
			t.Fatal("feed not listed")
		}
		m := regexp.MustCompile(`<td data-label="Median latency">([^<]*)</td>`).FindStringSubmatch(r.body[i:])
		if m == nil {
			t.Fatal("no latency cell")
		}
		return m[1]
	}
	want := func() string {
		obs, err := e.st.Observations(e.remote.ID, latencyPolls)
		if err != nil {
			t.Fatal(err)
		}
		var lat []float64
		for _, o := range obs {
			lat = append(lat, o.LatencyS...)
		}
		slices.Sort(lat)
		return seconds(median(lat))
	}
	if got, w := cell(), want(); got != w || got == "—" {
		t.Fatalf("median latency %q, want %q", got, w)
	}
	before := cell()
	for range 40 { // enough slow polls to move the median
		o := storage.Observation{At: e.clock.Now(), Hit: true, Published: []time.Time{e.clock.Now()}, LatencyS: []float64{600}}
		if _, err := e.st.RecordPoll(e.remote.ID, o, func(f *storage.Feed) error { f.Polls++; f.Hits++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got, w := cell(), want(); got != w || got == before {
		t.Fatalf("after slow polls: %q, want %q (before %q)", got, w, before)
	}
}

// A feed read by a source adapter names it, and the rows it skipped show
// as a warning.
func TestFeedPageSourceWarning(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	if _, err := e.st.UpdateFeed(e.remote.ID, func(f *storage.Feed) error {
		f.Source = &storage.SourceSpec{Type: "csv"}
		f.Warning = "2 of 40 rows skipped: row 7: field value: \"n/a\" is not a number"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := e.client(t).get(t, "/ui/feeds/"+strconv.FormatUint(e.remote.ID, 10))
	if r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	for _, want := range []string{"<dt>Source adapter</dt><dd>csv</dd>", "2 of 40 rows skipped: row 7: field value: &#34;n/a&#34; is not a number"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("feed page lacks %q", want)
		}
	}
}
