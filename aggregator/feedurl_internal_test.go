package aggregator

import (
	"net/url"
	"testing"
)

func TestCanonicalURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://h.example.org/f/4.rss", "https://h.example.org/f/4.rss"},
		{"https://h.example.org/f/4.rss#latest", "https://h.example.org/f/4.rss"},
		{"HTTPS://H.Example.ORG/f/4.rss", "https://h.example.org/f/4.rss"},
		{"https://h.example.org:443/f/4.rss", "https://h.example.org/f/4.rss"},
		{"http://h.example.org:80/f/4.rss", "http://h.example.org/f/4.rss"},
		{"http://h.example.org:443/f/4.rss", "http://h.example.org:443/f/4.rss"},
		{"http://[::1]:80/f", "http://[::1]/f"},
		{"http://[::1]:8080/f", "http://[::1]:8080/f"},
		{"https://h.example.org/f/./4.rss", "https://h.example.org/f/4.rss"},
		{"https://h.example.org/x/../f/4.rss", "https://h.example.org/f/4.rss"},
		{"https://h.example.org/f/../../4.rss", "https://h.example.org/4.rss"},
		{"https://h.example.org/f/", "https://h.example.org/f/"},
		{"https://h.example.org/f/.", "https://h.example.org/f/"},
		{"https://h.example.org/%66/%34.rss", "https://h.example.org/f/4.rss"},
		{"https://h.example.org/f/4.rss?", "https://h.example.org/f/4.rss"},
		{"https://h.example.org/f/4.rss?#x", "https://h.example.org/f/4.rss"},
		{"https://h.example.org/f?a=%7e&b=%2f", "https://h.example.org/f?a=~&b=%2F"},
		{"https://h.example.org/f?b=2&a=1", "https://h.example.org/f?b=2&a=1"},
		// An encoded slash names another path; case is the server's.
		{"https://h.example.org/a%2fb", "https://h.example.org/a%2Fb"},
		{"https://h.example.org/F/4.RSS", "https://h.example.org/F/4.RSS"},
		{"https://h.example.org/a%20b", "https://h.example.org/a%20b"},
		{"https://user@h.example.org/f", "https://user@h.example.org/f"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if got := canonicalURL(u).String(); got != tt.want {
			t.Errorf("canonicalURL(%s) = %s, want %s", tt.in, got, tt.want)
		}
		// The canonical form is its own.
		if c, _ := url.Parse(tt.want); c != nil && canonicalURL(c).String() != tt.want {
			t.Errorf("canonicalURL(%s) = %s, not itself", tt.want, canonicalURL(c))
		}
	}
}
