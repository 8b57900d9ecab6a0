package storage

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
)

// The summaries follow every change of the feed records: after each step
// of a random mix of creations, updates and deletions they equal the
// summaries of a full read.
func TestFeedSummariesFollowChanges(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check := func(step string) {
		t.Helper()
		feeds, err := st.Feeds()
		if err != nil {
			t.Fatal(err)
		}
		var want, got []FeedSummary
		for i := range feeds {
			want = append(want, SummaryOf(&feeds[i]))
		}
		if err := st.EachFeedSummary(func(s *FeedSummary) bool { got = append(got, *s); return true }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: summaries\n%+v\nwant\n%+v", step, got, want)
		}
	}
	check("empty")
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []uint64
	for step := range 400 {
		switch op := rng.IntN(10); {
		case op < 4 || len(ids) == 0:
			f := Feed{Kind: KindRemote, URL: fmt.Sprintf("https://s%d.example/f.rss", step), Policy: "auto", Title: fmt.Sprint("t", step)}
			if err := st.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, f.ID)
		case op < 8:
			id := ids[rng.IntN(len(ids))]
			if _, err := st.UpdateFeed(id, func(f *Feed) error {
				f.Polls++
				f.Hits += int64(rng.IntN(2))
				f.LatencySumS += 1.5
				f.LatencyCount++
				if rng.IntN(3) == 0 {
					f.LastError, f.ErrorCount = "HTTP 500", f.ErrorCount+1
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		default:
			k := rng.IntN(len(ids))
			if err := st.DeleteFeed(ids[k]); err != nil {
				t.Fatal(err)
			}
			ids = append(ids[:k], ids[k+1:]...)
		}
		if step%7 == 0 || step > 390 {
			check(fmt.Sprint("step ", step))
		}
	}
	// The first and the last feeds go.
	for _, id := range []uint64{ids[0], ids[len(ids)-1]} {
		if err := st.DeleteFeed(id); err != nil {
			t.Fatal(err)
		}
	}
	check("ends deleted")
}
