package publish

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestServeDoc checks that ServeDoc answers as Serve does, with the ETag it
// is given or, when none, the one Serve computes.
func TestServeDoc(t *testing.T) {
	doc := []byte(`{"version":"https://jsonfeed.org/version/1.1","title":"t","items":[]}`)
	h := Hints{Newest: t0.Add(-time.Minute), Next: t0.Add(time.Minute), Desync: time.Second}
	serve := func(f func(w *httptest.ResponseRecorder, r *http.Request), method string, header map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/f.json", nil)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		f(w, r)
		return w
	}
	viaServe := func(w *httptest.ResponseRecorder, r *http.Request) { Serve(w, r, ContentTypeJSON, doc, h, t0) }
	viaDoc := func(w *httptest.ResponseRecorder, r *http.Request) {
		ServeDoc(w, r, NewDoc(doc, ContentTypeJSON), h, t0)
	}
	viaEmpty := func(w *httptest.ResponseRecorder, r *http.Request) {
		ServeDoc(w, r, Doc{Bytes: doc, ContentType: ContentTypeJSON}, h, t0)
	}
	for _, tt := range []struct {
		name   string
		method string
		header map[string]string
		code   int
	}{
		{"GET", "GET", nil, 200},
		{"HEAD", "HEAD", nil, 200},
		{"If-None-Match", "GET", map[string]string{"If-None-Match": ETag(doc)}, 304},
		{"If-Modified-Since", "GET", map[string]string{"If-Modified-Since": t0.Format(http.TimeFormat)}, 304},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := serve(viaServe, tt.method, tt.header)
			if want.Code != tt.code {
				t.Fatalf("Serve: status %d, want %d", want.Code, tt.code)
			}
			for name, f := range map[string]func(*httptest.ResponseRecorder, *http.Request){"precomputed": viaDoc, "computed": viaEmpty} {
				got := serve(f, tt.method, tt.header)
				if got.Code != want.Code || got.Body.String() != want.Body.String() {
					t.Errorf("%s: %d %q, want %d %q", name, got.Code, got.Body, want.Code, want.Body)
				}
				for k := range want.Header() {
					if got.Header().Get(k) != want.Header().Get(k) {
						t.Errorf("%s: %s = %q, want %q", name, k, got.Header().Get(k), want.Header().Get(k))
					}
				}
			}
		})
	}
	// The tag given is the one sent and matched.
	d := Doc{Bytes: doc, ETag: `"v7"`, ContentType: ContentTypeJSON}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/f.json", nil)
	r.Header.Set("If-None-Match", `"v7"`)
	ServeDoc(w, r, d, h, t0)
	if w.Code != 304 || w.Header().Get("ETag") != `"v7"` {
		t.Errorf("given tag: %d %q", w.Code, w.Header().Get("ETag"))
	}
}
