package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// add --sleep sends the feed's sleep windows with the subscription; a
// malformed one is a usage error before any request.
func TestAddSleep(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = nil
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("body: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id": 7, "policy": "auto", "url": "https://s.example/a.rss"}`))
	}))
	defer srv.Close()
	tests := []struct {
		name      string
		args      []string
		code      int
		sleep     any // the request's "sleep" (nil: none sent)
		stderrHas string
	}{
		{"daily and one-off", []string{"add", "https://s.example/a.rss", "--sleep", "20:00-06:00,2026-12-24T18:00:00Z/2026-12-26T06:00:00Z"}, 0, "20:00-06:00,2026-12-24T18:00:00Z/2026-12-26T06:00:00Z", ""},
		{"none", []string{"add", "https://s.example/a.rss"}, 0, nil, ""},
		{"malformed", []string{"add", "https://s.example/a.rss", "--sleep", "night"}, 2, nil, "--sleep: schedule: invalid sleep plan: daily window"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			env := map[string]string{"SLOGFEED_LOG_LEVEL": "error", "SLOGFEED_SERVER": srv.URL}
			r := runCLI(context.Background(), tc.args, env, nil)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderrHas) {
				t.Fatalf("code %d stderr %q, want %d and %q", r.code, r.stderr, tc.code, tc.stderrHas)
			}
			if tc.code != 0 {
				if got != nil {
					t.Fatalf("a request was sent: %v", got)
				}
				return
			}
			if got["sleep"] != tc.sleep {
				t.Fatalf("request sleep %v, want %v", got["sleep"], tc.sleep)
			}
		})
	}
}

// cluster prints GET /api/v1/cluster as a table: a node per row and a
// summary; a single node says so.
func TestClusterCommand(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"cluster", `{"mode":"cluster","nodes":[{"name":"n1","addr":"127.0.0.1:8081","shards":32,"shard_ids":[],"last_seen":"2026-11-25T12:00:00Z","live":true,"feeds":10},` +
			`{"name":"n2","shards":0,"shard_ids":[],"last_seen":"2026-11-25T11:59:00Z","live":false,"feeds":0}],"shards":64,"unowned":32,"lease_ttl_s":9,"feeds":20,"unowned_feeds":10}`,
			[]string{"NODE", "n1", "127.0.0.1:8081", "32", "10", "yes", "2026-11-25T12:00:00Z", "n2", "no", "64 shards, 32 unowned (10 feeds not polled now), 20 feeds, lease TTL 9s"}},
		{"single", `{"mode":"single","nodes":[{"name":"local","shards":1,"shard_ids":[0],"last_seen":"2026-11-25T12:00:00Z","live":true,"feeds":3}],"shards":1,"unowned":0,"lease_ttl_s":0,"feeds":3,"unowned_feeds":0}`,
			[]string{"local", "single node (no cluster): 3 feeds"}},
		{"this node loading", `{"mode":"cluster","nodes":[{"name":"n1","shards":48,"live":true,"feeds":20}],"shards":64,"unowned":16,"lease_ttl_s":9,"feeds":20,"unowned_feeds":0,` +
			`"this_node":{"name":"n1","polled":12,"pending":8,"failed":0,"deferred":3,"loading":true,"changed":"2026-11-25T12:00:00Z","load_s":1.25,"taken":2,"lost":0}}`,
			[]string{"this node (n1) polls 12 feeds; loading the change of its shards seen 2026-11-25T12:00:00Z: 8 feeds pending, 2 taken, 0 dropped so far, 3 scheduled from their shards' digests with their records still to read"}},
		{"this node loaded", `{"mode":"cluster","nodes":[{"name":"n1","shards":64,"live":true,"feeds":20}],"shards":64,"unowned":0,"lease_ttl_s":9,"feeds":20,"unowned_feeds":0,` +
			`"this_node":{"name":"n1","polled":19,"pending":0,"failed":1,"loading":false,"changed":"2026-11-25T12:00:00Z","loaded":"2026-11-25T12:00:03.5Z","load_s":3.5004,"taken":10,"lost":0}}`,
			[]string{"this node (n1) polls 19 feeds; the last change of its shards (seen 2026-11-25T12:00:00Z) was loaded in 3.5s: 10 feeds taken, 0 dropped; 1 feeds of its shards cannot be scheduled (see its log)"}},
		{"this node with parked feeds", `{"mode":"cluster","nodes":[{"name":"n1","shards":64,"live":true,"feeds":20}],"shards":64,"unowned":0,"lease_ttl_s":9,"feeds":20,"unowned_feeds":0,` +
			`"this_node":{"name":"n1","polled":20,"pending":0,"failed":0,"parked":6,"loading":false,"changed":"2026-11-25T12:00:00Z","loaded":"2026-11-25T12:00:03.5Z","load_s":3.5,"taken":20,"lost":0}}`,
			[]string{"this node (n1) polls 20 feeds; the last change of its shards (seen 2026-11-25T12:00:00Z) was loaded in 3.5s: 20 feeds taken, 0 dropped; 6 feeds parked (their shards' leases lapsed: not fetched until renewed)"}},
		{"this node single", `{"mode":"single","nodes":[{"name":"local","shards":1,"live":true,"feeds":3}],"shards":1,"feeds":3,` +
			`"this_node":{"name":"local","polled":3,"pending":0,"failed":0,"loading":false,"load_s":0,"taken":0,"lost":0}}`,
			[]string{"single node (no cluster): 3 feeds\nthis node (local) polls 3 feeds\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/cluster" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			env := map[string]string{"SLOGFEED_LOG_LEVEL": "error", "SLOGFEED_SERVER": srv.URL}
			r := runCLI(context.Background(), []string{"cluster"}, env, nil)
			if r.code != 0 {
				t.Fatalf("code %d: %s", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, r.stdout)
				}
			}
			// A server that does not say what it polls: no line.
			if !strings.Contains(tc.body, "this_node") && strings.Contains(r.stdout, "this node") {
				t.Errorf("output has a line on this node the server did not send:\n%s", r.stdout)
			}
		})
	}
}

// list asks for one page with the filters given, and says how to get the
// next; --all follows the pages to the end.
func TestListPages(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("cursor") == "" {
			w.Write([]byte(`{"feeds":[{"id":1,"policy":"auto","title":"Mote one"}],"total":2,"next_cursor":"CUR"}`))
			return
		}
		w.Write([]byte(`{"feeds":[{"id":2,"policy":"auto","title":"Mote two"}],"total":2,"next_cursor":"","prev_cursor":"PREV"}`))
	}))
	defer srv.Close()
	tests := []struct {
		name   string
		args   []string
		code   int
		asked  []string
		has    []string
		hasNot []string
	}{
		{"one page", []string{"list", "--limit", "1", "-q", "mote"}, 0, []string{"limit=1&q=mote"},
			[]string{"Mote one", `1 of 2 feeds; the next page: slogfeed list --limit 1 -q mote --cursor CUR`}, []string{"Mote two", "previous page"}},
		{"a search the shell would expand", []string{"list", "-q", "$(echo it's"}, 0, []string{"limit=100&q=%24%28echo+it%27s"},
			[]string{`the next page: slogfeed list -q '$(echo it'\''s' --cursor CUR`}, nil},
		{"the last page", []string{"list", "--cursor", "CUR"}, 0, []string{"cursor=CUR&limit=100"},
			[]string{"Mote two", "the previous page: slogfeed list --before PREV"}, []string{"Mote one", "next page"}},
		{"the page before", []string{"list", "--before", "PREV", "--policy", "auto"}, 0, []string{"before=PREV&limit=100&policy=auto"},
			[]string{"Mote one", `the next page: slogfeed list --policy auto --cursor CUR`}, []string{"Mote two", "previous page"}},
		{"sensors", []string{"list", "--kind", "sensor"}, 0, []string{"kind=sensor&limit=100"},
			[]string{`the next page: slogfeed list --kind sensor --cursor CUR`}, nil},
		{"all pages", []string{"list", "--all", "--status", "erroring"}, 0, []string{"limit=100&status=erroring", "cursor=CUR&limit=100&status=erroring"},
			[]string{"Mote one", "Mote two"}, []string{"next page", "previous page"}},
		{"bad limit", []string{"list", "--limit", "0"}, 2, nil, nil, nil},
		{"bad kind", []string{"list", "--kind", "sensors"}, 2, nil, nil, nil},
		{"bad status", []string{"list", "--status", "ok"}, 2, nil, nil, nil},
		{"feed 0", []string{"show", "0"}, 2, nil, nil, nil},
		{"before and cursor", []string{"list", "--before", "A", "--cursor", "B"}, 2, nil, nil, nil},
		{"before and all", []string{"list", "--before", "A", "--all"}, 2, nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			env := map[string]string{"SLOGFEED_LOG_LEVEL": "error", "SLOGFEED_SERVER": srv.URL}
			r := runCLI(context.Background(), tc.args, env, nil)
			if r.code != tc.code {
				t.Fatalf("code %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			if strings.Join(asked, " ") != strings.Join(tc.asked, " ") {
				t.Errorf("asked %q, want %q", asked, tc.asked)
			}
			checkOutput(t, r.stdout, tc.has, tc.hasNot)
		})
	}
	// --json: a feed a line on standard output, as the API gives it; the
	// paging hints on standard error.
	env := map[string]string{"SLOGFEED_LOG_LEVEL": "error", "SLOGFEED_SERVER": srv.URL}
	r := runCLI(context.Background(), []string{"list", "--json", "--all"}, env, nil)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var ids []uint64
	for _, l := range lines {
		var f struct {
			ID    uint64 `json:"id"`
			Title string `json:"title"`
		}
		if err := json.Unmarshal([]byte(l), &f); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		ids = append(ids, f.ID)
	}
	if r.code != 0 || fmt.Sprint(ids) != "[1 2]" {
		t.Fatalf("list --json --all: code %d, ids %v, stdout %q", r.code, ids, r.stdout)
	}
	r = runCLI(context.Background(), []string{"list", "--json", "--limit", "1"}, env, nil)
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stderr, "the next page: slogfeed list --limit 1 --json --cursor CUR") {
		t.Fatalf("list --json --limit 1: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// show names what a feed is: a remote feed's URL and policy, a pipe's
// output or a sensor by where it is published (they have neither).
func TestShow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/feeds/1":
			w.Write([]byte(`{"id":1,"kind":"remote","url":"https://s.example/a.rss","title":"Mote","policy":"auto","polls":3,"hits":2}`))
		case "/api/v1/feeds/2":
			w.Write([]byte(`{"id":2,"kind":"pipe","slug":"field-mean","title":"Field mean"}`))
		case "/api/v1/feeds/3":
			w.Write([]byte(`{"id":3,"kind":"sensor","slug":"lab-1","title":"lab-1"}`))
		case "/api/v1/feeds/1/schedule":
			w.Write([]byte(`{"policy":"auto","mode":"fast","median_s":60,"recent_polls":[]}`))
		default:
			w.Write([]byte(`{"recent_polls":[]}`))
		}
	}))
	defer srv.Close()
	tests := []struct {
		id          string
		has, hasNot []string
	}{
		{"1", []string{"feed 1  Mote\n", "  url      https://s.example/a.rss\n", "  policy   auto   mode fast\n"}, []string{"output", "sensor"}},
		{"2", []string{"feed 2  Field mean\n", `  output   of pipe "field-mean", republished at /feeds/field-mean.rss`, "  policy   -   mode -\n"}, []string{"url "}},
		{"3", []string{`  sensor   "lab-1", posted here, published at /sensors/lab-1.rss`}, []string{"url "}},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			env := map[string]string{"SLOGFEED_LOG_LEVEL": "error", "SLOGFEED_SERVER": srv.URL}
			r := runCLI(context.Background(), []string{"show", tc.id}, env, nil)
			if r.code != 0 {
				t.Fatalf("code %d, stderr %q", r.code, r.stderr)
			}
			checkOutput(t, r.stdout, tc.has, tc.hasNot)
		})
	}
}

// checkOutput checks that out holds each of has and none of hasNot.
func checkOutput(t *testing.T, out string, has, hasNot []string) {
	t.Helper()
	for _, s := range has {
		if !strings.Contains(out, s) {
			t.Errorf("stdout %q lacks %q", out, s)
		}
	}
	for _, s := range hasNot {
		if strings.Contains(out, s) {
			t.Errorf("stdout %q has %q", out, s)
		}
	}
}

// fullWriter fails every write, as a full disk or a closed pipe does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// The client refuses what would make it misreport: a server URL with a
// query or a fragment (the API path would land after it), an answer that
// is not slogfeed's JSON, a weight that is not a number; it masks the
// server's credentials in its messages, and a command whose output
// cannot be written fails.
func TestClientRefusesAndMasks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/auth/api/v1/feeds" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"this server needs a token: send Authorization: Bearer TOKEN"}`))
			return
		}
		if r.URL.Path == "/html/api/v1/feeds" {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<!doctype html><p>a router's login page"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":1,"kind":"remote","url":"https://s.example/a.rss","title":"Mote","policy":"auto","recent_polls":[]}`))
	}))
	defer srv.Close()
	dead := "http://alice:hunter2@127.0.0.1:1"
	tests := []struct {
		name   string
		args   []string
		server string
		code   int
		says   string
	}{
		{"a query in the server URL", []string{"list"}, srv.URL + "?x=1", 2, "without a query or a fragment"},
		{"a fragment in the server URL", []string{"show", "1"}, srv.URL + "#x", 2, "without a query or a fragment"},
		{"an empty fragment", []string{"show", "1"}, srv.URL + "#", 2, "without a query or a fragment"},
		{"not slogfeed", []string{"list"}, srv.URL + "/html", 1, `did not answer GET /api/v1/feeds?limit=100 as slogfeed does (text/html, "<!doctype html><p>a router's login page"`},
		{"no token", []string{"list"}, srv.URL + "/auth", 1, "(give the server's token with --token or SLOGFEED_TOKEN)"},
		{"credentials masked", []string{"list"}, dead, 1, "cannot reach slogfeed at http://alice:xxxxx@127.0.0.1:1"},
		{"NaN weight", []string{"add", "https://s.example/a.rss", "--weight", "NaN"}, srv.URL, 2, "--weight must be a positive number"},
		{"unknown policy", []string{"add", "https://s.example/a.rss", "--policy", "bogus"}, srv.URL, 2, `--policy: unknown policy "bogus"`},
		{"a period out of range", []string{"add", "https://s.example/a.rss", "--policy", "fixed-0s"}, srv.URL, 2, "--policy: "},
		{"infinite weight", []string{"add", "https://s.example/a.rss", "--weight", "-Inf"}, srv.URL, 2, "--weight must be a positive number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(context.Background(), tc.args, map[string]string{"SLOGFEED_LOG_LEVEL": "error", "SLOGFEED_SERVER": tc.server}, nil)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
				t.Fatalf("code %d, stderr %q; want %d saying %q", r.code, r.stderr, tc.code, tc.says)
			}
			if strings.Contains(r.stderr, "hunter2") {
				t.Errorf("the password is shown: %q", r.stderr)
			}
		})
	}
	// Output that cannot be written.
	var stderr bytes.Buffer
	env := map[string]string{"SLOGFEED_LOG_LEVEL": "error", "SLOGFEED_SERVER": srv.URL}
	a := &app{stdout: fullWriter{}, stderr: &stderr, getenv: func(k string) string { return env[k] }}
	if code := runWith(context.Background(), []string{"show", "1"}, a, false); code != 1 || !strings.Contains(stderr.String(), "writing the output: no space left") {
		t.Fatalf("show to a full disk: code %d, stderr %q; want 1", code, stderr.String())
	}
}
