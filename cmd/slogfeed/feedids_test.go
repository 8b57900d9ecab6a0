package main

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Atom ids of the sensor and pipe feeds keep the tag authority of the
// installation's first start: a restart behind another public URL keeps
// every id (subscribers would store every item again otherwise);
// --id-authority sets another one explicitly, for as long as it is given.
func TestFeedIDsSurviveAnotherPublicURL(t *testing.T) {
	data := t.TempDir()
	steps := []struct {
		name      string
		args      []string
		authority string // of every id
	}{
		{"first start", []string{"--public-url", "https://feeds.example.org"}, "feeds.example.org"},
		{"behind another public URL", []string{"--public-url", "https://proxy.example.net/slog"}, "feeds.example.org"},
		{"on another address", nil, "feeds.example.org"},
		{"with --id-authority", []string{"--id-authority", "ids.example.com"}, "ids.example.com"},
		{"without it again", []string{"--public-url", "http://10.0.0.7:8080"}, "feeds.example.org"},
	}
	var first []string
	for i, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			h, stop := servicesOn(t, data, step.args...)
			defer stop()
			if i == 0 {
				do(t, h, "POST", "/api/v1/sensors/lab-1/readings", `{"value": 21.5, "unit": "C"}`, http.StatusCreated)
				do(t, h, "POST", "/api/v1/pipes", `{"name": "Lab", "nodes": [{"id": "in", "op": "source", "config": {"feed": "sensor/lab-1"}}], "output": {"slug": "lab"}}`, http.StatusCreated)
			}
			var ids []string
			for _, path := range []string{"/sensors/lab-1.atom", "/feeds/lab.atom"} {
				doc := do(t, h, "GET", path, "", http.StatusOK)
				for _, m := range regexp.MustCompile(`<id>([^<]*)</id>`).FindAllStringSubmatch(doc, -1) {
					ids = append(ids, m[1])
				}
			}
			if len(ids) < 2 {
				t.Fatalf("ids %q: want the feeds' and their entries'", ids)
			}
			for _, id := range ids {
				if !strings.HasPrefix(id, "tag:"+step.authority+",") {
					t.Errorf("id %q, want a tag URI of %s", id, step.authority)
				}
			}
			if i == 0 {
				first = ids
			} else if step.authority == steps[0].authority && !slices.Equal(ids, first) {
				t.Errorf("ids %q, want those of the first start %q", ids, first)
			}
		})
	}
}

// servicesOn builds serve's services on the data directory data, as on
// 127.0.0.1:8080 (not listening), with args; stop closes them and the
// store, so that the directory can be opened again.
func servicesOn(t *testing.T, data string, args ...string) (http.Handler, func()) {
	t.Helper()
	st, sv := startServices(t, data, args...)
	return sv.handler, func() {
		sv.close()
		st.close()
	}
}

// do sends a request to h as from loopback and checks its status.
func do(t *testing.T, h http.Handler, method, path, body string, status int) string {
	t.Helper()
	req := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, status)
	}
	return rec.Body.String()
}
