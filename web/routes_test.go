package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Extra routes are mounted; a public one takes changes without the token,
// any other needs it.
func TestExtraRoutes(t *testing.T) {
	echo := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) })
	}
	h := New(Options{
		Token: "s3cret",
		Routes: []Route{
			{Pattern: "POST /websub/hub", Handler: echo("hub"), Public: true},
			{Pattern: "POST /api/v1/things", Handler: echo("things")},
			{Pattern: "GET /things", Handler: echo("list")},
		},
	})
	tests := []struct {
		name, method, path, auth string
		status                   int
		body                     string
	}{
		{"public write without token", "POST", "/websub/hub", "", http.StatusOK, "hub"},
		{"private write without token", "POST", "/api/v1/things", "", http.StatusUnauthorized, ""},
		{"private write with token", "POST", "/api/v1/things", "Bearer s3cret", http.StatusOK, "things"},
		{"read", "GET", "/things", "", http.StatusOK, "list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader("x"))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.body != "" && rec.Body.String() != tt.body {
				t.Errorf("body %q, want %q", rec.Body, tt.body)
			}
		})
	}
}

// A path the API serves for other methods answers 405 with Allow; an
// unknown path 404; a malformed query of the feed list 400.
func TestMethodNotAllowedAndMalformedQuery(t *testing.T) {
	h := New(Options{Store: clusterStore(t, 1), Node: "n1"})
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"POST", "/api/v1/cluster", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/api/v1/fleet", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"GET", "/api/v1/nothing", http.StatusNotFound, ""},
		{"GET", "/api/v1/feeds?q=%", http.StatusBadRequest, ""},
		{"GET", "/api/v1/cluster", http.StatusOK, ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, "http://127.0.0.1:8080"+tc.path, nil))
		if rec.Code != tc.status || rec.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want %d %q: %s", tc.method, tc.path, rec.Code, rec.Header().Get("Allow"), tc.status, tc.allow, rec.Body)
		}
	}
}
