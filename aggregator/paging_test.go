package aggregator_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// loopbackService is a downstream aggregator whose fetcher may reach
// loopback servers.
func loopbackService(t *testing.T) (*aggregator.Service, *storage.Store) {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "down.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store: st,
		Fetcher: fetcher.New(fetcher.Options{
			Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc, st
}

// 500 readings posted to a sensor between two polls of a downstream
// slogfeed all arrive downstream: the sensor feed holds the newest 50,
// the downstream fetch sees that none of them is stored yet (a gap) and
// follows the feed's rel="next" pages until it reaches what it has.
func TestPagedSensorFeedLosesNothing(t *testing.T) {
	clock := schedule.NewVirtualClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	up, err := storage.Open(filepath.Join(t.TempDir(), "up.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	srv := httptest.NewServer(web.SensorHandler(up, web.SensorOptions{Now: clock.Now}))
	defer srv.Close()
	post := func(n int) {
		for i := range n {
			clock.Advance(time.Second)
			resp, err := http.Post(srv.URL+"/api/v1/sensors/lab/readings", "application/json", strings.NewReader(fmt.Sprintf(`{"value": %d}`, i)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("post: %s", resp.Status)
			}
		}
	}
	// One downstream subscription per format, polled together.
	svc, down := loopbackService(t)
	post(10)
	var feeds []storage.Feed
	for _, ext := range []string{"rss", "atom", "json"} {
		f, err := svc.Subscribe(storage.Feed{URL: srv.URL + "/sensors/lab." + ext, Policy: "fixed-1m"})
		if err != nil {
			t.Fatal(err)
		}
		feeds = append(feeds, f)
	}
	poll := func() {
		for _, f := range feeds {
			if _, err := svc.FetchNow(t.Context(), f.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll()
	post(500)
	poll()
	for _, f := range feeds {
		t.Run(f.URL[strings.LastIndexByte(f.URL, '.')+1:], func(t *testing.T) {
			n, err := down.CountItems(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if n != 510 {
				got, _ := down.Feed(f.ID)
				t.Fatalf("downstream holds %d readings, want 510 (warning %q)", n, got.Warning)
			}
			// The publisher said more was waiting (Slogfeed-More); the
			// pages brought it, so the poll asks for no pull again.
			obs, err := down.Observations(f.ID, 1)
			if err != nil || len(obs) != 1 {
				t.Fatalf("observations: %d, %v", len(obs), err)
			}
			if obs[0].MoreData || !obs[0].Hit {
				t.Errorf("last poll: hit %v, more data %v; want a hit without more data waiting", obs[0].Hit, obs[0].MoreData)
			}
			// Stored oldest first: Seq order is observation order.
			items, err := down.Items(f.ID, storage.ItemQuery{Order: storage.ByArrivalAsc})
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(items); i++ {
				if items[i].Reading == nil || items[i].Reading.Time.Before(items[i-1].Reading.Time) {
					t.Fatalf("item %d (%s) stored out of time order", i, items[i].ID)
				}
			}
		})
	}
}

// rssPage writes a one-item RSS page whose older page is older.
func rssPage(w http.ResponseWriter, older, id string) {
	w.Header().Set("Content-Type", "application/rss+xml")
	fmt.Fprintf(w, `<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>f</title>`+
		`<atom:link rel="next" href="%s"/>`+
		`<item><guid>%s</guid><title>%s</title></item></channel></rss>`, older, id, id)
}

// pollPaged serves mux with a /f.rss that brings a new item at each
// request and links older as its older page, subscribes to it, polls it
// twice (the second poll shows a gap) and returns the feed as stored and
// how many items it holds.
func pollPaged(t *testing.T, mux *http.ServeMux, older string) (storage.Feed, int) {
	t.Helper()
	var round atomic.Int64
	mux.HandleFunc("/f.rss", func(w http.ResponseWriter, r *http.Request) {
		rssPage(w, older, fmt.Sprint("r", round.Add(1)))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	svc, down := loopbackService(t)
	f, err := svc.Subscribe(storage.Feed{URL: srv.URL + "/f.rss"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := svc.FetchNow(t.Context(), f.ID); err != nil {
			t.Fatal(err)
		}
	}
	got, err := down.Feed(f.ID)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := down.CountItems(f.ID)
	return got, n
}

// Pages are followed only on the feed's own server, and a gap left open
// is the feed's warning.
func TestPagingStaysOnOrigin(t *testing.T) {
	got, n := pollPaged(t, http.NewServeMux(), "http://127.0.0.2:1/older.rss")
	if n != 2 || !strings.Contains(got.Warning, "another server") {
		t.Fatalf("%d items, warning %q; want 2 and the page on another server named", n, got.Warning)
	}
}

// A page whose older link leads back to a page already read ends the
// walk at once, with the loop named, rather than fetching it again up to
// MaxPages times.
func TestPagingStopsOnLoop(t *testing.T) {
	var older atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/older.rss", func(w http.ResponseWriter, r *http.Request) {
		older.Add(1)
		rssPage(w, "/older.rss", "old")
	})
	got, _ := pollPaged(t, mux, "/older.rss")
	if n := older.Load(); n != 1 || !strings.Contains(got.Warning, "links back") {
		t.Fatalf("older page fetched %d times, warning %q; want once and the loop named", n, got.Warning)
	}
}
