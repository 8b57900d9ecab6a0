package publish

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/feedext"
)

func TestServe(t *testing.T) {
	doc := []byte(`<rss version="2.0"><channel><title>t</title></channel></rss>`)
	now := t0
	h := Hints{Newest: now.Add(-12500 * time.Millisecond), Next: now.Add(90*time.Second + 600*time.Millisecond), Desync: 2500 * time.Millisecond}
	etag := ETag(doc)
	tests := []struct {
		name       string
		method     string
		header     map[string]string
		hints      Hints
		wantStatus int
		wantBody   bool
		want       map[string]string // header values; "" means absent
	}{
		{name: "plain GET", method: "GET", hints: h, wantStatus: 200, wantBody: true, want: map[string]string{
			"Content-Type": ContentTypeRSS, "ETag": etag, "Last-Modified": "Sat, 21 Nov 2026 19:29:47 GMT",
			"Cache-Control": "public, max-age=90", feedext.HeaderPhase: "12.500", feedext.HeaderDesync: "2.5",
			feedext.HeaderNext: "2026-11-21T19:31:30Z", feedext.HeaderMore: "", feedext.HeaderDue: "",
		}},
		{name: "matching If-None-Match", method: "GET", header: map[string]string{"If-None-Match": etag}, hints: h, wantStatus: 304, want: map[string]string{
			"ETag": etag, "Cache-Control": "public, max-age=90", feedext.HeaderPhase: "12.500", feedext.HeaderDesync: "2.5",
		}},
		{name: "one of several tags, weak form", method: "GET", header: map[string]string{"If-None-Match": `"nope", W/` + etag}, hints: h, wantStatus: 304},
		{name: "stale If-None-Match", method: "GET", header: map[string]string{"If-None-Match": `"0000"`}, hints: h, wantStatus: 200, wantBody: true},
		{name: "If-None-Match wins over If-Modified-Since", method: "GET", header: map[string]string{"If-None-Match": `"0000"`, "If-Modified-Since": "Sat, 21 Nov 2026 19:30:00 GMT"}, hints: h, wantStatus: 200, wantBody: true},
		{name: "If-Modified-Since at Last-Modified", method: "GET", header: map[string]string{"If-Modified-Since": "Sat, 21 Nov 2026 19:29:47 GMT"}, hints: h, wantStatus: 304},
		{name: "If-Modified-Since before", method: "GET", header: map[string]string{"If-Modified-Since": "Sat, 21 Nov 2026 19:29:46 GMT"}, hints: h, wantStatus: 200, wantBody: true},
		{name: "HEAD", method: "HEAD", hints: h, wantStatus: 200, want: map[string]string{"ETag": etag}},
		{name: "no prediction, no items", method: "GET", hints: Hints{}, wantStatus: 200, wantBody: true, want: map[string]string{
			"Cache-Control": "no-cache", "Last-Modified": "", feedext.HeaderPhase: "", feedext.HeaderDesync: "", feedext.HeaderNext: "",
		}},
		{name: "overdue prediction", method: "GET", hints: Hints{Newest: now.Add(time.Hour), Next: now.Add(-time.Second), More: true}, wantStatus: 200, wantBody: true, want: map[string]string{
			"Cache-Control": "no-cache", feedext.HeaderPhase: "0.000", feedext.HeaderNext: "2026-11-21T19:29:59Z", feedext.HeaderMore: "1",
		}},
		{name: "planned update", method: "GET", hints: Hints{Next: now.Add(30 * time.Second), Due: now.Add(31250 * time.Millisecond)}, wantStatus: 200, wantBody: true, want: map[string]string{
			"Cache-Control": "public, max-age=30", feedext.HeaderDue: "31.250",
		}},
		{name: "planned update on a 304", method: "GET", header: map[string]string{"If-None-Match": etag}, hints: Hints{Due: now.Add(5 * time.Second)}, wantStatus: 304, want: map[string]string{
			feedext.HeaderDue: "5.000",
		}},
		{name: "planned update passed: due now", method: "GET", hints: Hints{Due: now.Add(-3 * time.Second)}, wantStatus: 200, wantBody: true, want: map[string]string{
			feedext.HeaderDue: "0.000",
		}},
		{name: "far prediction capped", method: "GET", hints: Hints{Next: now.Add(72 * time.Hour), Desync: 4 * time.Second}, wantStatus: 200, wantBody: true, want: map[string]string{
			"Cache-Control": "public, max-age=86400", feedext.HeaderDesync: "4",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "/f.rss", nil)
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			Serve(w, r, ContentTypeRSS, doc, tt.hints, now)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", w.Code, tt.wantStatus)
			}
			if got := w.Body.Len() > 0; got != tt.wantBody {
				t.Errorf("body present = %v, want %v", got, tt.wantBody)
			}
			if tt.wantBody && w.Body.String() != string(doc) {
				t.Errorf("body %q", w.Body.String())
			}
			for k, v := range tt.want {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestETag(t *testing.T) {
	a, b := ETag([]byte("a")), ETag([]byte("b"))
	if a == b || a != ETag([]byte("a")) || a[0] != '"' || a[len(a)-1] != '"' {
		t.Errorf("ETag: %s %s", a, b)
	}
	h := http.Header{}
	h.Set("ETag", a)
	if h.Get("Etag") != a {
		t.Error("header round trip")
	}
}
