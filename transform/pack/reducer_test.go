package pack

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// fakeClock is a settable clock for the store and the Reducer.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// openStore opens a store in a fresh temporary directory with a Reducer
// on clock; cleanup checks and closes it.
func openStore(t *testing.T, clock *fakeClock) *storage.Store {
	t.Helper()
	s, err := storage.Open(filepath.Join(t.TempDir(), "slogfeed.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	s.SetReducer(NewReducer().WithClock(clock.Now))
	return s
}

// readings makes n readings numbered from first, one a minute, with
// integer values so that sums are exact.
func readings(first, n int) []Item {
	out := make([]Item, n)
	for i := range out {
		k := first + i
		out[i] = rd(fmt.Sprintf("r%03d", k), "lab", float64((k*7)%23-5), k)
	}
	return out
}

// feedState splits a feed's items into readings and digests by
// digester.
func feedState(t *testing.T, s *storage.Store, feedID uint64) (plain []Item, digests map[string]Item) {
	t.Helper()
	items, err := s.Items(feedID, storage.ItemQuery{})
	if err != nil {
		t.Fatal(err)
	}
	digests = map[string]Item{}
	for _, it := range items {
		if it.Digest == nil {
			plain = append(plain, it)
			continue
		}
		digests[it.Categories[1]] = it
	}
	return plain, digests
}

func sumValues(items []Item) float64 {
	s := 0.0
	for _, it := range items {
		s += it.Reading.Value
	}
	return s
}

func TestReducerWithStore(t *testing.T) {
	clock := &fakeClock{t: t0.Add(24 * time.Hour)}
	s := openStore(t, clock)
	const capacity = 10
	policy := `{"levels":[
		{"above":1,"filters":[{"op":"EVERY","config":{"n":2}}],"digest":["MEAN"]},
		{"above":3,"digest":["MEAN","MIN","MAX"]}]}`
	feed := storage.Feed{Kind: storage.KindSensor, Slug: "lab", Policy: "auto",
		Retention: storage.Retention{MaxItems: capacity}, Reduce: json.RawMessage(policy)}
	if err := s.CreateFeed(&feed); err != nil {
		t.Fatal(err)
	}
	var added []Item
	add := func(items []Item) {
		t.Helper()
		if _, err := s.AddItems(feed.ID, items); err != nil {
			t.Fatalf("AddItems: %v", err)
		}
		added = append(added, items...)
	}
	// check verifies that the feed's readings and its MEAN digest
	// account for every reading added, exactly.
	check := func(round string) (plain []Item, digests map[string]Item) {
		t.Helper()
		plain, digests = feedState(t, s, feed.ID)
		mean, ok := digests["digest:MEAN"]
		if !ok {
			t.Fatalf("%s: no MEAN digest among %v", round, digests)
		}
		d := mean.Digest
		if int(d.Count)+len(plain) != len(added) {
			t.Errorf("%s: digest count %d + %d readings kept, want %d", round, d.Count, len(plain), len(added))
		}
		if want := sumValues(added) - sumValues(plain); d.Sum != want {
			t.Errorf("%s: digest sum %v, want %v", round, d.Sum, want)
		}
		if mean.Reading.Value != d.Sum/float64(d.Count) {
			t.Errorf("%s: MEAN value %v, sum %v count %d", round, mean.Reading.Value, d.Sum, d.Count)
		}
		return plain, digests
	}

	// Round 1: 50 readings, 40 over capacity, fill 5: the top level
	// digests all 40 into MEAN, MIN and MAX.
	add(readings(0, 50))
	plain, d1 := check("round 1")
	if len(plain) != capacity || len(d1) != 3 {
		t.Fatalf("round 1: %d readings and %d digests, want %d and 3", len(plain), len(d1), capacity)
	}
	if n, _ := s.CountItems(feed.ID); n > capacity+len(d1) {
		t.Errorf("round 1: feed holds %d items, more than capacity + digests", n)
	}
	over := readings(0, 40)
	wantMin, wantMax := over[0].Reading.Value, over[0].Reading.Value
	for _, it := range over {
		wantMin, wantMax = min(wantMin, it.Reading.Value), max(wantMax, it.Reading.Value)
	}
	if d1["digest:MIN"].Reading.Value != wantMin || d1["digest:MAX"].Reading.Value != wantMax || d1["digest:MIN"].Digest.Count != 40 {
		t.Errorf("round 1: MIN %+v MAX %+v, want %v and %v", d1["digest:MIN"].Digest, d1["digest:MAX"].Digest, wantMin, wantMax)
	}
	if d := d1["digest:MEAN"].Digest; !d.From.Equal(over[0].Published) || !d.To.Equal(over[39].Published) {
		t.Errorf("round 1: span %v–%v", d.From, d.To)
	}

	// Round 2: 20 more readings; the digests are over capacity too and
	// merge into the new ones, which keep their ids.
	add(readings(50, 20))
	plain, d2 := check("round 2")
	if len(plain) != capacity || len(d2) != 3 {
		t.Fatalf("round 2: %d readings and %d digests", len(plain), len(d2))
	}
	for name, d := range d1 {
		if d2[name].ID != d.ID {
			t.Errorf("round 2: %s digest id %s, was %s", name, d2[name].ID, d.ID)
		}
		if d2[name].Digest.Count != 60 {
			t.Errorf("round 2: %s digest counts %d, want 60", name, d2[name].Digest.Count)
		}
	}

	// Round 3: 6 more, fill (10+9)/10: the first level keeps every other
	// reading over capacity; MEAN merges the rest, MIN and MAX stay.
	add(readings(70, 6))
	plain, d3 := check("round 3")
	if len(plain) != capacity+3 || len(d3) != 3 {
		t.Fatalf("round 3: %d readings and %d digests, want %d and 3", len(plain), len(d3), capacity+3)
	}
	if d3["digest:MEAN"].ID != d1["digest:MEAN"].ID || d3["digest:MEAN"].Digest.Count != 63 {
		t.Errorf("round 3: MEAN %s %+v", d3["digest:MEAN"].ID, d3["digest:MEAN"].Digest)
	}
	if d3["digest:MAX"].Seq != d2["digest:MAX"].Seq || d3["digest:MAX"].Digest.Count != 60 {
		t.Errorf("round 3: MAX digest changed: %+v", d3["digest:MAX"])
	}

	// A second reducer (a restart) reads the same policy to the same ids.
	s.SetReducer(NewReducer().WithClock(clock.Now))
	add(readings(76, 30))
	_, d4 := check("round 4")
	if d4["digest:MEAN"].ID != d1["digest:MEAN"].ID {
		t.Errorf("round 4: MEAN id %s", d4["digest:MEAN"].ID)
	}
}

func TestReducerWithoutPolicyOrWithBadPolicy(t *testing.T) {
	clock := &fakeClock{t: t0.Add(24 * time.Hour)}
	s := openStore(t, clock)
	t.Run("no policy: plain deletion", func(t *testing.T) {
		feed := storage.Feed{Kind: storage.KindSensor, Slug: "plain", Policy: "auto", Retention: storage.Retention{MaxItems: 5}}
		if err := s.CreateFeed(&feed); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddItems(feed.ID, readings(0, 20)); err != nil {
			t.Fatal(err)
		}
		plain, digests := feedState(t, s, feed.ID)
		if len(plain) != 5 || len(digests) != 0 {
			t.Errorf("%d readings and %d digests, want 5 and 0", len(plain), len(digests))
		}
	})
	t.Run("level not reached: plain deletion", func(t *testing.T) {
		feed := storage.Feed{Kind: storage.KindSensor, Slug: "high", Policy: "auto", Retention: storage.Retention{MaxItems: 10},
			Reduce: json.RawMessage(`{"levels":[{"above":2,"digest":["COUNT"]}]}`)}
		if err := s.CreateFeed(&feed); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddItems(feed.ID, readings(0, 15)); err != nil {
			t.Fatal(err)
		}
		plain, digests := feedState(t, s, feed.ID)
		if len(plain) != 10 || len(digests) != 0 {
			t.Errorf("%d readings and %d digests, want 10 and 0", len(plain), len(digests))
		}
	})
	t.Run("bad policy: nothing removed, error reported", func(t *testing.T) {
		feed := storage.Feed{Kind: storage.KindSensor, Slug: "bad", Policy: "auto", Retention: storage.Retention{MaxItems: 5},
			Reduce: json.RawMessage(`{"levels":[{"above":1,"digest":["MEDIAN"]}]}`)}
		if err := s.CreateFeed(&feed); err != nil {
			t.Fatal(err)
		}
		_, err := s.AddItems(feed.ID, readings(0, 8))
		if err == nil {
			t.Fatal("AddItems with a bad policy: no error")
		}
		if n, _ := s.CountItems(feed.ID); n != 8 {
			t.Errorf("feed holds %d items, want all 8", n)
		}
	})
}

func TestReducerCacheIsBounded(t *testing.T) {
	r := NewReducer()
	for i := range maxCachedPolicies + 10 {
		feed := storage.Feed{ID: 1, Retention: storage.Retention{MaxItems: 1},
			Reduce: json.RawMessage(fmt.Sprintf(`{"levels":[{"above":%d}]}`, i+1))}
		if _, _, err := r.Reduce(feed, seqs(readings(0, 3))); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.cache) > maxCachedPolicies {
		t.Errorf("cache holds %d policies", len(r.cache))
	}
}

func TestReducerConcurrent(t *testing.T) {
	r := NewReducer().WithClock(func() time.Time { return t0 })
	feed := storage.Feed{ID: 3, Retention: storage.Retention{MaxItems: 5},
		Reduce: json.RawMessage(`{"levels":[{"above":1,"filters":[{"op":"DELTA","config":{"delta":10}}],"digest":["MEAN"]}]}`)}
	want, wantD, err := r.Reduce(feed, seqs(readings(0, 40)))
	if err != nil || len(wantD) != 1 || len(want) == 0 || len(want) == 40 {
		t.Fatalf("kept %d, digests %v, %v", len(want), wantD, err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			keep, d, err := r.Reduce(feed, seqs(readings(0, 40)))
			if err != nil || len(keep) != len(want) || len(d) != 1 || d[0].Digest.Count != wantD[0].Digest.Count {
				errs <- fmt.Sprintf("kept %d digests %v, %v", len(keep), d, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
