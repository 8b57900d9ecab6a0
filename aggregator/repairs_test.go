package aggregator_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/storage"
)

// repairPolls is how often TestRepairsCountedOncePerItem polls an
// unchanged document: the figure of the report that found invalid_utf8
// growing with every poll (3 bytes × 39 polls = 117).
const repairPolls = 39

// repairServer serves testdata/repairs/{name} over HTTP on loopback, as
// set (set replaces a document, to add items), without validators, so
// that every poll reads the whole body.
type repairServer struct {
	mu   sync.Mutex
	docs map[string][]byte
	srv  *httptest.Server
}

func newRepairServer(t *testing.T) *repairServer {
	t.Helper()
	s := &repairServer{docs: map[string][]byte{}}
	for _, name := range []string{"utf8.rss", "dates.rss", "utf8.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "repairs", name))
		if err != nil {
			t.Fatal(err)
		}
		s.docs["/"+name] = b
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		doc, ok := s.docs[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(doc)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *repairServer) set(name string, doc []byte) {
	s.mu.Lock()
	s.docs["/"+name] = doc
	s.mu.Unlock()
}

// TestRepairsCountedOncePerItem polls documents with invalid UTF-8 and
// with unreadable dates many times unchanged over HTTP: each repaired
// item counts once, however often it is fetched again, and the same way
// for both kinds of repair; a new item counts when it needs a repair and
// only then; invalid bytes outside items (the feed's own title) count no
// item.
func TestRepairsCountedOncePerItem(t *testing.T) {
	srv := newRepairServer(t)
	st, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:   st,
		Fetcher: fetcher.New(fetcher.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	counts := func(id uint64) (int64, int64) {
		t.Helper()
		f, err := st.Feed(id)
		if err != nil {
			t.Fatal(err)
		}
		return f.RepairCounts()
	}
	poll := func(id uint64, n int) {
		t.Helper()
		for range n {
			if _, err := svc.FetchNow(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		doc                 string
		utf8Items, badDates int64
	}{
		{"utf8.rss", 2, 0},  // 3 bytes: r-1, r-2 and the channel's title
		{"dates.rss", 0, 3}, // d-1, d-2, d-3
		{"utf8.json", 1, 0}, // j-1 and the feed's title
	} {
		t.Run(c.doc, func(t *testing.T) {
			f, err := svc.Subscribe(storage.Feed{URL: srv.srv.URL + "/" + c.doc})
			if err != nil {
				t.Fatal(err)
			}
			for i := range repairPolls {
				poll(f.ID, 1)
				if u, d := counts(f.ID); u != c.utf8Items || d != c.badDates {
					t.Fatalf("after poll %d: invalid_utf8 %d, bad_dates %d; want %d and %d", i+1, u, d, c.utf8Items, c.badDates)
				}
			}
			got, err := st.Feed(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Polls != repairPolls || got.LastRepair == "" || got.Warning == "" {
				t.Errorf("%d polls, last repair %q, warning %q", got.Polls, got.LastRepair, got.Warning)
			}
		})
	}

	// New items: a clean one adds nothing, one with invalid UTF-8 and a
	// bad date counts once for each repair.
	f, err := st.FeedByURL(srv.srv.URL + "/utf8.rss")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile(filepath.Join("testdata", "repairs", "utf8.rss"))
	clean := []byte(`<item><guid>r-4</guid><title>new and clean</title><pubDate>Sat, 21 Nov 2026 19:40:00 GMT</pubDate></item>`)
	srv.set("utf8.rss", bytes.Replace(doc, []byte("<item>"), append(clean, "\n<item>"...), 1))
	poll(f.ID, 3)
	if u, d := counts(f.ID); u != 2 || d != 0 {
		t.Errorf("after a clean new item: invalid_utf8 %d, bad_dates %d; want 2 and 0", u, d)
	}
	bad := []byte("<item><guid>r-5</guid><title>na\xefve</title><pubDate>someday</pubDate></item>")
	srv.set("utf8.rss", bytes.Replace(doc, []byte("<item>"), append(bad, "\n<item>"...), 1))
	poll(f.ID, 3)
	if u, d := counts(f.ID); u != 3 || d != 1 {
		t.Errorf("after a new item with both repairs: invalid_utf8 %d, bad_dates %d; want 3 and 1", u, d)
	}
}

// TestRepairCountsOfOlderStores: a feed stored by a slogfeed that
// counted the bytes of invalid UTF-8 at every fetch reads 0 items with
// invalid UTF-8 until its next fetch, which drops the old count and
// counts items from then on; its bad dates, already counted per item,
// are kept.
func TestRepairCountsOfOlderStores(t *testing.T) {
	srv := newRepairServer(t)
	st, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	old := storage.Feed{URL: srv.srv.URL + "/utf8.rss", Kind: storage.KindRemote, Policy: "auto", InvalidUTF8: 117, BadDates: 3}
	if err := st.CreateFeed(&old); err != nil {
		t.Fatal(err)
	}
	f, err := st.Feed(old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if u, d := f.RepairCounts(); u != 0 || d != 3 {
		t.Errorf("before a fetch: invalid_utf8 %d, bad_dates %d; want 0 and 3", u, d)
	}
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:   st,
		Fetcher: fetcher.New(fetcher.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := svc.FetchNow(context.Background(), old.ID); err != nil {
			t.Fatal(err)
		}
	}
	if f, err = st.Feed(old.ID); err != nil {
		t.Fatal(err)
	}
	if u, d := f.RepairCounts(); u != 2 || d != 3 || f.InvalidUTF8 != 2 || !f.RepairsPerItem {
		t.Errorf("after two fetches: invalid_utf8 %d (stored %d), bad_dates %d; want 2 and 3", u, f.InvalidUTF8, d)
	}
}
