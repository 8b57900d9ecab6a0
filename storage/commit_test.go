package storage

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// queued waits until n writes wait behind the committing one.
func queued(s *Store, n int) {
	for {
		s.commit.mu.Lock()
		k := len(s.commit.queue)
		s.commit.mu.Unlock()
		if k >= n {
			return
		}
		runtime.Gosched()
	}
}

// TestGroupCommit holds one write in its transaction while others queue,
// then checks that the queued writes share one transaction, that a failing
// write is rolled back alone, that a panic reaches its own caller, and
// that k failing writes among n cost O(n) calls, not O(k·n): each
// function runs at most three times, and the rest still commit together.
func TestGroupCommit(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		fails  []int // the writes that fail
		panics bool
	}{
		{"all commit together", 8, nil, false},
		{"one fails alone", 8, []int{3}, false},
		{"one panics alone", 8, []int{5}, true},
		{"many fail alone", 64, []int{0, 7, 8, 20, 33, 50, 62, 63}, false},
		{"many panic alone", 64, []int{1, 2, 30, 31, 60}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t)
			f := createRemote(t, s, "https://example.org/feed", Retention{})
			release, entered := make(chan struct{}), make(chan struct{})
			first := make(chan error, 1)
			go func() {
				first <- s.update(func(tx *bolt.Tx) error {
					close(entered)
					<-release
					return nil
				})
			}()
			<-entered // the first write leads and holds its transaction
			boom := errors.New("boom")
			var mu sync.Mutex
			txOf := map[int][]int{} // write → transactions its function ran in
			errs := make([]error, tc.n)
			panics := make([]any, tc.n)
			var wg sync.WaitGroup
			for i := range tc.n {
				wg.Go(func() {
					defer func() { panics[i] = recover() }()
					errs[i] = s.update(func(tx *bolt.Tx) error {
						mu.Lock()
						txOf[i] = append(txOf[i], tx.ID())
						mu.Unlock()
						if err := s.putObservation(tx, f.ID, []byte(fmt.Sprintf(`{"status":%d}`, i))); err != nil {
							return err
						}
						if slices.Contains(tc.fails, i) {
							if tc.panics {
								panic("kaboom")
							}
							return boom
						}
						return nil
					})
				})
			}
			queued(s, tc.n)
			close(release)
			wg.Wait()
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			var committed []int
			for i := range tc.n {
				failing := slices.Contains(tc.fails, i)
				if n := len(txOf[i]); n > 3 {
					t.Errorf("write %d ran %d times, want at most 3", i, n)
				}
				switch {
				case failing && tc.panics:
					if panics[i] != "kaboom" {
						t.Errorf("write %d: panic %v, want kaboom", i, panics[i])
					}
				case failing:
					if !errors.Is(errs[i], boom) {
						t.Errorf("write %d: %v, want boom", i, errs[i])
					}
				default:
					if errs[i] != nil || panics[i] != nil {
						t.Errorf("write %d: %v %v", i, errs[i], panics[i])
					}
					committed = append(committed, i)
				}
			}
			// The writes that committed did so in one transaction.
			last := map[int]bool{}
			for _, i := range committed {
				last[txOf[i][len(txOf[i])-1]] = true
			}
			if len(last) != 1 {
				t.Errorf("committed writes ran in transactions %v, want one", txOf)
			}
			obs, err := s.Observations(f.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, o := range obs {
				got = append(got, o.Status)
			}
			slices.Sort(got)
			if !slices.Equal(got, committed) {
				t.Errorf("stored observations of writes %v, want %v", got, committed)
			}
		})
	}
}

func TestRecordFetch(t *testing.T) {
	s := openTest(t)
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	items := []Item{{ID: "a", Title: "A", Published: t0}, {ID: "b", Title: "B", Published: t0}}
	fn := func(x *Feed, o *Observation, added []Item) error {
		x.Polls++
		x.Items += int64(len(added))
		o.Hit = len(added) > 0
		return nil
	}
	rec, err := s.RecordFetch(f.ID, items, Observation{At: t0, Status: 200}, fn)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(rec.Added), []string{"a", "b"}) || rec.Feed.Polls != 1 || rec.Feed.Items != 2 || !rec.Observation.Hit || rec.ItemErr != nil {
		t.Fatalf("first fetch: %+v", rec)
	}
	// The same items again: nothing added, the observation says so.
	rec, err = s.RecordFetch(f.ID, items, Observation{At: t0.Add(1), Status: 200}, fn)
	if err != nil || len(rec.Added) != 0 || rec.Observation.Hit || rec.Feed.Polls != 2 {
		t.Fatalf("second fetch: %+v, %v", rec, err)
	}
	// A failing update stores neither the items nor the observation.
	boom := errors.New("boom")
	_, err = s.RecordFetch(f.ID, []Item{{ID: "c", Title: "C"}}, Observation{At: t0.Add(2)}, func(*Feed, *Observation, []Item) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("failing update: %v", err)
	}
	// An observation that cannot be stored undoes the items too.
	_, err = s.RecordFetch(f.ID, []Item{{ID: "c", Title: "C"}}, Observation{At: t0.Add(3)}, func(_ *Feed, o *Observation, _ []Item) error {
		o.Err = string(make([]byte, MaxObservationSize+1))
		return nil
	})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("oversized observation: %v", err)
	}
	if _, err := s.Item(f.ID, "c"); !errors.Is(err, ErrItemNotFound) {
		t.Fatalf("item of a failed record: %v", err)
	}
	if obs, _ := s.Observations(f.ID, 0); len(obs) != 2 {
		t.Fatalf("%d observations, want 2", len(obs))
	}
	// An invalid item is refused alone.
	rec, err = s.RecordFetch(f.ID, []Item{{ID: ""}, {ID: "d", Title: "D"}}, Observation{At: t0.Add(4)}, fn)
	var ie *ItemError
	if err != nil || !slices.Equal(ids(rec.Added), []string{"d"}) || !errors.As(rec.ItemErr, &ie) {
		t.Fatalf("invalid item: %+v, %v", rec, err)
	}
	if _, err := s.RecordFetch(999, nil, Observation{At: t0}, fn); !errors.Is(err, ErrFeedNotFound) {
		t.Fatalf("unknown feed: %v", err)
	}
	if n, err := s.Size(); err != nil || n <= 0 {
		t.Fatalf("Size = %d, %v", n, err)
	}
}

// TestCommitLinger: a lone writer never waits, however long the linger;
// after a group of several writes, the next leader waits for the writes
// still arriving, so that they commit in one group.
func TestCommitLinger(t *testing.T) {
	t.Run("lone writers never wait", func(t *testing.T) {
		s := openTest(t, Options{CommitLinger: time.Hour})
		for range 50 {
			if err := s.update(func(*bolt.Tx) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if st := s.CommitStats(); st.Groups != 50 {
			t.Fatalf("50 writes one after the other in %d groups", st.Groups)
		}
	})
	t.Run("arriving writes join the group", func(t *testing.T) {
		// The linger is long (a step of 1 s): writes that arrive within
		// it, one every few milliseconds, all join the lingering group.
		s := openTest(t, Options{CommitLinger: 8 * time.Second})
		s.commit.last.Store(2) // as after a group of two
		const n = 5
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 20 * time.Millisecond)
				if err := s.update(func(*bolt.Tx) error { return nil }); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if st := s.CommitStats(); st.Groups != 1 || st.Writes != n {
			t.Fatalf("%d writes arriving 20 ms apart in %d groups, want one", st.Writes, st.Groups)
		}
	})
}
