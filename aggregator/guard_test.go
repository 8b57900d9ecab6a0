package aggregator

import (
	"runtime"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
)

func TestStamp(t *testing.T) {
	now := time.Now() // Local, with a monotonic reading
	tests := []struct {
		name string
		in   time.Time
		want time.Time
	}{
		{"zero", time.Time{}, time.Time{}},
		{"utc", time.Date(2026, 12, 5, 23, 14, 15, 123456789, time.UTC), time.Date(2026, 12, 5, 23, 14, 15, 123456789, time.UTC)},
		{"local with monotonic reading", now, now.Round(0).UTC()},
		{"other zone", time.Date(2026, 6, 1, 12, 0, 0, 7, time.FixedZone("X", 3*3600)), time.Date(2026, 6, 1, 9, 0, 0, 7, time.UTC)},
		{"unix epoch", time.Unix(0, 0), time.Unix(0, 0).UTC()},
		{"before 1970", time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC)},
		{"the flip instant saturates", time.Unix(0, stampFlip), stampMin.UTC()},
		{"year 1 (not zero) saturates", time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), stampMin.UTC()},
		{"year 9999 saturates", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), stampMax.UTC()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stampOf(tc.in)
			got := s.time()
			if got != tc.want { // == : the location and monotonic reading too
				t.Fatalf("stampOf(%v).time() = %v, want %v", tc.in, got, tc.want)
			}
			if s.isZero() != tc.in.IsZero() {
				t.Fatalf("isZero %v for %v", s.isZero(), tc.in)
			}
			if stampOf(got) != s {
				t.Fatalf("%v: not stable", tc.in)
			}
		})
	}
}

// TestStampOrder checks that stamps compare as the instants they stand for.
func TestStampOrder(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts := []time.Time{base.Add(-time.Hour), base.Add(-1), base, base.Add(1), base.Add(48 * time.Hour)}
	for i, a := range ts {
		for j, b := range ts {
			if got, want := stampOf(a).time().Before(stampOf(b).time()), i < j; got != want {
				t.Fatalf("%v before %v: %v", a, b, got)
			}
		}
	}
}

// BenchmarkGuardLiveHeap reports the live heap per feed of the service's
// fetch guards (B/feed), policy and item hashes left out.
func BenchmarkGuardLiveHeap(b *testing.B) {
	const n = 100_000
	pol := schedule.NewFixed(time.Hour, 0)
	keep := make([]*feedGuard, n)
	var per float64
	for b.Loop() {
		clear(keep)
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range keep {
			g := &feedGuard{policy: pol, respect: true}
			g.Next(schedule.Observation{At: at, Hints: schedule.Hints{CacheFor: time.Minute}})
			keep[i] = g
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		per = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
	}
	b.ReportMetric(per, "B/feed")
	runtime.KeepAlive(keep)
}
