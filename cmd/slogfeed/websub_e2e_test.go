package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The WebSub round trip between two slogfeed processes on loopback: A
// publishes a sensor feed and is its hub, B subscribes to it (finding the
// hub in the first poll) and republishes it through a pipe.

// loopbackAddr returns a loopback address with a port free right now.
func loopbackAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// buildSlogfeed builds the binary once per test into a temporary directory.
func buildSlogfeed(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "slogfeed")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		tb.Fatalf("build: %v", err)
	}
	return bin
}

// instance is one running `slogfeed serve`.
type instance struct {
	tb   testing.TB
	bin  string
	addr string
	data string
	args []string
	cmd  *exec.Cmd
	log  *os.File
}

// startInstance runs slogfeed serve on addr with its data in data and
// waits until it answers /healthz.
func startInstance(tb testing.TB, bin, addr, data string, args ...string) *instance {
	tb.Helper()
	in := &instance{tb: tb, bin: bin, addr: addr, data: data, args: args}
	in.start()
	return in
}

func (in *instance) start() {
	in.tb.Helper()
	log, err := os.OpenFile(filepath.Join(in.data, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		in.tb.Fatal(err)
	}
	in.log = log
	args := append([]string{"--log-level", "warn", "serve", "--addr", in.addr, "--data", in.data, "--allow", "127.0.0.0/8"}, in.args...)
	in.cmd = exec.Command(in.bin, args...)
	in.cmd.Stderr = log
	if err := in.cmd.Start(); err != nil {
		in.tb.Fatal(err)
	}
	in.tb.Cleanup(in.stop)
	waitUntil(in.tb, time.Minute, "slogfeed at "+in.addr+" to answer /healthz", func() bool {
		resp, err := http.Get("http://" + in.addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// stop ends the process with SIGTERM (a clean shutdown) and waits for it.
func (in *instance) stop() {
	if in.cmd == nil {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = in.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = in.cmd.Process.Kill()
		<-done
	}
	in.cmd = nil
	in.log.Close()
}

func (in *instance) restart() {
	in.tb.Helper()
	in.stop()
	in.start()
}

func (in *instance) url(path string) string { return "http://" + in.addr + path }

// do sends a JSON request and decodes the JSON answer into out (when not
// nil); it fails the test on any status but want.
func (in *instance) do(method, path string, body any, want int, out any) {
	in.tb.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			in.tb.Fatal(err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, in.url(path), rd)
	if err != nil {
		in.tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		in.tb.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw.String(), want)
	}
	if out != nil {
		if err := json.Unmarshal(raw.Bytes(), out); err != nil {
			in.tb.Fatalf("%s %s: %v in %s", method, path, err, raw.String())
		}
	}
}

// waitUntil polls cond every 10 ms until it holds or timeout passes.
func waitUntil(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// getJSON fetches a JSON document; false when the request fails.
func getJSON(url string, out any) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(out) == nil
}

// itemValues returns the reading values among B's stored items of feed.
func itemValues(in *instance, feed uint64) []float64 {
	var items []struct {
		Reading *struct {
			Value float64 `json:"value"`
		} `json:"reading"`
	}
	if !getJSON(in.url(fmt.Sprintf("/api/v1/feeds/%d/items?limit=20", feed)), &items) {
		return nil
	}
	var out []float64
	for _, it := range items {
		if it.Reading != nil {
			out = append(out, it.Reading.Value)
		}
	}
	return out
}

// republishedValues returns the reading values of a pipe's JSON Feed.
func republishedValues(in *instance, slug string) []float64 {
	var doc struct {
		Items []struct {
			Ext *struct {
				Value float64 `json:"value"`
			} `json:"_slogfeed"`
		} `json:"items"`
	}
	if !getJSON(in.url("/feeds/"+slug+".json?limit=20"), &doc) {
		return nil
	}
	var out []float64
	for _, it := range doc.Items {
		if it.Ext != nil {
			out = append(out, it.Ext.Value)
		}
	}
	return out
}

// websubStatus is the part of GET /api/v1/websub the tests read.
type websubStatus struct {
	Hub *struct {
		Subscriptions int `json:"subscriptions"`
	} `json:"hub"`
	Subscriber *struct {
		Subscriptions []struct {
			Feed   uint64 `json:"feed"`
			State  string `json:"state"`
			Pushes int64  `json:"pushes"`
			Missed int64  `json:"missed"`
		} `json:"subscriptions"`
	} `json:"subscriber"`
}

func (in *instance) websub() websubStatus {
	var st websubStatus
	getJSON(in.url("/api/v1/websub"), &st)
	return st
}

// subscribed reports whether in's subscription of feed is active.
func (in *instance) subscribed(feed uint64) bool {
	st := in.websub()
	if st.Subscriber == nil {
		return false
	}
	for _, s := range st.Subscriber.Subscriptions {
		if s.Feed == feed && s.State == "active" {
			return true
		}
	}
	return false
}

// hubHas reports whether in's hub holds at least n subscriptions. The
// hub stores a subscription only after the subscriber has answered its
// verification, so the subscriber may call itself subscribed a moment
// before the hub pushes to it.
func (in *instance) hubHas(n int) bool {
	st := in.websub()
	return st.Hub != nil && st.Hub.Subscriptions >= n
}

// postReading posts value to A's sensor.
func (in *instance) postReading(sensor string, value float64) {
	in.tb.Helper()
	in.do(http.MethodPost, "/api/v1/sensors/"+sensor+"/readings", map[string]any{"value": value, "unit": "C"}, http.StatusCreated, nil)
}

// follow makes b subscribe to a's sensor feed (doc, e.g. "room-1.rss")
// and republish it through a pipe whose output is slug; it returns the
// feed's id at b.
func follow(tb testing.TB, a, b *instance, doc, slug string) uint64 {
	tb.Helper()
	var f struct {
		ID uint64 `json:"id"`
	}
	b.do(http.MethodPost, "/api/v1/feeds", map[string]any{"url": a.url("/sensors/" + doc)}, http.StatusCreated, &f)
	b.do(http.MethodPost, "/api/v1/pipes", map[string]any{
		"name":   "copy of " + doc,
		"nodes":  []map[string]any{{"id": "in", "op": "source", "config": map[string]any{"feed": "feed/" + strconv.FormatUint(f.ID, 10)}}},
		"edges":  []any{},
		"output": map[string]any{"slug": slug},
	}, http.StatusCreated, nil)
	return f.ID
}

func (in *instance) polls(feed uint64) int64 {
	var f struct {
		Polls int64 `json:"polls"`
	}
	getJSON(in.url(fmt.Sprintf("/api/v1/feeds/%d", feed)), &f)
	return f.Polls
}

// TestWebSubTwoProcesses: readings posted to A reach B's store and B's
// republished feed by push; the subscription survives a restart of A and
// then of B without anyone subscribing again by hand.
func TestWebSubTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two slogfeed processes")
	}
	bin := buildSlogfeed(t)
	a := startInstance(t, bin, loopbackAddr(t), t.TempDir())
	b := startInstance(t, bin, loopbackAddr(t), t.TempDir())
	a.postReading("room-1", 20)
	feed := follow(t, a, b, "room-1.rss", "room-1-copy")
	waitUntil(t, 30*time.Second, "B's subscription at A's hub", func() bool { return b.subscribed(feed) && a.hubHas(1) })

	value := 20.0
	check := func(phase string, n int) {
		t.Helper()
		for range n {
			value += 0.25
			a.postReading("room-1", value)
			v := value
			waitUntil(t, 20*time.Second, fmt.Sprintf("%s: reading %v in B's items", phase, v), func() bool {
				return slices.Contains(itemValues(b, feed), v)
			})
			waitUntil(t, 20*time.Second, fmt.Sprintf("%s: reading %v in B's republished feed", phase, v), func() bool {
				return slices.Contains(republishedValues(b, "room-1-copy"), v)
			})
		}
	}
	check("pushed", 5)
	pollsBefore := b.polls(feed)

	a.restart()
	check("after A restarted", 3)
	b.restart()
	waitUntil(t, 30*time.Second, "B's subscription back after its restart", func() bool { return b.subscribed(feed) })
	check("after B restarted", 3)

	// The readings came by push: B's polling of the feed is a fallback
	// check minutes apart (one poll may follow B's restart).
	if p := b.polls(feed); p > pollsBefore+2 {
		t.Fatalf("B polled the feed %d times during the test: the readings were not pushed", p-pollsBefore)
	}
	st := b.websub()
	if st.Subscriber == nil || len(st.Subscriber.Subscriptions) != 1 || st.Subscriber.Subscriptions[0].Missed != 0 {
		t.Fatalf("B's subscriptions: %+v", st.Subscriber)
	}
	if hs := a.websub(); hs.Hub == nil || hs.Hub.Subscriptions != 1 {
		t.Fatalf("A's hub: %+v (want B's one subscription, not a second one)", hs.Hub)
	}
	// B's republished feed advertises B's own hub.
	resp, err := http.Get(b.url("/feeds/room-1-copy.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if links := resp.Header.Values("Link"); !slices.Contains(links, "<"+b.url("/websub/hub")+`>; rel="hub"`) {
		t.Fatalf("B's republished feed: Link %q, want B's hub", links)
	}
}

// latencies records, per reading value, when it was posted and when it
// was first seen at B's store and B's republished feed.
type latencies struct {
	mu     sync.Mutex
	posted map[float64]time.Time
	items  map[float64]time.Duration
	feed   map[float64]time.Duration
}

func newLatencies() *latencies {
	return &latencies{posted: map[float64]time.Time{}, items: map[float64]time.Duration{}, feed: map[float64]time.Duration{}}
}

// watch polls b's items of feed and its republished feed slug every
// 20 ms until ctx ends, noting when each posted value first shows.
func (l *latencies) watch(ctx context.Context, b *instance, feed uint64, slug string) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		items, repub := itemValues(b, feed), republishedValues(b, slug)
		now := time.Now()
		l.mu.Lock()
		for _, v := range items {
			if at, ok := l.posted[v]; ok {
				if _, seen := l.items[v]; !seen {
					l.items[v] = now.Sub(at)
				}
			}
		}
		for _, v := range repub {
			if at, ok := l.posted[v]; ok {
				if _, seen := l.feed[v]; !seen {
					l.feed[v] = now.Sub(at)
				}
			}
		}
		l.mu.Unlock()
	}
}

// quantiles returns the median and the 90th percentile of the latencies
// of values (a value never seen counts as timeout).
func quantiles(m map[float64]time.Duration, values []float64, timeout time.Duration) (median, p90 time.Duration, missing int) {
	var ds []time.Duration
	for _, v := range values {
		d, ok := m[v]
		if !ok {
			d, missing = timeout, missing+1
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[(len(ds)*9)/10], missing
}

// BenchmarkWebSubRoundTrip measures the latency from a reading's POST to
// A until it is visible in B's stored items and in B's republished feed,
// over 50 readings posted at a steady pace, for two subscribers side by
// side in the same run: B1 with WebSub (the default) and B2 with
// --websub=false, which polls with the default adaptive policy (DPT).
// Both follow A's JSON Feed (sub-second dates) and subscribe after 20
// warm-up readings at the same pace, so that B2's first poll sees a
// history to learn the period from. Two paces: 500 ms, faster than DPT
// can resolve (it merges publishes less than a second apart into one
// event, so the period stays unknown and it polls every 5 minutes), and
// 2 s. Run it with:
//
//	go test -run '^$' -bench WebSubRoundTrip -benchtime 1x ./cmd/slogfeed/
func BenchmarkWebSubRoundTrip(b *testing.B) {
	bin := buildSlogfeed(b)
	for _, pace := range []time.Duration{500 * time.Millisecond, 2 * time.Second} {
		b.Run("pace="+pace.String(), func(b *testing.B) {
			for b.Loop() {
				roundTrip(b, bin, pace)
			}
		})
	}
}

// roundTrip is one run of BenchmarkWebSubRoundTrip.
func roundTrip(b *testing.B, bin string, pace time.Duration) {
	const (
		warmup   = 20 // readings before the measured ones
		readings = 50
		timeout  = 30 * time.Second // a reading not seen by then counts as this
	)
	a := startInstance(b, bin, loopbackAddr(b), b.TempDir())
	push := startInstance(b, bin, loopbackAddr(b), b.TempDir())
	poll := startInstance(b, bin, loopbackAddr(b), b.TempDir(), "--websub=false")
	defer func() { a.stop(); push.stop(); poll.stop() }()
	next := time.Now()
	for i := 1; i <= warmup; i++ {
		time.Sleep(time.Until(next))
		next = next.Add(pace)
		a.postReading("room-1", -float64(i))
	}
	pushFeed := follow(b, a, push, "room-1.json", "copy")
	pollFeed := follow(b, a, poll, "room-1.json", "copy")
	waitUntil(b, 30*time.Second, "the WebSub subscription", func() bool { return push.subscribed(pushFeed) && a.hubHas(1) })

	lp, lq := newLatencies(), newLatencies()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { lp.watch(ctx, push, pushFeed, "copy") })
	wg.Go(func() { lq.watch(ctx, poll, pollFeed, "copy") })
	var measured []float64
	next = time.Now()
	for i := 1; i <= readings; i++ {
		time.Sleep(time.Until(next))
		next = next.Add(pace)
		v := float64(i)
		at := time.Now()
		for _, l := range []*latencies{lp, lq} {
			l.mu.Lock()
			l.posted[v] = at
			l.mu.Unlock()
		}
		a.postReading("room-1", v)
		measured = append(measured, v)
	}
	// Wait for the last reading at both.
	last := measured[len(measured)-1]
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		lp.mu.Lock()
		lq.mu.Lock()
		_, x := lp.feed[last]
		_, y := lq.feed[last]
		lq.mu.Unlock()
		lp.mu.Unlock()
		if x && y {
			break
		}
	}
	cancel()
	wg.Wait()

	report := func(name string, m map[float64]time.Duration) time.Duration {
		med, p90, missing := quantiles(m, measured, timeout)
		b.ReportMetric(float64(med.Microseconds())/1000, name+"-median-ms")
		b.ReportMetric(float64(p90.Microseconds())/1000, name+"-p90-ms")
		b.ReportMetric(float64(missing), name+"-unseen")
		b.Logf("%-13s median %8.1f ms  p90 %8.1f ms  (%d of %d not seen within %v)", name,
			float64(med.Microseconds())/1000, float64(p90.Microseconds())/1000, missing, len(measured), timeout)
		return med
	}
	lp.mu.Lock()
	lq.mu.Lock()
	websubItems := report("websub-items", lp.items)
	websubFeed := report("websub-feed", lp.feed)
	report("dpt-items", lq.items)
	report("dpt-feed", lq.feed)
	lq.mu.Unlock()
	lp.mu.Unlock()
	b.Logf("polls of A's feed: B1 (WebSub) %d, B2 (DPT only) %d", push.polls(pushFeed), poll.polls(pollFeed))
	if websubItems >= time.Second || websubFeed >= time.Second {
		b.Errorf("WebSub median latency %v (items) / %v (republished), want under 1 s", websubItems, websubFeed)
	}
}
