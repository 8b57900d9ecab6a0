package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web"
)

var t0 = time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)

// testClock is a settable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testAgg is the real aggregator service (it subscribes and unsubscribes)
// with schedule states set by the test, as if it had been polling.
type testAgg struct {
	*aggregator.Service
	mu     sync.Mutex
	states map[uint64]schedule.State
	next   map[uint64]time.Time
	// sched, when set, holds the planned fetches too, and answers
	// Overdue as the live aggregator's does (BenchmarkFleetPages).
	sched *schedule.Scheduler
}

// Overdue lists the feeds planned before before: from sched when set,
// else by a pass over next.
func (a *testAgg) Overdue(before time.Time) []uint64 {
	if a.sched != nil {
		ids := a.sched.AppendOverdue(nil, before)
		out := make([]uint64, len(ids))
		for i, id := range ids {
			out[i] = uint64(id)
		}
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []uint64
	for id, t := range a.next {
		if t.Before(before) {
			out = append(out, id)
		}
	}
	return out
}

func (a *testAgg) State(id uint64) (schedule.State, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.states[id]
	return st, ok
}

func (a *testAgg) NextFetch(id uint64) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.next[id]
	return t, ok
}

func (a *testAgg) set(id uint64, st schedule.State, next time.Time) {
	a.mu.Lock()
	a.states[id], a.next[id] = st, next
	a.mu.Unlock()
}

// env is a slogfeed server with the UI, over HTTP on loopback.
type env struct {
	st     *storage.Store
	clock  *testClock
	agg    *testAgg
	auth   *web.Auth
	ui     *UI
	pipes  *runner.Runner
	srv    *httptest.Server
	logs   *bytes.Buffer
	remote storage.Feed // a polled remote feed with hostile item HTML
	sensor storage.Feed // sensor "lab-1" with readings
	pipe   runner.Info  // a pipe over lab-1
}

type envOptions struct {
	token    string
	loopback bool
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	e := &env{clock: &testClock{t: t0}, logs: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := storage.Open(filepath.Join(t.TempDir(), "slogfeed.db"), storage.Options{NoSync: true, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{}), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	e.agg = &testAgg{Service: svc, states: map[uint64]schedule.State{}, next: map[uint64]time.Time{}}
	e.pipes, err = runner.New(runner.Options{Store: st, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sensors := web.SensorHandler(st, web.SensorOptions{Now: e.clock.Now, Logger: log})
	e.auth = web.NewAuth(web.AuthOptions{Token: o.token, Loopback: o.loopback, Now: e.clock.Now, Logger: log})
	e.ui, err = New(Options{
		Store: st, Auth: e.auth, Aggregator: e.agg, Pipes: e.pipes, Sensors: sensors,
		BaseURL: "http://127.0.0.1:8080", Logger: log, Now: e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := web.New(web.Options{
		Store: st, Aggregator: e.agg, Sensors: sensors, Pipes: e.pipes, Auth: e.auth, UI: e.ui,
		Logger: log, Now: e.clock.Now,
	})
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	e.seed(t, sensors)
	return e
}

// seed stores a remote feed with polls and items, a sensor with readings
// and a pipe reading it.
func (e *env) seed(t testing.TB, sensors http.Handler) {
	t.Helper()
	f, err := e.agg.Subscribe(storage.Feed{URL: "https://example.org/already.rss", Title: "North <mast> & co"})
	if err != nil {
		t.Fatal(err)
	}
	hostile, err := os.ReadFile("testdata/hostile-item.html")
	if err != nil {
		t.Fatal(err)
	}
	var items []storage.Item
	for i := range 30 {
		at := t0.Add(time.Duration(i-30) * time.Minute)
		o := storage.Observation{At: at.Add(2 * time.Second), Hit: i%4 != 0, Status: 200}
		if o.Hit {
			o.Published = []time.Time{at}
			o.LatencyS = []float64{2 + float64(i%5)}
			v := 20 + float64(i)/10
			items = append(items, storage.Item{
				ID: "item-" + itoa(i), Title: "Reading " + itoa(i), Link: "https://example.org/r/" + itoa(i),
				Summary: string(hostile), Published: at, Reading: &storage.Reading{Value: v, Unit: "C", Time: at},
			})
		} else {
			o.Err = "HTTP 503 <b>busy</b>"
		}
		if _, err := e.st.RecordPoll(f.ID, o, func(f *storage.Feed) error {
			f.Polls++
			if o.Hit {
				f.Hits++
				f.LastHit = o.At
			}
			f.LastFetch = o.At
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.st.AddItems(f.ID, items); err != nil {
		t.Fatal(err)
	}
	if e.remote, err = e.st.Feed(f.ID); err != nil {
		t.Fatal(err)
	}

	for i := range 5 {
		e.clock.Add(10 * time.Second)
		req := httptest.NewRequest("POST", "/api/v1/sensors/lab-1/readings", strings.NewReader(`{"value": `+itoa(20+i)+`.5, "unit": "C"}`))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		sensors.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			t.Fatalf("posting a reading: %d %s", rec.Code, rec.Body)
		}
	}
	if e.sensor, err = e.st.FeedBySlug(storage.KindSensor, "lab-1"); err != nil {
		t.Fatal(err)
	}
	var def transform.Pipe
	if err := json.Unmarshal([]byte(`{"name": "Lab mean", "nodes": [{"id": "lab", "op": "source", "config": {"feed": "sensor/lab-1"}}],
		"edges": [], "output": {"slug": "lab-mean", "title": "Lab mean"}}`), &def); err != nil {
		t.Fatal(err)
	}
	if e.pipe, err = e.pipes.Create(context.Background(), def); err != nil {
		t.Fatal(err)
	}
	e.agg.set(f.ID, schedule.State{Median: 70 * time.Second, Sigma: 2 * time.Second, Gaps: 20}, e.clock.Now().Add(12*time.Second))
}

// client is a browser: it keeps cookies and does not follow redirects.
type client struct {
	e   *env
	c   *http.Client
	hdr map[string]string
}

func (e *env) client(t testing.TB) *client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &client{e: e, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, hdr: map[string]string{}}
}

// response is a read response.
type response struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(t testing.TB, method, path string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, c.e.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	for k, v := range c.hdr {
		req.Header.Set(k, v)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (c *client) get(t testing.TB, path string) response {
	t.Helper()
	return c.do(t, "GET", path, nil, nil)
}

// post sends a URL-encoded form; the session's CSRF token is added when
// csrf is set.
func (c *client) post(t testing.TB, path string, form url.Values, csrf bool) response {
	t.Helper()
	if csrf {
		form.Set(web.CSRFField, c.csrf(t))
	}
	return c.do(t, "POST", path, strings.NewReader(form.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
}

// upload sends a multipart form with one file.
func (c *client) upload(t testing.TB, path string, fields map[string]string, fileField, fileName string, content []byte) response {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := mw.CreateFormFile(fileField, fileName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return c.do(t, "POST", path, &buf, map[string]string{"Content-Type": mw.FormDataContentType()})
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)">`)

// csrf loads a page and returns the CSRF token it carries.
func (c *client) csrf(t testing.TB) string {
	t.Helper()
	r := c.get(t, "/ui/feeds")
	if r.status == http.StatusSeeOther {
		r = c.get(t, "/ui/login")
	}
	m := csrfMeta.FindStringSubmatch(r.body)
	if m == nil || m[1] == "" {
		t.Fatalf("no csrf-token (%d): %.300s", r.status, r.body)
	}
	return m[1]
}

// login logs the client in with token.
func (c *client) login(t testing.TB, token string) response {
	t.Helper()
	return c.post(t, "/ui/login", url.Values{"token": {token}, "next": {"/ui/feeds"}}, true)
}
