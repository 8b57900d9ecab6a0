package aggregator_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// A document that lists more items than the feed keeps does not bring
// back the items retention dropped as new ones each time it is read: they
// are judged by their own dates, older than every item kept. The items
// new to the document are stored, the one dated before the previous poll
// (published late) too.
func TestRetentionDroppedItemsStayDropped(t *testing.T) {
	for _, format := range []string{"json", "rss"} {
		t.Run(format, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRetentionDropped(t, format) })
		})
	}
}

// listing is a document in format ("json" or "rss") of the items top,
// top-1, … down to listed of them, each written by item (its JSON Feed
// item and its RSS item).
func listing(format string, top, listed int, item func(id int) (jsonItem, rssItem string)) string {
	var b strings.Builder
	if format == "json" {
		b.WriteString(`{"version":"https://jsonfeed.org/version/1.1","title":"t","items":[`)
	} else {
		b.WriteString(`<rss version="2.0"><channel><title>t</title>`)
	}
	for id := top; id > top-listed; id-- {
		j, r := item(id)
		switch {
		case format != "json":
			b.WriteString(r)
		case id != top:
			b.WriteString("," + j)
		default:
			b.WriteString(j)
		}
	}
	if format == "json" {
		b.WriteString(`]}`)
	} else {
		b.WriteString(`</channel></rss>`)
	}
	return b.String()
}

// pollListing subscribes to url, served as doc gives it in format, with
// a retention of kept items, and polls it every minute for six and a half
// minutes (in a synctest bubble).
func pollListing(t *testing.T, st *storage.Store, format, url string, kept int, doc func() string) storage.Feed {
	t.Helper()
	pub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", map[string]string{"json": "application/feed+json", "rss": "application/rss+xml"}[format])
		_, _ = w.Write([]byte(doc()))
	})
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Scheduler: schedule.Config{Workers: 1},
		Fetcher: fetcher.New(fetcher.Options{Transport: handlerTransport{pub}})})
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Subscribe(storage.Feed{URL: url, Policy: "fixed-1m", Retention: storage.Retention{MaxItems: kept}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- svc.Run(ctx) }()
	time.Sleep(6*time.Minute + 30*time.Second)
	synctest.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return f
}

func testRetentionDropped(t *testing.T, format string) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	base := start.Add(-48 * time.Hour)
	const kept, listed = 200, 250
	// The document lists its newest items, one a minute, at most listed
	// of them: a new one each minute from start, dated when it appears,
	// except every third one, published late (dated a minute before).
	// One old item's date cannot be right: the polls then read every item,
	// not only those they have not seen (as after a restart).
	var mu sync.Mutex
	var newest int
	dateOf := func(id int) time.Time {
		switch {
		case id == listed-3:
			return time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
		case id < listed:
			return base.Add(time.Duration(id) * time.Minute)
		case id%3 == 0:
			return start.Add(time.Duration(id-listed) * time.Minute).Add(-time.Minute)
		}
		return start.Add(time.Duration(id-listed) * time.Minute)
	}
	doc := func() string {
		mu.Lock()
		newest = listed - 1 + int(time.Since(start)/time.Minute)
		top := newest
		mu.Unlock()
		return listing(format, top, listed, func(id int) (string, string) {
			d := dateOf(id)
			return fmt.Sprintf(`{"id":"r%d","title":"reading %d","date_published":%q}`, id, id, d.UTC().Format(time.RFC3339)),
				fmt.Sprintf(`<item><guid>r%d</guid><title>reading %d</title><pubDate>%s</pubDate></item>`, id, id, d.Format(time.RFC1123Z))
		})
	}
	f := pollListing(t, st, format, "https://sensors.example.org/feed."+format, kept, doc)
	mu.Lock()
	top := newest
	mu.Unlock()
	stored := func(id int) bool {
		_, err := st.Item(f.ID, fmt.Sprint("r", id))
		return err == nil
	}
	back := 0
	for id := top - listed + 1; id <= top-kept; id++ {
		if stored(id) {
			back++
		}
	}
	if back > 0 {
		t.Errorf("%d of the items retention dropped were stored again", back)
	}
	for id := listed; id <= top; id++ {
		if !stored(id) {
			t.Errorf("item r%d, new to the document, not stored", id)
		}
	}
	if g, _ := st.Feed(f.ID); g.Polls < 6 {
		t.Errorf("%d polls", g.Polls)
	}
}

// Items without dates that a document lists beyond the feed's retention
// are not stored again as new at every poll: the items a poll's document
// shares with the previous one, byte for byte, are not read again (RSS,
// Atom and JSON Feed alike), so only the item new to the document counts.
func TestUndatedItemsBeyondRetentionNotNewAgain(t *testing.T) {
	for _, format := range []string{"json", "rss"} {
		t.Run(format, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testUndatedBeyondRetention(t, format) })
		})
	}
}

func testUndatedBeyondRetention(t *testing.T, format string) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	const kept, listed = 200, 250
	var mu sync.Mutex
	var newest int
	doc := func() string {
		mu.Lock()
		newest = listed - 1 + int(time.Since(start)/time.Minute)
		top := newest
		mu.Unlock()
		return listing(format, top, listed, func(id int) (string, string) {
			return fmt.Sprintf(`{"id":"u%d","title":"reading %d"}`, id, id),
				fmt.Sprintf(`<item><guid>u%d</guid><title>reading %d</title></item>`, id, id)
		})
	}
	f := pollListing(t, st, format, "https://sensors.example.org/undated."+format, kept, doc)
	mu.Lock()
	top := newest
	mu.Unlock()
	g, err := st.Feed(f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if g.Polls < 6 {
		t.Fatalf("%d polls", g.Polls)
	}
	// The first poll stores the newest kept; each later one the item
	// new to the document.
	if want := int64(kept + top - (listed - 1)); g.Items != want {
		t.Errorf("%d items added over %d polls, want %d (the %d kept, then one a poll)", g.Items, g.Polls, want, kept)
	}
	for id := listed; id <= top; id++ {
		if _, err := st.Item(f.ID, fmt.Sprint("u", id)); err != nil {
			t.Errorf("item u%d, new to the document: %v", id, err)
		}
	}
}
