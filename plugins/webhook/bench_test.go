package webhook

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// benchService is a service with 4 hooks on pipe/out over a fsynced
// bbolt store in a temporary directory.
func benchService(b *testing.B, maxPending int) *Service {
	b.Helper()
	st, err := storage.Open(filepath.Join(b.TempDir(), "bench.db"), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	s, err := New(Options{Store: st, MaxPending: maxPending})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.Create("pipe/out", fmt.Sprintf("https://receiver%d.example.org/", i), secret); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkNotify: a feed with 4 hooks gains one item (a delivery for
// each hook), on a fsynced bbolt store; "queued" with room in every
// queue, "full" with every queue full, so that each Notify also drops a
// delivery of each hook.
func BenchmarkNotify(b *testing.B) {
	for _, bc := range []struct {
		name       string
		maxPending int
	}{
		{"queued", 1 << 30},
		{"full", 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchService(b, bc.maxPending)
			its := items("x", 1)
			s.Notify(outFeed, its)
			b.ResetTimer()
			for range b.N {
				s.Notify(outFeed, its)
			}
		})
	}
}

// BenchmarkHooksDuringNotify: GET /api/v1/webhooks's Hooks call while
// Notify calls as in BenchmarkNotify/queued run back to back, a call
// every 100 µs or so: how long the API waits for the service's lock
// (wait-ns/op, the mean; max-wait-ns the longest).
func BenchmarkHooksDuringNotify(b *testing.B) {
	s := benchService(b, 1<<30)
	its := items("x", 1)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			s.Notify(outFeed, its)
		}
	}()
	time.Sleep(10 * time.Millisecond)
	var total, longest time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if len(s.Hooks()) != 4 {
			b.Fatal("hooks lost")
		}
		d := time.Since(start)
		total += d
		longest = max(longest, d)
		time.Sleep(100 * time.Microsecond) // let Notify take the lock again
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "wait-ns/op")
	b.ReportMetric(float64(longest.Nanoseconds()), "max-wait-ns")
}
