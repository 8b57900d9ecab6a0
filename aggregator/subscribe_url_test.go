package aggregator_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Two spellings of one address are one feed: a URL's fragment (the server
// never sees it), the host's case, the default port, dot segments,
// percent-encoded unreserved characters and an empty query do not make
// another subscription.
func TestSubscribeOneFeedPerAddress(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Scheduler: schedule.Config{Workers: 1},
		Fetcher: fetcher.New(fetcher.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Subscribe(storage.Feed{URL: "https://h.example.org/f/4.rss#latest"})
	if err != nil {
		t.Fatal(err)
	}
	if f.URL != "https://h.example.org/f/4.rss" {
		t.Errorf("stored URL %q, want it without its fragment", f.URL)
	}
	for _, u := range []string{
		"https://h.example.org/f/4.rss", "https://h.example.org/f/4.rss#other", "HTTPS://h.example.org/f/4.rss#",
		"https://H.EXAMPLE.org/f/4.rss", "https://h.example.org:443/f/4.rss", "https://h.example.org/f/./4.rss",
		"https://h.example.org/x/../f/4.rss", "https://h.example.org/f/%34.rss", "https://h.example.org/f/4.rss?",
	} {
		if _, err := svc.Subscribe(storage.Feed{URL: u}); !errors.Is(err, storage.ErrFeedExists) {
			t.Errorf("%s: %v, want the feed already subscribed", u, err)
		}
	}
}
