package jetstream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

const benchFeeds, benchPerPoll = 100, 20

// benchPoll is poll i: 20 new items.
func benchPoll(i int) []storage.Item {
	out := make([]storage.Item, benchPerPoll)
	for j := range out {
		out[j] = storage.Item{ID: fmt.Sprintf("p%d-%d", i, j), Title: "reading", Summary: "21.5 °C",
			Published: time.Unix(int64(i*benchPerPoll+j), 0).UTC()}
	}
	return out
}

func reportItems(b *testing.B) {
	b.ReportMetric(float64(b.N*benchPerPoll)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkAddItems stores polls of 20 new items each, round robin over
// 100 feeds, side by side: the bbolt store (one transaction per poll,
// fsynced, and without fsync), the JetStream store on one embedded server
// (R1) and on an embedded 3-server cluster (R3), all in this process on
// loopback. JetStream acknowledges once a majority of the replicas have
// the message in their log; it does not fsync each message (the server's
// sync_interval does), so compare it with bbolt-nosync for the work done
// and with bbolt for durability on one machine; R3 survives the loss of
// one of three machines.
//
//	go test -run xxx -bench BenchmarkAddItems -benchtime 300x ./storage/jetstream/
func BenchmarkAddItems(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		name := "bbolt"
		if noSync {
			name = "bbolt-nosync"
		}
		b.Run(name, func(b *testing.B) { benchBolt(b, noSync) })
	}
	for _, servers := range []int{1, 3} {
		b.Run(fmt.Sprintf("jetstream-R%d", servers), func(b *testing.B) {
			var c *jstest.Cluster
			if servers == 1 {
				c = jstest.NewServer(b)
			} else {
				c = jstest.NewCluster(b, servers)
			}
			st, _ := openStore(b, c)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.ResetTimer()
			for i := range b.N {
				if added, err := st.AddItems(ctx, uint64(i%benchFeeds+1), benchPoll(i), storage.Retention{}); err != nil || len(added) != benchPerPoll {
					b.Fatalf("added %d, %v", len(added), err)
				}
			}
			reportItems(b)
		})
	}
}

func benchBolt(b *testing.B, noSync bool) {
	st, err := storage.Open(filepath.Join(b.TempDir(), "bench.db"), storage.Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ids := make([]uint64, benchFeeds)
	for i := range ids {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("http://127.0.0.1:1/%d.xml", i), Policy: "auto"}
		if err := st.CreateFeed(&f); err != nil {
			b.Fatal(err)
		}
		ids[i] = f.ID
	}
	b.ResetTimer()
	for i := range b.N {
		if added, err := st.AddItems(ids[i%benchFeeds], benchPoll(i)); err != nil || len(added) != benchPerPoll {
			b.Fatalf("added %d, %v", len(added), err)
		}
	}
	reportItems(b)
}
