package web

import (
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

func TestLocalFeeds(t *testing.T) {
	local := LocalFeeds("http://127.0.0.1:8080", "https://feeds.example.org/slog/", "not a url")
	tests := []struct {
		url  string
		want string // the ref; "" for none
	}{
		{"http://127.0.0.1:8080/feeds/field-mean.rss", "pipe/field-mean"},
		{"http://localhost:8080/feeds/field-mean.json?limit=5", "pipe/field-mean"},
		{"http://127.0.0.2:8080/feeds/a.atom", "pipe/a"},
		{"http://[::1]:8080/sensors/lab-1.atom", "sensor/lab-1"},
		{"http://[::ffff:127.0.0.1]:8080/sensors/lab-1.rss", "sensor/lab-1"},
		{"https://feeds.example.org/slog/feeds/x.atom", "pipe/x"},
		{"https://FEEDS.example.org./slog/feeds/x.rss", "pipe/x"},
		{"http://127.0.0.1:8080/feeds/%6De.json", "pipe/me"},    // percent-encoded
		{"http://127.0.0.1:8080/x/../feeds/p1.json", "pipe/p1"}, // dot segments
		{"http://127.0.0.1:8080//feeds/./p1.json", "pipe/p1"},   // a doubled slash, a dot
		{"http://127.0.0.1:08080/feeds/p1.json", "pipe/p1"},     // a port with a leading zero
		{"http://127.0.0.1:8081/feeds/a.rss", ""},               // another port
		{"https://127.0.0.1:8080/feeds/a.rss", ""},              // another scheme
		{"https://feeds.example.org/feeds/x.atom", ""},          // outside the base path
		{"http://feeds.example.org/slog/feeds/x.rss", ""},       // http is port 80
		{"https://other.example.org/slog/feeds/x.rss", ""},      // another host
		{"http://127.0.0.1:8080/feeds/a/b.rss", ""},             // not a slug
		{"http://127.0.0.1:8080/feeds/.rss", ""},                // no slug
		{"http://127.0.0.1:8080/feeds/a.xml", ""},               // not a format
		{"http://127.0.0.1:8080/api/v1/feeds/3/items", ""},      // not a document
		{"http://127.0.0.1:8080/feeds/Not_A_Slug!.rss", ""},     // not a pipe slug
		{"http://127.0.0.1:8080/sensors/" + string(make([]byte, 80)) + ".rss", ""},
	}
	for _, tt := range tests {
		ref, ok := local(tt.url)
		got := ""
		if ok {
			got = ref.String()
		}
		if got != tt.want {
			t.Errorf("%q: %q, want %q", tt.url, got, tt.want)
		}
	}
}

func TestPipeFeedIRI(t *testing.T) {
	f := storage.Feed{Slug: "field-mean", Created: time.Date(2026, 11, 21, 23, 30, 0, 0, time.FixedZone("", -3600))}
	if got, want := pipeFeedIRI(AuthorityOf("https://feeds.example.org:8443/slog"))(f), "tag:feeds.example.org,2026-11-22:feeds/field-mean"; got != want {
		t.Errorf("id %q, want %q", got, want)
	}
	if got, want := pipeFeedIRI("")(f), "urn:slogfeed:pipe:field-mean"; got != want {
		t.Errorf("without an authority: %q, want %q", got, want)
	}
}
