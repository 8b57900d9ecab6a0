package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// BenchmarkOwnedCopyBytes reports the heap one owned feed's record copy
// takes (ownRecords), for a remote feed with validators, counters and a
// 300-byte learned policy state (a third of its bytes varied, the rest
// zero, as a DPT state's small counts and unset fields leave it), kept
// as a poll's write leaves it.
func BenchmarkOwnedCopyBytes(b *testing.B) {
	const n = 20_000
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	policy := make([]byte, 300)
	for i := range policy {
		if i%3 == 0 {
			policy[i] = byte(i * 7919 >> 3)
		}
	}
	encoded := make([][]byte, n)
	for i := range encoded {
		rec := feedRecord{
			Feed: storage.Feed{ID: uint64(i + 1), Kind: storage.KindRemote, URL: fmt.Sprintf("http://127.0.0.%d:8080/feeds/%d.xml", i%8+1, i),
				Title: fmt.Sprintf("Sensor %d", i), Policy: "auto", NextFetch: at, ETag: fmt.Sprintf(`"%x"`, i*7919),
				LastModified: at.Format(time.RFC1123), Polls: 100, Hits: 90, Items: 80, LastFetch: at, LastHit: at},
			State: &recordState{Next: at, Last: at, Policy: policy},
		}
		data, err := json.Marshal(&rec)
		if err != nil {
			b.Fatal(err)
		}
		encoded[i] = data
	}
	for b.Loop() {
		var r ownRecords
		r.max = n
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i, data := range encoded {
			r.put(uint64(i+1), ownRecord{data: bytes.Clone(packRecord(data, true)), rev: 1}, func(uint64, ownMark) bool { return true })
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/feed")
		runtime.KeepAlive(&r)
	}
}

// BenchmarkTrustedIndexBytes reports the heap of an owned feed's item
// index (kept, trusted, beyond the bound of recently used feeds) per feed
// and per item ID, for feeds of 10 and of 100 items.
func BenchmarkTrustedIndexBytes(b *testing.B) {
	const n = 5_000
	for _, per := range []int{10, 100} {
		b.Run(fmt.Sprintf("items=%d", per), func(b *testing.B) {
			valid := func(uint64, ownMark) (bool, bool) { return true, false }
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				k := newKnown(1, n, n*per)
				for id := range uint64(n) {
					its := make([]knownItem, per)
					for i := range its {
						its[i] = knownItem{key: MsgID(id, fmt.Sprintf("https://example.com/item/%d", i)), seq: id*uint64(per) + uint64(i) + 1, at: int64(i)}
					}
					k.extend(id, its[per-1].seq, its, false)
					k.trust(id, ownMark{}, valid)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if k.nTrusted != n {
					b.Fatalf("%d trusted, want %d", k.nTrusted, n)
				}
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/feed")
				runtime.KeepAlive(k)
			}
		})
	}
}

// TestOwnRecordsBoundScansRarely: with the copies at their bound and all
// still valid (a node owning more feeds than the bound), puts of other
// feeds are refused with a scan of the copies once per max/8 of them,
// not at each; once copies stop being valid (shards moved away), a put
// within max/8 finds them and is kept.
func TestOwnRecordsBoundScansRarely(t *testing.T) {
	const max = 800
	r := ownRecords{max: max}
	stillValid := true
	checks := 0
	valid := func(uint64, ownMark) bool { checks++; return stillValid }
	for id := range uint64(max) {
		r.put(id, ownRecord{rev: 1}, valid)
	}
	if checks != 0 || len(r.feeds) != max {
		t.Fatalf("filling: %d checks, %d copies", checks, len(r.feeds))
	}
	const beyond = 10_000
	for id := uint64(max); id < max+beyond; id++ {
		r.put(id, ownRecord{rev: 1}, valid)
	}
	scans := beyond/(max/8+1) + 1
	if len(r.feeds) != max || checks > scans*max {
		t.Fatalf("%d puts beyond the bound: %d checks (at most %d scans of %d wanted), %d copies", beyond, checks, scans, max, len(r.feeds))
	}
	stillValid = false
	kept := -1
	for i := range max/8 + 1 {
		id := uint64(max + beyond + i)
		r.put(id, ownRecord{rev: 1}, valid)
		if _, ok := r.feeds[id]; ok {
			kept = i
			break
		}
	}
	if kept < 0 {
		t.Fatalf("no put kept within %d after the copies stopped being valid", max/8+1)
	}
}

// renewingOwner owns one shard, lapsed in tenure 1 until its lease is
// renewed (same tenure) by the OwnsFeed call numbered renewAt.
type renewingOwner struct {
	calls, renewAt int
}

func (o *renewingOwner) renewed() bool            { return o.calls >= o.renewAt }
func (o *renewingOwner) OwnsPipe(uint64) bool     { return false }
func (o *renewingOwner) Changed() <-chan struct{} { return nil }
func (o *renewingOwner) Shards() int              { return 1 }
func (o *renewingOwner) Tenure(int) uint64        { return 1 }
func (o *renewingOwner) Holds() []cluster.Hold {
	return []cluster.Hold{{Owned: o.renewed(), Lapsed: !o.renewed(), Tenure: 1}}
}
func (o *renewingOwner) Lapsed(int) (uint64, bool) { return 1, !o.renewed() }

func (o *renewingOwner) OwnsFeed(uint64) bool {
	owned := o.renewed()
	o.calls++
	return owned
}

// TestOwnershipAcrossRenewal: a copy made in a shard's tenure is used
// once the lapsed lease is renewed in that tenure, kept while it is
// lapsed, and, when the renewal lands between the question of
// ownership and that of the lapse, still judged usable rather than
// neither owned nor lapsed (which would drop it).
func TestOwnershipAcrossRenewal(t *testing.T) {
	tests := []struct {
		name      string
		renewAt   int // the OwnsFeed call the renewal lands after
		use, keep bool
	}{
		{name: "renewed before", renewAt: 0, use: true},
		{name: "renewed between the questions", renewAt: 1, use: true},
		{name: "still lapsed", renewAt: 100, keep: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := storeOnBareServer(t)
			o := &renewingOwner{renewAt: tt.renewAt}
			s.owner.Store(&ownerBox{o})
			m := ownMark{gen: s.ownGen.Load(), reconnects: s.reconnects(), tenure: 2}
			if use, keep := s.ownership(7, m); use != tt.use || keep != tt.keep {
				t.Fatalf("ownership = use %v, keep %v; want %v, %v", use, keep, tt.use, tt.keep)
			}
		})
	}
}
