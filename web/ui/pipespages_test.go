package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/web"
)

// The pipes list pages, in the UI (100 a page, First, Previous and Next
// links) and in the API (limit, next_cursor): walking either lists every
// pipe once, the links back lead to the pages before, and a bad page is
// a 400.
func TestPipesPaged(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	for i := range 2*pipesPerPage + 4 { // one pipe, e.pipe, is the env's
		var def transform.Pipe
		if err := json.Unmarshal([]byte(fmt.Sprintf(`{"name": "Pipe %d", "nodes": [{"id": "lab", "op": "source", "config": {"feed": "sensor/lab-1"}}],
			"edges": [], "output": {"slug": "p-%d"}}`, i, i)), &def); err != nil {
			t.Fatal(err)
		}
		if _, err := e.pipes.Create(context.Background(), def); err != nil {
			t.Fatal(err)
		}
	}
	all := e.pipes.IDs()
	if len(all) != 2*pipesPerPage+5 {
		t.Fatalf("%d pipes", len(all))
	}
	row := regexp.MustCompile(`<td data-label="Pipe" class="name-cell"><a href="/ui/pipes/(\d+)">`)
	next := regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
	prev := regexp.MustCompile(`<a href="([^"]+)" rel="prev">`)
	var pages [][]string
	for path := "/ui/pipes"; path != ""; {
		r := c.get(t, path)
		checkPage(t, r)
		var ids []string
		for _, m := range row.FindAllStringSubmatch(r.body, -1) {
			ids = append(ids, m[1])
		}
		if len(ids) == 0 || len(ids) > pipesPerPage {
			t.Fatalf("%s: %d pipes", path, len(ids))
		}
		if len(pages) > 0 {
			m := prev.FindStringSubmatch(r.body)
			if m == nil {
				t.Fatalf("%s: no link to the page before", path)
			}
			back := c.get(t, html.UnescapeString(m[1]))
			var got []string
			for _, m := range row.FindAllStringSubmatch(back.body, -1) {
				got = append(got, m[1])
			}
			if fmt.Sprint(got) != fmt.Sprint(pages[len(pages)-1]) {
				t.Fatalf("%s: the page before lists %v, want %v", path, got, pages[len(pages)-1])
			}
		}
		pages = append(pages, ids)
		path = ""
		if m := next.FindStringSubmatch(r.body); m != nil {
			path = html.UnescapeString(m[1])
		}
		if len(pages) > 5 {
			t.Fatal("the pages never end")
		}
	}
	var walked []string
	for _, p := range pages {
		walked = append(walked, p...)
	}
	var want []string
	for _, id := range all {
		want = append(want, strconv.FormatUint(id, 10))
	}
	if len(pages) != 3 || fmt.Sprint(walked) != fmt.Sprint(want) {
		t.Fatalf("%d pages listing %v, want 3 listing %v", len(pages), walked, want)
	}
	if r := c.get(t, "/ui/pipes?after=x"); r.status != http.StatusBadRequest {
		t.Errorf("/ui/pipes?after=x: %d, want 400", r.status)
	}

	// The API, 7 a page.
	var got []uint64
	for path, n := "/api/v1/pipes?limit=7", 0; path != ""; n++ {
		r := c.get(t, path)
		var page web.PipePage
		if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &page) != nil || len(page.Pipes) > 7 || page.Total != len(all) {
			t.Fatalf("GET %s: %d %.300s", path, r.status, r.body)
		}
		for _, p := range page.Pipes {
			got = append(got, p.ID)
		}
		path = ""
		if page.NextCursor != "" {
			path = "/api/v1/pipes?limit=7&cursor=" + page.NextCursor
		}
		if n > len(all) {
			t.Fatal("the API's pages never end")
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("the API's pages list %v, want %v", got, all)
	}
	// A pipe's output feed links its pipe, found among many.
	last, err := e.pipes.Get(all[len(all)-1])
	if err != nil {
		t.Fatal(err)
	}
	if r := c.get(t, fmt.Sprintf("/ui/feeds/%d", last.FeedID)); !strings.Contains(r.body, fmt.Sprintf(`<a href="/ui/pipes/%d">Edit the pipe</a>`, last.ID)) {
		t.Errorf("the output feed's page does not link its pipe %d", last.ID)
	}
	for _, q := range []string{"limit=0", "limit=1001", "cursor=x", "cursor=-1"} {
		if r := c.get(t, "/api/v1/pipes?"+q); r.status != http.StatusBadRequest {
			t.Errorf("/api/v1/pipes?%s: %d, want 400", q, r.status)
		}
	}
}

// pipesPageBefore links the page before one from the ids, whatever the
// page's bound.
func TestPipesPageBefore(t *testing.T) {
	ids := make([]uint64, 0, 250)
	for i := range uint64(250) {
		ids = append(ids, 2*i+1) // odd ids 1..499
	}
	tests := []struct {
		after uint64
		want  string
	}{
		{ids[99], "/ui/pipes"},                 // the second page: the first before it
		{ids[199], "/ui/pipes?after=" + "199"}, // the third: after the 100th id
		{ids[150], "/ui/pipes?after=" + "101"}, // a page begun mid-way: the 100 before it
		{ids[199] + 1, "/ui/pipes?after=199"},  // after an id deleted since
		{1000, "/ui/pipes?after=" + "299"},     // past the end: the last 100
		{0, "/ui/pipes"},
	}
	for _, tt := range tests {
		if got := pipesPageBefore(ids, tt.after); got != tt.want {
			t.Errorf("pipesPageBefore(after %d) = %q, want %q", tt.after, got, tt.want)
		}
	}
}
