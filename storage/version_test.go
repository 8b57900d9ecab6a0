package storage

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func createPipeFeed(t *testing.T, s *Store, slug string) Feed {
	t.Helper()
	f := Feed{Kind: KindPipe, Slug: slug, Title: slug}
	if err := s.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

func versionItem(i int, title string) Item {
	return Item{
		ID:        fmt.Sprintf("item-%d", i),
		Title:     title,
		Published: t0.Add(time.Duration(i) * time.Minute),
	}
}

func TestFeedVersion(t *testing.T) {
	s := openTest(t)
	f := createPipeFeed(t, s, "out")
	other := createPipeFeed(t, s, "other")
	const depth = 3

	version := func() Version {
		t.Helper()
		v, err := s.FeedVersion(f.ID, depth)
		if err != nil {
			t.Fatal(err)
		}
		bySlug, err := s.FeedVersionBySlug(KindPipe, "out", depth)
		if err != nil || bySlug != v {
			t.Fatalf("by slug %+v (%v), by id %+v", bySlug, err, v)
		}
		return v
	}

	empty := version()
	if empty.FeedID != f.ID || empty.LastSeq != 0 || empty.Count != 0 || empty.Sum == 0 {
		t.Fatalf("empty feed: %+v", empty)
	}
	if again := version(); again != empty {
		t.Fatalf("no change, yet %+v then %+v", empty, again)
	}

	var items []Item
	for i := range 5 {
		items = append(items, versionItem(i, "t"))
	}
	added, err := s.AddItems(f.ID, items)
	if err != nil || len(added) != 5 {
		t.Fatal(added, err)
	}
	full := version()
	if full.LastSeq != added[4].Seq || full.Count != 5 || full.Sum == empty.Sum {
		t.Fatalf("after adding 5: %+v (last seq %d)", full, added[4].Seq)
	}

	steps := []struct {
		name     string
		change   func(t *testing.T)
		want     func(before, after Version) bool // how the version must move
		wantDesc string
	}{
		{
			name: "other feed changes",
			change: func(t *testing.T) {
				if _, err := s.AddItems(other.ID, []Item{versionItem(1, "x")}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.UpdateFeed(other.ID, func(f *Feed) error { f.Title = "renamed"; return nil }); err != nil {
					t.Fatal(err)
				}
			},
			want:     func(b, a Version) bool { return a == b },
			wantDesc: "unchanged",
		},
		{
			name: "duplicate add",
			change: func(t *testing.T) {
				if added, err := s.AddItems(f.ID, []Item{versionItem(4, "t")}); err != nil || len(added) != 0 {
					t.Fatal(added, err)
				}
			},
			want:     func(b, a Version) bool { return a == b },
			wantDesc: "unchanged",
		},
		{
			name: "in-place update of a newest item",
			change: func(t *testing.T) {
				if added, err := s.AddItems(f.ID, []Item{versionItem(3, "new title")}); err != nil || len(added) != 0 {
					t.Fatal(added, err)
				}
			},
			want:     func(b, a Version) bool { return a.LastSeq == b.LastSeq && a.Count == b.Count && a.Sum != b.Sum },
			wantDesc: "same seq and count, another sum",
		},
		{
			name: "in-place update beyond the depth",
			change: func(t *testing.T) {
				if _, err := s.AddItems(f.ID, []Item{versionItem(0, "old one retitled")}); err != nil {
					t.Fatal(err)
				}
			},
			want:     func(b, a Version) bool { return a == b },
			wantDesc: "unchanged (not among the newest 3)",
		},
		{
			name: "rename",
			change: func(t *testing.T) {
				if _, err := s.UpdateFeed(f.ID, func(f *Feed) error { f.Title = "Renamed output"; return nil }); err != nil {
					t.Fatal(err)
				}
			},
			want:     func(b, a Version) bool { return a.LastSeq == b.LastSeq && a.Count == b.Count && a.Sum != b.Sum },
			wantDesc: "another sum",
		},
		{
			name: "retention deletes the oldest",
			change: func(t *testing.T) {
				if _, err := s.UpdateFeed(f.ID, func(f *Feed) error { f.Retention.MaxItems = 4; return nil }); err != nil {
					t.Fatal(err)
				}
				// Compare from here: the retention setting alone changes the record.
			},
			want:     func(b, a Version) bool { return a.Sum != b.Sum },
			wantDesc: "another sum",
		},
		{
			name: "apply retention",
			change: func(t *testing.T) {
				if n, err := s.ApplyRetention(f.ID); err != nil || n != 1 {
					t.Fatal(n, err)
				}
			},
			want:     func(b, a Version) bool { return a.LastSeq == b.LastSeq && a.Count == b.Count-1 },
			wantDesc: "one item fewer, same last seq",
		},
		{
			name: "add",
			change: func(t *testing.T) {
				if _, err := s.AddItems(f.ID, []Item{versionItem(10, "t")}); err != nil {
					t.Fatal(err)
				}
			},
			want:     func(b, a Version) bool { return a.LastSeq > b.LastSeq && a.Count == b.Count && a.Sum != b.Sum },
			wantDesc: "a higher last seq (retention keeps the count at 4)",
		},
	}
	prev := full
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change(t)
			now := version()
			if !st.want(prev, now) {
				t.Errorf("version %+v → %+v, want %s", prev, now, st.wantDesc)
			}
			prev = now
		})
	}

	// A depth of zero still sees additions and deletions, not updates.
	z1, _ := s.FeedVersion(f.ID, 0)
	if _, err := s.AddItems(f.ID, []Item{versionItem(10, "retitled")}); err != nil {
		t.Fatal(err)
	}
	if z2, _ := s.FeedVersion(f.ID, 0); z2 != z1 {
		t.Errorf("depth 0: %+v → %+v after an update in place", z1, z2)
	}
}

func TestFeedVersionNotFound(t *testing.T) {
	s := openTest(t)
	f := createPipeFeed(t, s, "gone")
	if err := s.DeleteFeed(f.ID); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"deleted id":     func() error { _, err := s.FeedVersion(f.ID, 5); return err },
		"unknown id":     func() error { _, err := s.FeedVersion(999, 5); return err },
		"deleted slug":   func() error { _, err := s.FeedVersionBySlug(KindPipe, "gone", 5); return err },
		"empty slug":     func() error { _, err := s.FeedVersionBySlug(KindPipe, "", 5); return err },
		"wrong kind":     func() error { createPipeFeed(t, s, "p"); _, err := s.FeedVersionBySlug(KindSensor, "p", 5); return err },
		"snapshot":       func() error { _, _, _, err := s.FeedSnapshot(KindPipe, "gone", 5); return err },
		"oversized slug": func() error { _, _, _, err := s.FeedSnapshot(KindPipe, string(make([]byte, 40000)), 5); return err },
	} {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, ErrFeedNotFound) {
				t.Errorf("error %v, want ErrFeedNotFound", err)
			}
		})
	}
}

func TestFeedSnapshot(t *testing.T) {
	s := openTest(t)
	f := createPipeFeed(t, s, "snap")
	var items []Item
	for i := range 7 {
		items = append(items, versionItem(i, fmt.Sprint("title ", i)))
	}
	if _, err := s.AddItems(f.ID, items); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 3, 7, 20} {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			feed, got, v, err := s.FeedSnapshot(KindPipe, "snap", n)
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.Items(f.ID, ItemQuery{Limit: n, Order: ByArrival})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("items %v, want %v", ids(got), ids(want))
			}
			if feed.ID != f.ID || feed.Title != "snap" {
				t.Errorf("feed %+v", feed)
			}
			depth := n
			if n <= 0 {
				depth = 7
			}
			if wantV, err := s.FeedVersion(f.ID, depth); err != nil || v != wantV {
				t.Errorf("version %+v, want %+v (%v)", v, wantV, err)
			}
		})
	}
}

// BenchmarkFeedVersion measures the per-request cost of a republished
// feed's cache check: the Version of a 50-item document.
func BenchmarkFeedVersion(b *testing.B) {
	s := openTest(b)
	f := Feed{Kind: KindPipe, Slug: "bench"}
	if err := s.CreateFeed(&f); err != nil {
		b.Fatal(err)
	}
	var items []Item
	for i := range 200 {
		it := versionItem(i, fmt.Sprintf("lab-%d: %d.5 °C", i%4, 20+i%7))
		it.Summary = fmt.Sprintf("%d.5 C at 2026-11-21 18:%02d:00 UTC", 20+i%7, i%60)
		it.Reading = &Reading{Value: 20.5, Unit: "C", Sensor: "lab-1", Time: it.Published}
		items = append(items, it)
	}
	if _, err := s.AddItems(f.ID, items); err != nil {
		b.Fatal(err)
	}
	for _, depth := range []int{0, 50} {
		b.Run(fmt.Sprint("depth=", depth), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := s.FeedVersionBySlug(KindPipe, "bench", depth); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
