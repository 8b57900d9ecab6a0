package runner

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// dtnDoc is an RSS document of a DTN buoy: the readings observed at the
// given minutes after t0, newest first, all published when the batch came
// in (at). A negative minute -m is a straggler observed at minute m, with
// an id of its own.
func dtnDoc(at time.Time, minutes ...int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<rss version="2.0" xmlns:%s=%q><channel><title>buoy</title>`, feedext.Prefix, feedext.Namespace)
	abs := func(m int) int { return max(m, -m) }
	slices.SortFunc(minutes, func(x, y int) int { return abs(x) - abs(y) })
	for _, m := range slices.Backward(minutes) {
		id := fmt.Sprintf("buoy-%d", m)
		if m < 0 {
			id, m = fmt.Sprintf("buoy-%d-again", -m), -m
		}
		obs := t0.Add(time.Duration(m) * time.Minute).Format(time.RFC3339)
		fmt.Fprintf(&b, `<item><guid>%s</guid><title>buoy %d</title><pubDate>%s</pubDate>`+
			`<sf:reading value="%d" unit="m" sensor="buoy" time="%s"/></item>`, id, m, at.Format(time.RFC1123Z), m, obs)
	}
	b.WriteString("</channel></rss>")
	return b.String()
}

// A DTN feed's batches, fetched by the aggregator (newest first in each
// document) and read by a pipe, reach a window in observation-time order
// within and across fetches; a straggler from before the last batch is
// republished as late, not counted into a window. The same on bbolt (by
// cursor) and on JetStream (through the pipe's input queue).
func TestDTNBatchesThroughPipe(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			clock := schedule.NewVirtualClock(t0.Add(2 * time.Hour))
			st := be.open(t, clock.Now)
			t.Cleanup(func() {
				if err := st.Check(); err != nil {
					t.Errorf("store check: %v", err)
				}
			})
			r, err := New(Options{Store: st, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Load(); err != nil {
				t.Fatal(err)
			}
			testDTNBatches(t, st, r, clock)
		})
	}
}

func testDTNBatches(t *testing.T, st storage.Backend, r *Runner, clock *schedule.VirtualClock) {
	var mu sync.Mutex
	doc := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprint(w, doc)
	}))
	defer srv.Close()
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:      st,
		Clock:      clock,
		Fetcher:    fetcher.New(fetcher.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
		OnNewItems: r.Notify,
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Subscribe(storage.Feed{URL: srv.URL + "/buoy.rss", Policy: "fixed-1h"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := r.Create(ctx, transform.Pipe{
		Nodes: []transform.Node{
			{ID: "in", Op: "source", Config: []byte(fmt.Sprintf(`{"feed":"feed/%d"}`, f.ID))},
			{ID: "w", Op: "window", Config: []byte(`{"stat":"count","span":"3m"}`)},
		},
		Edges:  []transform.Edge{{From: "in", To: "w"}},
		Output: transform.Output{Slug: "buoy-windows", From: "w"},
	})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(minutes ...int) {
		t.Helper()
		mu.Lock()
		doc = dtnDoc(clock.Now(), minutes...)
		mu.Unlock()
		if _, err := svc.FetchNow(ctx, f.ID); err != nil {
			t.Fatal(err)
		}
		queued(t, st, info.ID, len(minutes))
		if _, err := r.RunNow(ctx, info.ID); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
	}
	batch(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	batch(10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
	batch(20, 21, -5) // a straggler of minute 5
	out, err := st.Items(info.FeedID, storage.ItemQuery{Order: storage.ByArrivalAsc})
	if err != nil {
		t.Fatal(err)
	}
	var windows, late []string
	for _, it := range out {
		if slices.Contains(it.Categories, "late") {
			late = append(late, it.ID)
			continue
		}
		windows = append(windows, fmt.Sprintf("%v:%v", it.Reading.Time.Sub(t0).Minutes(), it.Reading.Value))
	}
	var want []string
	for m := range 22 {
		want = append(want, fmt.Sprintf("%d:%d", m, min(m+1, 4)))
	}
	if !slices.Equal(windows, want) {
		t.Fatalf("windows (minute:count) %v\nwant %v", windows, want)
	}
	if len(late) != 1 || !strings.HasSuffix(late[0], "buoy-5-again~late") {
		t.Errorf("late items %v, want the straggler of minute 5", late)
	}
}
