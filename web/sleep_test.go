package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// A feed's own sleep windows are set when it is subscribed and replaced
// later through the API; bad windows are refused with a clear error.
func TestFeedSleepAPI(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "sleep.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store: st, Fetcher: fetcher.New(fetcher.Options{}), Scheduler: schedule.Config{},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := web.New(web.Options{Store: st, Aggregator: svc})
	do := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := do("POST", "/api/v1/feeds", `{"url": "https://sensors.example/solar.rss", "sleep": "20:00-06:00"}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("POST with sleep: %d %s", rec.Code, rec.Body)
	}
	var f web.FeedView
	if err := json.Unmarshal(rec.Body.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/feeds/" + jsonNumber(f.ID)
	const replaced = "01:00-02:30,2026-12-24T18:00:00Z/2026-12-26T06:00:00Z"
	// The plan in the schedule's "sleep", for each sleep_text.
	plans := map[string]string{
		"":            `{"skip_hours":[],"skip_days":[],"daily":[],"windows":[]}`,
		"20:00-06:00": `{"skip_hours":[],"skip_days":[],"daily":["20:00-06:00"],"windows":[]}`,
		replaced:      `{"skip_hours":[],"skip_days":[],"daily":["01:00-02:30"],"windows":[{"start":"2026-12-24T18:00:00Z","end":"2026-12-26T06:00:00Z"}]}`,
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		sleepText                string // for 200s
		errHas                   string // for 400s
	}{
		{"stored at subscription", "GET", path + "/schedule", "", http.StatusOK, "20:00-06:00", ""},
		{"replaced", "PUT", path + "/sleep", `{"sleep": "01:00-02:30, 2026-12-24T18:00:00Z/2026-12-26T06:00:00+00:00"}`, http.StatusOK, replaced, ""},
		{"kept after a bad one", "PUT", path + "/sleep", `{"sleep": "25:00-02:00"}`, http.StatusBadRequest, "", "daily window"},
		{"still the last good one", "GET", path + "/schedule", "", http.StatusOK, replaced, ""},
		{"inverted window", "PUT", path + "/sleep", `{"sleep": "2026-12-26T00:00:00Z/2026-12-24T00:00:00Z"}`, http.StatusBadRequest, "", "ends before it starts"},
		{"object form refused clearly", "PUT", path + "/sleep", `{"sleep": {"Daily": []}}`, http.StatusBadRequest, "", "sleep"},
		{"cleared", "PUT", path + "/sleep", `{"sleep": ""}`, http.StatusOK, "", ""},
		{"unknown feed", "PUT", "/api/v1/feeds/999/sleep", `{"sleep": ""}`, http.StatusNotFound, "", "no feed"},
		{"feed 0", "PUT", "/api/v1/feeds/0/sleep", `{"sleep": ""}`, http.StatusBadRequest, "", "positive integer"},
		{"feed -1", "PUT", "/api/v1/feeds/-1/sleep", `{"sleep": ""}`, http.StatusBadRequest, "", "positive integer"},
		{"bad at subscription", "POST", "/api/v1/feeds", `{"url": "https://sensors.example/b.rss", "sleep": "night"}`, http.StatusBadRequest, "", "HH:MM-HH:MM"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(tc.method, tc.path, tc.body)
			if rec.Code != tc.status {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, rec.Code, rec.Body, tc.status)
			}
			if tc.status != http.StatusOK {
				if !strings.Contains(rec.Body.String(), tc.errHas) {
					t.Fatalf("error %s does not mention %q", rec.Body, tc.errHas)
				}
				return
			}
			var v web.ScheduleView
			if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
				t.Fatal(err)
			}
			if v.SleepText != tc.sleepText {
				t.Fatalf("sleep_text %q, want %q", v.SleepText, tc.sleepText)
			}
			var raw struct{ Sleep json.RawMessage }
			if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, raw.Sleep); err != nil {
				t.Fatal(err)
			}
			if got := compact.String(); got != plans[tc.sleepText] {
				t.Fatalf("sleep %s, want %s", got, plans[tc.sleepText])
			}
		})
	}
}

func jsonNumber(id uint64) string { b, _ := json.Marshal(id); return string(b) }
