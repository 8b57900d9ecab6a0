package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/internal/testlog"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/opml"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
	_ "github.com/slogfeed/slogfeed/transform/pipes" // union, regex_replace
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web"
)

// The hostile suite: the four failures of a hostile probe on loopback,
// each reproduced with its figures on the real stack (store,
// aggregator, pipe runner, API with a token) and held to its bound. The
// inputs are shrunk where the unbounded behaviour took seconds, so that
// each test takes a few seconds at most even under -race.

const hostileToken = "s3cret-token"

// hostileEnv is one token-protected slogfeed whose fetcher reaches no
// network: its transport counts the requests that would have left.
type hostileEnv struct {
	st    *storage.Store
	svc   *aggregator.Service
	run   *runner.Runner
	h     http.Handler
	logs  *testlog.Buffer
	sent  atomic.Int64 // requests the fetcher's transport was given
	reply func(*http.Request) *http.Response
}

func (e *hostileEnv) RoundTrip(r *http.Request) (*http.Response, error) {
	e.sent.Add(1)
	if e.reply != nil {
		return e.reply(r), nil
	}
	return nil, fmt.Errorf("no network in this test (%s)", r.URL.Host)
}

func newHostileEnv(t *testing.T, lim transform.Limits, previews int, allow ...netip.Prefix) *hostileEnv {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "hostile.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &hostileEnv{st: st, logs: &testlog.Buffer{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if e.run, err = runner.New(runner.Options{Store: st, Limits: lim, Logger: log}); err != nil {
		t.Fatal(err)
	}
	e.svc, err = aggregator.NewService(aggregator.ServiceOptions{
		Store:     st,
		Fetcher:   fetcher.New(fetcher.Options{Transport: e, Allow: allow}),
		Scheduler: schedule.Config{Workers: 2},
		Logger:    log,
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e.svc.SetMetrics(aggregator.NewMetrics(reg, e.svc.Scheduler(), 0))
	e.h = web.New(web.Options{
		Store: st, Aggregator: e.svc, Pipes: e.run, Token: hostileToken, Logger: log,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), MaxPreviews: previews,
	})
	return e
}

// do serves one request with the token given in lower case ("bearer"),
// as curl users type it, and returns the status, body and headers.
func (e *hostileEnv) do(t *testing.T, method, path, body string, token bool) (int, []byte, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token {
		req.Header.Set("Authorization", "bearer "+hostileToken)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes(), rec.Header()
}

// bigFeed stores a remote feed of n items with summaries of size bytes
// and returns its id.
func (e *hostileEnv) bigFeed(t *testing.T, n, size int) uint64 {
	t.Helper()
	f := storage.Feed{URL: "http://feeds.example.org/big.rss", Kind: storage.KindRemote, Policy: schedule.DefaultPolicy}
	if err := e.st.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	// "lorem ipsum" has an 'a' every 27 bytes: the regex below keeps
	// finding partial matches, the slow case of a large program.
	text := strings.Repeat("lorem ipsum dolor sit amet ", size/27+1)[:size]
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	items := make([]storage.Item, n)
	for i := range items {
		items[i] = storage.Item{ID: fmt.Sprintf("i%02d", i), Title: fmt.Sprintf("item %d", i), Summary: text,
			Published: now.Add(time.Duration(i) * time.Minute), Fetched: now}
	}
	if _, err := e.st.AddItems(f.ID, items); err != nil {
		t.Fatal(err)
	}
	return f.ID
}

// unionChain is the probe's pipe: a source and k union nodes, each the
// union of the one before and the source (the first: of the source
// alone), so union j holds j·n items.
func unionChain(feed uint64, k int) string {
	nodes := []string{fmt.Sprintf(`{"id":"src","op":"source","config":{"feed":"feed/%d"}}`, feed)}
	var edges []string
	prev := "src"
	for j := 1; j <= k; j++ {
		id := fmt.Sprintf("u%d", j)
		nodes = append(nodes, fmt.Sprintf(`{"id":%q,"op":"union"}`, id))
		edges = append(edges, fmt.Sprintf(`{"from":%q,"to":%q}`, prev, id))
		if prev != "src" {
			edges = append(edges, fmt.Sprintf(`{"from":"src","to":%q}`, id))
		}
		prev = id
	}
	return fmt.Sprintf(`{"nodes":[%s],"edges":[%s],"output":{"slug":"bomb"}}`, strings.Join(nodes, ","), strings.Join(edges, ","))
}

// problem is the 4xx body of the pipes API.
type problem struct {
	Error   string             `json:"error"`
	Details []transform.Detail `json:"details"`
}

func decodeProblem(t *testing.T, body []byte) problem {
	t.Helper()
	var p problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("body %.300q: %v", body, err)
	}
	return p
}

// 1. Pipe previews and runs have no memory bound: a 5.5 KB preview of 62
// unions over one 30-item feed with 60 KB summaries returned 193 MB.
// The very same pipe (real figures: the strings are shared, so the test
// itself holds little) is now refused with a 422 naming the node and the
// limit, in a small body, for a preview and for a saved pipe's run.
func TestHostileUnionBomb(t *testing.T) {
	const items, summary, unions = 30, 60 << 10, 62
	e := newHostileEnv(t, transform.Limits{}, 0) // the defaults serve uses
	feed := e.bigFeed(t, items, summary)
	def := unionChain(feed, unions)

	// What the pipe materialises unbounded: the source 30 items, union
	// j j·30.
	stored, err := e.st.Items(feed, storage.ItemQuery{Limit: 1})
	if err != nil || len(stored) != 1 {
		t.Fatalf("items: %v", err)
	}
	per := transform.ItemBytes(&stored[0])
	var unbounded, shown int64
	for j := 0; j <= unions; j++ {
		n := max(j, 1) * items
		unbounded += int64(n) * per
		shown += int64(min(n, transform.PreviewItems)) * per
	}
	lim := transform.DefaultLimits
	t.Logf("request %d bytes; unbounded the run materialises %d MB and a preview shows %d MB of items (the probe: 193 MB)", len(def), unbounded>>20, shown>>20)
	if unbounded <= lim.MaxRunBytes || shown <= lim.MaxPreviewBytes {
		t.Fatalf("the probe's pipe no longer exceeds the defaults (%d, %d): the test proves nothing", unbounded, shown)
	}

	start := time.Now()
	status, body, _ := e.do(t, "POST", "/api/v1/pipes/preview", def, true)
	took := time.Since(start)
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("preview: status %d, want 422: %.300s", status, body)
	}
	p := decodeProblem(t, body)
	if !strings.Contains(p.Error, "max_run_bytes") || !strings.Contains(p.Error, "byte budget") || len(p.Details) != 1 || !strings.HasPrefix(p.Details[0].Node, "u") {
		t.Errorf("preview: the error does not name the limit and the node: %+v", p)
	}
	if int64(len(body)) > 64<<10 {
		t.Errorf("preview answered %d bytes", len(body))
	}
	t.Logf("preview: %d in %v, %d bytes: %s", status, took.Round(time.Millisecond), len(body), p.Error)

	// A saved pipe runs under the same budget.
	status, body, _ = e.do(t, "POST", "/api/v1/pipes", def, true)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	var info struct{ ID uint64 }
	_ = json.Unmarshal(body, &info)
	status, body, _ = e.do(t, "POST", fmt.Sprintf("/api/v1/pipes/%d/run", info.ID), "", true)
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), "max_run_bytes") {
		t.Fatalf("run: status %d, want 422 naming max_run_bytes: %.300s", status, body)
	}
	out, err := e.st.FeedBySlug(storage.KindPipe, "bomb")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := e.st.CountItems(out.ID); n != 0 {
		t.Errorf("the failed run stored %d items", n)
	}
}

// A preview within the budget but with more to show than
// Limits.MaxPreviewBytes shows counts, not every item.
func TestHostilePreviewShowsBoundedItems(t *testing.T) {
	const items, summary, unions = 30, 6 << 10, 12
	lim := transform.Limits{MaxPreviewBytes: 256 << 10}
	e := newHostileEnv(t, lim, 0)
	feed := e.bigFeed(t, items, summary)
	status, body, _ := e.do(t, "POST", "/api/v1/pipes/preview", unionChain(feed, unions), true)
	if status != http.StatusOK {
		t.Fatalf("status %d: %.300s", status, body)
	}
	var pv transform.Preview
	if err := json.Unmarshal(body, &pv); err != nil {
		t.Fatal(err)
	}
	var shownBytes int64
	truncated := 0
	for _, n := range pv.Nodes {
		for i := range n.Items {
			shownBytes += transform.ItemBytes(&n.Items[i])
		}
		if n.Truncated {
			truncated++
		}
		if n.Count < len(n.Items) {
			t.Errorf("node %s: count %d < %d items shown", n.Node, n.Count, len(n.Items))
		}
	}
	last := pv.Nodes[len(pv.Nodes)-1]
	if last.Count != unions*items {
		t.Errorf("last node counts %d items, want %d", last.Count, unions*items)
	}
	if shownBytes > lim.MaxPreviewBytes || truncated == 0 || !pv.Truncated {
		t.Errorf("shown %d bytes (limit %d), %d nodes truncated, output truncated %v", shownBytes, lim.MaxPreviewBytes, truncated, pv.Truncated)
	}
	t.Logf("preview: %d bytes of items shown (limit %d), body %d bytes, %d of %d nodes truncated", shownBytes, lim.MaxPreviewBytes, len(body), truncated, len(pv.Nodes))
}

// The probe's pattern: it passes the regex size limits.
const hostilePattern = `(.*a){99}(.*a){99}(.*a){99}`

// regexClip is the Limits.MaxRegexInput of the regex tests: 4 KiB rather
// than the default 16 KiB keeps them short under -race, where one match
// of the probe's pattern over 16 KiB takes seconds.
const regexClip = 4 << 10

// matchCost times one match of the probe's pattern over the first clip
// bytes of a summary of size bytes, as regex_replace now does it, on this
// machine (and under -race when it is on).
func matchCost(size, clip int) time.Duration {
	re := regexp.MustCompile(hostilePattern)
	text := strings.Repeat("lorem ipsum dolor sit amet ", size/27+1)[:size]
	t0 := time.Now()
	re.FindAllStringSubmatchIndex(text[:clip], -1)
	return time.Since(t0)
}

// regexPipe is a preview of regex_replace with the probe's pattern.
func regexPipe(feed uint64) string {
	return fmt.Sprintf(`{"nodes":[{"id":"src","op":"source","config":{"feed":"feed/%d"}},
		{"id":"rx","op":"regex_replace","config":{"field":"summary","pattern":%q,"replace":"x","all":true}}],
		"edges":[{"from":"src","to":"rx"}],"output":{"slug":"slow"}}`, feed, hostilePattern)
}

// 2. regex_replace ignored the pipe's time limit: over 30 summaries of
// 60 KB a preview took 25 s and answered 200. The run time is shrunk to
// 100 ms here (and the regex input to 4 KiB, for -race). The regex now
// sees at most Limits.MaxRegexInput bytes of a field and the deadline is
// looked at before every item, so the preview answers 422 within the run
// time and an item's match.
func TestHostileRegexDeadline(t *testing.T) {
	const items, summary = 30, 60 << 10
	lim := transform.Limits{RunTime: 100 * time.Millisecond, MaxRegexInput: regexClip}
	e := newHostileEnv(t, lim, 0)
	feed := e.bigFeed(t, items, summary)
	def := regexPipe(feed)

	perItem := matchCost(summary, regexClip)
	// Unbounded, every item took at least the full-length share of
	// that (RE2 is at least linear in the input): 30 items.
	atLeast := time.Duration(items) * perItem * time.Duration(summary) / regexClip
	t.Logf("one clipped match %v; unbounded the preview takes at least %v (the probe: 25 s, answered 200)", perItem.Round(time.Millisecond), atLeast.Round(time.Millisecond))

	start := time.Now()
	status, body, _ := e.do(t, "POST", "/api/v1/pipes/preview", def, true)
	took := time.Since(start)
	bound := lim.RunTime + 2*perItem + time.Second
	t.Logf("preview: %d in %v (bound %v): %.200s", status, took.Round(time.Millisecond), bound.Round(time.Millisecond), body)
	if took > bound {
		t.Errorf("preview took %v, more than the run time %v and two items' matches", took, lim.RunTime)
	}
	if time.Duration(items)*perItem > 2*lim.RunTime {
		// The clipped matches alone overrun the time limit: it must say so.
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), "time limit") {
			t.Fatalf("status %d, want 422 with the time limit: %.300s", status, body)
		}
		if p := decodeProblem(t, body); len(p.Details) != 1 || p.Details[0].Node != "rx" {
			t.Errorf("the error does not name node rx: %+v", p)
		}
	} else if status != http.StatusOK && status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d: %.300s", status, body)
	}

	// A saved pipe's run stops at the same deadline.
	status, body, _ = e.do(t, "POST", "/api/v1/pipes", def, true)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	var info struct{ ID uint64 }
	_ = json.Unmarshal(body, &info)
	start = time.Now()
	status, body, _ = e.do(t, "POST", fmt.Sprintf("/api/v1/pipes/%d/run", info.ID), "", true)
	took = time.Since(start)
	t.Logf("saved pipe's run: %d in %v (the probe: about 16 s)", status, took.Round(time.Millisecond))
	if took > bound {
		t.Errorf("run took %v, bound %v", took, bound)
	}
	if time.Duration(items)*perItem > 2*lim.RunTime && status != http.StatusUnprocessableEntity {
		t.Errorf("run: status %d, want 422: %.300s", status, body)
	}
}

// The regex still does its work within the first MaxRegexInput bytes
// and leaves the rest of the field as it was.
func TestHostileRegexKeepsTheRest(t *testing.T) {
	e := newHostileEnv(t, transform.Limits{MaxRegexInput: 1 << 10}, 0)
	feed := e.bigFeed(t, 1, 4<<10)
	def := fmt.Sprintf(`{"nodes":[{"id":"src","op":"source","config":{"feed":"feed/%d"}},
		{"id":"rx","op":"regex_replace","config":{"field":"summary","pattern":"lorem","replace":"LOREM","all":true}}],
		"edges":[{"from":"src","to":"rx"}],"output":{"slug":"up"}}`, feed)
	status, body, _ := e.do(t, "POST", "/api/v1/pipes/preview", def, true)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var pv transform.Preview
	if err := json.Unmarshal(body, &pv); err != nil || len(pv.Output) != 1 {
		t.Fatalf("%v: %.200s", err, body)
	}
	s := pv.Output[0].Summary
	if len(s) != 4<<10 || !strings.HasPrefix(s, "LOREM ipsum") || strings.Contains(s[1<<10:], "LOREM") || !strings.Contains(s[1<<10:], "lorem") {
		t.Errorf("summary %d bytes: %.60q … %.60q", len(s), s, s[len(s)-60:])
	}
}

// Eight previews at once pinned both cores until their clients were
// dropped: past Options.MaxPreviews they are now answered 429 with
// Retry-After at once, and the ones admitted end at the run's deadline.
func TestHostileConcurrentPreviews(t *testing.T) {
	const items, summary, clients, previews = 30, 60 << 10, 8, 2
	lim := transform.Limits{RunTime: 100 * time.Millisecond, MaxRegexInput: regexClip}
	e := newHostileEnv(t, lim, previews)
	feed := e.bigFeed(t, items, summary)
	def := regexPipe(feed)
	perItem := matchCost(summary, regexClip)
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	var slowest time.Duration
	start := time.Now()
	for range clients {
		wg.Go(func() {
			t0 := time.Now()
			status, body, h := e.do(t, "POST", "/api/v1/pipes/preview", def, true)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			counts[status]++
			slowest = max(slowest, took)
			switch status {
			case http.StatusTooManyRequests:
				if h.Get("Retry-After") == "" {
					t.Errorf("429 without Retry-After")
				}
			case http.StatusOK, http.StatusUnprocessableEntity:
			default:
				t.Errorf("status %d: %.200s", status, body)
			}
		})
	}
	wg.Wait()
	t.Logf("%d clients at once: statuses %v, all answered in %v, the slowest %v", clients, counts, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
	if counts[http.StatusTooManyRequests] == 0 {
		t.Errorf("no preview was turned away: %v", counts)
	}
	// Two previews share the cores (with whatever else runs): allow each
	// a few items' matches past its deadline.
	if bound := lim.RunTime + 4*perItem + 2*time.Second; slowest > bound {
		t.Errorf("a client waited %v, bound %v", slowest, bound)
	}
}

// 3. Passwords in feed URLs were readable without the token. Every read
// (API, metrics, logs, fetch errors) now masks them; the OPML export
// keeps them and needs the token.
func TestHostileCredentialsMasked(t *testing.T) {
	e := newHostileEnv(t, transform.Limits{}, 0)
	e.reply = func(r *http.Request) *http.Response {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody, Header: http.Header{}, Request: r}
	}
	const secretURL = "http://alice:hunter2@feeds.example.org/private.rss"
	status, body, _ := e.do(t, "POST", "/api/v1/feeds", `{"url":"`+secretURL+`","title":"private"}`, true)
	if status != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", status, body)
	}
	var f web.FeedView
	_ = json.Unmarshal(body, &f)
	_, _ = e.svc.FetchNow(context.Background(), f.ID) // the server answers 503
	if e.sent.Load() != 1 {
		t.Fatalf("%d requests sent", e.sent.Load())
	}

	reads := []struct {
		path  string
		token bool
	}{
		{"/api/v1/feeds", false},
		{"/api/v1/feeds", true},
		{fmt.Sprintf("/api/v1/feeds/%d", f.ID), false},
		{fmt.Sprintf("/api/v1/feeds/%d/schedule", f.ID), false},
		{"/metrics", false},
	}
	for _, rd := range reads {
		status, body, _ := e.do(t, "GET", rd.path, "", rd.token)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d", rd.path, status)
		}
		if bytes.Contains(body, []byte("hunter2")) {
			t.Errorf("GET %s (token %v) shows the password: %.300s", rd.path, rd.token, body)
		}
	}
	_, body, _ = e.do(t, "GET", fmt.Sprintf("/api/v1/feeds/%d", f.ID), "", false)
	_ = json.Unmarshal(body, &f)
	if f.URL != "http://alice:xxxxx@feeds.example.org/private.rss" || f.LastError == "" || strings.Contains(f.LastError, "hunter2") {
		t.Errorf("url %q, last error %q", f.URL, f.LastError)
	}
	if logs := e.logs.String(); strings.Contains(logs, "hunter2") || !strings.Contains(logs, "alice:xxxxx@") {
		t.Errorf("logs:\n%s", logs)
	}
	// Subscribing again says so without the password.
	status, body, _ = e.do(t, "POST", "/api/v1/feeds", `{"url":"`+secretURL+`"}`, true)
	if status != http.StatusConflict || bytes.Contains(body, []byte("hunter2")) {
		t.Errorf("second subscribe: %d %s", status, body)
	}

	// The OPML export is a backup: it keeps the password, behind the token.
	status, body, h := e.do(t, "GET", "/api/v1/opml", "", false)
	if status != http.StatusUnauthorized || bytes.Contains(body, []byte("hunter2")) || h.Get("WWW-Authenticate") == "" {
		t.Errorf("export without the token: %d %s", status, body)
	}
	status, body, h = e.do(t, "GET", "/api/v1/opml", "", true)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/x-opml") {
		t.Fatalf("export: %d %s", status, body)
	}
	outlines, err := opml.Parse(bytes.NewReader(body))
	if err != nil || len(outlines) != 1 || outlines[0].URL != secretURL {
		t.Errorf("export reads back as %+v (%v), want %s", outlines, err, secretURL)
	}
}

// 4. Subscribing to http://169.254.169.254/ or http://127.0.0.1/ answered
// 201 and failed only at the first fetch. Every loopback, private and
// link-local form, numeric forms included, is now a 400 that says "not
// allowed", with no request (and so no DNS query) made, and nothing
// stored.
func TestHostileSubscribeSSRF(t *testing.T) {
	e := newHostileEnv(t, transform.Limits{}, 0)
	blocked := []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://127.0.0.1/",
		"http://127.1/",
		"http://2130706433/",
		"http://0x7f000001/",
		"http://017700000001/",
		"http://0/",
		"http://0x7f.1/",
		"http://0177.0.0.1/",
		"http://127.0.1:8080/feed",
		"http://127.0.0.1./",
		"http://2852039166/",          // 169.254.169.254
		"http://0xa9.0xfe.0xa9.0xfe/", // 169.254.169.254
		"http://10.1/",
		"http://192.168.0.1/",
		"http://0xc0a80001/",
		"http://100.64.0.1/",
		"http://[::1]/",
		"http://[::ffff:127.0.0.1]/",
		"http://[::ffff:7f00:1]/",
		"http://[fe80::1]/",
		"http://[fc00::1]/",
		"http://[64:ff9b::a9fe:a9fe]/",
		"http://localhost:6060/debug/pprof/",
		"http://metadata.localhost/",
		"http://u:pw@127.1/",
	}
	for _, u := range blocked {
		t.Run(u, func(t *testing.T) {
			status, body, _ := e.do(t, "POST", "/api/v1/feeds", `{"url":"`+u+`"}`, true)
			if status != http.StatusBadRequest || !strings.Contains(string(body), "not allowed") || strings.Contains(string(body), "no such host") {
				t.Errorf("status %d, want 400 saying \"not allowed\": %s", status, body)
			}
			if strings.Contains(string(body), "pw@") {
				t.Errorf("the error shows the password: %s", body)
			}
		})
	}
	// Not addresses although their last label is a number: refused as
	// invalid, never looked up.
	for _, u := range []string{"http://1.2.3.4.5/", "http://256.1.1.1/", "http://0x100000000/", "http://1.2.3.09/"} {
		t.Run(u, func(t *testing.T) {
			status, body, _ := e.do(t, "POST", "/api/v1/feeds", `{"url":"`+u+`"}`, true)
			if status != http.StatusBadRequest || !strings.Contains(string(body), "not one") {
				t.Errorf("status %d, want 400 for an invalid address: %s", status, body)
			}
		})
	}
	if n := e.sent.Load(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
	if feeds, _ := e.st.Feeds(); len(feeds) != 0 {
		t.Errorf("%d feeds stored", len(feeds))
	}
	t.Logf("%d loopback, private and link-local forms refused with 400, 0 requests sent, 0 feeds stored", len(blocked))

	// A public address in numeric form is stored in its usual form, so
	// that no resolver is ever asked about "0x08080808".
	status, body, _ := e.do(t, "POST", "/api/v1/feeds", `{"url":"http://0x08080808/feed.xml"}`, true)
	var f web.FeedView
	_ = json.Unmarshal(body, &f)
	if status != http.StatusCreated || f.URL != "http://8.8.8.8/feed.xml" {
		t.Errorf("public numeric host: %d %s", status, body)
	}
}

// The allow-list covers numeric forms too: with 127.0.0.0/8 allowed, a
// lab feed at 127.1 is subscribed, as 127.0.0.1.
func TestHostileSubscribeAllowList(t *testing.T) {
	e := newHostileEnv(t, transform.Limits{}, 0, netip.MustParsePrefix("127.0.0.0/8"))
	status, body, _ := e.do(t, "POST", "/api/v1/feeds", `{"url":"http://127.1:8080/lab.rss"}`, true)
	var f web.FeedView
	_ = json.Unmarshal(body, &f)
	if status != http.StatusCreated || f.URL != "http://127.0.0.1:8080/lab.rss" {
		t.Errorf("%d %s", status, body)
	}
	status, body, _ = e.do(t, "POST", "/api/v1/feeds", `{"url":"http://10.0.0.1/lab.rss"}`, true)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "not allowed") {
		t.Errorf("10.0.0.1 with only 127/8 allowed: %d %s", status, body)
	}
}

// Invalid UTF-8 and absurd dates (year 9999) were replaced silently: they
// are counted per feed, with the last repair, in the API.
func TestHostileRepairsCounted(t *testing.T) {
	e := newHostileEnv(t, transform.Limits{}, 0)
	doc := "<rss version=\"2.0\"><channel><title>T\xff</title>" +
		"<item><guid>a</guid><title>caf\xe9</title><pubDate>Fri, 31 Dec 9999 23:59:59 GMT</pubDate></item>" +
		"<item><guid>b</guid><title>fine</title><pubDate>not a date</pubDate></item>" +
		"</channel></rss>"
	e.reply = func(r *http.Request) *http.Response {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(doc)),
			Header: http.Header{"Content-Type": {"application/rss+xml"}}, Request: r}
	}
	status, body, _ := e.do(t, "POST", "/api/v1/feeds", `{"url":"http://feeds.example.org/broken.rss"}`, true)
	if status != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", status, body)
	}
	var f web.FeedView
	_ = json.Unmarshal(body, &f)
	for range 2 { // the second fetch finds the same items: they count once
		if _, err := e.svc.FetchNow(context.Background(), f.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, body, _ = e.do(t, "GET", fmt.Sprintf("/api/v1/feeds/%d", f.ID), "", false)
	if err := json.Unmarshal(body, &f); err != nil {
		t.Fatal(err)
	}
	// Each repaired item counts once: item a held invalid UTF-8 (the
	// channel's title too, which is no item), a and b bad dates.
	if f.InvalidUTF8 != 1 || f.BadDates != 2 || f.LastRepairAt == nil || !strings.Contains(f.LastRepair, "invalid UTF-8") || !strings.Contains(f.Warning, "2 items with an unreadable or implausible date") {
		t.Errorf("invalid_utf8 %d (want 1 item), bad_dates %d (want 2), last %q, warning %q", f.InvalidUTF8, f.BadDates, f.LastRepair, f.Warning)
	}
}
