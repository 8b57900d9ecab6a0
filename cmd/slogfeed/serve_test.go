package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{
		"65536": 65536, "64KiB": 64 << 10, "32MiB": 32 << 20, "1GiB": 1 << 30,
		"16K": 16 << 10, "2M": 2 << 20, "1G": 1 << 30, "512B": 512, " 8 MiB ": 8 << 20,
	} {
		if got, err := parseBytes(s); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "MiB", "-1", "1.5MiB", "12 parsecs", "9999999999999GiB"} {
		if _, err := parseBytes(s); err == nil {
			t.Errorf("parseBytes(%q) accepted", s)
		}
	}
	for s, ok := range map[string]bool{"1KiB": true, "64GiB": true, "1023": false, "65GiB": false} {
		if err := checkBytes(s); (err == nil) != ok {
			t.Errorf("checkBytes(%q) = %v", s, err)
		}
	}
	for s, ok := range map[string]bool{"10s": true, "100ms": true, "10m": true, "50ms": false, "1h": false, "ten": false} {
		if err := checkPipeTime(s); (err == nil) != ok {
			t.Errorf("checkPipeTime(%q) = %v", s, err)
		}
	}
}

// The defaults of serve's table are the run limits transform uses when
// none are given, and the settings reach the runner's limits.
func TestPipeLimits(t *testing.T) {
	defaults := map[string]string{}
	for _, s := range serveSettings(func(string) string { return "" }) {
		defaults[s.Name] = s.Default
	}
	got := pipeLimits(defaults).WithDefaults()
	if got != transform.DefaultLimits {
		t.Errorf("serve's defaults give %+v, transform's are %+v", got, transform.DefaultLimits)
	}
	got = pipeLimits(map[string]string{"pipe-time": "2s", "pipe-node-bytes": "1MiB", "pipe-run-bytes": "4MiB", "regex-input": "4KiB"})
	want := transform.Limits{RunTime: 2 * time.Second, MaxNodeBytes: 1 << 20, MaxRunBytes: 4 << 20, MaxRegexInput: 4 << 10}
	if got != want {
		t.Errorf("pipeLimits = %+v, want %+v", got, want)
	}
}

// --addr 0.0.0.0:P prints a URL a person can open, not http://0.0.0.0:P.
func TestServeURLs(t *testing.T) {
	host := func() (string, error) { return "lab-pi", nil }
	noHost := func() (string, error) { return "", errors.New("no name") }
	tests := []struct {
		addr, public         string
		hostname             func() (string, error)
		listen, open, remote string
	}{
		{"0.0.0.0:8080", "", host, "http://0.0.0.0:8080 (every interface)", "http://localhost:8080/", "http://lab-pi:8080/"},
		{"[::]:9000", "", host, "http://[::]:9000 (every interface)", "http://localhost:9000/", "http://lab-pi:9000/"},
		{"0.0.0.0:8080", "", noHost, "http://0.0.0.0:8080 (every interface)", "http://localhost:8080/", ""},
		{"0.0.0.0:8080", "https://slog.example.org", host, "http://0.0.0.0:8080 (every interface)", "https://slog.example.org/", ""},
		{"127.0.0.1:8080", "", host, "http://127.0.0.1:8080", "http://127.0.0.1:8080/", ""},
		{"192.168.1.20:8080", "", host, "http://192.168.1.20:8080", "http://192.168.1.20:8080/", ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr+" "+tt.public, func(t *testing.T) {
			a, err := net.ResolveTCPAddr("tcp", tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			if got := listenDescription(a); got != tt.listen {
				t.Errorf("listenDescription = %q, want %q", got, tt.listen)
			}
			if got := browserURL(a, tt.public); got != tt.open {
				t.Errorf("browserURL = %q, want %q", got, tt.open)
			}
			if got := otherMachinesURL(a, tt.public, tt.hostname); got != tt.remote {
				t.Errorf("otherMachinesURL = %q, want %q", got, tt.remote)
			}
		})
	}
}

// --keep-items is the retention a single node's new remote feeds
// get; sensor feeds keep every reading, and 0 keeps every item; values
// out of range are refused.
func TestKeepItems(t *testing.T) {
	tests := []struct {
		args   []string
		remote storage.Retention
		err    bool
	}{
		{nil, storage.Retention{MaxItems: 200}, false},
		{[]string{"--keep-items", "50"}, storage.Retention{MaxItems: 50}, false},
		{[]string{"--keep-items", "0"}, storage.Retention{}, false},
		{[]string{"--keep-items", "-1"}, storage.Retention{}, true},
		{[]string{"--keep-items", "lots"}, storage.Retention{}, true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			a := &app{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
			cfg, err := parseServe(a, append([]string{"--data", t.TempDir()}, tt.args...))
			if tt.err {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, err := openStore(context.Background(), a, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.backend.Close()
			remote := storage.Feed{Kind: storage.KindRemote, URL: "https://example.org/feed"}
			sensor := storage.Feed{Kind: storage.KindSensor, Slug: "mote"}
			for _, f := range []*storage.Feed{&remote, &sensor} {
				if err := st.backend.CreateFeed(f); err != nil {
					t.Fatal(err)
				}
			}
			if remote.Retention != tt.remote {
				t.Errorf("remote feed retention %+v, want %+v", remote.Retention, tt.remote)
			}
			if sensor.Retention != (storage.Retention{}) {
				t.Errorf("sensor feed retention %+v, want none", sensor.Retention)
			}
		})
	}
}

// A pipe whose source names a feed URL not subscribed yet subscribes to
// it when saved, through the polling service (its SSRF guard included);
// a preview does not subscribe.
func TestPipeSourceURLSubscribes(t *testing.T) {
	st, sv := testServices(t)
	pipe := func(slug, url string) string {
		return `{"name": "` + slug + `", "nodes": [{"id": "in", "op": "source", "config": {"feed": "` + url + `"}}], "output": {"slug": "` + slug + `"}}`
	}
	tests := []struct {
		name, path, body string
		status           int
		has              string // in the answer
		subscribed       string // the remote feed subscribed after it, if any
	}{
		{"preview", "/api/v1/pipes/preview", pipe("p0", "https://sensors.example/a.rss"), http.StatusBadRequest, "no subscribed feed", ""},
		{"saved", "/api/v1/pipes", pipe("p1", "https://sensors.example/a.rss"), http.StatusCreated, `"p1"`, "https://sensors.example/a.rss"},
		{"saved again, the feed reused", "/api/v1/pipes", pipe("p2", "https://sensors.example/a.rss"), http.StatusCreated, `"p2"`, "https://sensors.example/a.rss"},
		{"a loopback URL refused", "/api/v1/pipes", pipe("p3", "http://127.0.0.1:1/x.rss"), http.StatusBadRequest, "subscribing to http://127.0.0.1:1/x.rss", "https://sensors.example/a.rss"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "http://127.0.0.1:8080"+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			sv.handler.ServeHTTP(rec, req)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.has) {
				t.Fatalf("%d %s, want %d with %q", rec.Code, rec.Body, tt.status, tt.has)
			}
			feeds, err := st.backend.Feeds()
			if err != nil {
				t.Fatal(err)
			}
			var remote []string
			for _, f := range feeds {
				if f.Kind == storage.KindRemote {
					remote = append(remote, f.URL)
				}
			}
			var want []string
			if tt.subscribed != "" {
				want = []string{tt.subscribed}
			}
			if !slices.Equal(remote, want) {
				t.Fatalf("remote feeds %q, want %q", remote, want)
			}
		})
	}
}

// --demo lets the fetcher reach its simulated publishers on loopback, on
// their port only: a feed elsewhere on the machine stays refused.
func TestDemoAllowsOnlyItsPublishers(t *testing.T) {
	_, sv := testServices(t, "--demo")
	demo := sv.demo.Endpoint()
	for _, tt := range []struct {
		url    string
		status int
	}{
		{fmt.Sprintf("http://%s/extra.rss", demo), http.StatusCreated},
		{"http://127.0.0.1/x.rss", http.StatusBadRequest},
		{fmt.Sprintf("http://127.0.0.1:%d/x.rss", demo.Port()+1), http.StatusBadRequest},
		{fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/x.rss", 8080), http.StatusBadRequest},
	} {
		req := httptest.NewRequest("POST", "http://127.0.0.1:8080/api/v1/feeds", strings.NewReader(`{"url": "`+tt.url+`"}`))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		sv.handler.ServeHTTP(rec, req)
		if rec.Code != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.url, rec.Code, rec.Body, tt.status)
		}
	}
}

// Until its services are built, serve answers every request with a 503
// and Retry-After, /healthz saying what it waits for; then the real
// handler answers.
func TestStartingHandler(t *testing.T) {
	h := &startingHandler{}
	h.setStage("joining the cluster")
	for _, path := range []string{"/healthz", "/api/v1/feeds", "/"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
			!strings.Contains(rec.Body.String(), `"status":"starting"`) || !strings.Contains(rec.Body.String(), "joining the cluster") {
			t.Errorf("%s while starting: %d %v %s", path, rec.Code, rec.Header(), rec.Body)
		}
	}
	var ready http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h.next.Store(&ready)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != http.StatusTeapot {
		t.Errorf("once built: %d, want the services' answer", rec.Code)
	}
}

// --demo is a single node's: with a cluster's settings it is refused, by
// name, before anything starts.
func TestDemoRefusedOnCluster(t *testing.T) {
	for _, args := range [][]string{{"--demo", "--nats-embed"}, {"--demo", "--nats", "nats://127.0.0.1:4222"}} {
		a := &app{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
		_, err := parseServe(a, append([]string{"--data", t.TempDir()}, args...))
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--demo runs a single node") {
			t.Errorf("%v: %v, want a usage error about --demo", args, err)
		}
	}
}

// testServices builds serve's store and services, as on 127.0.0.1:8080
// (not listening), on a fresh data directory with args.
func testServices(t *testing.T, args ...string) (*storeStage, *services) {
	t.Helper()
	st, sv := startServices(t, t.TempDir(), args...)
	t.Cleanup(st.close)
	t.Cleanup(sv.close)
	return st, sv
}

// startServices opens the store in data and builds serve's services on
// it with args, as serve does before it listens; the caller closes both.
func startServices(t *testing.T, data string, args ...string) (*storeStage, *services) {
	t.Helper()
	a := &app{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }, log: slog.New(slog.DiscardHandler)}
	cfg, err := parseServe(a, append([]string{"--data", data}, args...))
	if err != nil {
		t.Fatal(err)
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	st, err := openStore(t.Context(), a, cfg, addr)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := buildServices(t.Context(), a, cfg, st, addr)
	if err != nil {
		st.close()
		t.Fatal(err)
	}
	return st, sv
}

// A data directory that holds the other kind of node's data is refused
// by name: a node with --nats-embed on a single node's slogfeed.db, a
// single node on a cluster node's DIR/nats. Either would otherwise start
// empty beside the data it was meant to use. Fresh directories, each
// kind on its own data, and a directory that holds both are accepted.
func TestDataDirOfTheOtherKind(t *testing.T) {
	embed := []string{"--nats-embed"}
	external := []string{"--nats", "nats://127.0.0.1:4222"}
	for _, c := range []struct {
		name       string
		db, nats   bool
		args       []string
		refuse     string
		warnIgnore string
	}{
		{name: "single, fresh"},
		{name: "single on its file", db: true},
		{name: "single on a cluster node's data", nats: true, refuse: "JetStream data"},
		{name: "single beside both", db: true, nats: true, warnIgnore: "nats"},
		{name: "embedded, fresh", args: embed},
		{name: "embedded on its data", nats: true, args: embed},
		{name: "embedded on a single node's file", db: true, args: embed, refuse: "slogfeed.db"},
		{name: "embedded beside both", db: true, nats: true, args: embed, warnIgnore: "slogfeed.db"},
		{name: "external NATS beside a file", db: true, args: external, warnIgnore: "slogfeed.db"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.db {
				if err := os.WriteFile(filepath.Join(dir, "slogfeed.db"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if c.nats {
				if err := os.MkdirAll(filepath.Join(dir, "nats", "jetstream"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			var logged bytes.Buffer
			a := &app{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
			cfg, err := parseServe(a, append([]string{"--data", dir}, c.args...))
			if err != nil {
				t.Fatal(err)
			}
			err = checkDataDir(slog.New(slog.NewTextHandler(&logged, nil)), cfg)
			switch {
			case c.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse) || !strings.Contains(err.Error(), "--data "+dir)):
				t.Fatalf("%v, want a refusal naming --data %s and %s", err, dir, c.refuse)
			}
			ignored := filepath.Join(dir, c.warnIgnore)
			if got := logged.String(); c.warnIgnore != "" && !strings.Contains(got, "ignored="+ignored) || c.warnIgnore == "" && got != "" {
				t.Errorf("logged %q, want a warning naming %q: %v", got, c.warnIgnore, c.warnIgnore != "")
			}
		})
	}
}
