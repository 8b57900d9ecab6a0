package storage

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCreateFeed(t *testing.T) {
	s := openTest(t)
	existing := []Feed{
		{Kind: KindRemote, URL: "https://example.org/taken.xml"},
		{Kind: KindSensor, Slug: "taken"},
	}
	for i := range existing {
		if err := s.CreateFeed(&existing[i]); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		feed Feed
		want error
	}{
		{"remote", Feed{Kind: KindRemote, URL: "https://example.org/a.xml", Title: "A"}, nil},
		{"remote, other scheme", Feed{Kind: KindRemote, URL: "gemini://example.org/feed"}, nil},
		{"sensor", Feed{Kind: KindSensor, Slug: "lab-1.temp_C~2"}, nil},
		{"pipe with a sensor's slug", Feed{Kind: KindPipe, Slug: "taken"}, nil},
		{"remote with a sensor's slug", Feed{Kind: KindRemote, URL: "https://example.org/b.xml", Slug: "taken"}, nil},
		{"duplicate URL", Feed{Kind: KindRemote, URL: "https://example.org/taken.xml"}, ErrFeedExists},
		{"duplicate slug", Feed{Kind: KindSensor, Slug: "taken"}, ErrFeedExists},
		{"empty URL", Feed{Kind: KindRemote}, ErrInvalid},
		{"relative URL", Feed{Kind: KindRemote, URL: "/feed.xml"}, ErrInvalid},
		{"URL with space", Feed{Kind: KindRemote, URL: "https://example.org/a b"}, ErrInvalid},
		{"URL with newline", Feed{Kind: KindRemote, URL: "https://example.org/\n"}, ErrInvalid},
		{"URL too long", Feed{Kind: KindRemote, URL: "https://example.org/" + strings.Repeat("a", MaxURLLen)}, ErrInvalid},
		{"URL not UTF-8", Feed{Kind: KindRemote, URL: "https://example.org/\xff"}, ErrInvalid},
		{"no kind", Feed{URL: "https://example.org/c.xml"}, ErrInvalid},
		{"unknown kind", Feed{Kind: "ftp", URL: "https://example.org/c.xml"}, ErrInvalid},
		{"sensor without slug", Feed{Kind: KindSensor}, ErrInvalid},
		{"slug with slash", Feed{Kind: KindSensor, Slug: "a/b"}, ErrInvalid},
		{"slug dot-dot", Feed{Kind: KindPipe, Slug: ".."}, ErrInvalid},
		{"slug too long", Feed{Kind: KindPipe, Slug: strings.Repeat("s", MaxSlugLen+1)}, ErrInvalid},
		{"title too long", Feed{Kind: KindSensor, Slug: "long", Title: strings.Repeat("t", MaxTitleLen+1)}, ErrInvalid},
		{"NaN weight", Feed{Kind: KindSensor, Slug: "nan", Weight: math.NaN()}, ErrInvalid},
		{"negative weight", Feed{Kind: KindSensor, Slug: "neg", Weight: -1}, ErrInvalid},
		{"year 10000", Feed{Kind: KindSensor, Slug: "y", NextFetch: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := s.Feeds()
			f := tt.feed
			f.ID = 999 // ignored
			err := s.CreateFeed(&f)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("CreateFeed = %v, want %v", err, tt.want)
			}
			after, _ := s.Feeds()
			if err != nil {
				if f.ID != 999 {
					t.Errorf("failed CreateFeed changed the feed: ID %d", f.ID)
				}
				if len(after) != len(before) {
					t.Errorf("failed CreateFeed stored a feed")
				}
				return
			}
			if f.ID == 999 || f.ID == 0 || !f.Created.Equal(t0) || !f.Updated.Equal(t0) {
				t.Errorf("CreateFeed did not assign ID and times: %+v", f)
			}
			got, err := s.Feed(f.ID)
			if err != nil || got.Title != f.Title || got.URL != f.URL || got.Slug != f.Slug {
				t.Errorf("Feed(%d) = %+v, %v", f.ID, got, err)
			}
			if f.Kind == KindRemote {
				if got, err := s.FeedByURL(f.URL); err != nil || got.ID != f.ID {
					t.Errorf("FeedByURL = %d, %v", got.ID, err)
				}
			} else if got, err := s.FeedBySlug(f.Kind, f.Slug); err != nil || got.ID != f.ID {
				t.Errorf("FeedBySlug = %d, %v", got.ID, err)
			}
		})
	}
}

func TestFeedLookups(t *testing.T) {
	s := openTest(t)
	a := createRemote(t, s, "https://example.org/a", Retention{})
	b := Feed{Kind: KindPipe, Slug: "b"}
	if err := s.CreateFeed(&b); err != nil {
		t.Fatal(err)
	}
	feeds, err := s.Feeds()
	if err != nil || len(feeds) != 2 || feeds[0].ID != a.ID || feeds[1].ID != b.ID {
		t.Fatalf("Feeds = %+v, %v", feeds, err)
	}
	notFound := []struct {
		name string
		fn   func() error
	}{
		{"Feed", func() error { _, err := s.Feed(42); return err }},
		{"FeedByURL", func() error { _, err := s.FeedByURL("https://example.org/none"); return err }},
		{"FeedByURL empty", func() error { _, err := s.FeedByURL(""); return err }},
		{"FeedByURL huge", func() error { _, err := s.FeedByURL(strings.Repeat("x", 40000)); return err }},
		{"FeedBySlug other kind", func() error { _, err := s.FeedBySlug(KindSensor, "b"); return err }},
		{"UpdateFeed", func() error { _, err := s.UpdateFeed(42, func(*Feed) error { return nil }); return err }},
		{"DeleteFeed", func() error { return s.DeleteFeed(42) }},
		{"AddItems", func() error { _, err := s.AddItems(42, []Item{{ID: "x"}}); return err }},
		{"Items", func() error { _, err := s.Items(42, ItemQuery{}); return err }},
		{"Item", func() error { _, err := s.Item(42, "x"); return err }},
		{"CountItems", func() error { _, err := s.CountItems(42); return err }},
		{"AddObservation", func() error { return s.AddObservation(42, Observation{At: t0}) }},
		{"Observations", func() error { _, err := s.Observations(42, 0); return err }},
		{"ApplyRetention", func() error { _, err := s.ApplyRetention(42); return err }},
	}
	for _, tt := range notFound {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.fn(); !errors.Is(err, ErrFeedNotFound) {
				t.Errorf("err = %v, want ErrFeedNotFound", err)
			}
		})
	}
}

func TestUpdateFeed(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	a := createRemote(t, s, "https://example.org/a", Retention{})
	createRemote(t, s, "https://example.org/taken", Retention{})
	sensor := Feed{Kind: KindSensor, Slug: "s1"}
	if err := s.CreateFeed(&sensor); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	boom := errors.New("boom")

	tests := []struct {
		name    string
		id      uint64
		fn      func(*Feed) error
		want    error
		url     string // expected indexed URL afterwards (remote)
		oldGone string // URL no longer indexed
	}{
		{name: "counters", id: a.ID, fn: func(f *Feed) error { f.Polls++; f.ETag = `"x"`; f.Category = []string{"News", "Sensors"}; return nil }, url: "https://example.org/a"},
		{name: "ID and Created are kept", id: a.ID, fn: func(f *Feed) error { f.ID, f.Created = 77, time.Time{}; return nil }, url: "https://example.org/a"},
		{name: "move URL", id: a.ID, fn: func(f *Feed) error { f.URL = "https://example.org/moved"; return nil },
			url: "https://example.org/moved", oldGone: "https://example.org/a"},
		{name: "URL taken", id: a.ID, fn: func(f *Feed) error { f.URL = "https://example.org/taken"; return nil },
			want: ErrFeedExists, url: "https://example.org/moved"},
		{name: "invalid", id: a.ID, fn: func(f *Feed) error { f.URL = ""; return nil }, want: ErrInvalid, url: "https://example.org/moved"},
		{name: "fn fails", id: a.ID, fn: func(f *Feed) error { f.Title = "lost"; f.Category = append(f.Category[:0], "x"); return boom },
			want: boom, url: "https://example.org/moved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := s.Feed(tt.id)
			got, err := s.UpdateFeed(tt.id, tt.fn)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("UpdateFeed = %v, want %v", err, tt.want)
			}
			stored, _ := s.Feed(tt.id)
			if err != nil {
				if !reflect.DeepEqual(stored, before) {
					t.Errorf("failed update changed the feed: %+v", stored)
				}
			} else {
				if got.ID != tt.id || !got.Created.Equal(t0) || !got.Updated.Equal(t0.Add(time.Minute)) {
					t.Errorf("UpdateFeed returned %+v", got)
				}
				if stored.ETag != got.ETag || stored.Polls != got.Polls || stored.URL != got.URL {
					t.Errorf("stored %+v, returned %+v", stored, got)
				}
			}
			if f, err := s.FeedByURL(tt.url); err != nil || f.ID != tt.id {
				t.Errorf("FeedByURL(%q) = %d, %v", tt.url, f.ID, err)
			}
			if tt.oldGone != "" {
				if _, err := s.FeedByURL(tt.oldGone); !errors.Is(err, ErrFeedNotFound) {
					t.Errorf("old URL still indexed: %v", err)
				}
			}
		})
	}

	t.Run("sensor becomes pipe", func(t *testing.T) {
		if _, err := s.UpdateFeed(sensor.ID, func(f *Feed) error { f.Kind = KindPipe; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FeedBySlug(KindSensor, "s1"); !errors.Is(err, ErrFeedNotFound) {
			t.Errorf("sensor slug still indexed: %v", err)
		}
		if f, err := s.FeedBySlug(KindPipe, "s1"); err != nil || f.ID != sensor.ID {
			t.Errorf("pipe slug: %d, %v", f.ID, err)
		}
	})
}

func TestDeleteFeed(t *testing.T) {
	s := openTest(t)
	a := createRemote(t, s, "https://example.org/a", Retention{})
	b := createRemote(t, s, "https://example.org/b", Retention{})
	for _, f := range []Feed{a, b} {
		if _, err := s.AddItems(f.ID, []Item{{ID: "1"}, {ID: "2"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddObservation(f.ID, Observation{At: t0, Hit: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteFeed(a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Feed(a.ID); !errors.Is(err, ErrFeedNotFound) {
		t.Errorf("Feed after delete: %v", err)
	}
	if _, err := s.FeedByURL(a.URL); !errors.Is(err, ErrFeedNotFound) {
		t.Errorf("FeedByURL after delete: %v", err)
	}
	if _, err := s.Items(a.ID, ItemQuery{}); !errors.Is(err, ErrFeedNotFound) {
		t.Errorf("Items after delete: %v", err)
	}
	if n, err := s.CountItems(b.ID); err != nil || n != 2 {
		t.Errorf("other feed lost items: %d, %v", n, err)
	}
	// The URL can be subscribed again, as a new feed without old items.
	a2 := createRemote(t, s, a.URL, Retention{})
	if a2.ID == a.ID {
		t.Errorf("feed ID %d reused", a.ID)
	}
	if n, _ := s.CountItems(a2.ID); n != 0 {
		t.Errorf("new feed has %d items", n)
	}
}
