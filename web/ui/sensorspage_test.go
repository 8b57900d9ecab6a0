package ui

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
)

// The sensors list pages: 100 sensors a page, a next link until the
// last, every sensor once; previous links lead back through the same
// pages to the first.
func TestSensorsPaged(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	for i := range 250 {
		f := storage.Feed{Kind: storage.KindSensor, Slug: fmt.Sprintf("paged-%03d", i), Policy: "auto"}
		if err := e.st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 { // remote feeds between them are not listed
			r := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://example.org/%d.rss", i), Policy: "auto"}
			if err := e.st.CreateFeed(&r); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := e.client(t)
	link := regexp.MustCompile(`href="/ui/sensors/(paged-\d+)"`)
	next := regexp.MustCompile(`href="(/ui/sensors\?after=\d+)" rel="next"`)
	prev := regexp.MustCompile(`href="(/ui/sensors(?:\?after=\d+)?)" rel="prev"`)
	seen := map[string]bool{}
	var forward [][]string // each page's sensors
	last := ""
	path, pages := "/ui/sensors", 0
	for path != "" {
		last = path
		page := c.get(t, path)
		if page.status != http.StatusOK {
			t.Fatalf("%s: %d", path, page.status)
		}
		pages++
		rows := 0
		var names []string
		for _, m := range link.FindAllStringSubmatch(page.body, -1) {
			if seen[m[1]] {
				t.Fatalf("%s: %s listed again", path, m[1])
			}
			seen[m[1]] = true
			names = append(names, m[1])
			rows++
		}
		forward = append(forward, names)
		if got := prev.MatchString(page.body); got != (pages > 1) {
			t.Errorf("%s (page %d): previous page link %v", path, pages, got)
		}
		if rows > sensorsPerPage {
			t.Errorf("%s: %d sensors on a page", path, rows)
		}
		path = ""
		if m := next.FindStringSubmatch(page.body); m != nil {
			path = m[1]
		}
		if pages > 10 {
			t.Fatal("no last page")
		}
	}
	if len(seen) != 250 || pages < 3 {
		t.Errorf("%d paged sensors listed over %d pages, want 250 over at least 3", len(seen), pages)
	}
	// Back from the last page, page by page.
	path = last
	for i := len(forward) - 1; i > 0; i-- {
		m := prev.FindStringSubmatch(c.get(t, path).body)
		if m == nil {
			t.Fatalf("%s: no previous page link", path)
		}
		path = m[1]
		var names []string
		for _, m := range link.FindAllStringSubmatch(c.get(t, path).body, -1) {
			names = append(names, m[1])
		}
		if strings.Join(names, " ") != strings.Join(forward[i-1], " ") {
			t.Fatalf("previous page %s lists %d sensors from %v, want page %d's %d from %v", path, len(names), names[:min(1, len(names))], i, len(forward[i-1]), forward[i-1][:1])
		}
	}
	if path != "/ui/sensors" {
		t.Errorf("the previous pages lead back to %s, not the first page", path)
	}
	if page := c.get(t, "/ui/sensors?after=x"); page.status != http.StatusBadRequest || !strings.Contains(page.body, "after=x") {
		t.Errorf("a bad page: %d", page.status)
	}
	// A page past the last sensor (a stale link) says so and leads back.
	page := c.get(t, "/ui/sensors?after=18446744073709551615")
	if page.status != http.StatusOK || !strings.Contains(page.body, "No sensors on this page.") || strings.Contains(page.body, "No sensors yet") ||
		!strings.Contains(page.body, `href="/ui/sensors">First page`) || !prev.MatchString(page.body) {
		t.Errorf("a page past the end: %d, no way back or says there are no sensors:\n%s", page.status, page.body)
	}
}
