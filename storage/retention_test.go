package storage

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestRetentionByCount(t *testing.T) {
	s := openTest(t)
	f := createRemote(t, s, "https://example.org/feed", Retention{MaxItems: 3})
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

	steps := []struct {
		name  string
		in    []Item
		added []string
		kept  []string // by publish time, newest first
	}{
		{"first fetch, over capacity",
			[]Item{{ID: "m5", Published: at(-5)}, {ID: "m1", Published: at(-1)}, {ID: "m9", Published: at(-9)}, {ID: "m3", Published: at(-3)}, {ID: "m4", Published: at(-4)}},
			[]string{"m1", "m3", "m4"}, []string{"m1", "m3", "m4"}},
		{"dropped items do not come back",
			[]Item{{ID: "m5", Published: at(-5)}, {ID: "m9", Published: at(-9)}},
			nil, []string{"m1", "m3", "m4"}},
		{"a tie with the oldest kept does not come in",
			[]Item{{ID: "m4b", Published: at(-4)}},
			nil, []string{"m1", "m3", "m4"}},
		{"a newer item pushes the oldest out",
			[]Item{{ID: "m0", Published: at(0)}, {ID: "m5", Published: at(-5)}},
			[]string{"m0"}, []string{"m0", "m1", "m3"}},
		{"an older item between the kept ones comes in",
			[]Item{{ID: "m2", Published: at(-2)}},
			[]string{"m2"}, []string{"m0", "m1", "m2"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			added, err := s.AddItems(f.ID, st.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(added); !slices.Equal(got, st.added) && len(got)+len(st.added) > 0 {
				t.Errorf("added %v, want %v", got, st.added)
			}
			items, _ := s.Items(f.ID, ItemQuery{Order: ByPublished})
			if got := ids(items); !slices.Equal(got, st.kept) {
				t.Errorf("kept %v, want %v", got, st.kept)
			}
			if n, _ := s.CountItems(f.ID); n != len(st.kept) {
				t.Errorf("CountItems = %d, want %d", n, len(st.kept))
			}
		})
	}

	t.Run("lowering MaxItems applies on the next retention", func(t *testing.T) {
		if _, err := s.UpdateFeed(f.ID, func(f *Feed) error { f.Retention.MaxItems = 1; return nil }); err != nil {
			t.Fatal(err)
		}
		removed, err := s.ApplyRetention(f.ID)
		if err != nil || removed != 2 {
			t.Errorf("ApplyRetention = %d, %v; want 2", removed, err)
		}
		if items, _ := s.Items(f.ID, ItemQuery{}); !slices.Equal(ids(items), []string{"m0"}) {
			t.Errorf("kept %v", ids(items))
		}
	})
}

func TestRetentionByAge(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	f := createRemote(t, s, "https://example.org/feed", Retention{MaxAge: time.Hour})
	added, err := s.AddItems(f.ID, []Item{
		{ID: "2h", Published: t0.Add(-2 * time.Hour)},
		{ID: "30m", Published: t0.Add(-30 * time.Minute)},
		{ID: "now", Published: t0},
		{ID: "undated"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(added), []string{"30m", "now", "undated"}; !slices.Equal(got, want) {
		t.Errorf("added %v, want %v (too old for MaxAge is not stored)", got, want)
	}
	clk.Add(45 * time.Minute)
	if removed, err := s.ApplyRetention(f.ID); err != nil || removed != 1 {
		t.Errorf("ApplyRetention after 45 min = %d, %v; want 1", removed, err)
	}
	clk.Add(time.Hour)
	if removed, err := s.ApplyRetention(f.ID); err != nil || removed != 2 {
		t.Errorf("ApplyRetention after 1h45 = %d, %v; want 2", removed, err)
	}
	if n, _ := s.CountItems(f.ID); n != 0 {
		t.Errorf("CountItems = %d", n)
	}
	if removed, err := s.ApplyRetention(f.ID); err != nil || removed != 0 {
		t.Errorf("ApplyRetention of an empty feed = %d, %v", removed, err)
	}
}

// fakeReducer keeps items titled "keep" and summarises the others in one
// digest item, "digest", whose title counts all items dropped so far.
type fakeReducer struct {
	calls   [][]string // IDs given to each call
	dropped int
	err     error
	invalid bool
}

func (r *fakeReducer) Reduce(feed Feed, items []Item) (keep, digest []Item, err error) {
	r.calls = append(r.calls, ids(items))
	if r.err != nil {
		return nil, nil, r.err
	}
	var newest time.Time
	for _, it := range items {
		if it.Title == "keep" {
			keep = append(keep, it)
			continue
		}
		if it.ID == "digest" {
			continue // merged into the new digest
		}
		r.dropped++
		newest = it.Published
	}
	d := Item{ID: "digest", Title: fmt.Sprintf("%d dropped", r.dropped), Published: newest}
	if r.invalid {
		d.ID = ""
	}
	return keep, []Item{d}, nil
}

func TestRetentionWithReducer(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	r := &fakeReducer{}
	s.SetReducer(r)
	f := createRemote(t, s, "https://example.org/feed", Retention{MaxItems: 3})
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

	added, err := s.AddItems(f.ID, []Item{
		{ID: "a", Title: "keep", Published: at(1)},
		{ID: "b", Published: at(2)},
		{ID: "c", Published: at(3)},
		{ID: "d", Published: at(4)},
		{ID: "e", Published: at(5)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.calls) != 1 || !slices.Equal(r.calls[0], []string{"a", "b"}) {
		t.Fatalf("reducer calls %v, want [[a b]]", r.calls)
	}
	if got, want := ids(added), []string{"a", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("added %v, want %v", got, want)
	}
	items, _ := s.Items(f.ID, ItemQuery{Order: ByPublished})
	if got, want := ids(items), []string{"e", "d", "c", "digest", "a"}; !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	d1, err := s.Item(f.ID, "digest")
	if err != nil || d1.Title != "1 dropped" || d1.FeedID != f.ID || !d1.Fetched.Equal(t0) {
		t.Errorf("digest = %+v, %v", d1, err)
	}

	// The next item pushes a and the digest over: a is kept again, the
	// digest is replaced by a merged one with a new Seq.
	if _, err := s.AddItems(f.ID, []Item{{ID: "f", Published: at(6)}}); err != nil {
		t.Fatal(err)
	}
	if got := r.calls[len(r.calls)-1]; !slices.Equal(got, []string{"a", "digest", "c"}) {
		t.Errorf("second reducer call got %v", got)
	}
	d2, err := s.Item(f.ID, "digest")
	if err != nil || d2.Title != "2 dropped" || d2.Seq <= d1.Seq {
		t.Errorf("merged digest = %+v, %v (first had Seq %d)", d2, err, d1.Seq)
	}
	if after, _ := s.Items(f.ID, ItemQuery{AfterSeq: d1.Seq}); !slices.Contains(ids(after), "digest") {
		t.Errorf("an incremental reader does not see the merged digest: %v", ids(after))
	}
	if _, err := s.Item(f.ID, "c"); !errors.Is(err, ErrItemNotFound) {
		t.Errorf("c not dropped: %v", err)
	}

	t.Run("reducer error keeps everything", func(t *testing.T) {
		boom := errors.New("boom")
		r.err = boom
		before, _ := s.CountItems(f.ID)
		added, err := s.AddItems(f.ID, []Item{{ID: "g", Published: at(7)}})
		if !errors.Is(err, boom) || errors.Is(err, ErrInvalid) {
			t.Errorf("AddItems err = %v, want the reducer's", err)
		}
		if !slices.Equal(ids(added), []string{"g"}) {
			t.Errorf("added %v, want [g]", ids(added))
		}
		if n, _ := s.CountItems(f.ID); n != before+1 {
			t.Errorf("CountItems = %d, want %d", n, before+1)
		}
		if removed, err := s.ApplyRetention(f.ID); !errors.Is(err, boom) || removed != 0 {
			t.Errorf("ApplyRetention = %d, %v", removed, err)
		}
		r.err = nil
	})

	t.Run("invalid digest keeps everything", func(t *testing.T) {
		r.invalid = true
		before, _ := s.CountItems(f.ID)
		if removed, err := s.ApplyRetention(f.ID); !errors.Is(err, ErrInvalid) || removed != 0 {
			t.Errorf("ApplyRetention = %d, %v; want ErrInvalid", removed, err)
		}
		if n, _ := s.CountItems(f.ID); n != before {
			t.Errorf("CountItems = %d, want %d", n, before)
		}
		r.invalid = false
	})

	t.Run("without reducer the oldest are deleted", func(t *testing.T) {
		s.SetReducer(nil)
		calls := len(r.calls)
		if _, err := s.ApplyRetention(f.ID); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.CountItems(f.ID); n != 3 {
			t.Errorf("CountItems = %d, want 3", n)
		}
		if len(r.calls) != calls {
			t.Errorf("removed reducer was called")
		}
	})
}
