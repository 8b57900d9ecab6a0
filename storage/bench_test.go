package storage

import (
	"fmt"
	"testing"
	"time"
)

// benchItem is a typical sensor item of about 600 bytes encoded.
func benchItem(i int) Item {
	at := t0.Add(time.Duration(i) * time.Minute)
	return Item{
		ID:        fmt.Sprintf("https://example.org/readings/%d", i),
		Link:      fmt.Sprintf("https://example.org/readings/%d", i),
		Title:     fmt.Sprintf("Lab 1: %.1f °C", 20+float64(i%50)/10),
		Summary:   "<p>Temperature of the lab, measured every minute by the sensor on the north wall.</p>",
		Published: at,
		Reading:   &Reading{Value: 20 + float64(i%50)/10, Unit: "C", Sensor: "lab-1", Time: at},
	}
}

// benchStore opens a store with one feed holding n items.
func benchStore(b *testing.B, n int) (*Store, Feed) {
	s := openTest(b)
	f := createRemote(b, s, "https://example.org/feed", Retention{})
	const batch = 1000
	for i := 0; i < n; i += batch {
		items := make([]Item, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			items = append(items, benchItem(j))
		}
		if _, err := s.AddItems(f.ID, items); err != nil {
			b.Fatal(err)
		}
	}
	return s, f
}

// BenchmarkAddItems adds 20 new items to a feed holding 10,000 (NoSync:
// the cost of the store, not of the disk's fsync).
func BenchmarkAddItems(b *testing.B) {
	const have, per = 10000, 20
	s, f := benchStore(b, have)
	next := have
	b.ReportAllocs()
	for b.Loop() {
		items := make([]Item, per)
		for i := range items {
			items[i] = benchItem(next)
			next++
		}
		if added, err := s.AddItems(f.ID, items); err != nil || len(added) != per {
			b.Fatalf("AddItems = %d, %v", len(added), err)
		}
	}
}

// BenchmarkAddItemsDuplicates re-sends 20 stored items: the common case
// of a fetch that finds nothing new.
func BenchmarkAddItemsDuplicates(b *testing.B) {
	const have, per = 10000, 20
	s, f := benchStore(b, have)
	items := make([]Item, per)
	for i := range items {
		items[i] = benchItem(have - per + i)
	}
	b.ReportAllocs()
	for b.Loop() {
		if added, err := s.AddItems(f.ID, items); err != nil || len(added) != 0 {
			b.Fatalf("AddItems = %d, %v", len(added), err)
		}
	}
}

// BenchmarkItems reads the newest 50 items of a feed holding 10,000, in
// each order.
func BenchmarkItems(b *testing.B) {
	s, f := benchStore(b, 10000)
	for _, order := range []struct {
		name string
		o    Order
	}{{"ByArrival", ByArrival}, {"ByPublished", ByPublished}} {
		b.Run(order.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if items, err := s.Items(f.ID, ItemQuery{Limit: 50, Order: order.o}); err != nil || len(items) != 50 {
					b.Fatalf("Items = %d, %v", len(items), err)
				}
			}
		})
	}
}
