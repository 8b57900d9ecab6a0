package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// A sensor feed's items count in /api/v1/feeds is the readings it holds
// (it is never fetched, so the fetch counter stays 0), in the list and
// for the single feed.
func TestFeedsAPIItemsOfSensor(t *testing.T) {
	e := newSensorEnv(t)
	e.postSeries(t, "lab-1", 7, sensorT0)
	h := New(Options{Store: e.st, Sensors: e.handler(), Now: e.clock.Now})

	var page FeedPage
	getJSON(t, h, "/api/v1/feeds", &page)
	list := page.Feeds
	if len(list) != 1 || list[0].Kind != "sensor" {
		t.Fatalf("feeds %+v, want the one sensor feed", list)
	}
	if list[0].Items != 7 {
		t.Errorf("list: items = %d, want 7", list[0].Items)
	}
	var one FeedView
	getJSON(t, h, "/api/v1/feeds/"+strconv.FormatUint(list[0].ID, 10), &one)
	if one.Items != 7 {
		t.Errorf("feed: items = %d, want 7", one.Items)
	}
	e.clock.Set(sensorT0.Add(time.Hour))
	e.postSeries(t, "lab-1", 2, sensorT0.Add(time.Hour))
	getJSON(t, h, "/api/v1/feeds", &page)
	list = page.Feeds
	if list[0].Items != 9 {
		t.Errorf("after two more readings: items = %d, want 9", list[0].Items)
	}
}

func getJSON(t *testing.T, h http.Handler, path string, v any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// An item whose publisher gave no update time is answered without
// "updated" (not the zero time), by the readings POST and the items list
// (pipe previews: TestPipeRoutes).
func TestItemsOmitZeroUpdated(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := New(Options{Store: st, Sensors: SensorHandler(st, SensorOptions{})})
	req := httptest.NewRequest("POST", "/api/v1/sensors/lab-1/readings", strings.NewReader(`{"value": 21.5}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated || strings.Contains(rec.Body.String(), `"updated"`) || !strings.Contains(rec.Body.String(), `"published"`) {
		t.Fatalf("reading: %d %s", rec.Code, rec.Body)
	}
	f, err := st.FeedBySlug(storage.KindSensor, "lab-1")
	if err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/api/v1/feeds/%d/items", f.ID), nil))
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"updated"`) || !strings.Contains(rec.Body.String(), `"lab-1`) {
		t.Fatalf("items: %d %s", rec.Code, rec.Body)
	}
}

// TestItemsAPIPages: /api/v1/feeds/{id}/items pages by arrival, each page
// linking the next (Link rel="next") while older items remain; walking
// the links gives every item once, newest first; a bad before is a 400.
func TestItemsAPIPages(t *testing.T) {
	e := newSensorEnv(t)
	e.postSeries(t, "lab-1", 7, sensorT0)
	h := New(Options{Store: e.st, Sensors: e.handler(), Now: e.clock.Now})
	f, err := e.st.FeedBySlug(storage.KindSensor, "lab-1")
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("/api/v1/feeds/%d/items", f.ID)
	all, err := e.st.Items(f.ID, storage.ItemQuery{})
	if err != nil || len(all) != 7 {
		t.Fatalf("%d items, %v", len(all), err)
	}
	next := regexp.MustCompile(`^<(/api/v1/feeds/\d+/items\?before=\d+&limit=\d+)>; rel="next"$`)
	for _, limit := range []int{1, 2, 3, 7, 50} {
		var got []uint64
		pages := 0
		for path := fmt.Sprintf("%s?limit=%d", base, limit); path != ""; pages++ {
			if pages > len(all) {
				t.Fatalf("limit %d: more pages than items", limit)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			var page []storage.Item
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil || len(page) > limit {
				t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
			}
			for _, it := range page {
				got = append(got, it.Seq)
			}
			asked := path
			path = ""
			if link := rec.Header().Get("Link"); link != "" {
				m := next.FindStringSubmatch(link)
				if m == nil {
					t.Fatalf("GET %s: Link %q", asked, link)
				}
				path = m[1]
			}
		}
		var want []uint64
		for _, it := range all {
			want = append(want, it.Seq)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("limit %d: pages give %v, want %v", limit, got, want)
		}
		if wantPages := (len(all) + limit - 1) / limit; pages != wantPages {
			t.Errorf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
	for _, q := range []string{"before=0", "before=x", "before=-1", "before=18446744073709551616"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", base+"?"+q, nil))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "before must be") {
			t.Errorf("GET ?%s: %d %s, want 400", q, rec.Code, rec.Body)
		}
	}
}

// TestSensorsListed: GET /api/v1/sensors leads to the feeds list of kind
// sensor, with the query it was given; other methods are a 405.
func TestSensorsListed(t *testing.T) {
	e := newSensorEnv(t)
	e.postSeries(t, "lab-1", 1, sensorT0)
	e.postSeries(t, "lab-2", 1, sensorT0)
	h := New(Options{Store: e.st, Sensors: e.handler(), Now: e.clock.Now})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/sensors?limit=1", nil))
	loc := rec.Header().Get("Location")
	if rec.Code != http.StatusTemporaryRedirect || loc != "/api/v1/feeds?kind=sensor&limit=1" {
		t.Fatalf("GET /api/v1/sensors: %d to %q", rec.Code, loc)
	}
	var page FeedPage
	getJSON(t, h, loc, &page)
	if len(page.Feeds) != 1 || page.Feeds[0].Kind != "sensor" || page.Total != 2 || page.NextCursor == "" {
		t.Fatalf("sensors: %+v", page)
	}
	// A query the list refuses is refused, not dropped on the way.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/sensors?q=a;b", nil))
	if loc := rec.Header().Get("Location"); loc != "/api/v1/feeds?kind=sensor&q=a;b" {
		t.Fatalf("GET /api/v1/sensors?q=a;b: to %q", loc)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/feeds?kind=sensor&q=a;b", nil))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("GET /api/v1/feeds?kind=sensor&q=a;b: %d, want 400", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/sensors", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET" {
		t.Fatalf("POST /api/v1/sensors: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

// isJSONType takes a JSON media type in any case, with parameters.
func TestIsJSONType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "APPLICATION/JSON": true, "Application/Json; charset=UTF-8": true,
		" application/json ;charset=utf-8": true, "application/feed+json": true, "text/json": true,
		"text/plain": false, "application/jsonx": false, "": false, "application/x-www-form-urlencoded": false,
	} {
		if got := isJSONType(ct); got != want {
			t.Errorf("isJSONType(%q) = %v, want %v", ct, got, want)
		}
	}
}
