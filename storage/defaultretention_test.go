package storage

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDefaultRetention: a feed created without a Retention gets the
// store's default, which Options.DefaultRetention sets or turns off; a
// feed's own Retention and a later UpdateFeed override it.
func TestDefaultRetention(t *testing.T) {
	tests := []struct {
		name   string
		opt    Retention // Options.DefaultRetention
		own    Retention // the feed's at creation
		update *Retention
		want   Retention // the feed's after creation (and update)
		kept   int       // of 250 items added
	}{
		{"none by default", Retention{}, Retention{}, nil, Retention{}, 250},
		{"the package's default", DefaultRetention, Retention{}, nil, DefaultRetention, DefaultRetention.MaxItems},
		{"the store's default", Retention{MaxItems: 30}, Retention{}, nil, Retention{MaxItems: 30}, 30},
		{"the feed's own", Retention{}, Retention{MaxItems: 40}, nil, Retention{MaxItems: 40}, 40},
		{"none by option", Retention{MaxItems: -1}, Retention{}, nil, Retention{}, 250},
		{"none by update", DefaultRetention, Retention{}, &Retention{}, Retention{}, 250},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t, Options{DefaultRetention: tt.opt})
			f := createRemote(t, s, "https://example.org/feed", tt.own)
			if tt.update != nil {
				var err error
				if f, err = s.UpdateFeed(f.ID, func(f *Feed) error { f.Retention = *tt.update; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if f.Retention != tt.want {
				t.Fatalf("retention %+v, want %+v", f.Retention, tt.want)
			}
			items := make([]Item, 250)
			for i := range items {
				items[i] = Item{ID: fmt.Sprint(i), Published: t0.Add(time.Duration(i) * time.Minute)}
			}
			if _, err := s.AddItems(f.ID, items); err != nil {
				t.Fatal(err)
			}
			if n, err := s.CountItems(f.ID); err != nil || n != tt.kept {
				t.Errorf("CountItems = %d, %v; want %d", n, err, tt.kept)
			}
			out := Feed{Kind: KindPipe, Slug: "out"}
			if err := s.CreatePipe(&Pipe{Slug: "out", Def: []byte(`{}`)}, &out); err != nil {
				t.Fatal(err)
			}
			if want := defaultRetention(tt.opt); out.Retention != want {
				t.Errorf("pipe output retention %+v, want %+v", out.Retention, want)
			}
			// A sensor feed's readings are kept nowhere else: it gets no
			// default, only a Retention of its own.
			sensor := Feed{Kind: KindSensor, Slug: "mote", Retention: tt.own}
			if err := s.CreateFeed(&sensor); err != nil {
				t.Fatal(err)
			}
			if sensor.Retention != tt.own {
				t.Errorf("sensor feed retention %+v, want its own %+v", sensor.Retention, tt.own)
			}
		})
	}
}

// TestFileStopsGrowing: once every feed holds as many items and
// observations as its bounds allow, polls that each store a new item and
// an observation no longer grow the data file's pages in use.
func TestFileStopsGrowing(t *testing.T) {
	const feeds, maxItems, maxObs = 30, 20, 24
	s := openTest(t, Options{DefaultRetention: Retention{MaxItems: maxItems}, MaxObservations: maxObs})
	ids := make([]uint64, feeds)
	for i := range ids {
		ids[i] = createRemote(t, s, fmt.Sprintf("https://example.org/%d", i), Retention{}).ID
	}
	body := strings.Repeat("reading ", 40)
	round := 0
	poll := func(rounds int) int64 {
		t.Helper()
		for range rounds {
			round++
			at := t0.Add(time.Duration(round) * time.Hour)
			for _, id := range ids {
				it := Item{ID: fmt.Sprintf("%d-%d", id, round), Summary: body, Published: at}
				o := Observation{At: at, Hit: true, Status: 200, LatencyS: []float64{1.5}}
				if _, err := s.RecordFetch(id, []Item{it}, o, func(*Feed, *Observation, []Item) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
		}
		used, err := s.InUse()
		if err != nil {
			t.Fatal(err)
		}
		return used
	}
	// Past both bounds, and the observations' slack.
	full := poll(2 * maxObs)
	for _, id := range ids {
		if n, err := s.CountItems(id); err != nil || n != maxItems {
			t.Fatalf("feed %d holds %d items, %v", id, n, err)
		}
	}
	later := poll(6 * maxObs)
	t.Logf("in use after %d polls a feed: %d bytes; after %d: %d", 2*maxObs, full, 8*maxObs, later)
	if later > full+full/10 {
		t.Errorf("in use grew from %d to %d bytes with every feed at its bounds", full, later)
	}
}
