package aggregator_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

const goodFeed = `<?xml version="1.0"?><rss version="2.0"><channel><title>good</title><link>http://pub.test/</link><description>d</description>
<item><title>reading 1</title><guid>g1</guid><pubDate>Mon, 05 Jan 2026 10:00:00 +0000</pubDate></item>
<item><title>reading 2</title><guid>g2</guid><pubDate>Mon, 05 Jan 2026 10:05:00 +0000</pubDate></item>
</channel></rss>`

// TestBadFeedsAreIsolated: each hostile feed ends as a readable error on
// that feed alone (with a backoff), and the good feed beside it is fetched
// and stored as usual.
func TestBadFeedsAreIsolated(t *testing.T) {
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;"><!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]><rss version="2.0"><channel><title>&lol4;</title></channel></rss>`
	bodies := map[string]struct {
		status int
		ctype  string
		body   string
		want   string // in the feed's last error
	}{
		"html":    {200, "text/html", "<!doctype html><html><body>Hello</body></html>", "HTML"},
		"garbage": {200, "application/rss+xml", "\x00\x01 not a feed at all", "feed"},
		"laughs":  {200, "application/rss+xml", laughs, ""},
		"gone":    {410, "text/plain", "gone", "410"},
		"busy":    {503, "text/plain", "busy", "503"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/good", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write([]byte(goodFeed))
	})
	for name, b := range bodies {
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", b.ctype)
			if name == "busy" {
				w.Header().Set("Retry-After", "120")
			}
			w.WriteHeader(b.status)
			_, _ = w.Write([]byte(b.body))
		})
	}
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:     st,
		Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{mux}}),
		Scheduler: schedule.Config{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := map[string]uint64{}
	for _, name := range []string{"good", "html", "garbage", "laughs", "gone", "busy"} {
		f, err := svc.Subscribe(storage.Feed{URL: "http://pub.test/" + name})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = f.ID
		if _, err := svc.FetchNow(ctx, f.ID); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, b := range bodies {
		t.Run(name, func(t *testing.T) {
			f, err := st.Feed(ids[name])
			if err != nil {
				t.Fatal(err)
			}
			if name == "laughs" {
				// Entities are not expanded: either a clear error or a
				// feed whose title holds no expansion.
				if f.LastError == "" && strings.Contains(f.Title, "lollol") {
					t.Fatalf("entities expanded: title %q", f.Title)
				}
				return
			}
			if f.LastError == "" || !strings.Contains(f.LastError, b.want) || f.ErrorCount != 1 || f.RetryAfter.IsZero() {
				t.Fatalf("feed %s: last error %q (count %d, retry %v), want one error mentioning %q with a retry time", name, f.LastError, f.ErrorCount, f.RetryAfter, b.want)
			}
			if name == "busy" && f.RetryAfter.Sub(f.LastErrorAt).Seconds() < 119 {
				t.Fatalf("Retry-After 120 s not honoured: retry %v after the error", f.RetryAfter.Sub(f.LastErrorAt))
			}
		})
	}
	good, err := st.Feed(ids["good"])
	if err != nil {
		t.Fatal(err)
	}
	if good.LastError != "" || good.Items != 2 || good.Title != "good" {
		t.Fatalf("good feed: error %q items %d title %q, want no error, 2 items, title good", good.LastError, good.Items, good.Title)
	}
}

// TestSeenClearedOnRetentionChange: items a poll's retention refused are
// parsed again once the feed's retention changes (they are not cut as
// unchanged), so that a wider retention stores them.
func TestSeenClearedOnRetentionChange(t *testing.T) {
	doc := `<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>` +
		`<item><guid>c</guid><title>c</title><pubDate>Mon, 05 Jan 2026 10:10:00 +0000</pubDate></item>` +
		`<item><guid>b</guid><title>b</title><pubDate>Mon, 05 Jan 2026 10:05:00 +0000</pubDate></item>` +
		`<item><guid>a</guid><title>a</title><pubDate>Mon, 05 Jan 2026 10:00:00 +0000</pubDate></item>` +
		`</channel></rss>`
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/f.rss", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = io.WriteString(w, doc)
	})
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{Transport: handlerTransport{mux}})})
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Subscribe(storage.Feed{URL: "http://pub.test/f.rss", Policy: "fixed-1h", Retention: storage.Retention{MaxItems: 2}})
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n, err := st.CountItems(f.ID)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, tc := range []struct {
		ret  *storage.Retention // set before the poll (nil: unchanged)
		want int
	}{
		{nil, 2},                  // a is refused by MaxItems 2
		{nil, 2},                  // the same document: every item cut as unchanged
		{&storage.Retention{}, 3}, // no limit: a is parsed again and stored
		{&storage.Retention{MaxItems: 3}, 3},
	} {
		if tc.ret != nil {
			if _, err := st.UpdateFeed(f.ID, func(x *storage.Feed) error { x.Retention = *tc.ret; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := svc.FetchNow(context.Background(), f.ID); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != tc.want {
			t.Fatalf("poll %d: %d items stored, want %d", i, n, tc.want)
		}
	}
}
