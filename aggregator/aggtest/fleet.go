// Package aggtest holds helpers for the live loop's benchmarks: Fleet, a
// loopback publisher of many periodic feeds with conditional GET, and
// CPUTime. The aggregator's BenchmarkFleet and the cluster's polling
// benchmark (storage/jetstream/e2e) poll the same Fleet.
package aggtest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fleet serves feeds /f/{i} that each publish an item every Period at a
// phase of their own (Phase), on several loopback addresses 127.0.0.x,
// with an ETag per newest item and a 304 to a matching If-None-Match. A
// document lists the Items newest items; item j of feed i has the guid
// "i-j" and is published at Published(i, j).
type Fleet struct {
	Epoch  time.Time // item 0 of every feed is published at Epoch + its phase
	Period time.Duration
	Items  int
	hosts  []string
}

// StartFleet serves a Fleet on hosts addresses 127.0.0.1 … 127.0.0.hosts
// (ports chosen by the system) until tb's cleanup. Its epoch lies items
// periods back, so a first fetch finds items full documents.
func StartFleet(tb testing.TB, hosts int, period time.Duration, items int) *Fleet {
	tb.Helper()
	p, stop, err := ServeFleet(time.Now().Add(-time.Duration(items)*period), period, items, hosts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return p
}

// ServeFleet serves a Fleet of the epoch given on hosts addresses
// 127.0.0.1 … 127.0.0.hosts until stop is called.
func ServeFleet(epoch time.Time, period time.Duration, items, hosts int) (p *Fleet, stop func(), err error) {
	p = &Fleet{Epoch: epoch, Period: period, Items: items}
	var srvs []*http.Server
	stop = func() {
		for _, srv := range srvs {
			_ = srv.Close()
		}
	}
	for h := 1; h <= hosts; h++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", h))
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("fleet address %d: %w", h, err)
		}
		srv := &http.Server{Handler: p, ReadHeaderTimeout: time.Minute}
		go func() { _ = srv.Serve(ln) }()
		srvs = append(srvs, srv)
		p.hosts = append(p.hosts, ln.Addr().String())
	}
	return p, stop, nil
}

// FleetAt is the Fleet another process serves on hosts (host:port
// addresses, as Hosts gives them): it answers URL, Published and the
// other questions of the feeds, and serves nothing itself.
func FleetAt(epoch time.Time, period time.Duration, items int, hosts []string) *Fleet {
	return &Fleet{Epoch: epoch, Period: period, Items: items, hosts: hosts}
}

// Hosts are the addresses the fleet is served on.
func (p *Fleet) Hosts() []string { return p.hosts }

// URL is feed i's address, on host i mod hosts.
func (p *Fleet) URL(i int) string {
	return "http://" + p.hosts[i%len(p.hosts)] + "/f/" + strconv.Itoa(i)
}

// FeedOf is the feed number of a URL made by URL.
func (p *Fleet) FeedOf(url string) (int, bool) {
	_, s, ok := strings.Cut(url, "/f/")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0
}

// Phase is feed i's offset in the period (millisecond steps, distinct for
// up to Period/1 ms feeds when 7919 does not divide that count).
func (p *Fleet) Phase(i int) time.Duration {
	return time.Duration(i*7919%int(p.Period/time.Millisecond)) * time.Millisecond
}

// Published is when item j of feed i is published.
func (p *Fleet) Published(i, j int) time.Time {
	return p.Epoch.Add(p.Phase(i) + time.Duration(j)*p.Period)
}

// Item parses an item's guid "i-j".
func (p *Fleet) Item(guid string) (i, j int, ok bool) {
	a, b, ok := strings.Cut(guid, "-")
	if !ok {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	j, err2 := strconv.Atoi(b)
	return i, j, err1 == nil && err2 == nil
}

// Latest is the newest item of feed i published by t (-1: none).
func (p *Fleet) Latest(i int, t time.Time) int {
	first := p.Published(i, 0)
	if t.Before(first) {
		return -1
	}
	return int(t.Sub(first) / p.Period)
}

func (p *Fleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/f/"))
	if err != nil || i < 0 {
		http.NotFound(w, r)
		return
	}
	k := p.Latest(i, time.Now())
	etag := fmt.Sprintf(`"%d-%d"`, i, k)
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<?xml version="1.0"?><rss version="2.0"><channel><title>sensor %d</title><link>http://127.0.0.1/</link><description>fleet</description>`, i)
	for j := k; j >= 0 && j > k-p.Items; j-- {
		fmt.Fprintf(&sb, `<item><title>reading %d</title><guid isPermaLink="false">%d-%d</guid><pubDate>%s</pubDate><description>%d.%d C</description></item>`,
			j, i, j, p.Published(i, j).UTC().Format(time.RFC1123Z), j%40, i%10)
	}
	sb.WriteString(`</channel></rss>`)
	w.Header().Set("Content-Type", "application/rss+xml")
	_, _ = io.WriteString(w, sb.String())
}

// ETag is the validator the fleet answers for feed i while item j is its
// newest.
func (p *Fleet) ETag(i, j int) string { return fmt.Sprintf(`"%d-%d"`, i, j) }

// CPUTime is the process's user + system CPU time.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// GCTime is the CPU time the Go runtime estimates its garbage collector
// has spent so far, and the CPU time it estimates it has spent in all
// (runtime/metrics: /cpu/classes/gc/total:cpu-seconds, the background
// mark workers, the assists charged to allocating goroutines and the
// pauses; and /cpu/classes/total less /cpu/classes/idle). Both are the
// runtime's own estimates, good for the collector's share of the work.
func GCTime() (gc, busy time.Duration) {
	s := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"},
		{Name: "/cpu/classes/idle:cpu-seconds"},
	}
	metrics.Read(s)
	v := make([]float64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			v[i] = s[i].Value.Float64()
		}
	}
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	return sec(v[0]), sec(v[1] - v[2])
}
