package sanitize

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"http://u:pw@host/feed":                "http://u:xxxxx@host/feed",
		"https://apikey@host/feed?x=1":         "https://xxxxx@host/feed?x=1",
		"http://u:@host/":                      "http://u:xxxxx@host/",
		"http://host/feed":                     "http://host/feed",
		"http://host/a@b":                      "http://host/a@b",
		"http://u:p%40ss@host:8080/x":          "http://u:xxxxx@host:8080/x",
		"http://u:pw@host/%zz":                 Masked,
		"":                                     "",
		"sensor/lab-1":                         "sensor/lab-1",
		"http://u:pw@[::1]:8080/feed.rss#frag": "http://u:xxxxx@[::1]:8080/feed.rss#frag",
		"u:pw@host/feed":                       Masked, // no scheme: "u" parses as one
		"apikey@host/feed":                     Masked,
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
		if strings.Contains(RedactURL(raw), "pw") && !strings.Contains(want, "pw") {
			t.Errorf("RedactURL(%q) shows the password", raw)
		}
	}
}
