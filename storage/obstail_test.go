package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
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
		bucketN, tailN = viewLen(fb.obs), len(tail)
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

// TestObservationTailAgainstModel: random sequences of observations of
// mixed sizes, on two feeds and under several MaxObservations, read back
// exactly as a plain list keeping the newest MaxObservations would give
// them, through every read and at every step.
func TestObservationTailAgainstModel(t *testing.T) {
	for _, keep := range []int{1, 3, 10, 40} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("keep%d/seed%d", keep, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(keep)))
				s := openTest(t, Options{MaxObservations: keep})
				feeds := []Feed{
					createRemote(t, s, "https://example.org/a", Retention{}),
					createRemote(t, s, "https://example.org/b", Retention{}),
				}
				model := map[uint64][]Observation{}
				for i := range 150 {
					f := feeds[rng.IntN(len(feeds))]
					o := Observation{At: t0.Add(time.Duration(i) * time.Second), LatencyS: []float64{float64(i)}}
					switch rng.IntN(10) {
					case 0: // too large for a tail
						o.Err = strings.Repeat("e", tailMaxBytes+rng.IntN(100))
					case 1, 2: // a few hundred bytes: the tail fills by size
						o.Err = strings.Repeat("w", 200+rng.IntN(400))
					}
					var err error
					if rng.IntN(2) == 0 {
						err = s.AddObservation(f.ID, o)
					} else {
						_, err = s.RecordPoll(f.ID, o, func(f *Feed) error { f.Polls++; return nil })
					}
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					model[f.ID] = append(model[f.ID], o)
					want := model[f.ID][max(0, len(model[f.ID])-keep):]
					for _, limit := range []int{0, 1, 2, keep} {
						got, err := s.Observations(f.ID, limit)
						w := want
						if limit > 0 && limit < len(w) {
							w = w[len(w)-limit:]
						}
						if err != nil || len(got) != len(w) {
							t.Fatalf("step %d: Observations(%d) = %d, %v; want %d", i, limit, len(got), err, len(w))
						}
						for j := range w {
							if !got[j].At.Equal(w[j].At) || got[j].Err != w[j].Err {
								t.Fatalf("step %d: Observations(%d)[%d] at %v, want %v", i, limit, j, got[j].At, w[j].At)
							}
						}
					}
					lat, err := s.RecentLatencies([]uint64{f.ID}, 0)
					if err != nil || len(lat[f.ID]) != len(want) || lat[f.ID][len(want)-1] != float64(i) {
						t.Fatalf("step %d: RecentLatencies = %v, %v; want %d ending in %d", i, lat[f.ID], err, len(want), i)
					}
				}
				if err := s.Check(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestObservationTailAfterUpgrade: a data file written before tails
// (schema 1, one observation in its remote feed's obs bucket) is
// upgraded, and its old observations come before the new ones.
func TestObservationTailAfterUpgrade(t *testing.T) {
	s := openFixture(t, "schema1.db")
	f, err := s.FeedByURL("https://example.org/sensors.xml")
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.Observations(f.ID, 0)
	if err != nil || len(old) != 1 {
		t.Fatalf("observations before = %d, %v; want the fixture's one", len(old), err)
	}
	for i := range tailMax + 2 { // one move to the bucket, then a new tail
		if err := s.AddObservation(f.ID, Observation{At: old[0].At.Add(time.Duration(i+1) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Observations(f.ID, 0)
	if err != nil || len(got) != tailMax+3 {
		t.Fatalf("observations after = %d, %v; want %d", len(got), err, tailMax+3)
	}
	for i := range got {
		if want := old[0].At.Add(time.Duration(i) * time.Minute); !got[i].At.Equal(want) {
			t.Fatalf("observation %d at %v, want %v", i, got[i].At, want)
		}
	}
}
