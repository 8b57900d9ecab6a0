package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
