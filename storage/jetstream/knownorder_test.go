package jetstream

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

func TestTimeHeader(t *testing.T) {
	for _, c := range []struct {
		t      time.Time
		header string
		at     int64
	}{
		{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), "+1772323200000000000", 1772323200000000000},
		{time.Unix(0, 0), "+0", 0},
		{time.Unix(-1, 0), "-01000000000", -1000000000},
		{time.Unix(0, math.MaxInt64-1), "+9223372036854775806", math.MaxInt64 - 1},
		{time.Unix(0, math.MinInt64+1), "-09223372036854775807", math.MinInt64 + 1},
		{time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC), "2400-01-01T00:00:00Z", math.MaxInt64},
		{time.Date(1500, 1, 1, 0, 0, 0, 5, time.UTC), "1500-01-01T00:00:00.000000005Z", math.MinInt64},
		{time.Unix(0, math.MaxInt64), "2262-04-11T23:47:16.854775807Z", math.MaxInt64},
	} {
		h := timeHeader(c.t)
		if h != c.header {
			t.Errorf("timeHeader(%v) = %q, want %q", c.t, h, c.header)
		}
		at, loose, ok := parseTimeHeader(h)
		if !ok || loose || at != c.at {
			t.Errorf("parseTimeHeader(%q) = %d, %v, %v; want %d, exact", h, at, loose, ok, c.at)
		}
		// Readers of the integer form read the signed one alike.
		if ns, err := strconv.ParseInt(h, 10, 64); err == nil && ns != c.at {
			t.Errorf("ParseInt(%q) = %d, want %d", h, ns, c.at)
		}
	}
	for _, c := range []struct {
		header       string
		at           int64
		loose, valid bool
	}{
		{"1772323200000000000", 1772323200000000000, true, true}, // the form an earlier version wrote
		{"-1000000000", -1000000000, true, true},
		{"0", 0, true, true},
		{"", 0, false, false},
		{"soon", 0, false, false},
	} {
		at, loose, ok := parseTimeHeader(c.header)
		if ok != c.valid || ok && (at != c.at || loose != c.loose) {
			t.Errorf("parseTimeHeader(%q) = %d, %v, %v; want %d, %v, %v", c.header, at, loose, ok, c.at, c.loose, c.valid)
		}
	}
}

func TestSpanOf(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	far := time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC)
	past := time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name         string
		since, until time.Time
		want         span
	}{
		{"none", time.Time{}, time.Time{}, allTime},
		{"since", t0, time.Time{}, span{t0.UnixNano(), math.MaxInt64}},
		{"until", time.Time{}, t0, span{math.MinInt64, t0.UnixNano() - 1}},
		{"since beyond 2262", far, time.Time{}, span{math.MaxInt64, math.MaxInt64}},
		{"until beyond 2262", t0, far, span{t0.UnixNano(), math.MaxInt64}},
		{"until before 1678", time.Time{}, past, span{math.MinInt64, math.MinInt64}},
		{"since before 1678", past, t0, span{math.MinInt64, t0.UnixNano() - 1}},
		{"both beyond 2262", far, far.AddDate(1, 0, 0), span{math.MaxInt64, math.MaxInt64}},
	} {
		if got := spanOf(c.since, c.until); got != c.want {
			t.Errorf("%s: spanOf = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// checkOrder fails unless feed 1's bySeq and byAt hold exactly its
// stored entries, in their orders, and its loose set the sequences of
// loose.
func checkOrder(t *testing.T, k *known, loose ...uint64) {
	t.Helper()
	f := k.feeds[1]
	var want []knownEntry
	for _, seq := range f.items {
		if seq != 0 {
			want = append(want, knownEntry{seq: seq, at: f.atOf(seq)})
		}
	}
	slices.SortFunc(want, bySeqOrder)
	if !slices.Equal(f.bySeq, want) {
		t.Fatalf("bySeq = %v, want %v", f.bySeq, want)
	}
	slices.SortFunc(want, byAtOrder)
	if !slices.Equal(f.byAt, seqsOf(want)) {
		t.Fatalf("byAt = %v, want %v", f.byAt, want)
	}
	if got := slices.Sorted(maps.Keys(f.loose)); !slices.Equal(got, loose) {
		t.Fatalf("loose = %v, want %v", got, loose)
	}
	if len(f.pend.put) != 0 || len(f.pend.drop) != 0 {
		t.Fatal("changes left pending")
	}
}

// TestKnownOrderFollowsChanges: after every change of a feed's index,
// its entries ordered by sequence and by sort time are its stored items.
func TestKnownOrderFollowsChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shuffled := func(n, from int) []knownItem {
		out := make([]knownItem, n)
		for i := range out {
			out[i] = knownItem{key: fmt.Sprint("r", from+i), seq: uint64(from + i), at: rng.Int64N(1000)}
		}
		return out
	}
	for _, c := range []struct {
		name  string
		do    func(k *known)
		loose []uint64
	}{
		{"in order, oldest removed", func(k *known) {
			k.extend(1, 3, ki("a", 1, "b", 2, "c", 3), false)
			for i := 4; i < 40; i++ {
				k.advance(1, uint64(i-1), knownItem{key: fmt.Sprint("x", i), seq: uint64(i), at: int64(i) * 10})
				live, _ := k.live(1)
				k.removed(1, live[:1])
			}
		}, nil},
		{"late arrivals", func(k *known) {
			k.extend(1, 3, ki("a", 1, "b", 2, "c", 3), false)
			k.add(1, []knownItem{{key: "late", seq: 4, at: 5}, {key: "later", seq: 5, at: 15}})
		}, nil},
		{"a key moved to a later message", func(k *known) {
			k.extend(1, 3, ki("a", 1, "b", 2, "c", 3), false)
			k.add(1, []knownItem{{key: "a", seq: 7, at: 100}})
			k.removed(1, []knownItem{{key: "a", seq: 1}})
		}, nil},
		{"many at once, out of order", func(k *known) {
			k.extend(1, 500, shuffled(500, 1), false)
			k.extend(1, 800, shuffled(300, 501), false)
			live, _ := k.live(1)
			k.removed(1, live[100:400])
			k.add(1, shuffled(5, 900))
		}, nil},
		{"loose entries, vouched for", func(k *known) {
			k.extend(1, 4, []knownItem{{key: "a", seq: 1, at: 10, loose: true}, {key: "b", seq: 2, at: 20, loose: true},
				{key: "c", seq: 3, at: 30, loose: true}, {key: "d", seq: 4, at: 40}}, false)
			k.extend(1, 4, []knownItem{{key: "a", seq: 1, at: math.MaxInt64}}, false)   // read exact
			k.extend(1, 4, []knownItem{{key: "a", seq: 1, at: 10, loose: true}}, false) // a loose read does not undo it
			k.removed(1, []knownItem{{key: "b", seq: 2}})
		}, []uint64{3}},
		{"reset", func(k *known) {
			k.extend(1, 4, shuffled(4, 1), false)
			k.extend(1, 2, []knownItem{{key: "z", seq: 2, at: 1, loose: true}}, true)
		}, []uint64{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKnown(4, 0, 0)
			c.do(k)
			checkOrder(t, k, c.loose...)
		})
	}
}

// TestKnownNthNewest: the n-th newest stored item below a sequence, in a
// window of sort times; an entry whose time is not exact counts as in
// any window it may be in.
func TestKnownNthNewest(t *testing.T) {
	k := newKnown(4, 0, 0)
	// a@1 … h@8 at 10 … 80; d removed; g at the upper bound; h loose.
	k.extend(1, 8, ki("a", 1, "b", 2, "c", 3, "d", 4, "e", 5, "f", 6), false)
	k.extend(1, 8, []knownItem{{key: "g", seq: 7, at: math.MaxInt64}, {key: "h", seq: 8, at: 5, loose: true}}, false)
	k.removed(1, []knownItem{{key: "d", seq: 4}})
	for _, c := range []struct {
		n     int
		below uint64
		sp    span
		want  uint64 // 0: none
	}{
		{1, 0, allTime, 8},
		{3, 0, allTime, 6},
		{4, 0, allTime, 5},
		{5, 0, allTime, 3},
		{7, 0, allTime, 1},
		{8, 0, allTime, 0},
		{1, 6, allTime, 5},
		{2, 6, allTime, 3},
		{1, 1, allTime, 0},
		{1, 0, span{20, 30}, 8},             // h may be anywhere
		{2, 0, span{20, 30}, 3},             // then c
		{2, 8, span{20, 60}, 5},             // below h: f, e
		{1, 8, span{100, math.MaxInt64}, 7}, // only g may be
		{1, 7, span{100, math.MaxInt64}, 0},
	} {
		got, ok := k.nthNewest(1, c.n, c.below, c.sp)
		if ok != (c.want != 0) || got != c.want {
			t.Errorf("nthNewest(%d, below %d, %+v) = %d, %v; want %d", c.n, c.below, c.sp, got, ok, c.want)
		}
	}
}

// TestKnownNewestByTime: the items a read by sort time takes, and the
// runs of the subject they are read in.
func TestKnownNewestByTime(t *testing.T) {
	// 40 items in order (seq 1..40, at 10..400), then at 41 one dated
	// beyond 2262, at 42 one before 1678, at 43 one loose (its header
	// says 5), at 44 one late (at 15), and 45..50 in order again.
	var items []knownItem
	for i := 1; i <= 40; i++ {
		items = append(items, knownItem{key: fmt.Sprint("r", i), seq: uint64(i), at: int64(i) * 10})
	}
	items = append(items, knownItem{key: "future", seq: 41, at: math.MaxInt64}, knownItem{key: "past", seq: 42, at: math.MinInt64},
		knownItem{key: "loose", seq: 43, at: 5, loose: true}, knownItem{key: "late", seq: 44, at: 15})
	for i := 45; i <= 50; i++ {
		items = append(items, knownItem{key: fmt.Sprint("r", i), seq: uint64(i), at: int64(i) * 10})
	}
	seqs := func(from, to int) []uint64 {
		var out []uint64
		for i := from; i <= to; i++ {
			out = append(out, uint64(i))
		}
		return out
	}
	for _, c := range []struct {
		name  string
		limit int
		sp    span
		most  int
		want  []uint64 // the sequences read for the answer; nil: cannot tell
		runs  int      // with the run of the tail, alone when no other ends the index
	}{
		{"newest 3", 3, allTime, 100, []uint64{41, 43, 48, 49, 50}, 1},
		{"newest 10", 10, allTime, 100, append([]uint64{37, 38, 39, 40, 41, 43}, seqs(45, 50)...), 1},
		{"oldest window", 3, span{0, 25}, 100, []uint64{1, 2, 43, 44}, 3},
		{"fewer than the limit: the lower bound too", 5, span{math.MinInt64, 12}, 100, []uint64{1, 42, 43}, 3},
		{"beyond 2262 only", 2, span{math.MaxInt64, math.MaxInt64}, 100, []uint64{41, 43}, 2},
		{"none but the loose one", 2, span{1000, 2000}, 100, []uint64{43}, 2},
		{"no limit", 0, span{100, 150}, 100, []uint64{10, 11, 12, 13, 14, 15, 43}, 3},
		{"more than most", 30, allTime, 20, nil, 0},
		{"no limit, more than half the feed", 0, allTime, 100, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKnown(4, 0, 0)
			k.extend(1, 50, items, false)
			runs, upTo, after, ok := k.newestByTime(1, c.limit, c.sp, c.most)
			if ok != (c.want != nil) {
				t.Fatalf("newestByTime: %v, want %v", ok, c.want != nil)
			}
			if !ok {
				return
			}
			if upTo != 50 || after != 0 {
				t.Errorf("up to %d, %d after; want 50, 0", upTo, after)
			}
			var want []uint64
			for i, r := range runs {
				want = append(want, r.want...)
				if len(r.seqs) > 0 && (r.from != r.seqs[0] || r.seqs[0] != r.want[0] || r.seqs[len(r.seqs)-1] != r.want[len(r.want)-1]) {
					t.Errorf("run %d: from %d, seqs %v, want %v", i, r.from, r.seqs, r.want)
				}
				if r.tail != (i == len(runs)-1) {
					t.Errorf("run %d: tail %v", i, r.tail)
				}
			}
			if !slices.Equal(want, c.want) || len(runs) != c.runs {
				t.Errorf("read %v in %d runs, want %v in %d", want, len(runs), c.want, c.runs)
			}
		})
	}
	// Items stored since the index was synced: read with the tail.
	k := newKnown(4, 0, 0)
	k.extend(1, 44, items[:44], false)
	k.add(1, items[44:])
	runs, upTo, after, ok := k.newestByTime(1, 3, allTime, 100)
	if !ok || upTo != 44 || after != 6 || len(runs) != 2 || !slices.Equal(runs[0].want, []uint64{41, 43}) ||
		!runs[1].tail || runs[1].from != 45 || len(runs[1].seqs) != 0 {
		t.Errorf("with 6 items after the sync: %+v, up to %d, %d after, %v", runs, upTo, after, ok)
	}
	k = newKnown(4, 0, 0)
	k.extend(1, 50, items, false)
	k.add(1, []knownItem{{key: "r1", seq: 51, at: 10}}) // two messages of r1
	if _, _, _, ok := k.newestByTime(1, 3, allTime, 100); ok {
		t.Error("newestByTime vouched for an index that may lack a message")
	}
}

// TestKnownSettleDropsReplacedEntry: a sync of more than 64 messages in
// which one key is held by two messages (a digest replacing an item)
// puts and drops the older message's entry in the same settle; neither
// order keeps it, and the count of stored items is the items'.
func TestKnownSettleDropsReplacedEntry(t *testing.T) {
	for _, n := range []int{10, 64, 70, 300} {
		k := newKnown(100, 100, 1<<20)
		var its []knownItem
		for i := 1; i <= n; i++ {
			its = append(its, knownItem{key: fmt.Sprintf("k%d", i), seq: uint64(i), at: int64(i) * 1000})
		}
		// The digests of k1 and k2, stored last.
		its = append(its,
			knownItem{key: "k1", seq: uint64(n + 1), at: 500},
			knownItem{key: "k2", seq: uint64(n + 2), at: 2000})
		k.extend(1, uint64(n+2), its, true)
		f := k.feeds[1]
		if len(f.bySeq) != n || len(f.byAt) != n {
			t.Errorf("%d items: bySeq %d, byAt %d entries", n, len(f.bySeq), len(f.byAt))
		}
		if cnt, at := k.oldest(1); cnt != n || at != 500 {
			t.Errorf("%d items: oldest() = %d, %d", n, cnt, at)
		}
		if seq, ok := k.nthNewest(1, n, 0, allTime); !ok || seq != 3 {
			t.Errorf("%d items: the %d-th newest is %d, %v; want 3", n, n, seq, ok)
		}
		checkOrder(t, k)
	}
}

// TestKnownVouchWork: vouching for an index read from an earlier
// version's headers (every entry loose) looks up each entry's sort time
// in a bounded number of steps, not in the pending changes of all the
// entries vouched for before it (which made 100,000 entries take seconds
// under the node-wide lock).
func TestKnownVouchWork(t *testing.T) {
	const n = 20000
	k := newKnown(100, 100, 1<<22)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	its := make([]knownItem, n)
	items := make([]storage.Item, n)
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		at := t0.Add(time.Duration(i) * time.Second)
		its[i] = knownItem{key: MsgID(1, id), seq: uint64(i + 1), at: at.UnixNano() + 1, loose: true}
		items[i] = storage.Item{ID: id, Seq: uint64(i + 1), Published: at}
	}
	k.extend(1, n, its, true)
	before := k.pend.scanned
	k.vouch(1, items)
	f := k.feeds[1]
	if f.loose != nil {
		t.Fatalf("%d entries still loose", len(f.loose))
	}
	if work := k.pend.scanned - before; work > 2*pendingScan*n {
		t.Errorf("vouching for %d entries looked through %d pending entries", n, work)
	}
	if len(f.bySeq) != n || len(f.byAt) != n {
		t.Fatalf("bySeq %d, byAt %d entries", len(f.bySeq), len(f.byAt))
	}
	for i, e := range f.bySeq {
		if want := t0.Add(time.Duration(i) * time.Second).UnixNano(); e.at != want {
			t.Fatalf("entry %d: sort time %d, want %d", e.seq, e.at, want)
		}
	}
	checkOrder(t, k)
}
