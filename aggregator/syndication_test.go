package aggregator_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// The syndication module's stated update interval (sy:updatePeriod /
// sy:updateFrequency) reaches the policy as a period hint on every poll:
// from the document, and from the stored feed when a 304 brings none.
func TestUpdatePeriodIsAPeriodHint(t *testing.T) {
	tests := []struct {
		fixture string
		want    time.Duration
	}{
		{"update-period.xml", 15 * time.Minute},
		{"none.xml", 0},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "syndication", tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("ETag", `"v1"`)
				if r.Header.Get("If-None-Match") == `"v1"` {
					w.WriteHeader(http.StatusNotModified)
					return
				}
				w.Header().Set("Content-Type", "application/rss+xml")
				w.Write(body)
			}))
			defer srv.Close()
			svc, st := loopbackService(t)
			f, err := svc.Subscribe(storage.Feed{URL: srv.URL + "/roof.rss"})
			if err != nil {
				t.Fatal(err)
			}
			for i, status := range []int{http.StatusOK, http.StatusNotModified} {
				obs, err := svc.FetchNow(t.Context(), f.ID)
				if err != nil {
					t.Fatal(err)
				}
				if obs.Status != status || obs.Hints.Period != tc.want {
					t.Errorf("poll %d: status %d, period hint %v; want %d and %v", i, obs.Status, obs.Hints.Period, status, tc.want)
				}
				if p := obs.Schedule().Hints.Period; p != tc.want {
					t.Errorf("poll %d: the policy sees period hint %v, want %v", i, p, tc.want)
				}
			}
			stored, err := st.Observations(f.ID, 1)
			if err != nil || len(stored) != 1 || stored[0].Hints.Period != tc.want {
				t.Fatalf("stored observations %+v (%v), want the last with period hint %v", stored, err, tc.want)
			}
		})
	}
}
