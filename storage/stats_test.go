package storage

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slogfeed/slogfeed/schedule"
)

// latenciesByObservations is what RecentLatencies must equal: the
// latencies of Observations, decoded in full.
func latenciesByObservations(t *testing.T, s *Store, id uint64, polls int) []float64 {
	t.Helper()
	obs, err := s.Observations(id, polls)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, o := range obs {
		out = append(out, o.LatencyS...)
	}
	return out
}

func TestRecentLatencies(t *testing.T) {
	s := openTest(t, Options{MaxObservations: 50})
	busy := createRemote(t, s, "https://example.org/busy", Retention{})
	quiet := createRemote(t, s, "https://example.org/quiet", Retention{})
	empty := createRemote(t, s, "https://example.org/empty", Retention{})
	for i := range 80 {
		at := t0.Add(time.Duration(i) * time.Minute)
		o := Observation{At: at, Hit: i%3 != 0, Status: 200, Err: `"latency_s":[9,9]`,
			Hints: schedule.Hints{Desync: time.Second, HasPhase: true, Phase: time.Duration(i) * time.Millisecond}}
		if o.Hit {
			o.Published = []time.Time{at.Add(-time.Second)}
			// Values json.Marshal writes in several forms: integers,
			// fractions, exponents.
			o.LatencyS = []float64{float64(i), 0.125 * float64(i), 1e-7 * float64(i+1), 3e21}
		}
		if err := s.AddObservation(busy.ID, o); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := s.AddObservation(quiet.ID, Observation{At: at, Hit: false}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name  string
		ids   []uint64
		polls int
		want  []uint64 // feeds present in the result
	}{
		{"every feed, newest 10", nil, 10, []uint64{busy.ID}},
		{"every feed, all kept", nil, 0, []uint64{busy.ID}},
		{"one feed, newest 1", []uint64{busy.ID}, 1, []uint64{busy.ID}},
		{"more polls than kept", []uint64{busy.ID}, 500, []uint64{busy.ID}},
		{"feeds without latencies", []uint64{quiet.ID, empty.ID}, 10, nil},
		{"unknown feed", []uint64{999, busy.ID}, 5, []uint64{busy.ID}},
		{"no ids", []uint64{}, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.RecentLatencies(tt.ids, tt.polls)
			if err != nil {
				t.Fatal(err)
			}
			keys := slices.Sorted(func(yield func(uint64) bool) {
				for k := range got {
					if !yield(k) {
						return
					}
				}
			})
			if !slices.Equal(keys, tt.want) {
				t.Fatalf("feeds %v, want %v", keys, tt.want)
			}
			for _, id := range tt.want {
				want := latenciesByObservations(t, s, id, tt.polls)
				if !slices.Equal(got[id], want) {
					t.Errorf("feed %d: %v\nwant %v", id, got[id], want)
				}
			}
		})
	}
}

func TestAppendLatencies(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    []float64
		wantErr bool
	}{
		{"none", `{"at":"2026-11-21T12:00:00Z","hit":false}`, nil, false},
		{"plain", `{"hit":true,"latency_s":[1,2.5,3e-7]}`, []float64{1, 2.5, 3e-7}, false},
		{"spaces fall back on json", `{"hit":true,"latency_s":[1, 2 ]}`, []float64{1, 2}, false},
		{"empty array falls back", `{"latency_s":[]}`, nil, false},
		{"in a string only", `{"err":"\"latency_s\":[1]"}`, nil, false},
		{"unterminated", `{"latency_s":[1,2`, nil, true},
		{"not numbers", `{"latency_s":["a"]}`, nil, true},
		{"NaN is not JSON", `{"latency_s":[NaN]}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := appendLatencies([]float64{42}, []byte(tt.raw))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !slices.Equal(got, append([]float64{42}, tt.want...)) {
				t.Errorf("got %v, want %v", got, append([]float64{42}, tt.want...))
			}
		})
	}
}

func TestRecentLatenciesCorrupt(t *testing.T) {
	s := openTest(t)
	f := createRemote(t, s, "https://example.org/feed", Retention{})
	if err := s.AddObservation(f.ID, Observation{At: t0, Hit: true, LatencyS: []float64{1}}); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		fb, err := openFeedBuckets(tx, f.ID)
		if err != nil {
			return err
		}
		return fb.obs.Put(u64(99), []byte(`{"latency_s":[1,`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecentLatencies(nil, 0); err == nil {
		t.Fatal("no error for a corrupt observation")
	}
}

// FuzzAppendLatencies checks the fast path against encoding/json on
// encoded observations, and that no input makes it panic.
func FuzzAppendLatencies(f *testing.F) {
	f.Add(`"latency_s":[1,2]`, 1.5, 2e-9, true)
	f.Add("", 1e300, negZero, false)
	f.Add(`{"latency_s":[NaN]}`, 0.0, 7.0, true)
	f.Fuzz(func(t *testing.T, text string, a, b float64, hit bool) {
		_, _ = appendLatencies(nil, []byte(text)) // must not panic
		if math.IsNaN(a) || math.IsInf(a, 0) || math.IsNaN(b) || math.IsInf(b, 0) {
			return
		}
		o := Observation{At: t0, Hit: hit, Err: text, Status: 200}
		if hit {
			o.LatencyS = []float64{a, b}
		}
		raw, err := encodeObservation(1, o)
		if err != nil {
			return
		}
		got, err := appendLatencies(nil, raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if !slices.Equal(got, o.LatencyS) {
			t.Fatalf("%s: got %v, want %v", raw, got, o.LatencyS)
		}
	})
}

func BenchmarkRecentLatencies(b *testing.B) {
	s := openTest(b, Options{NoSync: true})
	var ids []uint64
	for i := range 20 {
		f := createRemote(b, s, fmt.Sprintf("https://example.org/%d", i), Retention{})
		ids = append(ids, f.ID)
		for j := range 200 {
			o := Observation{At: t0.Add(time.Duration(j) * time.Minute), Hit: j%2 == 0, Status: 200}
			if o.Hit {
				o.Published = []time.Time{o.At.Add(-time.Second)}
				o.LatencyS = []float64{float64(j) / 7}
			}
			if err := s.AddObservation(f.ID, o); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("RecentLatencies", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.RecentLatencies(ids, 200); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Observations", func(b *testing.B) {
		for b.Loop() {
			for _, id := range ids {
				if _, err := s.Observations(id, 200); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
