package web

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Every answer of the sensor store's routes that is not a document is a
// JSON error, with its status and, for a method a route does not take,
// the Allow header.
func TestSensorRouteErrors(t *testing.T) {
	e := newSensorEnv(t)
	if code, v := e.post(t, "x", "application/json", `{"value": 1}`); code != http.StatusCreated {
		t.Fatalf("post: %d %v", code, v)
	}
	tests := []struct {
		method, path string
		code         int
		allow        string
	}{
		{"POST", "/sensors/x.rss", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"PUT", "/sensors/x.atom", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/sensors/x.json", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"GET", "/api/v1/sensors/x/readings", http.StatusMethodNotAllowed, "POST"},
		{"DELETE", "/api/v1/sensors/x/readings", http.StatusMethodNotAllowed, "POST"},
		{"GET", "/api/v1/sensors/x", http.StatusNotFound, ""},
		{"POST", "/api/v1/sensors/x/readings/1", http.StatusNotFound, ""},
		{"GET", "/sensors/a/b.rss", http.StatusNotFound, ""},
		{"GET", "/sensors/", http.StatusNotFound, ""},
		{"GET", "/sensors/nope.rss", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, e.srv.URL+tt.path, strings.NewReader(`{"value": 1}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var v struct {
				Error string `json:"error"`
			}
			if resp.StatusCode != tt.code || resp.Header.Get("Allow") != tt.allow {
				t.Errorf("%d Allow %q, want %d %q", resp.StatusCode, resp.Header.Get("Allow"), tt.code, tt.allow)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || json.Unmarshal(body, &v) != nil || v.Error == "" {
				t.Errorf("%s %q, want a JSON error", ct, body)
			}
		})
	}
}
