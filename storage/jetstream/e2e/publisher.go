package e2e

import (
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// Publisher serves simulated feeds for the cluster tests: /f/{i}.rss, i
// from 0 to Feeds-1, each publishing one item every Period at its own
// phase (i·Period/Feeds), each item up to ±Jitter off the grid (whole
// seconds, as RSS dates are); a document lists the DocItems newest items.
// It records every poll with the polling node, read from the User-Agent
// ("slogfeed/V (node NAME; +URL)").
type Publisher struct {
	Base     time.Time // item 0 of feed 0 is published here
	Feeds    int
	Period   time.Duration
	Jitter   time.Duration
	DocItems int

	mu   sync.Mutex
	logs []Poll
}

// Poll is one request for a feed.
type Poll struct {
	Feed int
	Node string
	At   time.Time
}

// NewPublisher returns a Publisher.
func NewPublisher(base time.Time, feeds int, period, jitter time.Duration, docItems int) *Publisher {
	return &Publisher{Base: base, Feeds: feeds, Period: period, Jitter: jitter, DocItems: docItems}
}

// Pub is when item k of feed i is published.
func (p *Publisher) Pub(i, k int) time.Time {
	var j time.Duration
	if js := int(p.Jitter / time.Second); js > 0 {
		h := fnv.New32a()
		fmt.Fprintf(h, "%d/%d", i, k)
		j = time.Duration(int(h.Sum32()%uint32(2*js+1))-js) * time.Second
	}
	return p.Base.Add(time.Duration(i)*p.Period/time.Duration(p.Feeds) + time.Duration(k)*p.Period + j).Truncate(time.Second)
}

// Latest is the newest item of feed i published by t (-1: none).
func (p *Publisher) Latest(i int, t time.Time) int {
	k := int(t.Sub(p.Base)/p.Period) + 1
	for k >= 0 && p.Pub(i, k).After(t) {
		k--
	}
	return k
}

// GUID is the guid of item k of feed i.
func GUID(i, k int) string { return fmt.Sprintf("f%d-%d", i, k) }

func (p *Publisher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/f/")
	name, ok2 := strings.CutSuffix(name, ".rss")
	i, err := strconv.Atoi(name)
	if !ok || !ok2 || err != nil || i < 0 || i >= p.Feeds {
		http.NotFound(w, r)
		return
	}
	now := time.Now()
	node := r.Header.Get("User-Agent")
	if _, rest, ok := strings.Cut(node, "(node "); ok {
		node, _, _ = strings.Cut(rest, ";")
	}
	p.mu.Lock()
	p.logs = append(p.logs, Poll{Feed: i, Node: node, At: now})
	p.mu.Unlock()
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><rss version="2.0"><channel><title>sim</title>`)
	latest := p.Latest(i, now)
	for k := latest; k >= 0 && k > latest-p.DocItems; k-- {
		fmt.Fprintf(&b, "<item><title>%s</title><guid>%s</guid><pubDate>%s</pubDate></item>", GUID(i, k), GUID(i, k), p.Pub(i, k).UTC().Format(time.RFC1123Z))
	}
	b.WriteString("</channel></rss>")
	w.Header().Set("Content-Type", "application/rss+xml")
	_, _ = io.WriteString(w, b.String())
}

// Polls returns the polls of feed i at or after t, in order.
func (p *Publisher) Polls(i int, t time.Time) []Poll {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Poll
	for _, l := range p.logs {
		if l.Feed == i && !l.At.Before(t) {
			out = append(out, l)
		}
	}
	return out
}

// CheckStored compares the items a node stores for feed i with what was
// published: it returns one error per item stored more than once and per
// item published from the poll at from to a second before the one at to
// that is missing.
func (p *Publisher) CheckStored(i int, items []storage.Item, from, to time.Time) []error {
	got := map[string]int{}
	for _, it := range items {
		got[it.GUID]++
	}
	var errs []error
	for g, k := range got {
		if k > 1 {
			errs = append(errs, fmt.Errorf("feed #%d: item %s stored %d times", i, g, k))
		}
	}
	for k := max(p.Latest(i, from), 0); k <= p.Latest(i, to.Add(-time.Second)); k++ {
		if got[GUID(i, k)] == 0 {
			errs = append(errs, fmt.Errorf("feed #%d: item %s (published %v) missing", i, GUID(i, k), p.Pub(i, k).Format(time.TimeOnly)))
		}
	}
	return errs
}

// WaitFor calls cond every 100 ms until it returns nil, and fails the
// test when d has passed first; it returns how long it took.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: not after %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
