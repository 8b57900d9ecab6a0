package schedule

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// refQueue is the reference model: a map, sorted on demand.
type refQueue map[int]int64

func (r refQueue) sorted() [][2]int64 {
	var out [][2]int64
	for id, at := range r {
		out = append(out, [2]int64{at, int64(id)})
	}
	slices.SortFunc(out, func(a, b [2]int64) int {
		if a[0] != b[0] {
			return qCmp(a[0], b[0])
		}
		return qCmp(a[1], b[1])
	})
	return out
}

func qCmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkHeap verifies the heap invariant and the position index.
func checkHeap(t *testing.T, q *Queue) {
	t.Helper()
	for i := 1; i < q.Len(); i++ {
		if q.h.less(i, (i-1)/4) {
			t.Fatalf("heap order broken at slot %d", i)
		}
	}
	n := 0
	for id, p := range q.pos {
		if p < 0 {
			continue
		}
		n++
		if int(q.h.ids[p]) != id {
			t.Fatalf("pos[%d] = %d holds id %d", id, p, q.h.ids[p])
		}
	}
	if n != q.Len() {
		t.Fatalf("%d positions for %d entries", n, q.Len())
	}
}

func TestQueueMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ids, keys int // id and key ranges (small key ranges force ties)
		ops       int
	}{
		{"ties", 50, 5, 5000},
		{"sparse", 2000, 1 << 40, 5000},
		{"dense", 300, 1000, 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.ids)))
			q := NewQueue(0)
			ref := refQueue{}
			for op := range tc.ops {
				id := rng.IntN(tc.ids)
				switch r := rng.IntN(10); {
				case r < 5: // push or update
					at := rng.Int64N(int64(tc.keys))
					if err := q.Set(id, at); err != nil {
						t.Fatal(err)
					}
					ref[id] = at
				case r < 7:
					_, want := ref[id]
					if got := q.Remove(id); got != want {
						t.Fatalf("op %d: Remove(%d) = %v, want %v", op, id, got, want)
					}
					delete(ref, id)
				case r < 9:
					gid, gat, ok := q.Pop()
					s := ref.sorted()
					if ok != (len(s) > 0) {
						t.Fatalf("op %d: Pop ok = %v with %d entries", op, ok, len(s))
					}
					if ok {
						if gat != s[0][0] || int64(gid) != s[0][1] {
							t.Fatalf("op %d: Pop = (%d, %d), want (%d, %d)", op, gid, gat, s[0][1], s[0][0])
						}
						delete(ref, gid)
					}
				default:
					gat, ok := q.Get(id)
					wat, wok := ref[id]
					if ok != wok || gat != wat {
						t.Fatalf("op %d: Get(%d) = %d,%v, want %d,%v", op, id, gat, ok, wat, wok)
					}
				}
				if q.Len() != len(ref) {
					t.Fatalf("op %d: Len = %d, want %d", op, q.Len(), len(ref))
				}
			}
			checkHeap(t, q)
			// Drain: the full order must match the reference sort.
			for _, want := range ref.sorted() {
				id, at, _ := q.Pop()
				if at != want[0] || int64(id) != want[1] {
					t.Fatalf("drain: got (%d, %d), want (%d, %d)", id, at, want[1], want[0])
				}
			}
			if _, _, ok := q.Peek(); ok {
				t.Fatal("queue not empty after drain")
			}
		})
	}
}

func TestQueueBadIDs(t *testing.T) {
	q := NewQueue(4)
	for _, id := range []int{-1, MaxFeedID + 1} {
		t.Run(fmt.Sprint(id), func(t *testing.T) {
			if err := q.Set(id, 1); !errors.Is(err, ErrFeedID) {
				t.Fatalf("Set(%d) = %v, want ErrFeedID", id, err)
			}
			if q.Remove(id) {
				t.Fatalf("Remove(%d) = true", id)
			}
			if _, ok := q.Get(id); ok {
				t.Fatalf("Get(%d) ok", id)
			}
		})
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d after rejected ids", q.Len())
	}
}

func TestQueueNoAllocs(t *testing.T) {
	const n = 1 << 12
	q := NewQueue(n)
	for i := range n {
		_ = q.Set(i, int64(i*7919%n))
	}
	rng := rand.New(rand.NewPCG(2, 2))
	allocs := testing.AllocsPerRun(1000, func() {
		id, at, _ := q.Pop()
		_ = q.Set(id, at+rng.Int64N(n))
		_ = q.Set(rng.IntN(n), rng.Int64N(n))
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per operation, want 0", allocs)
	}
}

func TestQueueBytesPerFeed(t *testing.T) {
	const n = 1 << 18
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	q := NewQueue(n)
	for i := range n {
		_ = q.Set(i, int64(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("queue: %.1f bytes per feed", per)
	if per > 17 {
		t.Fatalf("queue uses %.1f bytes per feed, want ≤ 17 (16 by layout)", per)
	}
	runtime.KeepAlive(q)
}

func fillQueue(n int) *Queue {
	q := NewQueue(n)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range n {
		_ = q.Set(i, rng.Int64N(1<<40))
	}
	return q
}

// BenchmarkQueuePopPush1M pops the earliest of a million entries and pushes
// it back later, the scheduler's steady state.
func BenchmarkQueuePopPush1M(b *testing.B) {
	q := fillQueue(1 << 20)
	rng := rand.New(rand.NewPCG(4, 4))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		id, at, _ := q.Pop()
		_ = q.Set(id, at+rng.Int64N(1<<36))
	}
}

// BenchmarkQueueUpdate1M moves random entries of a million.
func BenchmarkQueueUpdate1M(b *testing.B) {
	q := fillQueue(1 << 20)
	rng := rand.New(rand.NewPCG(5, 5))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = q.Set(rng.IntN(1<<20), rng.Int64N(1<<40))
	}
}

// BenchmarkQueueRemovePush1M removes a random entry and pushes it back.
func BenchmarkQueueRemovePush1M(b *testing.B) {
	q := fillQueue(1 << 20)
	rng := rand.New(rand.NewPCG(6, 6))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		id := rng.IntN(1 << 20)
		q.Remove(id)
		_ = q.Set(id, rng.Int64N(1<<40))
	}
}
