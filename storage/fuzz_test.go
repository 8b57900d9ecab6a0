package storage

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// FuzzAddItems feeds random items (ids, titles, publish times, readings,
// duplicates, retention bounds) to AddItems. It must never panic, fail
// only with ErrInvalid, store exactly what it reports as added, and leave
// a file that passes Check.
func FuzzAddItems(f *testing.F) {
	f.Add("guid-1", "21.3 C", "<p>x</p>", int64(1700000000), int64(0), 21.3, true, uint8(0), uint8(0))
	f.Add("", "", "", int64(0), int64(0), 0.0, false, uint8(1), uint8(2))
	f.Add("\xff", "t", "", int64(-62135596800), int64(1), math.NaN(), true, uint8(2), uint8(1))
	f.Add("a", "b", "c", int64(253402300800), int64(-1), math.Inf(-1), true, uint8(3), uint8(3))
	f.Add("x/y?z", "title", "", int64(-1), int64(999999999), negZero, false, uint8(4), uint8(0))

	clk := newClock()
	s := openTest(f, Options{Now: clk.Now})
	n := 0
	f.Fuzz(func(t *testing.T, id, title, content string, sec, nsec int64, value float64, reading bool, shape, maxItems uint8) {
		n++
		feed := createRemote(t, s, fmt.Sprintf("https://example.org/%d", n), Retention{MaxItems: int(maxItems % 4)})
		defer func() {
			if err := s.DeleteFeed(feed.ID); err != nil {
				t.Fatal(err)
			}
		}()
		base := Item{ID: id, Title: title, Content: content, Published: time.Unix(sec, nsec)}
		if reading {
			base.Reading = &Reading{Value: value, Time: time.Unix(nsec, sec)}
		}
		items := []Item{base}
		switch shape % 5 {
		case 1: // a duplicate with other content
			dup := base
			dup.Title += "!"
			items = append(items, dup)
		case 2: // a valid neighbour
			items = append(items, Item{ID: "n-" + id, Published: base.Published.Add(time.Second)})
		case 3: // neighbours on both sides, one without date
			items = append([]Item{{ID: id + "0"}}, base, Item{ID: id + "1", Published: base.Published.Add(-time.Hour)})
		case 4: // the same batch twice
			items = append(items, items...)
		}

		added, err := s.AddItems(feed.ID, items)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("AddItems: %v (want nil or ErrInvalid)", err)
		}
		for _, it := range added {
			stored, err := s.Item(feed.ID, it.ID)
			if err != nil || stored.Seq != it.Seq || stored.FeedID != feed.ID {
				t.Fatalf("added %q (seq %d) but stored %+v, %v", it.ID, it.Seq, stored, err)
			}
		}
		all, err := s.Items(feed.ID, ItemQuery{})
		if err != nil {
			t.Fatal(err)
		}
		byPub, err := s.Items(feed.ID, ItemQuery{Order: ByPublished})
		if err != nil {
			t.Fatal(err)
		}
		count, err := s.CountItems(feed.ID)
		if err != nil || count != len(all) || count != len(byPub) {
			t.Fatalf("CountItems %d (%v), Items %d, by publish time %d", count, err, len(all), len(byPub))
		}
		if m := int(maxItems % 4); m > 0 && count > m {
			t.Fatalf("feed with MaxItems %d holds %d", m, count)
		}
		if err := s.Check(); err != nil {
			t.Fatalf("Check: %v", err)
		}
	})
}
