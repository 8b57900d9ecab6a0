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

// A URL's fragment is not part of the subscription: the server never
// sees it, so a URL that differs only by one is the same feed.
func TestSubscribeDropsFragment(t *testing.T) {
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
	for _, u := range []string{"https://h.example.org/f/4.rss", "https://h.example.org/f/4.rss#other", "HTTPS://h.example.org/f/4.rss#"} {
		if _, err := svc.Subscribe(storage.Feed{URL: u}); !errors.Is(err, storage.ErrFeedExists) {
			t.Errorf("%s: %v, want the feed already subscribed", u, err)
		}
	}
}
