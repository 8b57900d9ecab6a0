package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The reader tests fetch the fixture pipe's feeds over HTTP with real feed
// readers: python3-feedparser and newsboat. When one is missing they skip
// with how to install it, unless SLOGFEED_REQUIRE_READERS=1 (scripts/test
// sets it when scripts/deps found or installed both), which makes a
// missing reader a failure.

// readerTimeout bounds each run of an external reader.
const readerTimeout = 30 * time.Second

const readerPython = "/usr/bin/python3"

// missingReader skips (or, when readers are required, fails) the test.
func missingReader(t *testing.T, what string, err error) {
	t.Helper()
	msg := fmt.Sprintf("%s is not available (%v): run ./scripts/deps, or apt-get install python3-feedparser newsboat", what, err)
	if os.Getenv("SLOGFEED_REQUIRE_READERS") == "1" {
		t.Fatal(msg + "; SLOGFEED_REQUIRE_READERS=1 requires it")
	}
	t.Skip(msg)
}

// readerServer serves the fixture pipe's feeds over HTTP and records the
// status of every answer by path.
type readerServer struct {
	*httptest.Server
	mu       sync.Mutex
	statuses map[string][]int
	log      []string // one line per request: path, validators sent, status
}

func newReaderServer(t *testing.T) *readerServer {
	t.Helper()
	fx := newPipeFixture(t)
	h := fx.handler(PipeFeedOptions{})
	s := &readerServer{statuses: map[string][]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		s.mu.Lock()
		s.statuses[r.URL.Path] = append(s.statuses[r.URL.Path], sw.status)
		s.log = append(s.log, fmt.Sprintf("%s %s If-None-Match=%q If-Modified-Since=%q → %d", r.Method, r.URL.Path,
			r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since"), sw.status))
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

// requests returns the request log.
func (s *readerServer) requests() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

func (s *readerServer) status(path string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.statuses[path]...)
}

// runReader runs a reader with the timeout and returns its standard output;
// a failure ends the test with the reader's output.
func runReader(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: no answer within %v\n%s%s", name, strings.Join(args, " "), readerTimeout, out, stderr.String())
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// feedparserExpect is the EXPECTED.json of check_feedparser.py.
type feedparserExpect struct {
	FeedTitle string              `json:"feed_title"`
	Version   string              `json:"version"`
	Entries   []map[string]string `json:"entries"`
}

func TestReaderFeedparser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), readerTimeout)
	defer cancel()
	if err := exec.CommandContext(ctx, readerPython, "-c", "import feedparser").Run(); err != nil {
		missingReader(t, "python3-feedparser", err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "readers", "check_feedparser.py"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newReaderServer(t)
	dir := t.TempDir()
	// feedparser reads RSS and Atom, not JSON Feed.
	for _, tt := range []struct{ ext, version string }{{"rss", "rss20"}, {"atom", "atom10"}} {
		t.Run(tt.ext, func(t *testing.T) {
			exp := feedparserExpect{FeedTitle: "Lab means & alerts", Version: tt.version}
			for _, e := range pipeExpected(tt.ext) {
				m := map[string]string{"title": e.Title, "id": e.ID, "published": e.Published.UTC().Format(time.RFC3339)}
				if tt.ext == "atom" { // RSS items have no update date of their own
					m["updated"] = e.Updated.UTC().Format(time.RFC3339)
				}
				exp.Entries = append(exp.Entries, m)
			}
			raw, err := json.Marshal(exp)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, tt.ext+".json")
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			feedPath := "/feeds/" + pipeSlug + "." + tt.ext
			out := runReader(t, dir, nil, readerPython, script, srv.URL+feedPath, path)
			t.Logf("%s", out)
			// Its first fetch, then the ETag and Last-Modified revalidations.
			if got := fmt.Sprint(srv.status(feedPath)); got != "[200 304 304]" {
				t.Errorf("answers %s, want [200 304 304]; requests:\n%s", got, srv.requests())
			}
		})
	}
}

// newsboatItem is one row of newsboat's cache, as newsboat_items.py prints.
type newsboatItem struct {
	FeedURL string `json:"feedurl"`
	GUID    string `json:"guid"`
	Title   string `json:"title"`
	PubDate int64  `json:"pubdate"`
}

func TestReaderNewsboat(t *testing.T) {
	newsboat, err := exec.LookPath("newsboat")
	if err != nil {
		missingReader(t, "newsboat", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readerTimeout)
	defer cancel()
	if err := exec.CommandContext(ctx, readerPython, "-c", "import sqlite3").Run(); err != nil {
		missingReader(t, "python3 with sqlite3 (to read newsboat's cache)", err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "readers", "newsboat_items.py"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newReaderServer(t)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{} // URL → format
	var list strings.Builder
	for _, ext := range []string{"rss", "atom"} {
		u := srv.URL + "/feeds/" + pipeSlug + "." + ext
		urls[u] = ext
		list.WriteString(u + "\n")
	}
	cache := filepath.Join(dir, "cache.db")
	files := map[string]string{
		"urls":   list.String(),
		"config": fmt.Sprintf("cache-file %q\n", cache),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{
		"HOME=" + home, "TERM=dumb", "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "PATH=" + os.Getenv("PATH"),
	}
	reload := func() {
		t.Helper()
		runReader(t, dir, env, newsboat, "-u", filepath.Join(dir, "urls"), "-c", cache, "-C", filepath.Join(dir, "config"), "-x", "reload")
	}
	reload()

	var items []newsboatItem
	if err := json.Unmarshal(runReader(t, dir, nil, readerPython, script, cache), &items); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]newsboatItem{} // URL → guid → item
	for _, it := range items {
		if got[it.FeedURL] == nil {
			got[it.FeedURL] = map[string]newsboatItem{}
		}
		got[it.FeedURL][it.GUID] = it
	}
	for u, ext := range urls {
		want := pipeExpected(ext)
		if len(got[u]) != len(want) {
			t.Errorf("%s: newsboat stored %d items, want %d: %+v", ext, len(got[u]), len(want), got[u])
		}
		for _, w := range want {
			it, ok := got[u][w.ID]
			switch {
			case !ok:
				t.Errorf("%s: newsboat has no item %q", ext, w.ID)
			case it.Title != w.Title:
				t.Errorf("%s: item %q titled %q, want %q", ext, w.ID, it.Title, w.Title)
			case it.PubDate != w.Published.Unix():
				t.Errorf("%s: item %q dated %v, want %v", ext, w.ID, time.Unix(it.PubDate, 0).UTC(), w.Published)
			}
		}
	}

	// Reloads revalidate: nothing new, a 304 at the latest on the third
	// fetch (newsboat 2.21 stores a feed's validators only once the feed
	// is in its cache, so it sends them from its third reload on).
	reload()
	reload()
	for u := range urls {
		path := strings.TrimPrefix(u, srv.URL)
		if st := srv.status(path); len(st) != 3 || st[0] != 200 || st[2] != 304 {
			t.Errorf("%s: answers %v, want 200 first and 304 third; requests:\n%s", path, st, srv.requests())
		}
	}
	t.Logf("requests:\n%s", srv.requests())
}
