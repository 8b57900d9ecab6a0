package storage

import (
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// heldObs returns how many observations of feed id sit in its obs bucket
// and in its tail.
func heldObs(t *testing.T, s *Store, id uint64) (bucketN, tailN int) {
	t.Helper()
	if err := s.db.View(func(tx *bolt.Tx) error {
		fb, err := s.feedBuckets(tx, id)
		if err != nil {
			return err
		}
		tail, err := feedTail(tx.Bucket(bucketFeeds), id)
		bucketN, tailN = fb.obs.Stats().KeyN, len(tail)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return bucketN, tailN
}

// TestObservationTail: a feed's newest observations wait in its tail,
// tailMax at a time, and move to the obs bucket together; one too large
// for a tail goes to the bucket at once, after the tail. Every read sees
// them all in order, Feeds lists no tail, and deleting the feed drops it.
func TestObservationTail(t *testing.T) {
	small := func(i int) Observation {
		return Observation{At: t0.Add(time.Duration(i) * time.Minute), LatencyS: []float64{float64(i)}}
	}
	big := func(i int) Observation { // larger than a tail may be
		o := small(i)
		o.Err = strings.Repeat("x", tailMaxBytes)
		return o
	}
	tests := []struct {
		name   string
		obs    []Observation
		bucket int // observations in the obs bucket at the end
		tail   int // and in the tail
	}{
		{"one", []Observation{small(0)}, 0, 1},
		{"a full tail", obsRange(small, 0, tailMax), 0, tailMax},
		{"one more moves the tail", obsRange(small, 0, tailMax+1), tailMax, 1},
		{"three tails and a bit", obsRange(small, 0, 3*tailMax+2), 3 * tailMax, 2},
		{"a large one goes to the bucket after the tail", append(obsRange(small, 0, 3), big(3)), 4, 0},
		{"then small ones start a new tail", append(append(obsRange(small, 0, 3), big(3)), small(4)), 4, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t)
			f := createRemote(t, s, "https://example.org/feed", Retention{})
			other := createRemote(t, s, "https://example.org/other", Retention{})
			for _, o := range tt.obs {
				if err := s.AddObservation(f.ID, o); err != nil {
					t.Fatal(err)
				}
			}
			if b, tl := heldObs(t, s, f.ID); b != tt.bucket || tl != tt.tail {
				t.Errorf("held %d in the bucket and %d in the tail, want %d and %d", b, tl, tt.bucket, tt.tail)
			}
			got, err := s.Observations(f.ID, 0)
			if err != nil || len(got) != len(tt.obs) {
				t.Fatalf("Observations = %d, %v; want %d", len(got), err, len(tt.obs))
			}
			for i := range got {
				if !got[i].At.Equal(tt.obs[i].At) || got[i].Err != tt.obs[i].Err {
					t.Fatalf("observation %d at %v, want %v", i, got[i].At, tt.obs[i].At)
				}
			}
			for _, limit := range []int{1, min(2, len(tt.obs)), len(tt.obs)} {
				got, err := s.Observations(f.ID, limit)
				if err != nil || len(got) != limit || !got[0].At.Equal(tt.obs[len(tt.obs)-limit].At) {
					t.Errorf("Observations(%d) = %d from %v, %v; want the newest %d", limit, len(got), got[0].At, err, limit)
				}
			}
			lat, err := s.RecentLatencies(nil, 0)
			if err != nil || len(lat[f.ID]) != len(tt.obs) || lat[f.ID][len(tt.obs)-1] != float64(len(tt.obs)-1) || len(lat) != 1 {
				t.Errorf("RecentLatencies = %v, %v", lat, err)
			}
			feeds, err := s.Feeds()
			if err != nil || len(feeds) != 2 {
				t.Fatalf("Feeds = %d, %v; want 2", len(feeds), err)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteFeed(f.ID); err != nil {
				t.Fatal(err)
			}
			if err := s.db.View(func(tx *bolt.Tx) error {
				if tx.Bucket(bucketFeeds).Get(tailKey(f.ID)) != nil {
					t.Error("the deleted feed's tail is still stored")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.AddObservation(f.ID, small(99)); !errors.Is(err, ErrFeedNotFound) {
				t.Errorf("observation of a deleted feed: %v, want ErrFeedNotFound", err)
			}
			if obs, err := s.Observations(other.ID, 0); err != nil || len(obs) != 0 {
				t.Errorf("the other feed has %d observations, %v", len(obs), err)
			}
		})
	}
}

func obsRange(mk func(int) Observation, from, to int) []Observation {
	var out []Observation
	for i := from; i < to; i++ {
		out = append(out, mk(i))
	}
	return out
}
