package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
)

// A feed's site link (RSS <link>, Atom rel="alternate", JSON Feed
// home_page_url) is its page in the web UI, and the paths the links once
// named redirect there; the feed documents' routes are unchanged.
func TestSiteLinks(t *testing.T) {
	se := newSensorEnv(t)
	if code, v := se.post(t, "lab-1", "application/json", `{"value": 21.5}`); code != http.StatusCreated {
		t.Fatalf("post: %d %v", code, v)
	}
	fx := newPipeFixture(t)
	pipes := httptest.NewServer(fx.handler(PipeFeedOptions{}))
	t.Cleanup(pipes.Close)
	sensorPage := "https://slog.example.org/ui/sensors/lab-1"
	pipePage := "https://slog.example.org/ui/feeds/" + strconv.FormatUint(fx.feed.ID, 10)

	links := []struct {
		url, page string
	}{
		{se.srv.URL + "/sensors/lab-1.rss", sensorPage},
		{se.srv.URL + "/sensors/lab-1.atom", sensorPage},
		{se.srv.URL + "/sensors/lab-1.json", sensorPage},
		{pipes.URL + "/feeds/" + pipeSlug + ".rss", pipePage},
		{pipes.URL + "/feeds/" + pipeSlug + ".atom", pipePage},
		{pipes.URL + "/feeds/" + pipeSlug + ".json", pipePage},
	}
	site := regexp.MustCompile(`<link>([^<]*)</link>|<link href="([^"]*)" rel="alternate">`)
	for _, l := range links {
		resp, err := http.Get(l.url)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Home string `json:"home_page_url"`
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := json.Unmarshal(body, &doc); err == nil {
			got = doc.Home
		} else if m := site.FindSubmatch(body); m != nil {
			got = string(m[1]) + string(m[2])
		}
		if got != l.page {
			t.Errorf("%s: site link %q, want %q", l.url, got, l.page)
		}
	}

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirects := []struct {
		method, url string
		code        int
		location    string
	}{
		{"GET", se.srv.URL + "/sensors/lab-1", http.StatusMovedPermanently, sensorPage},
		{"HEAD", se.srv.URL + "/sensors/lab-1", http.StatusMovedPermanently, sensorPage},
		{"GET", se.srv.URL + "/sensors/nope", http.StatusNotFound, ""},
		{"GET", se.srv.URL + "/sensors/lab-1.rss", http.StatusOK, ""},
		{"GET", pipes.URL + "/feeds/" + pipeSlug, http.StatusFound, pipePage},
		{"HEAD", pipes.URL + "/feeds/" + pipeSlug, http.StatusFound, pipePage},
		{"GET", pipes.URL + "/feeds/nope", http.StatusNotFound, ""},
		{"GET", pipes.URL + "/feeds/" + pipeSlug + ".json", http.StatusOK, ""},
	}
	for _, r := range redirects {
		req, _ := http.NewRequest(r.method, r.url, nil)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != r.code || resp.Header.Get("Location") != r.location {
			t.Errorf("%s %s: %d Location %q, want %d %q", r.method, r.url, resp.StatusCode, resp.Header.Get("Location"), r.code, r.location)
		}
	}
}
