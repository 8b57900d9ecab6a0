package storage

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	bolt "go.etcd.io/bbolt"
)

// countLearner keeps, as a feed's policy, one byte per observation it
// learned from (errors are not learned), and predicts a minute after the
// newest; feeds of policy "none" keep no state.
func countLearner(f *Feed, prev *PolicyState, o *Observation) (PolicyState, bool) {
	if f.Policy == "none" {
		return PolicyState{}, false
	}
	if o.Err != "" {
		return *prev, true
	}
	p := append(append([]byte(nil), prev.Policy...), byte(len(prev.Policy)))
	return PolicyState{Next: o.At.Add(time.Minute), Last: o.At, Policy: p}, true
}

func obsAt(i int) Observation {
	return Observation{At: t0.Add(time.Duration(i) * time.Minute), Status: 200}
}

// TestPolicyStateFolds: every write of an observation (AddObservation,
// RecordPoll, RecordFetch) folds it into the feed's state in its own
// transaction; without a learner, or for a policy that keeps none, the
// state is dropped; a sensor feed keeps none.
func TestPolicyStateFolds(t *testing.T) {
	write := map[string]func(s *Store, id uint64, o Observation) error{
		"AddObservation": func(s *Store, id uint64, o Observation) error { return s.AddObservation(id, o) },
		"RecordPoll": func(s *Store, id uint64, o Observation) error {
			_, err := s.RecordPoll(id, o, func(f *Feed) error { f.Polls++; return nil })
			return err
		},
		"RecordFetch": func(s *Store, id uint64, o Observation) error {
			it := Item{ID: fmt.Sprintf("i%d", o.At.Unix()), Title: "x", Published: o.At}
			_, err := s.RecordFetch(id, []Item{it}, o, func(f *Feed, o *Observation, added []Item) error {
				o.Hit = len(added) > 0
				f.Polls++
				return nil
			})
			return err
		},
	}
	tests := []struct {
		name      string
		policy    string
		learner   bool
		obs       []Observation
		wantState bool
		wantN     int // observations learned
	}{
		{"learns each", "auto", true, []Observation{obsAt(0), obsAt(1), obsAt(2)}, true, 3},
		{"errors are not learned", "auto", true, []Observation{obsAt(0), {At: t0.Add(5 * time.Minute), Err: "boom"}}, true, 1},
		{"no learner drops the state", "auto", false, []Observation{obsAt(0)}, false, 0},
		{"a policy without state drops it", "none", true, []Observation{obsAt(0)}, false, 0},
		{"a new feed has a fresh state", "auto", true, nil, true, 0},
	}
	for wname, w := range write {
		for _, tt := range tests {
			t.Run(wname+"/"+tt.name, func(t *testing.T) {
				s := openTest(t)
				if tt.learner {
					s.SetLearner(countLearner)
				}
				f := Feed{Kind: KindRemote, URL: "https://example.com/f", Policy: tt.policy}
				if err := s.CreateFeed(&f); err != nil {
					t.Fatal(err)
				}
				for _, o := range tt.obs {
					if err := w(s, f.ID, o); err != nil {
						t.Fatal(err)
					}
				}
				st, ok, err := s.PolicyStateOf(f.ID)
				if err != nil {
					t.Fatal(err)
				}
				if ok != tt.wantState {
					t.Fatalf("has state %v, want %v", ok, tt.wantState)
				}
				if len(st.Policy) != tt.wantN {
					t.Fatalf("learned %d observations, want %d", len(st.Policy), tt.wantN)
				}
				if tt.wantN > 0 && !st.Last.Equal(tt.obs[tt.wantN-1].At) {
					t.Fatalf("last %v, want %v", st.Last, tt.obs[tt.wantN-1].At)
				}
			})
		}
	}
	t.Run("sensor feeds keep none", func(t *testing.T) {
		s := openTest(t)
		s.SetLearner(countLearner)
		f := Feed{Kind: KindSensor, Slug: "temp"}
		if err := s.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.PolicyStateOf(f.ID); err != nil || ok {
			t.Fatalf("state %v, %v", ok, err)
		}
	})
}

// TestStateOrderAndFeedsWithStates: the feeds come in order of their
// learned next fetch, those without a state first, and deleted feeds
// leave no state behind (closeAndCheck checks the file).
func TestStateOrderAndFeedsWithStates(t *testing.T) {
	s := openTest(t)
	var ids []uint64
	for i := range 5 {
		f := Feed{Kind: KindRemote, URL: fmt.Sprintf("https://example.com/%d", i), Policy: "auto"}
		if i == 3 {
			f.Policy = "none"
		}
		if err := s.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	s.SetLearner(countLearner)
	// Feed i's newest observation is at minute 10-i: the last is due first.
	for i, id := range ids {
		if err := s.AddObservation(id, obsAt(10-i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteFeed(ids[1]); err != nil {
		t.Fatal(err)
	}
	refs, err := s.StateOrder()
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, r := range refs {
		got = append(got, r.ID)
	}
	want := []uint64{ids[3], ids[4], ids[2], ids[0]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	n := 0
	err = s.FeedsWithStates(append(got, 999), func(f Feed, st *PolicyState) error {
		if (st != nil) != (f.ID != ids[3]) {
			t.Errorf("feed %d: state %v", f.ID, st)
		}
		n++
		return nil
	})
	if err != nil || n != 4 {
		t.Fatalf("FeedsWithStates: %d feeds, %v", n, err)
	}
}

// TestInitPolicyStates: a replay's state is stored only while the feed
// has none and its newest observation is still the one replayed.
func TestInitPolicyStates(t *testing.T) {
	s := openTest(t)
	var ids []uint64
	for i := range 2 {
		f := Feed{Kind: KindRemote, URL: fmt.Sprintf("https://example.com/%d", i), Policy: "auto"}
		if err := s.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	// Written without a learner: the states are gone.
	for i := range 3 {
		for _, id := range ids {
			if err := s.AddObservation(id, obsAt(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := PolicyState{Next: obsAt(3).At, Last: obsAt(2).At, Policy: []byte{0, 1, 2}}
	tests := []struct {
		name  string
		inits []StateInit
		want  int
	}{
		{"an older replay", []StateInit{{ids[0], obsAt(1).At, st}}, 0},
		{"no such feed", []StateInit{{12345, obsAt(2).At, st}}, 0},
		{"too large", []StateInit{{ids[0], obsAt(2).At, PolicyState{Policy: make([]byte, MaxPolicyStateSize)}}}, 0},
		{"current replays", []StateInit{{ids[0], obsAt(2).At, st}, {ids[1], obsAt(2).At, st}}, 2},
		{"twice", []StateInit{{ids[0], obsAt(2).At, st}}, 0},
	}
	for _, tt := range tests {
		n, err := s.InitPolicyStates(tt.inits)
		if err != nil || n != tt.want {
			t.Fatalf("%s: stored %d (%v), want %d", tt.name, n, err, tt.want)
		}
	}
	got, ok, err := s.PolicyStateOf(ids[0])
	if err != nil || !ok || !got.Next.Equal(st.Next) || string(got.Policy) != string(st.Policy) {
		t.Fatalf("state %+v %v %v", got, ok, err)
	}
	s.SetLearner(countLearner)
	if err := s.AddObservation(ids[0], obsAt(3)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.PolicyStateOf(ids[0]); len(got.Policy) != 4 || !got.Last.Equal(obsAt(3).At) {
		t.Fatalf("after a fold: %+v", got)
	}
}

// TestCheckFindsBadPolicyState: Check reports a malformed state.
func TestCheckFindsBadPolicyState(t *testing.T) {
	s := openTest(t)
	f := Feed{Kind: KindRemote, URL: "https://example.com/f", Policy: "auto"}
	if err := s.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if err := s.dbUpdate(func(tx *bolt.Tx) error { return tx.Bucket(bucketFeeds).Put(stateKey(f.ID), []byte{9}) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err == nil {
		t.Fatal("Check accepted a malformed policy state")
	}
	if err := s.dbUpdate(func(tx *bolt.Tx) error { return tx.Bucket(bucketFeeds).Delete(stateKey(f.ID)) }); err != nil {
		t.Fatal(err)
	}
}

// TestFeedsWithStatesReadsSchedulingFields: a start-up's read gives
// every field scheduling takes as the record holds it, and no other.
func TestFeedsWithStatesReadsSchedulingFields(t *testing.T) {
	s := openTest(t)
	f := Feed{Kind: KindRemote, URL: "https://example.com/f", Policy: "dpt-l", Title: "a title", Weight: 2.5, IgnoreCache: true,
		UpdateHint: time.Hour, Category: []string{"x"}}
	f.Sleep.SkipHours = 1 << 3
	f.Sleep.Daily = []schedule.DailyWindow{{From: time.Hour, To: 2 * time.Hour}}
	if err := s.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	full, err := s.UpdateFeed(f.ID, func(x *Feed) error { x.RetryAfter = t0.Add(time.Hour); x.Polls = 9; return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := Feed{ID: full.ID, Kind: full.Kind, URL: full.URL, Policy: full.Policy, Weight: full.Weight, IgnoreCache: full.IgnoreCache,
		Sleep: full.Sleep, UpdateHint: full.UpdateHint, RetryAfter: full.RetryAfter}
	var got Feed
	if err := s.FeedsWithStates([]uint64{f.ID}, func(x Feed, _ *PolicyState) error { got = x; return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v\nwant %+v", got, want)
	}
}
