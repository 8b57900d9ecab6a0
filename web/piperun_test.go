package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A requested run takes no body: an empty one (white space, {}) runs the
// pipe; any other is a 400 that sends the client to the preview, and
// the pipe does not run. A large body is not read whole.
func TestPipeRunBody(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		status int
	}{
		{"no body", "", http.StatusOK},
		{"white space", " \r\n\t ", http.StatusOK},
		{"empty object", "{}", http.StatusOK},
		{"empty object with white space", "\n{ \n }\n", http.StatusOK},
		{"items", `{"items": [{"id": "r1", "title": "21.5"}]}`, http.StatusBadRequest},
		{"a definition", bodyPipe, http.StatusBadRequest},
		{"an empty array", "[]", http.StatusBadRequest},
		{"null", "null", http.StatusBadRequest},
		{"not JSON", "dry_run=1", http.StatusBadRequest},
		{"an unclosed object", "{", http.StatusBadRequest},
		{"large", `{"items": [` + strings.Repeat(`{"id": "r1"},`, 1<<16) + `{}]}`, http.StatusBadRequest},
		{"large white space", strings.Repeat(" ", 2*maxRunBody), http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPipeEnv(t, "")
			body := &countingReader{r: strings.NewReader(tt.body)}
			req := httptest.NewRequest("POST", "/api/v1/pipes/7/run", body)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			if body.n > maxRunBody+1 {
				t.Errorf("read %d bytes of the body, want at most %d", body.n, maxRunBody+1)
			}
			calls := e.fake.Calls()
			if tt.status == http.StatusOK {
				if !slices.Equal(calls, []string{"RunNow 7"}) {
					t.Errorf("calls %v, want the run", calls)
				}
				return
			}
			if len(calls) != 0 {
				t.Errorf("calls %v, want none", calls)
			}
			var v map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
				t.Fatalf("reply is not a JSON object: %q", rec.Body)
			}
			msg, _ := v["error"].(string)
			for _, want := range []string{"/api/v1/pipes/7/run takes no body", "POST /api/v1/pipes/7/preview"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
			if len(v) != 1 {
				t.Errorf("reply %v, want only \"error\"", v)
			}
		})
	}
}
