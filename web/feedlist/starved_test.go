package feedlist

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// plans are planned fetches set by a test.
type plans map[uint64]time.Time

func (p plans) NextFetch(id uint64) (time.Time, bool) {
	t, ok := p[id]
	return t, ok
}

// overduePlans also lists its overdue feeds, in the reverse of ID order
// (Overdue promises no order).
type overduePlans struct {
	plans
	asked *int
}

func (p overduePlans) Overdue(before time.Time) []uint64 {
	*p.asked++
	var ids []uint64
	for id, t := range p.plans {
		if t.Before(before) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids
}

// TestStarved counts and lists the starved feeds of a store with a
// planner that lists its overdue feeds and with one that does not: the
// same feeds, the first counted at every call, the second by a walk that
// serves StarvedEvery.
func TestStarved(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := plans{}
	for i := 1; i <= 40; i++ {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://m%d.example/f.rss", i), Title: fmt.Sprintf("Mote %d", i), Policy: "auto"}
		if i%4 == 0 {
			f.Policy = "fixed-15m"
		}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		p[f.ID] = now.Add(time.Second) // planned, not due
		if i%3 == 0 {
			p[f.ID] = now.Add(-StarvedLag - time.Second) // starved
		}
		if i%5 == 0 {
			p[f.ID] = now.Add(-StarvedLag) // due for a minute: not yet starved
		}
	}
	starved := func(keep func(i int) bool) []uint64 {
		var ids []uint64
		for i := 1; i <= 40; i++ {
			if i%3 == 0 && i%5 != 0 && keep(i) {
				ids = append(ids, uint64(i))
			}
		}
		return ids
	}
	asked := 0
	for _, tc := range []struct {
		name      string
		planner   Planner
		recounted bool // the count follows a change at once
	}{
		{"walk", p, false},
		{"overdue", overduePlans{p, &asked}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			every := func(int) bool { return true }
			for _, lt := range []struct {
				name string
				ff   Filter
				keep func(i int) bool // which starved feeds the other filters keep
			}{
				{"first page", Filter{Limit: 4, Status: Starved}, every},
				{"a later page", Filter{Limit: 4, After: 20, Status: Starved}, every},
				{"last page", Filter{Limit: 100, After: 30, Status: Starved}, every},
				{"and a policy", Filter{Limit: 2, Status: Starved, Policy: "fixed-15m"}, func(i int) bool { return i%4 == 0 }},
				{"and text", Filter{Limit: 100, Status: Starved, Text: "mote 3"}, func(i int) bool { return i == 3 || i/10 == 3 }},
			} {
				match := starved(lt.keep)
				rest := match[:0:0]
				for _, id := range match {
					if id > lt.ff.After {
						rest = append(rest, id)
					}
				}
				want, more := rest[:min(len(rest), lt.ff.Limit)], len(rest) > lt.ff.Limit
				pg, err := List(st, lt.ff, tc.planner, now)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(pg.IDs, want) || pg.Total != len(match) || (pg.Cursor != "") != more {
					t.Errorf("%s: page %v of %d (cursor %q), want %v of %d", lt.name, pg.IDs, pg.Total, pg.Cursor, want, len(match))
				}
			}
			var c Counter
			count := func() int {
				t.Helper()
				s, err := c.Fleet(st, tc.planner, now)
				if err != nil {
					t.Fatal(err)
				}
				return s.Starved
			}
			n := len(starved(func(int) bool { return true }))
			if got := count(); got != n {
				t.Fatalf("starved %d, want %d", got, n)
			}
			p[1] = now.Add(-time.Hour)
			defer func() { p[1] = now.Add(time.Second) }()
			want := n
			if tc.recounted {
				want = n + 1
			}
			if got := count(); got != want {
				t.Fatalf("after feed 1 fell behind: starved %d, want %d", got, want)
			}
		})
	}
	if asked == 0 {
		t.Fatal("the overdue planner was never asked")
	}
}
