package storage

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	bolt "go.etcd.io/bbolt"
)

func TestObservations(t *testing.T) {
	s := openTest(t, Options{MaxObservations: 5})
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	other := createRemote(t, s, "https://example.org/other", Retention{})
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	for i := range 12 {
		o := Observation{At: at(i), Hit: i%2 == 0, Status: 200, Hints: schedule.Hints{Desync: time.Second, HasPhase: true, Phase: 3 * time.Second}}
		if o.Hit {
			o.Published = []time.Time{at(i).Add(-time.Second)}
			o.LatencyS = []float64{1}
		}
		if err := s.AddObservation(f.ID, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddObservation(other.ID, Observation{At: t0}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		limit int
		first int // At of the first returned, in minutes
		n     int
	}{
		{"all kept", 0, 7, 5},
		{"negative limit is all", -1, 7, 5},
		{"newest 3", 3, 9, 3},
		{"newest 1", 1, 11, 1},
		{"limit above kept", 50, 7, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Observations(f.ID, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.n {
				t.Fatalf("got %d observations, want %d", len(got), tt.n)
			}
			for i, o := range got {
				if want := at(tt.first + i); !o.At.Equal(want) {
					t.Errorf("[%d].At = %v, want %v (oldest first)", i, o.At, want)
				}
			}
		})
	}
	got, _ := s.Observations(f.ID, 1)
	o := got[0]
	if o.Hit || o.Status != 200 || !o.Hints.HasPhase || o.Hints.Phase != 3*time.Second || o.Hints.Desync != time.Second {
		t.Errorf("round trip lost fields: %+v", o)
	}
	if got, _ := s.Observations(other.ID, 0); len(got) != 1 {
		t.Errorf("other feed has %d observations", len(got))
	}

	t.Run("invalid", func(t *testing.T) {
		bad := []Observation{
			{At: t0, LatencyS: []float64{math.NaN()}},
			{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
			{At: t0, Err: strings.Repeat("e", MaxObservationSize)},
		}
		for _, o := range bad {
			if err := s.AddObservation(f.ID, o); !errors.Is(err, ErrInvalid) {
				t.Errorf("AddObservation = %v, want ErrInvalid", err)
			}
		}
		if got, _ := s.Observations(f.ID, 0); len(got) != 5 || !got[4].At.Equal(at(11)) {
			t.Errorf("invalid observations changed what is kept")
		}
	})
}

func TestObservationsDefaultCap(t *testing.T) {
	s := openTest(t)
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	for i := range DefaultMaxObservations + 3 {
		if err := s.AddObservation(f.ID, Observation{At: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Observations(f.ID, 0)
	if err != nil || len(got) != DefaultMaxObservations || !got[0].At.Equal(t0.Add(3*time.Second)) {
		t.Errorf("kept %d observations, first at %v; err %v", len(got), got[0].At, err)
	}
}

// TestObservationsTrimmedInBatches: the oldest observations are dropped a
// slack at a time, so the data file holds at most MaxObservations plus
// the slack and a tail (obstail.go), and every read returns exactly the
// newest MaxObservations.
func TestObservationsTrimmedInBatches(t *testing.T) {
	const keep = 40 // slack 5
	s := openTest(t, Options{MaxObservations: keep})
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	held := func() int {
		n := 0
		if err := s.db.View(func(tx *bolt.Tx) error {
			fb, err := s.feedBuckets(tx, f.ID)
			if err != nil {
				return err
			}
			tail, err := feedTail(tx.Bucket(bucketFeeds), f.ID)
			n = viewLen(fb.obs) + len(tail)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	most, trims := 0, 0
	for i := range 3 * keep {
		before := held()
		if err := s.AddObservation(f.ID, Observation{At: t0.Add(time.Duration(i) * time.Minute), LatencyS: []float64{float64(i)}}); err != nil {
			t.Fatal(err)
		}
		n := held()
		most = max(most, n)
		if n < before {
			trims++
		}
		for _, limit := range []int{0, -1, keep + 10, 3} {
			want := min(i+1, keep)
			if limit == 3 {
				want = min(i+1, 3)
			}
			got, err := s.Observations(f.ID, limit)
			if err != nil || len(got) != want || !got[len(got)-1].At.Equal(t0.Add(time.Duration(i)*time.Minute)) ||
				!got[0].At.Equal(t0.Add(time.Duration(i+1-want)*time.Minute)) {
				t.Fatalf("after %d: Observations(%d) = %d, want the newest %d (err %v)", i+1, limit, len(got), want, err)
			}
		}
		lat, err := s.RecentLatencies([]uint64{f.ID}, 0)
		if want := min(i+1, keep); err != nil || len(lat[f.ID]) != want || lat[f.ID][want-1] != float64(i) {
			t.Fatalf("after %d: RecentLatencies = %v, want the newest %d (err %v)", i+1, lat[f.ID], want, err)
		}
	}
	// Trims happen as a tail moves to the bucket: at most one per move,
	// and at least one per slack of observations past keep.
	slack := obsSlack(keep)
	if most > keep+slack+tailMax || most <= keep || trims < (3*keep-keep-tailMax)/(slack+tailMax) || trims > (3*keep-keep)/(slack+1) {
		t.Errorf("held at most %d observations in %d trims, want (%d, %d] and [%d, %d]", most, trims,
			keep, keep+slack+tailMax, (3*keep-keep-tailMax)/(slack+tailMax), (3*keep-keep)/(slack+1))
	}
}
