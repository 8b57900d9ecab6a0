package storage

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// ids returns the IDs of items.
func ids(items []Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func TestAddItemsDedupeAndUpdate(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	pub := t0.Add(-time.Hour)
	first := []Item{
		{ID: "a", Title: "A", Summary: "sa", Published: pub, Updated: pub, Reading: &Reading{Value: 1}},
		{ID: "b", Title: "B", Published: pub.Add(time.Minute)},
	}
	added, err := s.AddItems(f.ID, first)
	if err != nil || !slices.Equal(ids(added), []string{"a", "b"}) {
		t.Fatalf("first AddItems = %v, %v", ids(added), err)
	}
	for i, it := range added {
		if it.FeedID != f.ID || it.Seq != uint64(i+1) || !it.Fetched.Equal(t0) {
			t.Errorf("added[%d] = FeedID %d Seq %d Fetched %v", i, it.FeedID, it.Seq, it.Fetched)
		}
	}
	if first[0].Seq != 0 || first[0].FeedID != 0 {
		t.Errorf("AddItems changed its input: %+v", first[0])
	}
	clk.Add(time.Minute)

	tests := []struct {
		name  string
		in    []Item
		added []string
		check func(t *testing.T, a Item)
	}{
		{
			name:  "same again",
			in:    []Item{{ID: "a", Title: "A", Summary: "sa", Published: pub, Updated: pub}, {ID: "b", Title: "B", Published: pub.Add(time.Minute)}},
			added: []string{},
			check: func(t *testing.T, a Item) {
				if a.Reading == nil || a.Reading.Value != 1 {
					t.Errorf("nil reading erased the stored one: %+v", a.Reading)
				}
			},
		},
		{
			name:  "updated in place",
			in:    []Item{{ID: "a", Title: "A2", Summary: "sa2", Content: "c2", Published: pub.Add(time.Hour), Updated: pub.Add(time.Hour), Reading: &Reading{Value: 2}, Link: "https://changed"}, {ID: "c", Title: "C"}},
			added: []string{"c"},
			check: func(t *testing.T, a Item) {
				if a.Title != "A2" || a.Summary != "sa2" || a.Content != "c2" || !a.Updated.Equal(pub.Add(time.Hour)) || a.Reading.Value != 2 {
					t.Errorf("not updated: %+v", a)
				}
				if a.Seq != 1 || !a.Published.Equal(pub) || !a.Fetched.Equal(t0) || a.Link != "" {
					t.Errorf("update changed Seq, Published, Fetched or Link: %+v", a)
				}
			},
		},
		{
			name:  "older version ignored",
			in:    []Item{{ID: "a", Title: "stale", Updated: pub}},
			added: []string{},
			check: func(t *testing.T, a Item) {
				if a.Title != "A2" {
					t.Errorf("stale version written: %q", a.Title)
				}
			},
		},
		{
			name:  "update without updated date keeps the date",
			in:    []Item{{ID: "a", Title: "A3", Summary: "sa2", Content: "c2"}},
			added: []string{},
			check: func(t *testing.T, a Item) {
				if a.Title != "A3" || !a.Updated.Equal(pub.Add(time.Hour)) || a.Reading == nil {
					t.Errorf("got %+v", a)
				}
			},
		},
		{
			name:  "duplicates within one call",
			in:    []Item{{ID: "d", Title: "D1"}, {ID: "e"}, {ID: "d", Title: "D2"}},
			added: []string{"d", "e"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seqBefore, _ := s.LastSeq()
			added, err := s.AddItems(f.ID, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(added); !slices.Equal(got, tt.added) {
				t.Errorf("added %v, want %v", got, tt.added)
			}
			for i, it := range added {
				if it.Seq != seqBefore+uint64(i)+1 {
					t.Errorf("added[%d].Seq = %d, want %d", i, it.Seq, seqBefore+uint64(i)+1)
				}
				stored, err := s.Item(f.ID, it.ID)
				if err != nil || stored.Seq != it.Seq || stored.Title != it.Title {
					t.Errorf("stored %+v (%v), returned %+v", stored, err, it)
				}
			}
			if tt.check != nil {
				a, err := s.Item(f.ID, "a")
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, a)
			}
		})
	}
	if d, _ := s.Item(f.ID, "d"); d.Title != "D2" {
		t.Errorf("later duplicate did not update: %q", d.Title)
	}
	if n, _ := s.CountItems(f.ID); n != 5 {
		t.Errorf("CountItems = %d, want 5", n)
	}
	if _, err := s.Item(f.ID, "zz"); !errors.Is(err, ErrItemNotFound) {
		t.Errorf("Item(zz) = %v, want ErrItemNotFound", err)
	}
}

// Invalid items are refused one by one; the valid ones are written.
func TestAddItemsInvalid(t *testing.T) {
	s := openTest(t)
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	nan, inf := math.NaN(), math.Inf(1)
	bad := []struct {
		name string
		item Item
	}{
		{"no id", Item{Title: "x"}},
		{"id too long", Item{ID: strings.Repeat("i", MaxIDLen+1)}},
		{"id not UTF-8", Item{ID: "\xff\xfe"}},
		{"title too long", Item{ID: "t", Title: strings.Repeat("t", MaxTitleLen+1)}},
		{"too large", Item{ID: "big", Content: strings.Repeat("c", MaxItemSize)}},
		{"NaN value", Item{ID: "nan", Reading: &Reading{Value: nan}}},
		{"infinite latitude", Item{ID: "lat", Reading: &Reading{Value: 1, Lat: &inf}}},
		{"year 10000", Item{ID: "y", Published: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"negative year", Item{ID: "ny", Updated: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			in := []Item{{ID: "ok-before-" + b.name}, b.item, {ID: "ok-after-" + b.name}}
			added, err := s.AddItems(f.ID, in)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			var ie *ItemError
			if !errors.As(err, &ie) || ie.Index != 1 {
				t.Errorf("err = %v, want an ItemError for index 1", err)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("error message is %d bytes", len(err.Error()))
			}
			if got := ids(added); !slices.Equal(got, []string{in[0].ID, in[2].ID}) {
				t.Errorf("added %v", got)
			}
		})
	}

	t.Run("all bad items are listed", func(t *testing.T) {
		_, err := s.AddItems(f.ID, []Item{{}, {ID: "fine"}, {ID: "\xff"}})
		var n int
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var ie *ItemError
			if errors.As(e, &ie) {
				n++
			}
		}
		if n != 2 {
			t.Errorf("error lists %d bad items, want 2: %v", n, err)
		}
	})

	t.Run("an update that would make the item too large", func(t *testing.T) {
		half := strings.Repeat("l", MaxItemSize/2+100)
		if _, err := s.AddItems(f.ID, []Item{{ID: "grow", Link: half, Title: "v1"}}); err != nil {
			t.Fatal(err)
		}
		_, err := s.AddItems(f.ID, []Item{{ID: "fine2"}, {ID: "grow", Title: "v2", Content: half}})
		var ie *ItemError
		if !errors.As(err, &ie) || ie.Index != 1 || !errors.Is(err, ErrInvalid) {
			t.Errorf("err = %v, want an ItemError for index 1", err)
		}
		if it, _ := s.Item(f.ID, "grow"); it.Title != "v1" {
			t.Errorf("refused update was written: %q", it.Title)
		}
		if _, err := s.Item(f.ID, "fine2"); err != nil {
			t.Errorf("valid item of the same call not stored: %v", err)
		}
	})

	t.Run("an item just under the size limit is stored", func(t *testing.T) {
		it := Item{ID: "almost", Content: strings.Repeat("c", MaxItemSize-300)}
		if added, err := s.AddItems(f.ID, []Item{it}); err != nil || len(added) != 1 {
			t.Fatalf("AddItems = %d, %v", len(added), err)
		}
	})
}

// fillFeed adds items i0…i(n-1): arrival order by index, publish times in
// the order given by pubOrder (minutes after t0).
func fillFeed(t testing.TB, s *Store, feedID uint64, minutes []int) []Item {
	t.Helper()
	items := make([]Item, len(minutes))
	for i, m := range minutes {
		items[i] = Item{ID: "i" + string(rune('a'+i)), Published: t0.Add(time.Duration(m) * time.Minute)}
	}
	added, err := s.AddItems(feedID, items)
	if err != nil || len(added) != len(items) {
		t.Fatalf("AddItems = %d, %v", len(added), err)
	}
	return added
}

func TestItemsOrderAndPaging(t *testing.T) {
	s := openTest(t)
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	other := createRemote(t, s, "https://example.org/other", Retention{})
	// Arrival order ia…ie; publish order ib < ia < ie < ic < id, and one
	// item without a publish time (placed at its fetch time, t0).
	fillFeed(t, s, f.ID, []int{-20, -30, 10, 20, 5})
	fillFeed(t, s, other.ID, []int{0, 1}) // interleaves Seq values
	if _, err := s.AddItems(f.ID, []Item{{ID: "undated"}}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		q    ItemQuery
		want []string
	}{
		{"arrival, newest first", ItemQuery{}, []string{"undated", "ie", "id", "ic", "ib", "ia"}},
		{"arrival, limit", ItemQuery{Limit: 2}, []string{"undated", "ie"}},
		{"arrival ascending", ItemQuery{Order: ByArrivalAsc}, []string{"ia", "ib", "ic", "id", "ie", "undated"}},
		{"published", ItemQuery{Order: ByPublished}, []string{"id", "ic", "ie", "undated", "ia", "ib"}},
		{"published, limit", ItemQuery{Order: ByPublished, Limit: 3}, []string{"id", "ic", "ie"}},
		{"published window", ItemQuery{Order: ByPublished, Since: t0.Add(-20 * time.Minute), Until: t0.Add(20 * time.Minute)},
			[]string{"ic", "ie", "undated", "ia"}},
		{"published since", ItemQuery{Order: ByPublished, Since: t0}, []string{"id", "ic", "ie", "undated"}},
		{"published until", ItemQuery{Order: ByPublished, Until: t0}, []string{"ia", "ib"}},
		{"published until after all", ItemQuery{Order: ByPublished, Until: t0.Add(time.Hour), Limit: 1}, []string{"id"}},
		{"published empty window", ItemQuery{Order: ByPublished, Since: t0.Add(time.Hour)}, nil},
		{"arrival window", ItemQuery{Since: t0, Until: t0.Add(20 * time.Minute)}, []string{"undated", "ie", "ic"}},
		{"after seq 2", ItemQuery{AfterSeq: 2}, []string{"ic", "id", "ie", "undated"}},
		{"after seq 2, limit 2", ItemQuery{AfterSeq: 2, Limit: 2}, []string{"ic", "id"}},
		{"after seq 2, ascending", ItemQuery{AfterSeq: 2, Order: ByArrivalAsc, Limit: 1}, []string{"ic"}},
		{"after last seq", ItemQuery{AfterSeq: 8}, nil},
		{"after max seq", ItemQuery{AfterSeq: math.MaxUint64}, nil},
		{"before seq 4", ItemQuery{BeforeSeq: 4}, []string{"ic", "ib", "ia"}},
		{"before seq 4, limit 2", ItemQuery{BeforeSeq: 4, Limit: 2}, []string{"ic", "ib"}},
		{"before another feed's seq", ItemQuery{BeforeSeq: 7}, []string{"ie", "id", "ic", "ib", "ia"}},
		{"before a seq past the last", ItemQuery{BeforeSeq: 100}, []string{"undated", "ie", "id", "ic", "ib", "ia"}},
		{"before the first seq", ItemQuery{BeforeSeq: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Items(f.ID, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("got %v, want %v", ids(got), tt.want)
			}
		})
	}

	t.Run("paging with AfterSeq reads everything once", func(t *testing.T) {
		var seen []string
		var cursor uint64
		for range 10 {
			page, err := s.Items(f.ID, ItemQuery{AfterSeq: cursor, Order: ByArrivalAsc, Limit: 4})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			seen = append(seen, ids(page)...)
			cursor = page[len(page)-1].Seq
		}
		want := []string{"ia", "ib", "ic", "id", "ie", "undated"}
		if !slices.Equal(seen, want) {
			t.Errorf("paged %v, want %v", seen, want)
		}
	})

	t.Run("paging with BeforeSeq reads everything once, newest first", func(t *testing.T) {
		var seen []string
		var cursor uint64
		for range 10 {
			page, err := s.Items(f.ID, ItemQuery{BeforeSeq: cursor, Limit: 4})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			seen = append(seen, ids(page)...)
			if cursor = page[len(page)-1].Seq; cursor == 1 {
				break
			}
		}
		want := []string{"undated", "ie", "id", "ic", "ib", "ia"}
		if !slices.Equal(seen, want) {
			t.Errorf("paged %v, want %v", seen, want)
		}
	})

	bad := []ItemQuery{
		{Order: Order(7)},
		{Order: ByPublished, AfterSeq: 3},
		{Order: ByPublished, BeforeSeq: 3},
		{Order: ByArrivalAsc, BeforeSeq: 3},
		{AfterSeq: 1, BeforeSeq: 3},
		{Since: t0, Until: t0.Add(-time.Second)},
	}
	for _, q := range bad {
		if _, err := s.Items(f.ID, q); !errors.Is(err, ErrInvalid) {
			t.Errorf("Items(%+v) = %v, want ErrInvalid", q, err)
		}
	}
	if last, _ := s.LastSeq(); last != 8 {
		t.Errorf("LastSeq = %d, want 8", last)
	}
}

// Publish times before 1970 and the zero time sort correctly.
func TestItemsPublishedBeforeEpoch(t *testing.T) {
	s := openTest(t)
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	in := []Item{
		{ID: "1969", Published: time.Date(1969, 12, 31, 23, 59, 59, 999, time.UTC)},
		{ID: "1970", Published: time.Unix(0, 0)},
		{ID: "year1", Published: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
		{ID: "1900", Published: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	if _, err := s.AddItems(f.ID, in); err != nil {
		t.Fatal(err)
	}
	got, err := s.Items(f.ID, ItemQuery{Order: ByPublished})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1970", "1969", "1900", "year1"}; !slices.Equal(ids(got), want) {
		t.Errorf("got %v, want %v", ids(got), want)
	}
}

// TestHasItems: one read tells which IDs a feed holds; an unknown feed
// fails with ErrFeedNotFound.
func TestHasItems(t *testing.T) {
	s := openTest(t)
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	if _, err := s.AddItems(f.ID, []Item{{ID: "a", Title: "a"}, {ID: "c", Title: "c"}}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 40000)
	tests := []struct {
		name string
		ids  []string
		want []bool
	}{
		{"mixed", []string{"a", "b", "c"}, []bool{true, false, true}},
		{"none", nil, []bool{}},
		{"empty and oversized IDs", []string{"", long}, []bool{false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.HasItems(f.ID, tc.ids)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("HasItems(%q) = %v, %v; want %v", tc.ids, got, err, tc.want)
			}
		})
	}
	if _, err := s.HasItems(f.ID+1, []string{"a"}); !errors.Is(err, ErrFeedNotFound) {
		t.Fatalf("unknown feed: %v, want ErrFeedNotFound", err)
	}
}
