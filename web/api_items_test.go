package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
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
