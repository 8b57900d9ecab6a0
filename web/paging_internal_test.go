package web

import (
	"net/http/httptest"
	"testing"
	"time"
)

// missed compares a whole-second If-Modified-Since with the page's oldest
// item: a subscriber whose newest item lies in the oldest item's second
// is told too, since HTTP dates cannot say which part of it it has.
func TestMissed(t *testing.T) {
	oldest := time.Date(2026, 11, 25, 12, 0, 0, 700e6, time.UTC) // 12:00:00.7
	for _, tc := range []struct {
		name, ims string
		want      bool
	}{
		{"a second before", "Wed, 25 Nov 2026 11:59:59 GMT", true},
		{"the same second", "Wed, 25 Nov 2026 12:00:00 GMT", true},
		{"after it", "Wed, 25 Nov 2026 12:00:01 GMT", false},
		{"no header", "", false},
		{"unreadable", "yesterday", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/sensors/lab.rss", nil)
			if tc.ims != "" {
				r.Header.Set("If-Modified-Since", tc.ims)
			}
			if got := missed(r, oldest); got != tc.want {
				t.Errorf("missed = %v, want %v", got, tc.want)
			}
		})
	}
}
