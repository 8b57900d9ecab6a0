package jetstream

import (
	"fmt"
	"runtime"
	"testing"
)

// sensorIndex is a feed's index as a sensor feed of n readings builds it:
// one reading every 10 s, in arrival order.
func sensorIndex(k *known, feedID uint64, n int) {
	items := make([]knownItem, n)
	for i := range items {
		items[i] = knownItem{key: MsgID(feedID, fmt.Sprintf("reading-%d", i)), seq: uint64(2*i + 1), at: int64(i) * 10e9}
	}
	k.extend(feedID, uint64(2*n), items, false)
}

// BenchmarkKnownNthNewest measures where a page of a sensor feed of
// 100,000 readings starts: the 51st newest reading, and the 51st newest
// below the middle of the feed (the next page).
func BenchmarkKnownNthNewest(b *testing.B) {
	const n = 100000
	k := newKnown(4, 0, 0)
	sensorIndex(k, 1, n)
	for _, c := range []struct {
		name  string
		below uint64
	}{{"newest", 0}, {"older", n}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, ok := k.nthNewest(1, 51, c.below, allTime); !ok {
					b.Fatal("nthNewest found none")
				}
			}
		})
	}
}

// BenchmarkKnownBytesPerItem reports the heap a feed's index takes per
// item: 100 feeds of 10,000 readings each, read from the stream at once
// (read) or grown a reading at a time (grown).
func BenchmarkKnownBytesPerItem(b *testing.B) {
	const feeds, n = 100, 10000
	for _, grown := range []bool{false, true} {
		name := "read"
		if grown {
			name = "grown"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				k := newKnown(feeds, 0, 0)
				for id := range uint64(feeds) {
					if !grown {
						sensorIndex(k, id+1, n)
						continue
					}
					k.extend(id+1, 0, nil, false)
					for i := range n {
						k.advance(id+1, uint64(i), knownItem{key: MsgID(id+1, fmt.Sprintf("reading-%d", i)), seq: uint64(i + 1), at: int64(i) * 10e9})
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(feeds*n), "B/item")
				runtime.KeepAlive(k)
			}
		})
	}
}
