package storage

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slogfeed/slogfeed/aggregator/aggtest"
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

// BenchmarkPollBatches measures what a poll's write costs as a function of
// how polls are grouped into transactions: the design question of a log
// in front of bbolt. Each iteration
// writes one poll of each of 10,000 feeds as a 304 does, durable (fsync),
// in transactions of N polls:
//
//   - per-N-random: RecordPoll's transaction (an observation appended to
//     the feed's tail, its record rewritten), the feeds in the order the
//     polls came, as the group commit sees them;
//   - per-N-sorted: the same with each transaction's feeds sorted, as a
//     checkpoint that gathered the polls first would write them;
//   - log-N: each poll appended instead to one log bucket (a store-wide
//     sequence key, the feed's updated record and the observation), what
//     a log in front of the records would write per poll.
//
// Run each sub-benchmark in a process of its own (-bench
// 'BenchmarkPollBatches/NAME$'): run one after another in one process,
// the first came out slower than the same work run later. It reports the process's CPU time per poll (fsync's
// system time included), the wall time per poll and the pages each poll
// wrote.
func BenchmarkPollBatches(b *testing.B) {
	const feeds = 10000
	for _, c := range []struct {
		per    int
		sorted bool
		log    bool
	}{
		{64, false, false},
		{64, true, false},
		{1000, true, false},
		{feeds, true, false},
		{64, false, true},
		{1000, false, true},
	} {
		name := fmt.Sprintf("per-%d-random", c.per)
		switch {
		case c.log:
			name = fmt.Sprintf("log-%d", c.per)
		case c.sorted:
			name = fmt.Sprintf("per-%d-sorted", c.per)
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "polls.db")
			s, err := Open(path, Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]uint64, feeds)
			for i := range ids {
				f := Feed{Kind: KindRemote, URL: fmt.Sprintf("http://127.0.0.%d/f/%d", 1+i%4, i), Policy: "auto"}
				if err := s.CreateFeed(&f); err != nil {
					b.Fatal(err)
				}
				ids[i] = f.ID
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			if s, err = Open(path, Options{}); err != nil { // durable from here
				b.Fatal(err)
			}
			defer closeAndCheck(b, s)
			for _, id := range ids { // the memo holds every feed, as after a poll
				if _, err := s.Feed(id); err != nil {
					b.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			at := t0
			var pages int64
			cpu := aggtest.CPUTime()
			for b.Loop() {
				rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
				for lo := 0; lo < feeds; lo += c.per {
					chunk := slices.Clone(ids[lo:min(lo+c.per, feeds)])
					if c.sorted {
						slices.Sort(chunk)
					}
					at = at.Add(time.Second)
					if c.log {
						pages += int64(s.pollLogBatch(b, chunk, at))
						continue
					}
					pages += int64(s.pollBatch(b, chunk, at))
				}
			}
			n := float64(b.N * feeds)
			b.ReportMetric(float64((aggtest.CPUTime()-cpu).Microseconds())/n, "cpu-µs/poll")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/n, "µs/poll")
			b.ReportMetric(float64(pages)/n, "pages/poll")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchPoll is one 304 poll of a feed, prepared as RecordPoll prepares
// it off the writer: the feed's updated record and the observation.
type benchPoll struct {
	pre *preparedFeed
	raw []byte
}

// preparePolls prepares a poll at `at` of each feed of ids.
func (s *Store) preparePolls(b *testing.B, ids []uint64, at time.Time) []benchPoll {
	polls := make([]benchPoll, len(ids))
	for i, id := range ids {
		raw, err := encodeObservation(id, Observation{At: at, Status: 304})
		if err != nil {
			b.Fatal(err)
		}
		pre := s.prepareFeed(id, func(p *preparedFeed) error {
			p.f.Polls++
			p.f.LastFetch = at
			return nil
		})
		if pre == nil {
			b.Fatalf("feed %d: no memo entry", id)
		}
		polls[i] = benchPoll{pre, raw}
	}
	return polls
}

// pagesWritten runs fn in a durable write transaction and returns the
// pages its commit wrote.
func (s *Store) pagesWritten(b *testing.B, fn func(*bolt.Tx) error) int {
	before := s.db.Stats().TxStats
	written := before.GetWrite()
	if err := s.dbUpdate(fn); err != nil {
		b.Fatal(err)
	}
	after := s.db.Stats().TxStats
	return int(after.GetWrite() - written)
}

// pollBatch writes one 304 poll of each feed of ids in one transaction, as
// RecordPoll's transaction writes one, and returns the pages written.
func (s *Store) pollBatch(b *testing.B, ids []uint64, at time.Time) int {
	polls := s.preparePolls(b, ids, at)
	return s.pagesWritten(b, func(tx *bolt.Tx) error {
		for i, id := range ids {
			if err := s.putObservation(tx, id, polls[i].raw); err != nil {
				return err
			}
			if ok, err := s.applyPrepared(tx, id, polls[i].pre); err != nil || !ok {
				return fmt.Errorf("feed %d: record not stored (%v)", id, err)
			}
			s.memoOnCommit(tx, id, polls[i].pre.raw, polls[i].pre.memo)
		}
		return nil
	})
}

// pollLogBatch appends one 304 poll of each feed of ids to a log bucket
// in one transaction, each an entry keyed by a store-wide sequence
// holding the feed's updated record and the observation (what a log in
// front of the feeds' records would write per poll), and returns the
// pages written.
func (s *Store) pollLogBatch(b *testing.B, ids []uint64, at time.Time) int {
	polls := s.preparePolls(b, ids, at)
	entries := make([][]byte, len(ids))
	for i, id := range ids {
		e := binary.AppendUvarint(binary.BigEndian.AppendUint64(nil, id), uint64(len(polls[i].pre.raw)))
		entries[i] = append(append(e, polls[i].pre.raw...), polls[i].raw...)
	}
	return s.pagesWritten(b, func(tx *bolt.Tx) error {
		log, err := tx.CreateBucketIfNotExists([]byte("bench_poll_log"))
		if err != nil {
			return err
		}
		log.FillPercent = 1
		for _, e := range entries {
			seq, _ := log.NextSequence()
			if err := log.Put(u64(seq), e); err != nil {
				return err
			}
		}
		return nil
	})
}

var steadyFeeds = flag.Int("steady.feeds", 1000, "BenchmarkSteadyState: feeds in the store")

// BenchmarkSteadyState fills -steady.feeds feeds to their default bounds
// (DefaultRetention, DefaultMaxObservations) by hourly polls that each
// store one new sensor item of about 400 bytes and an observation, round
// robin (NoSync), and reports the data file's pages in use per feed
// then, which stay put as polls go on (TestFileStopsGrowing): times a
// million, the disk a node of a million such feeds needs. It also reports
// the encoded item and observation sizes, the item's size as JSON, the
// pages in use per item and observation stored, and the pages in use per
// byte of the items held, measured as JSON (the items' own size, what
// the JSON form stored). b.N is ignored.
func BenchmarkSteadyState(b *testing.B) {
	s := openTest(b, Options{DefaultRetention: DefaultRetention})
	ids := make([]uint64, *steadyFeeds)
	for i := range ids {
		ids[i] = createRemote(b, s, fmt.Sprintf("https://sensors.example.org/station/%d/feed.xml", i), Retention{}).ID
	}
	used0, err := s.InUse()
	if err != nil {
		b.Fatal(err)
	}
	rounds := DefaultMaxObservations + obsSlack(DefaultMaxObservations)
	var itemB, itemJSONB, obsB int
	b.ResetTimer()
	for r := range rounds {
		at := t0.Add(time.Duration(r) * time.Hour)
		for _, id := range ids {
			it := Item{
				ID:        fmt.Sprintf("%d-%d", id, r),
				GUID:      fmt.Sprintf("%d-%d", id, r),
				Link:      fmt.Sprintf("https://sensors.example.org/station/%d/readings/%d", id, r),
				Title:     fmt.Sprintf("Station %d: water level %d.%d cm", id, 100+r%50, r%10),
				Summary:   fmt.Sprintf("<p>Water level at station %d, gauge 1, averaged over the hour: %d.%d cm.</p>", id, 100+r%50, r%10),
				Published: at.Add(-3 * time.Minute),
				Reading:   &Reading{Value: 100 + float64(r%50), Unit: "cm", Sensor: "gauge-1", Time: at.Add(-3 * time.Minute)},
			}
			o := Observation{At: at, Hit: true, Published: []time.Time{it.Published}, LatencyS: []float64{180}, Status: 200}
			if r == 0 && id == ids[0] {
				raw, _ := encodeItem(&it, 1)
				js, _ := marshalItem(&it, 1)
				ob, _ := marshalObservation(&o)
				itemB, itemJSONB, obsB = len(raw), len(js), len(ob)
			}
			if _, err := s.RecordFetch(id, []Item{it}, o, func(*Feed, *Observation, []Item) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	used, err := s.InUse()
	if err != nil {
		b.Fatal(err)
	}
	n := float64(len(ids))
	b.ReportMetric(float64(used)/n, "in-use-B/feed")
	b.ReportMetric(float64(used-used0)/n/float64(DefaultRetention.MaxItems+DefaultMaxObservations), "in-use-B/(item+obs)")
	b.ReportMetric(float64(itemB), "item-B")
	b.ReportMetric(float64(itemJSONB), "item-json-B")
	b.ReportMetric(float64(used)/n/float64(DefaultRetention.MaxItems*itemJSONB), "in-use/item-json-B")
	b.ReportMetric(float64(obsB), "obs-B")
	b.Logf("%d feeds at %d items and %d observations each: %d MiB in use, %.0f GB for a million feeds",
		len(ids), DefaultRetention.MaxItems, DefaultMaxObservations, used>>20, float64(used)/n*1e6/1e9)
	logBuckets(b, s, len(ids))
}

// logBuckets logs the pages and leaf fill of each top-level bucket.
func logBuckets(b *testing.B, s *Store, feeds int) {
	_ = s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			st := bk.Stats()
			pages := st.LeafPageN + st.BranchPageN + st.LeafOverflowN + st.BranchOverflowN
			if pages > 0 {
				b.Logf("%-10s %8d keys %7d pages (%6d B a feed), leaves %3.0f%% full",
					name, st.KeyN, pages, pages*s.db.Info().PageSize/feeds, 100*float64(st.LeafInuse)/float64(max(1, st.LeafAlloc)))
			}
			return nil
		})
	})
}
