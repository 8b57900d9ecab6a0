package web

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web/publish"
)

// updateSensorGolden rewrites testdata/sensors. The flag is -update, shared
// with any other test of the package that defines it first.
var updateSensorGolden = lookupOrDefineBool("update", "rewrite golden files")

func lookupOrDefineBool(name, usage string) func() bool {
	if f := flag.Lookup(name); f != nil {
		return func() bool { return f.Value.String() == "true" }
	}
	p := flag.Bool(name, false, usage)
	return func() bool { return *p }
}

// testClock is a settable clock shared by the store and the handler.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

var sensorT0 = time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)

type sensorEnv struct {
	st    *storage.Store
	clock *testClock
	srv   *httptest.Server
	path  string
}

func newSensorEnv(t *testing.T) *sensorEnv {
	t.Helper()
	e := &sensorEnv{clock: &testClock{t: sensorT0}, path: filepath.Join(t.TempDir(), "slogfeed.db")}
	st, err := storage.Open(e.path, storage.Options{NoSync: true, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	e.srv = httptest.NewServer(e.handler())
	t.Cleanup(e.srv.Close)
	return e
}

func (e *sensorEnv) handler() http.Handler {
	return SensorHandler(e.st, SensorOptions{
		BaseURL: "https://slog.example.org/",
		Now:     e.clock.Now,
		Load:    publish.NewLoad(2*time.Second, 60*time.Second, time.Minute), // +1 s per request in the last minute
	})
}

// restart serves the same store through a new handler, as after a restart.
func (e *sensorEnv) restart() {
	e.srv.Config.Handler = e.handler()
}

func (e *sensorEnv) post(t *testing.T, sensor, contentType, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(e.srv.URL+"/api/v1/sensors/"+sensor+"/readings", contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &v); err != nil && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("reply %d is not JSON: %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, v
}

func (e *sensorEnv) get(t *testing.T, path string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// postSeries posts n readings of sensor, one a minute with a few seconds of
// deterministic jitter, and returns the arrival time of the last.
func (e *sensorEnv) postSeries(t *testing.T, sensor string, n int, from time.Time) time.Time {
	t.Helper()
	var at time.Time
	for i := range n {
		at = from.Add(time.Duration(i)*time.Minute + time.Duration(i%3)*time.Second)
		e.clock.Set(at)
		body := fmt.Sprintf(`{"value": %.1f, "unit": "C"}`, 20+float64(i)/10)
		if i%4 == 1 {
			obs := at.Add(-1500 * time.Millisecond).Format(time.RFC3339Nano)
			body = fmt.Sprintf(`{"value": %d, "unit": "hPa", "time": %q, "lat": 50.81, "lon": -4.38}`, 1000+i, obs)
		}
		if code, v := e.post(t, sensor, "application/json", body); code != http.StatusCreated {
			t.Fatalf("reading %d: status %d %v", i, code, v)
		}
	}
	return at
}

func TestSensorEndToEnd(t *testing.T) {
	e := newSensorEnv(t)

	// One reading: the reply is the stored item.
	e.clock.Set(sensorT0)
	code, v := e.post(t, "lab-1", "application/json; charset=utf-8", `{"value": 21.3, "unit": "C", "time": "2026-11-21T18:59:58.5Z", "lat": 50.81, "lon": 4.38}`)
	if code != http.StatusCreated {
		t.Fatalf("status %d: %v", code, v)
	}
	if v["id"] != "lab-1/2026-11-21T18:59:58.5Z/1" || v["published"] != "2026-11-21T19:00:00Z" || v["title"] != "lab-1: 21.3 °C" {
		t.Errorf("reply %v", v)
	}
	if seq, _ := v["seq"].(float64); seq < 1 {
		t.Errorf("seq %v", v["seq"])
	}
	rd, _ := v["reading"].(map[string]any)
	if rd["value"] != 21.3 || rd["unit"] != "C" || rd["sensor"] != "lab-1" || rd["lat"] != 50.81 || rd["lon"] != 4.38 {
		t.Errorf("reading %v", rd)
	}
	f, err := e.st.FeedBySlug(storage.KindSensor, "lab-1")
	if err != nil || f.Policy != "auto" {
		t.Fatalf("sensor feed %+v: %v", f, err)
	}

	// A minute-by-minute series: the model learns the period.
	last := e.postSeries(t, "lab-1", 20, sensorT0.Add(time.Minute))
	now := last.Add(10 * time.Second)
	e.clock.Set(now)

	etags := map[string]string{}
	for _, ext := range []string{"rss", "atom", "json"} {
		t.Run(ext, func(t *testing.T) {
			resp, body := e.get(t, "/sensors/lab-1."+ext, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			wantType := map[string]string{"rss": publish.ContentTypeRSS, "atom": publish.ContentTypeAtom, "json": publish.ContentTypeJSON}[ext]
			if ct := resp.Header.Get("Content-Type"); ct != wantType {
				t.Errorf("Content-Type %q", ct)
			}
			checkHints(t, resp.Header, now, last)
			if lm := resp.Header.Get("Last-Modified"); lm != last.Format(http.TimeFormat) {
				t.Errorf("Last-Modified %q, want %q", lm, last.Format(http.TimeFormat))
			}
			feed, err := gofeed.NewParser().Parse(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if len(feed.Items) != 21 {
				t.Fatalf("%d items, want 21", len(feed.Items))
			}
			newest := feed.Items[0]
			if newest.PublishedParsed == nil || !newest.PublishedParsed.Equal(last) {
				t.Errorf("newest published %v, want %v", newest.PublishedParsed, last)
			}
			if !strings.HasSuffix(newest.GUID, "/21") || !strings.HasSuffix(feed.Items[20].GUID, "lab-1/2026-11-21T18:59:58.5Z/1") {
				t.Errorf("ids %q … %q", newest.GUID, feed.Items[20].GUID)
			}
			if ext != "json" {
				r := newest.Extensions[feedext.Prefix][feedext.Element]
				if len(r) != 1 || r[0].Attrs[feedext.AttrSensor] != "lab-1" || r[0].Attrs[feedext.AttrValue] != "21.9" {
					t.Errorf("reading element %+v", r)
				}
			}
			if want := "https://slog.example.org/sensors/lab-1." + ext; !bytes.Contains(body, []byte(want)) {
				t.Errorf("no self link %s", want)
			}
			etags[ext] = resp.Header.Get("ETag")

			// The same request with the ETag: 304 with the hints.
			resp, body = e.get(t, "/sensors/lab-1."+ext, map[string]string{"If-None-Match": etags[ext]})
			if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
				t.Fatalf("conditional GET: status %d, %d bytes", resp.StatusCode, len(body))
			}
			checkHints(t, resp.Header, now, last)
			// And with the date.
			resp, _ = e.get(t, "/sensors/lab-1."+ext, map[string]string{"If-Modified-Since": last.Format(http.TimeFormat)})
			if resp.StatusCode != http.StatusNotModified {
				t.Errorf("If-Modified-Since: status %d", resp.StatusCode)
			}
		})
	}

	// ?limit=
	resp, body := e.get(t, "/sensors/lab-1.json?limit=5", nil)
	var jf struct{ Items []struct{ ID string } }
	if err := json.Unmarshal(body, &jf); err != nil || resp.StatusCode != 200 || len(jf.Items) != 5 {
		t.Errorf("limit=5: status %d, %d items, %v", resp.StatusCode, len(jf.Items), err)
	}

	// Load grows the desynchronisation interval: 2 s + 1 s per request.
	d1, _ := strconv.ParseFloat(resp.Header.Get(feedext.HeaderDesync), 64)
	resp, _ = e.get(t, "/sensors/lab-1.json", nil)
	d2, _ := strconv.ParseFloat(resp.Header.Get(feedext.HeaderDesync), 64)
	if d1 < 2 || d2 != d1+1 {
		t.Errorf("desync %v then %v, want growth by 1 s per request", d1, d2)
	}

	// A restart rebuilds the state from the store: the same document and
	// reading numbers go on.
	e.restart()
	resp, _ = e.get(t, "/sensors/lab-1.rss", nil)
	if resp.Header.Get("ETag") != etags["rss"] {
		t.Errorf("ETag after restart %s, want %s", resp.Header.Get("ETag"), etags["rss"])
	}
	e.clock.Set(now.Add(50 * time.Second))
	code, v = e.post(t, "lab-1", "application/json", `{"value": 1}`)
	if code != http.StatusCreated || !strings.HasSuffix(v["id"].(string), "/22") {
		t.Errorf("after restart: %d %v", code, v)
	}
	// New data: the old ETag no longer matches.
	resp, _ = e.get(t, "/sensors/lab-1.rss", map[string]string{"If-None-Match": etags["rss"]})
	if resp.StatusCode != http.StatusOK || resp.Header.Get(feedext.HeaderPhase) != "0.000" {
		t.Errorf("after a new reading: status %d, phase %q", resp.StatusCode, resp.Header.Get(feedext.HeaderPhase))
	}
}

// checkHints checks the publisher headers of a sensor posting once a
// minute, the last time at last, requested at now.
func checkHints(t *testing.T, h http.Header, now, last time.Time) {
	t.Helper()
	if got, want := h.Get(feedext.HeaderPhase), strconv.FormatFloat(now.Sub(last).Seconds(), 'f', 3, 64); got != want {
		t.Errorf("%s = %q, want %q", feedext.HeaderPhase, got, want)
	}
	next, err := time.Parse(time.RFC3339, h.Get(feedext.HeaderNext))
	if err != nil {
		t.Fatalf("%s: %v", feedext.HeaderNext, err)
	}
	if next.Before(last.Add(55*time.Second)) || next.After(last.Add(65*time.Second)) {
		t.Errorf("%s = %v, want about a minute after %v", feedext.HeaderNext, next, last)
	}
	wantCC := fmt.Sprintf("public, max-age=%d", int(next.Sub(now)/time.Second))
	if cc := h.Get("Cache-Control"); cc != wantCC {
		t.Errorf("Cache-Control %q, want %q", cc, wantCC)
	}
	if d, err := strconv.ParseFloat(h.Get(feedext.HeaderDesync), 64); err != nil || d < 2 || d > 60 {
		t.Errorf("%s = %q", feedext.HeaderDesync, h.Get(feedext.HeaderDesync))
	}
	if h.Get("ETag") == "" {
		t.Error("no ETag")
	}
}

func TestSensorOverdueAndFresh(t *testing.T) {
	e := newSensorEnv(t)
	last := e.postSeries(t, "s1", 10, sensorT0)
	// Past the predicted reading: an overdue reading may come at any
	// moment, so the store asks nobody to wait (no next, no max-age).
	now := last.Add(10*time.Minute + 30*time.Second)
	e.clock.Set(now)
	resp, _ := e.get(t, "/sensors/s1.atom", nil)
	if n := resp.Header.Get(feedext.HeaderNext); n != "" {
		t.Errorf("next %q for an overdue reading", n)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control %q for an overdue reading, want no-cache", cc)
	}
	// A sensor with a single reading has no prediction yet.
	e.clock.Set(sensorT0)
	e.post(t, "s2", "application/json", `{"value": 0}`)
	resp, _ = e.get(t, "/sensors/s2.json", nil)
	if resp.StatusCode != 200 || resp.Header.Get(feedext.HeaderNext) != "" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("fresh sensor: %d next %q cache %q", resp.StatusCode, resp.Header.Get(feedext.HeaderNext), resp.Header.Get("Cache-Control"))
	}
}

func TestSensorBadInput(t *testing.T) {
	e := newSensorEnv(t)
	e.clock.Set(sensorT0)
	tests := []struct {
		name, sensor, ctype, body string
		want                      int
		msg                       string // part of the error message
	}{
		{"not JSON content type", "s", "text/plain", `{"value": 1}`, 415, "application/json"},
		{"no content type", "s", "", `{"value": 1}`, 415, "application/json"},
		{"body too large", "s", "application/json", `{"value": 1, "unit": "` + strings.Repeat("x", MaxReadingBody) + `"}`, 413, "larger than"},
		{"empty body", "s", "application/json", ``, 400, "empty body"},
		{"not an object", "s", "application/json", `[1]`, 400, "invalid reading"},
		{"unknown field", "s", "application/json", `{"value": 1, "colour": "red"}`, 400, "unknown field"},
		{"missing value", "s", "application/json", `{"unit": "C"}`, 400, "value is required"},
		{"null value", "s", "application/json", `{"value": null}`, 400, "value is required"},
		{"string value", "s", "application/json", `{"value": "21.3"}`, 400, "invalid reading"},
		{"overflowing value", "s", "application/json", `{"value": 1e400}`, 400, "invalid reading"},
		{"trailing data", "s", "application/json", `{"value": 1} {"value": 2}`, 400, "after the JSON object"},
		{"trailing garbage", "s", "application/json", `{"value": 1} x`, 400, "after the JSON object"},
		{"unit too long", "s", "application/json", `{"value": 1, "unit": "` + strings.Repeat("u", MaxUnitLen+1) + `"}`, 400, "unit longer"},
		{"unit with control", "s", "application/json", `{"value": 1, "unit": "C\u0007"}`, 400, "unit contains"},
		{"bad time", "s", "application/json", `{"value": 1, "time": "yesterday"}`, 400, "RFC 3339"},
		{"time in the future", "s", "application/json", `{"value": 1, "time": "2026-11-21T20:00:01Z"}`, 400, "in the future"},
		{"time before 1970", "s", "application/json", `{"value": 1, "time": "1969-12-31T23:59:59Z"}`, 400, "before 1970"},
		{"lat without lon", "s", "application/json", `{"value": 1, "lat": 10}`, 400, "go together"},
		{"lat out of range", "s", "application/json", `{"value": 1, "lat": 90.5, "lon": 0}`, 400, "lat must"},
		{"lon out of range", "s", "application/json", `{"value": 1, "lat": 0, "lon": -181}`, 400, "lon must"},
		{"name starts with a dot", ".s", "application/json", `{"value": 1}`, 400, "sensor name"},
		{"name too long", strings.Repeat("a", 65), "application/json", `{"value": 1}`, 400, "sensor name"},
		{"name with escaped slash", "a%2Fb", "application/json", `{"value": 1}`, 400, "sensor name"},
		{"name with space", "a%20b", "application/json", `{"value": 1}`, 400, "sensor name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, v := e.post(t, tt.sensor, tt.ctype, tt.body)
			if code != tt.want {
				t.Fatalf("status %d, want %d (%v)", code, tt.want, v)
			}
			if msg, _ := v["error"].(string); !strings.Contains(msg, tt.msg) {
				t.Errorf("error %q, want it to mention %q", msg, tt.msg)
			}
		})
	}
	// Nothing was stored, no feed was created.
	if feeds, err := e.st.Feeds(); err != nil || len(feeds) != 0 {
		t.Errorf("feeds after bad input: %v %v", feeds, err)
	}
	// A reading at the edge of what is allowed is fine.
	if code, v := e.post(t, "s", "application/json", `{"value": -0.0, "unit": " µS/cm ", "time": "2026-11-21T20:00:00Z", "lat": -90, "lon": 180}`); code != 201 {
		t.Errorf("edge reading: %d %v", code, v)
	}

	gets := []struct {
		name, path string
		want       int
	}{
		{"unknown sensor", "/sensors/nope.rss", 404},
		{"unknown format", "/sensors/s.xml", 404},
		{"no format, unknown sensor", "/sensors/nope", 404},
		{"bad name", "/sensors/-s.rss", 404},
		{"limit zero", "/sensors/s.rss?limit=0", 400},
		{"limit too large", "/sensors/s.rss?limit=501", 400},
		{"limit not a number", "/sensors/s.rss?limit=ten", 400},
		{"limit max", "/sensors/s.rss?limit=500", 200},
	}
	for _, tt := range gets {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(t, tt.path, nil)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, body)
			}
			if tt.want != 200 {
				var v map[string]string
				if err := json.Unmarshal(body, &v); err != nil || v["error"] == "" {
					t.Errorf("error body %q", body)
				}
			}
		})
	}
}

// TestSensorGolden pins the three documents of a sensor fed on a fixed
// clock (testdata/sensors/README.md).
func TestSensorGolden(t *testing.T) {
	e := newSensorEnv(t)
	last := e.postSeries(t, "lab-1", 6, sensorT0)
	e.clock.Set(last.Add(5 * time.Second))
	for _, ext := range []string{"rss", "atom", "json"} {
		t.Run(ext, func(t *testing.T) {
			resp, body := e.get(t, "/sensors/lab-1."+ext, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			path := filepath.Join("testdata", "sensors", "lab-1."+ext)
			if updateSensorGolden() {
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
		})
	}
}

func TestSensorConcurrentPosts(t *testing.T) {
	e := newSensorEnv(t)
	e.clock.Set(sensorT0)
	var wg sync.WaitGroup
	ids := make(chan string, 40)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				code, v := e.post(t, []string{"a", "b"}[g%2], "application/json", fmt.Sprintf(`{"value": %d}`, i))
				if code != 201 {
					t.Errorf("status %d %v", code, v)
					return
				}
				ids <- v["id"].(string)
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Errorf("id %s given twice", id)
		}
		seen[id] = true
	}
	for _, s := range []string{"a", "b"} {
		f, _ := e.st.FeedBySlug(storage.KindSensor, s)
		if n, err := e.st.CountItems(f.ID); err != nil || n != 20 {
			t.Errorf("sensor %s: %d items, %v", s, n, err)
		}
	}
}

func TestReadingNumber(t *testing.T) {
	tests := []struct {
		id   string
		want uint64
	}{
		{readingID("lab-1", sensorT0, 7), 7},
		{"lab-1/2026-11-21T19:00:00Z/x", 0},
		{"no-slash", 0},
		{"a/b/18446744073709551615", 18446744073709551615},
	}
	for _, tt := range tests {
		if got := readingNumber(tt.id); got != tt.want {
			t.Errorf("readingNumber(%q) = %d, want %d", tt.id, got, tt.want)
		}
	}
}
