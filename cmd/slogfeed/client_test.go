package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// add --sleep sends the feed's sleep windows with the subscription; a
// malformed one is a usage error before any request.
func TestAddSleep(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = nil
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("body: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id": 7, "policy": "auto", "url": "https://s.example/a.rss"}`))
	}))
	defer srv.Close()
	tests := []struct {
		name      string
		args      []string
		code      int
		sleep     any // the request's "sleep" (nil: none sent)
		stderrHas string
	}{
		{"daily and one-off", []string{"add", "https://s.example/a.rss", "--sleep", "20:00-06:00,2026-12-24T18:00:00Z/2026-12-26T06:00:00Z"}, 0, "20:00-06:00,2026-12-24T18:00:00Z/2026-12-26T06:00:00Z", ""},
		{"none", []string{"add", "https://s.example/a.rss"}, 0, nil, ""},
		{"malformed", []string{"add", "https://s.example/a.rss", "--sleep", "night"}, 2, nil, "--sleep: schedule: invalid sleep plan: daily window"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			env := map[string]string{"SLOGFEED_LOG_LEVEL": "error", "SLOGFEED_SERVER": srv.URL}
			r := runCLI(context.Background(), tc.args, env, nil)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderrHas) {
				t.Fatalf("code %d stderr %q, want %d and %q", r.code, r.stderr, tc.code, tc.stderrHas)
			}
			if tc.code != 0 {
				if got != nil {
					t.Fatalf("a request was sent: %v", got)
				}
				return
			}
			if got["sleep"] != tc.sleep {
				t.Fatalf("request sleep %v, want %v", got["sleep"], tc.sleep)
			}
		})
	}
}
