package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// A bulk subscription subscribes what it can, refuses the rest with a
// reason each, in the order sent, and spreads the first fetches.
func TestBulkSubscribe(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := schedule.NewVirtualClock(t0)
	st, err := storage.Open(filepath.Join(t.TempDir(), "bulk.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{}), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	h := web.New(web.Options{Store: st, Aggregator: svc, Now: clock.Now})
	post := func(body string) (int, web.BulkResponse, string) {
		req := httptest.NewRequest("POST", "/api/v1/feeds/bulk", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out web.BulkResponse
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, out, rec.Body.String()
	}
	if code, _, _ := post(`{"feeds": [{"url": "https://already.example/a.rss"}]}`); code != http.StatusOK {
		t.Fatalf("first request: %d", code)
	}

	var feeds []string
	for i := range 50 {
		f := fmt.Sprintf(`{"url": "https://mote-%d.example/s.rss"}`, i)
		if i == 7 {
			f = `{"url": "https://mote-7.example/s.rss", "reduce": null}` // as a feed without one reads back
		}
		feeds = append(feeds, f)
	}
	refused := []struct{ body, reason string }{
		{`{"url": "https://already.example/a.rss"}`, web.ReasonDuplicate},
		{`{"url": "https://mote-3.example/s.rss"}`, web.ReasonDuplicate},
		{`{"url": "http://127.0.0.1/secret.rss"}`, web.ReasonSSRF},
		{`{"url": "http://[::1]:8080/x.rss"}`, web.ReasonSSRF},
		{`{"url": "http://10.0.0.7/x.rss"}`, web.ReasonSSRF},
		{`{"url": "ftp://files.example/x.rss"}`, web.ReasonBadURL},
		{`{"url": "not a url"}`, web.ReasonBadURL},
		{`{"url": "https://p.example/x.rss", "policy": "sometimes"}`, web.ReasonPolicy},
		{`{"url": "https://w.example/x.rss", "weight": -1}`, web.ReasonInvalid},
		{`{"url": "https://s.example/x.rss", "sleep": "night"}`, web.ReasonInvalid},
		{`{"url": "https://e1.example/x.rss", "extract": {"field": "title", "regex": "("}}`, web.ReasonInvalid},
		{`{"url": "https://e2.example/x.rss", "extract": {"field": "bogus", "regex": "(\\d+)"}}`, web.ReasonInvalid},
		{`{"url": "https://e3.example/x.rss", "extract": {"field": "title", "regex": "\\d+"}}`, web.ReasonInvalid},
		{`{"url": "https://r1.example/x.rss", "retention": {"max_items": -5}}`, web.ReasonInvalid},
		{`{"url": "https://r2.example/x.rss", "retention": {"max_age": -5}}`, web.ReasonInvalid},
		{`{"url": "https://r3.example/x.rss", "reduce": {"zzz": 1}}`, web.ReasonInvalid},
		{`{"url": "https://r4.example/x.rss", "reduce": "x"}`, web.ReasonInvalid},
	}
	for _, r := range refused {
		feeds = append(feeds, r.body)
	}
	code, out, body := post(`{"feeds": [` + strings.Join(feeds, ",") + `]}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	if out.Added != 50 || out.Refused != len(refused) || len(out.Results) != len(feeds) {
		t.Fatalf("added %d refused %d of %d results, want 50, %d of %d", out.Added, out.Refused, len(out.Results), len(refused), len(feeds))
	}
	var firsts []time.Time
	for i := range 50 {
		res := out.Results[i]
		if res.ID == 0 || res.URL != fmt.Sprintf("https://mote-%d.example/s.rss", i) {
			t.Fatalf("result %d: %+v", i, res)
		}
		next, ok := svc.NextFetch(res.ID)
		if !ok {
			t.Fatalf("feed %d is not scheduled", res.ID)
		}
		firsts = append(firsts, next)
	}
	for i, r := range refused {
		res := out.Results[50+i]
		if res.ID != 0 || res.Reason != r.reason || res.Error == "" {
			t.Errorf("%s: %+v, want refused as %s", r.body, res, r.reason)
		}
		if strings.Contains(res.URL, "secret") && !strings.Contains(r.body, "secret") {
			t.Errorf("result URL %q", res.URL)
		}
	}
	// Paced: each first fetch in a slot of its own, 1/FirstFetchRate
	// apart; a refused feed may have taken a slot too.
	slot := time.Second / aggregator.FirstFetchRate
	seen := map[time.Time]bool{}
	latest := t0
	for _, f := range firsts {
		if seen[f] || f.Sub(t0)%slot != 0 {
			t.Fatalf("first fetch at +%v: taken twice, or not on a slot", f.Sub(t0))
		}
		seen[f] = true
		if f.After(latest) {
			latest = f
		}
	}
	if d := latest.Sub(t0); d < 50*slot || d > time.Duration(1+len(firsts)+len(refused))*slot {
		t.Errorf("last first fetch at +%v, want within +%v…+%v", d, 50*slot, time.Duration(1+len(firsts)+len(refused))*slot)
	}

	tests := []struct {
		name, body string
		code       int
		says       string
	}{
		{"too many feeds", `{"feeds": [` + strings.Repeat(`{"url": "https://x.example/a"},`, web.MaxBulkFeeds) + `{"url": "https://x.example/b"}]}`, http.StatusBadRequest, "at most 10000 feeds"},
		{"not JSON", `{"feeds": [`, http.StatusBadRequest, "invalid JSON"},
		{"unknown field", `{"urls": ["https://x.example/a"]}`, http.StatusBadRequest, "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code, _, body := post(tc.body); code != tc.code || !strings.Contains(body, tc.says) {
				t.Fatalf("%d %s, want %d with %q", code, body, tc.code, tc.says)
			}
		})
	}
}
