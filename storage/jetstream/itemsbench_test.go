package jetstream_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// sensorStore is what BenchmarkSensorPage asks of either store.
type sensorStore interface {
	CreateFeed(*storage.Feed) error
	AddItems(feedID uint64, items []storage.Item) ([]storage.Item, error)
	Items(feedID uint64, q storage.ItemQuery) ([]storage.Item, error)
	Item(feedID uint64, itemID string) (storage.Item, error)
}

// fillSensor creates a sensor feed holding n readings, one every 10 s,
// each published when it arrived, as POST /sensors/NAME stores them.
func fillSensor(b *testing.B, st sensorStore, name string, n int) uint64 {
	b.Helper()
	f := storage.Feed{Kind: storage.KindSensor, Slug: name, Title: name}
	if err := st.CreateFeed(&f); err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	for i := 0; i < n; i += batch {
		its := make([]storage.Item, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			at := readingTime(j)
			its = append(its, storage.Item{ID: fmt.Sprintf("%s-%d", name, j+1), Title: "21.5 °C",
				Summary: "temperature 21.5 °C", Published: at, Fetched: at,
				Reading: &storage.Reading{Value: 21.5, Unit: "°C", Sensor: name, Time: at}})
		}
		if added, err := st.AddItems(f.ID, its); err != nil || len(added) != len(its) {
			b.Fatalf("fill %s: added %d of %d, %v", name, len(added), len(its), err)
		}
	}
	return f.ID
}

// readingTime is when fillSensor's j-th reading (from 0) was published.
func readingTime(j int) time.Time {
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(j) * 10 * time.Second)
}

// BenchmarkSensorPage measures the reads a sensor feed's pages make
// (/sensors/NAME.rss|.atom|.json and the API's items: the newest 51
// readings by arrival; the next page, before a sequence; the newest 50 by
// publish time, as the UI's feed page, and the 50 before the middle
// reading's publish time; one reading by its ID) on a feed
// of 1,000, 10,000 and 100,000 readings, on the bbolt store and on one
// embedded JetStream server, in one run.
//
//	go test -run '^$' -bench BenchmarkSensorPage -benchmem -timeout 30m ./storage/jetstream/
func BenchmarkSensorPage(b *testing.B) {
	sizes := []int{1000, 10000, 100000}
	bolt, err := storage.Open(filepath.Join(b.TempDir(), "bench.db"), storage.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer bolt.Close()
	js, _ := openStore(b, jstest.NewServer(b))
	be := sjs.NewBackend(js, time.Minute)
	defer be.Close()
	stores := []struct {
		name string
		st   sensorStore
	}{{"bbolt", bolt}, {"jetstream", be}}
	feeds := map[string]uint64{}
	for _, s := range stores {
		for _, n := range sizes {
			feeds[fmt.Sprintf("%s/%d", s.name, n)] = fillSensor(b, s.st, fmt.Sprintf("s%d", n), n)
		}
	}
	for _, n := range sizes {
		for _, s := range stores {
			id := feeds[fmt.Sprintf("%s/%d", s.name, n)]
			newest, err := s.st.Items(id, storage.ItemQuery{Limit: 1})
			if err != nil || len(newest) != 1 {
				b.Fatalf("newest: %d, %v", len(newest), err)
			}
			mid := newest[0].Seq - uint64(n/2) // each feed's readings have consecutive Seqs here
			for _, c := range []struct {
				name string
				q    storage.ItemQuery
				want int
			}{
				{"page", storage.ItemQuery{Limit: 51, Order: storage.ByArrival}, 51},
				{"older", storage.ItemQuery{Limit: 51, Order: storage.ByArrival, BeforeSeq: mid}, 51},
				{"published", storage.ItemQuery{Limit: 50, Order: storage.ByPublished}, 50},
				{"published-older", storage.ItemQuery{Limit: 50, Order: storage.ByPublished, Until: readingTime(n / 2)}, 50},
			} {
				b.Run(fmt.Sprintf("%s/n=%d/%s", c.name, n, s.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if got, err := s.st.Items(id, c.q); err != nil || len(got) != c.want {
							b.Fatalf("Items = %d, %v", len(got), err)
						}
					}
				})
			}
			b.Run(fmt.Sprintf("item/n=%d/%s", n, s.name), func(b *testing.B) {
				b.ReportAllocs()
				itemID := fmt.Sprintf("s%d-%d", n, n/2)
				for b.Loop() {
					if _, err := s.st.Item(id, itemID); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
