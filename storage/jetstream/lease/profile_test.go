package lease

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// scaleProfileEnv names a path prefix: when set, the many-feeds
// measurement writes heap profiles of the whole process (servers and
// nodes) around the first node's initial load, <prefix>-before.pb.gz and
// <prefix>-after.pb.gz, to be compared with go tool pprof -base.
const scaleProfileEnv = "SLOGFEED_SCALE_HEAPPROFILE"

// writeHeapProfile writes the in-use heap, after a collection, to the
// profile file named by scaleProfileEnv and suffix (nothing when unset).
func writeHeapProfile(tb testing.TB, suffix string) {
	tb.Helper()
	prefix := os.Getenv(scaleProfileEnv)
	if prefix == "" {
		return
	}
	runtime.GC()
	f, err := os.Create(prefix + "-" + suffix + ".pb.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}

// assetsIdle is how long BenchmarkServerAssets waits, after its last
// publish, before it measures the servers once more (the file store drops
// its block caches after 10 s idle and its per-block subject indexes after
// two minutes).
var assetsIdle = flag.Duration("assets.idle", 0, "BenchmarkServerAssets: idle time before the last measure (0: none)")

// BenchmarkServerAssets measures, on an embedded 3-server JetStream
// cluster (R3) without nodes, what the servers hold per feed for each of
// the store's assets, one after the other: each feed's record in the defs
// bucket (as createFeeds writes it), one item on the feed's subject of the
// items stream and one observation on its shard's subject of the
// observations stream, published as the Store publishes them (headers,
// message IDs, a body of the usual size), then every record written again
// (the previous revision removed from its block). With msgids=false neither
// carries a message ID, to tell the duplicate windows' share. Each figure
// is the growth of the process over the phase, per feed per server:
//
//	go test -run '^$' -bench 'BenchmarkServerAssets/feeds=100000$' -benchtime 1x -timeout 30m -assets.idle=130s ./storage/jetstream/lease/
func BenchmarkServerAssets(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 300_000} {
		b.Run("feeds="+strconv.Itoa(n), func(b *testing.B) {
			for _, ids := range []bool{true, false} {
				b.Run("msgids="+strconv.FormatBool(ids), func(b *testing.B) {
					for range b.N {
						benchAssets(b, n, ids)
					}
				})
			}
		})
	}
}

func benchAssets(b *testing.B, n int, msgIDs bool) {
	c := jstest.NewCluster(b, 3, jstest.WithMaxStore(max(256<<20, int64(n)*16<<10)))
	nc := c.Connect(b)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if _, err := sjs.Open(ctx, js, sjs.Options{Shards: cluster.DefaultShards}); err != nil {
		b.Fatal(err)
	}
	per := float64(n) * 3
	last := readMemSplit()
	phase := func(name string) {
		now := readMemSplit()
		d := now.sub(last).per(per)
		last = now
		b.Logf("%s: %s", name, d)
		b.ReportMetric(d.live, name+"-heap-B/feed")
		b.ReportMetric(d.rss, name+"-rss-B/feed")
		writeHeapProfile(b, "assets-"+name)
	}
	createFeeds(b, js, n, true)
	phase("defs")
	publishAll(ctx, b, js, n, func(id int) *nats.Msg {
		at := scaleT0.Add(-5 * time.Second)
		key := sjs.MsgID(uint64(id), "r0")
		m := nats.NewMsg("slogfeed.items." + strconv.Itoa(id))
		m.Header.Set(sjs.ItemKeyHeader, key)
		m.Header.Set(sjs.ItemTimeHeader, strconv.FormatInt(at.UnixNano(), 10))
		if msgIDs {
			m.Header.Set(jetstream.MsgIDHeader, key)
		}
		m.Data, _ = json.Marshal(storage.Item{ID: "r0", Title: "reading 12.0", Published: at, Fetched: scaleT0,
			Reading: &storage.Reading{Value: 12, Unit: "µg/m³", Time: at}})
		return m
	})
	phase("items")
	publishAll(ctx, b, js, n, func(id int) *nats.Msg {
		shard := cluster.ShardOf(cluster.KindFeed, uint64(id), cluster.DefaultShards)
		m := nats.NewMsg("slogfeed.obs." + strconv.Itoa(shard) + "." + strconv.Itoa(id))
		if msgIDs {
			m.Header.Set(jetstream.MsgIDHeader, strconv.Itoa(id)+"/"+strconv.FormatInt(scaleT0.UnixNano(), 10))
		}
		m.Data, _ = json.Marshal(storage.Observation{At: scaleT0, Status: 200, Hit: true,
			Published: []time.Time{scaleT0.Add(-5 * time.Second)}, LatencyS: []float64{5}})
		return m
	})
	phase("observations")
	// Each record written again, as a poll writes it: the bucket keeps one
	// revision, so the server removes the previous one from its block.
	createFeeds(b, js, n, true)
	phase("defs-rewrite")
	if *assetsIdle > 0 {
		time.Sleep(*assetsIdle)
		phase("idle")
	}
	for _, s := range []string{sjs.ItemsStream, sjs.ObsStream, "KV_" + sjs.DefsBucket} {
		st, err := js.Stream(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		info := st.CachedInfo()
		b.Logf("%s: %d messages, %d subjects, %d bytes", s, info.State.Msgs, info.State.NumSubjects, info.State.Bytes)
	}
}

// publishAll publishes msg(id) for ids 1..n asynchronously, a thousand
// at a time, and fails unless every one is stored.
func publishAll(ctx context.Context, b *testing.B, js jetstream.JetStream, n int, msg func(id int) *nats.Msg) {
	b.Helper()
	var acks []jetstream.PubAckFuture
	for id := 1; id <= n; id++ {
		a, err := js.PublishMsgAsync(msg(id))
		if err != nil {
			b.Fatal(err)
		}
		acks = append(acks, a)
		if id%1000 == 0 || id == n {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				b.Fatal("publishing: ", ctx.Err())
			}
			for _, a := range acks {
				select {
				case err := <-a.Err():
					b.Fatal(err)
				default:
				}
			}
			acks = acks[:0]
		}
	}
}
