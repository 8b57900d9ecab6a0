package storage

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
)

// exactFleet is FleetStats computed from every feed record, the
// quantiles exact.
func exactFleet(t *testing.T, st *Store) (FleetStats, []FeedSummary) {
	t.Helper()
	feeds, err := st.Feeds()
	if err != nil {
		t.Fatal(err)
	}
	var (
		fs    FleetStats
		sums  []FeedSummary
		means []float64
	)
	for i := range feeds {
		s := SummaryOf(&feeds[i])
		sums = append(sums, s)
		fs.Feeds++
		if s.Kind == KindRemote {
			fs.Remote++
		}
		if s.Erroring {
			fs.Erroring++
		}
		fs.Polls += s.Polls
		fs.Hits += s.Hits
		if s.HasLatency {
			means = append(means, s.MeanLatencyS)
		}
	}
	if n := len(means); n > 0 {
		slices.Sort(means)
		q := func(p float64) float64 { return means[min(n-1, int(p*float64(n)))] }
		fs.LatencyFeeds = n
		fs.LatencyP50, fs.LatencyP90, fs.LatencyP99, fs.LatencyMax = q(0.5), q(0.9), q(0.99), means[n-1]
	}
	return fs, sums
}

// checkIndex compares the store's summaries, pages and aggregates with a
// full read of its records.
func checkIndex(t *testing.T, st *Store, step string) {
	t.Helper()
	want, wantSums := exactFleet(t, st)
	var got []FeedSummary
	if err := st.EachFeedSummary(func(s *FeedSummary) bool { got = append(got, *s); return true }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantSums) {
		t.Fatalf("%s: summaries\n%+v\nwant\n%+v", step, got, wantSums)
	}
	fs, err := st.FleetStats()
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= latencyRelErr*math.Abs(b)+1e-9 }
	if !near(fs.LatencyP50, want.LatencyP50) || !near(fs.LatencyP90, want.LatencyP90) ||
		!near(fs.LatencyP99, want.LatencyP99) || !near(fs.LatencyMax, want.LatencyMax) {
		t.Fatalf("%s: latency quantiles %+v, want %+v within %.2g", step, fs, want, latencyRelErr)
	}
	fs.LatencyP50, fs.LatencyP90, fs.LatencyP99, fs.LatencyMax = want.LatencyP50, want.LatencyP90, want.LatencyP99, want.LatencyMax
	if fs != want {
		t.Fatalf("%s: fleet %+v, want %+v", step, fs, want)
	}
	// Pages of 3 by cursor give every ID once, in order.
	var ids []uint64
	for after := uint64(0); ; {
		page, more, err := st.FeedIDsAfter(after, 3)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, page...)
		if !more {
			break
		}
		after = page[len(page)-1]
	}
	var wantIDs []uint64
	for _, s := range wantSums {
		wantIDs = append(wantIDs, s.ID)
	}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("%s: pages give %v, want %v", step, ids, wantIDs)
	}
	// Read backward from any bound, the IDs are the last ones below it,
	// and paging back from past the end gives every ID once.
	for _, limit := range []int{0, 1, 3, 1000} {
		for _, before := range []uint64{0, 1, 2, 7, 40, math.MaxUint64} {
			got, more, err := st.FeedIDsBefore(before, limit)
			if err != nil {
				t.Fatal(err)
			}
			below := wantIDs[:func() int { i, _ := slices.BinarySearch(wantIDs, before); return i }()]
			want := below[max(0, len(below)-limit):]
			if !slices.Equal(got, want) || more != (len(below) > limit) {
				t.Fatalf("%s: FeedIDsBefore(%d, %d) = %v, %v; want %v, %v", step, before, limit, got, more, want, len(below) > limit)
			}
		}
	}
	var back []uint64
	for before := uint64(math.MaxUint64); ; {
		page, more, err := st.FeedIDsBefore(before, 3)
		if err != nil {
			t.Fatal(err)
		}
		back = append(slices.Clone(page), back...)
		if !more {
			break
		}
		before = page[0]
	}
	if !slices.Equal(back, wantIDs) {
		t.Fatalf("%s: pages back give %v, want %v", step, back, wantIDs)
	}
	// Filters keep what SummaryOf's fields say, after any cursor.
	odd := func(id uint64) bool { return id%2 == 1 }
	for _, f := range []SummaryFilter{
		{}, {Text: "t1"}, {Text: "xxxxx"}, {Text: "secret"}, {Policy: "fixed-15m"}, {Policy: "fixed-900000ms"},
		{Policy: "auto"}, {Policy: "none"},
		{Erroring: true}, {Kind: KindPipe}, {Kind: KindRemote, Keep: odd}, {Erroring: true, Text: "s", Keep: odd},
	} {
		var want []uint64
		for _, s := range wantSums {
			if strings.Contains(s.Text, f.Text) && (f.Policy == "" || schedule.PolicyKey(s.Policy) == schedule.PolicyKey(f.Policy)) &&
				(f.Kind == "" || s.Kind == f.Kind) && (!f.Erroring || s.Erroring) && (f.Keep == nil || f.Keep(s.ID)) {
				want = append(want, s.ID)
			}
		}
		for _, after := range []uint64{0, 5, 40} {
			got, total, err := st.MatchFeeds(f, after, 4)
			if err != nil {
				t.Fatal(err)
			}
			var page []uint64
			for _, id := range want {
				if id > after && len(page) < 4 {
					page = append(page, id)
				}
			}
			if total != len(want) || !slices.Equal(got, page) {
				t.Fatalf("%s: MatchFeeds(%+v, %d): %v of %d, want %v of %d", step, f, after, got, total, page, len(want))
			}
		}
		for _, stop := range []int{1, 2, len(want) + 1} {
			var got []uint64
			err := st.EachMatchingFeed(f, func(id uint64) bool { got = append(got, id); return len(got) < stop })
			if err != nil {
				t.Fatal(err)
			}
			if w := want[:min(stop, len(want))]; !slices.Equal(got, w) {
				t.Fatalf("%s: EachMatchingFeed(%+v) stopping at %d: %v, want %v", step, f, stop, got, w)
			}
		}
	}
}

func openSummaryStore(t *testing.T, path string) *Store {
	t.Helper()
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The summaries and aggregates follow every change of the feed records:
// after each step of a random mix of creations, updates, polls (through
// the prepared path and without it), pipes and deletions they equal
// those of a full read, and again after the store is reopened.
func TestFeedSummariesFollowChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st := openSummaryStore(t, path)
	defer func() { st.Close() }()
	checkIndex(t, st, "empty")
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []uint64
	pipes := map[uint64]uint64{} // output feed → pipe
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for step := range 500 {
		switch op := rng.IntN(14); {
		case op < 4 || len(ids) == 0:
			f := Feed{Kind: KindRemote, URL: fmt.Sprintf("https://S%d.example/f.rss", step), Policy: "auto", Title: fmt.Sprint("T", step)}
			if step%5 == 0 {
				f.URL = fmt.Sprintf("https://user:secret@s%d.example/f.rss", step)
			}
			if err := st.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, f.ID)
		case op < 6:
			id := ids[rng.IntN(len(ids))]
			if _, err := st.UpdateFeed(id, func(f *Feed) error {
				f.Polls++
				f.Hits += int64(rng.IntN(2))
				f.LatencySumS += float64(rng.IntN(100)) - 10
				f.LatencyCount++
				if rng.IntN(3) == 0 {
					f.LastError, f.ErrorCount = "HTTP 500", f.ErrorCount+1
				} else {
					f.LastError, f.ErrorCount = "", 0
				}
				if rng.IntN(4) == 0 && f.Kind == KindRemote {
					f.Title = fmt.Sprint("Renamed ", step)
					f.URL = fmt.Sprintf("https://moved%d.example/f.rss", step)
				}
				if rng.IntN(5) == 0 {
					// Spellings of one policy, and of the default.
					f.Policy = []string{"fixed-15m", "fixed-900s", "", "auto"}[rng.IntN(4)]
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		case op < 9: // a poll, through the prepared path when the memo has the feed
			id := ids[rng.IntN(len(ids))]
			if rng.IntN(2) == 0 {
				if _, err := st.Feed(id); err != nil {
					t.Fatal(err)
				}
			}
			at = at.Add(time.Minute)
			if _, err := st.RecordPoll(id, Observation{At: at, Hit: true}, func(f *Feed) error {
				f.Polls++
				f.Hits++
				f.LatencySumS += 2
				f.LatencyCount++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		case op < 10:
			p, out := createPipe(t, st, fmt.Sprint("p", step), Retention{})
			pipes[out.ID] = p.ID
			ids = append(ids, out.ID)
		default:
			k := rng.IntN(len(ids))
			if p, ok := pipes[ids[k]]; ok {
				if err := st.DeletePipe(p); err != nil {
					t.Fatal(err)
				}
			} else if err := st.DeleteFeed(ids[k]); err != nil {
				t.Fatal(err)
			}
			ids = append(ids[:k], ids[k+1:]...)
		}
		if step%7 == 0 || step > 490 {
			checkIndex(t, st, fmt.Sprint("step ", step))
		}
		if step == 250 { // walks in chunks of a few feeds from here
			st.summaries.ready.Load().chunk = 3
		}
	}
	for _, id := range []uint64{ids[0], ids[len(ids)-1]} {
		if _, ok := pipes[id]; ok {
			continue
		}
		if err := st.DeleteFeed(id); err != nil {
			t.Fatal(err)
		}
	}
	checkIndex(t, st, "ends deleted")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openSummaryStore(t, path)
	checkIndex(t, st, "reopened")
}

// Concurrent writers (creations, polls, updates, deletions) while the
// index is built and read: once they are done it equals a full read.
func TestFeedSummariesConcurrent(t *testing.T) {
	st := openSummaryStore(t, filepath.Join(t.TempDir(), "c.db"))
	defer st.Close()
	for i := range 200 {
		f := Feed{Kind: KindRemote, URL: fmt.Sprintf("https://s%d.example/f.rss", i), Policy: "auto"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			for i := range 150 {
				id := uint64(1 + rng.IntN(200))
				var err error
				switch rng.IntN(8) {
				case 0:
					f := Feed{Kind: KindRemote, URL: fmt.Sprintf("https://w%d-%d.example/f.rss", w, i), Policy: "auto"}
					err = st.CreateFeed(&f)
				case 1:
					err = st.DeleteFeed(id)
				case 2:
					_, err = st.UpdateFeed(id, func(f *Feed) error { f.Title = fmt.Sprint("w", w, " ", i); return nil })
				default:
					st.Feed(id) // the prepared path, when it is still there
					at = at.Add(time.Second)
					_, err = st.RecordPoll(id, Observation{At: at}, func(f *Feed) error {
						f.Polls++
						f.LatencySumS += float64(w)
						f.LatencyCount++
						return nil
					})
				}
				if err != nil && !isNotFound(err) {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 20 {
		if _, err := st.FleetStats(); err != nil {
			t.Fatal(err)
		}
		if err := st.EachFeedSummary(func(*FeedSummary) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	checkIndex(t, st, "after concurrent writes")
}

func isNotFound(err error) bool { return err != nil && errors.Is(err, ErrFeedNotFound) }

// A removal whose commit handler runs before that of an earlier write of
// the same feed is not undone by it, nor is a later write by an earlier.
func TestSummaryIndexOrdersChanges(t *testing.T) {
	x := &summaryIndex{policyID: map[string]uint32{}, lat: newLatencyHist()}
	put := func(tx, id uint64, polls int64) {
		x.apply(summaryChange{tx: tx, id: id, s: FeedSummary{ID: id, Kind: KindRemote, Policy: "auto", Polls: polls}})
	}
	put(1, 7, 1)
	put(3, 7, 3)
	put(2, 7, 2) // late
	if x.polls != 3 || x.feeds != 1 {
		t.Fatalf("after a late put: polls %d, feeds %d", x.polls, x.feeds)
	}
	x.apply(summaryChange{tx: 5, id: 7, remove: true})
	put(4, 7, 4) // late
	if x.feeds != 0 || x.polls != 0 {
		t.Fatalf("a late put brought back a removed feed: feeds %d, polls %d", x.feeds, x.polls)
	}
	x.apply(summaryChange{tx: 9, id: 8, remove: true}) // before its creation's handler
	put(8, 8, 1)
	if x.feeds != 0 {
		t.Fatal("a late creation brought back a removed feed")
	}
}

// The histogram's quantiles are within latencyRelErr of the exact ones,
// exact when a bucket's values are equal, and follow removals.
func TestLatencyHistQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name string
		gen  func() float64
	}{
		{"lognormal", func() float64 { return math.Exp(rng.NormFloat64()*2 + 1) }},
		{"integers", func() float64 { return float64(1 + rng.IntN(30)) }},
		{"with negatives and zero", func() float64 { return float64(rng.IntN(200)-20) / 4 }},
		{"huge", func() float64 { return math.Ldexp(1+rng.Float64(), 30+rng.IntN(8)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLatencyHist()
			var vals []float64
			for range 5000 {
				v := tc.gen()
				vals = append(vals, v)
				h.add(v, 1)
			}
			for _, v := range vals[:2000] { // removed
				h.add(v, -1)
			}
			vals = slices.Clone(vals[2000:])
			slices.Sort(vals)
			n := len(vals)
			ps := []float64{0, 0.5, 0.9, 0.99}
			qs, m := h.quantiles(ps)
			for i, p := range ps {
				want := vals[min(n-1, int(p*float64(n)))]
				if math.Abs(qs[i]-want) > latencyRelErr*math.Abs(want)+1e-9 {
					t.Errorf("q(%v) = %v, want %v", p, qs[i], want)
				}
				if tc.name == "integers" && qs[i] != want {
					t.Errorf("q(%v) = %v, want exactly %v", p, qs[i], want)
				}
			}
			if math.Abs(m-vals[n-1]) > latencyRelErr*math.Abs(vals[n-1]) {
				t.Errorf("max %v, want %v", m, vals[n-1])
			}
		})
	}
}

// The search text holds the title, slug and URL in lower case, the URL
// without its credentials.
func TestSearchText(t *testing.T) {
	for _, tc := range []struct {
		f    Feed
		want string
	}{
		{Feed{Kind: KindRemote, Title: "Station B", URL: "https://x.example/F.rss"}, "station b\n\nhttps://x.example/f.rss"},
		{Feed{Kind: KindRemote, URL: "https://u:hunter2@x.example/f"}, "\n\nhttps://x.example/f"},
		{Feed{Kind: KindRemote, URL: "https://apikey@x.example/f"}, "\n\nhttps://x.example/f"},
		{Feed{Kind: KindRemote, URL: "user:secret@x.example/f"}, "\n\n"},
		{Feed{Kind: KindSensor, Slug: "lab-1"}, "\nlab-1\n"},
	} {
		got := searchText(&tc.f)
		if got != tc.want {
			t.Errorf("searchText(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// A store of several batches of records builds its index in order, on
// several cores, after it is reopened.
func TestFeedSummariesBuiltInBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	st := openSummaryStore(t, path)
	n := 2*decodeBatch + 77
	for i := range n {
		f := Feed{Kind: KindRemote, URL: fmt.Sprintf("https://s%d.example/f.rss", i), Policy: "auto",
			Polls: int64(i), LatencySumS: float64(i % 13), LatencyCount: 1}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openSummaryStore(t, path)
	defer st.Close()
	checkIndex(t, st, "reopened")
}
