package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// TestServeWarmsFeedList: serve on a store of some thousands of feeds
// answers /healthz and polls due feeds, loads the feeds, and then builds
// the feed list's summaries in the background ("feed list ready", with
// every feed), before any page asks for them.
func TestServeWarmsFeedList(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const feeds = 3000
	var polls atomic.Int64
	pub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		polls.Add(1)
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>s</title></channel></rss>`)
	}))
	defer pub.Close()
	data := t.TempDir()
	st, err := storage.Open(filepath.Join(data, "slogfeed.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range feeds {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("%s/s%d.rss", pub.URL, i), Policy: "auto"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	bin := buildSlogfeed(t)
	addr := loopbackAddr(t)
	logPath := filepath.Join(data, "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "--log-level", "info", "serve", "--addr", addr, "--data", data, "--allow", "127.0.0.0/8")
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	waitUntil(t, time.Minute, "/healthz", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	logText := func() string {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ready := fmt.Sprintf(`msg="feed list ready" feeds=%d`, feeds)
	waitUntil(t, time.Minute, "the feed list to be warmed", func() bool { return strings.Contains(logText(), ready) })
	log := logText()
	loaded := strings.Index(log, `msg="feeds loaded" feeds=`+fmt.Sprint(feeds))
	if loaded < 0 || loaded > strings.Index(log, ready) {
		t.Fatalf("want the feeds loaded, then the feed list warmed; log:\n%s", log)
	}
	waitUntil(t, time.Minute, "the first due polls", func() bool { return polls.Load() > 0 })
}
