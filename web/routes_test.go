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
