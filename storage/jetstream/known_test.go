package jetstream

import (
	"fmt"
	"slices"
	"testing"
)

// ki builds index entries key@seq at sort time seq*10 (seq 0: removed).
func ki(keyseq ...any) []knownItem {
	var out []knownItem
	for i := 0; i < len(keyseq); i += 2 {
		seq := uint64(keyseq[i+1].(int))
		out = append(out, knownItem{key: keyseq[i].(string), seq: seq, at: int64(seq) * 10})
	}
	return out
}

func keys(items []knownItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.key)
	}
	return out
}

func TestKnownBoundsFeedsAndTracksSequences(t *testing.T) {
	k := newKnown(2, 0, 0)
	k.extend(1, 10, ki("a", 10), false)
	k.extend(2, 20, ki("b", 20), false)
	if _, ok := k.upTo(1); !ok { // 1 is now the most recently used
		t.Fatal("feed 1 missing")
	}
	k.extend(3, 30, ki("c", 30), false) // evicts 2
	if _, ok := k.upTo(2); ok {
		t.Fatal("feed 2 not evicted")
	}
	if !k.has(1, "a") || !k.has(3, "c") || k.has(2, "b") {
		t.Fatal("wrong members after eviction")
	}
	k.add(1, ki("a2", 12))
	if up, _ := k.upTo(1); up != 10 || !k.has(1, "a2") {
		t.Fatalf("add moved the sequence to %d or lost the ID", up)
	}
	k.extend(1, 15, ki("a3", 15), false)
	if up, _ := k.upTo(1); up != 15 || !k.has(1, "a") || !k.has(1, "a3") {
		t.Fatal("extend did not keep earlier IDs")
	}
	k.extend(1, 5, ki("x", 5), true)
	if k.has(1, "a") || !k.has(1, "x") {
		t.Fatal("reset kept old IDs")
	}
	k.add(9, ki("q", 1)) // unknown feed: nothing
	k.forget(1)
	if _, ok := k.upTo(1); ok || k.has(9, "q") {
		t.Fatal("forget or add on an unknown feed misbehaved")
	}
}

// TestKnownOrdersByTimeAndKeepsRemoved pins what retention reads from the
// index: stored items oldest first by sort time, then sequence; removed
// items known but not stored; a key moved to a later message (a digest
// replacing an item) not marked removed by the removal of its old one.
func TestKnownOrdersByTimeAndKeepsRemoved(t *testing.T) {
	k := newKnown(4, 0, 0)
	k.extend(1, 4, []knownItem{{key: "late", seq: 1, at: 50}, {key: "b", seq: 2, at: 20}, {key: "c", seq: 3, at: 20}, {key: "d", seq: 4, at: 10}}, false)
	live, ok := k.live(1)
	if !ok || !slices.Equal(keys(live), []string{"d", "b", "c", "late"}) {
		t.Fatalf("live = %v, %v; want d b c late", keys(live), ok)
	}
	if n, at := k.oldest(1); n != 4 || at != 10 {
		t.Fatalf("oldest = %d, %d; want 4, 10", n, at)
	}
	k.removed(1, []knownItem{{key: "d", seq: 4}})
	if n, at := k.oldest(1); n != 3 || at != 20 || !k.has(1, "d") || k.stored(1, "d") != 0 {
		t.Fatalf("after removing d: oldest %d, %d; has %v stored %d", n, at, k.has(1, "d"), k.stored(1, "d"))
	}
	k.add(1, []knownItem{{key: "b", seq: 9, at: 30}}) // b replaced by a later message
	k.removed(1, []knownItem{{key: "b", seq: 2}})     // its old message removed
	if k.stored(1, "b") != 9 {
		t.Fatalf("b stored at %d, want 9", k.stored(1, "b"))
	}
	k.add(1, []knownItem{{key: "b", seq: 2, at: 20}}) // an older message does not win
	if k.stored(1, "b") != 9 {
		t.Fatalf("an older message replaced b: %d", k.stored(1, "b"))
	}
	if _, ok := k.live(7); ok {
		t.Fatal("live of a feed without index")
	}
}

// ownedFeeds is the ownership the known tests trust under: the feeds
// set true, under marks of generation 1.
type ownedFeeds map[uint64]bool

func (o ownedFeeds) valid(id uint64, m ownMark) (use, keep bool) { return o[id] && m.gen == 1, false }

// reset owns feeds 0 to 7 again.
func (o ownedFeeds) reset() {
	clear(o)
	for id := range uint64(8) {
		o[id] = true
	}
}

// TestKnownTrust: a trusted index (an owned feed's) is kept outside the
// bound of recently used feeds, up to ownMax; an own publish that
// extends it keeps the trust, while an addition that does not, a reset,
// or an ownership that no longer holds ends it, and the feed is again
// one of the recently used ones.
func TestKnownTrust(t *testing.T) {
	owned := ownedFeeds{}
	valid, mark := owned.valid, ownMark{gen: 1}
	tests := []struct {
		name  string
		do    func(k *known)
		trust map[uint64]bool // feed → trusted afterwards
		kept  []uint64        // feeds still indexed
	}{
		{name: "trusted feeds are not evicted",
			do: func(k *known) {
				k.extend(1, 1, ki("a", 1), false)
				k.trust(1, mark, valid)
				k.extend(2, 2, ki("b", 2), false)
				k.extend(3, 3, ki("c", 3), false)
				k.extend(4, 4, ki("d", 4), false) // evicts 2, not 1
			},
			trust: map[uint64]bool{1: true, 3: false}, kept: []uint64{1, 3, 4}},
		{name: "own publish keeps the trust",
			do: func(k *known) {
				k.extend(1, 1, ki("a", 1), false)
				k.trust(1, mark, valid)
				if !k.advance(1, 1, knownItem{key: "a2", seq: 5, at: 50}) {
					t.Error("advance refused")
				}
			},
			trust: map[uint64]bool{1: true}, kept: []uint64{1}},
		{name: "an addition that does not extend the index ends it",
			do: func(k *known) {
				k.extend(1, 1, ki("a", 1), false)
				k.trust(1, mark, valid)
				k.add(1, ki("a2", 7))
			},
			trust: map[uint64]bool{1: false}, kept: []uint64{1}},
		{name: "a reset ends it",
			do: func(k *known) {
				k.extend(1, 4, ki("a", 4), false)
				k.trust(1, mark, valid)
				k.extend(1, 2, ki("x", 2), true)
			},
			trust: map[uint64]bool{1: false}, kept: []uint64{1}},
		{name: "a feed no longer owned is untrusted when asked",
			do: func(k *known) {
				k.extend(1, 1, ki("a", 1), false)
				k.trust(1, mark, valid)
				owned[1] = false
			},
			trust: map[uint64]bool{1: false}, kept: []uint64{1}},
		{name: "a new ownership sweeps the trusted feeds",
			do: func(k *known) {
				for id := uint64(1); id <= 2; id++ {
					k.extend(id, 1, ki("a", 1), false)
					k.trust(id, mark, valid)
				}
				owned[1] = false
				k.extend(5, 1, ki("e", 1), false)
				k.trust(5, ownMark{gen: 1, changed: make(chan struct{})}, valid) // a new mark: 1 is swept
				k.extend(6, 1, ki("f", 1), false)
				k.extend(7, 1, ki("g", 1), false) // the bound of 2 evicts 1
			},
			trust: map[uint64]bool{2: true, 5: true, 7: false}, kept: []uint64{2, 5, 6, 7}},
		{name: "no more than ownMax trusted",
			do: func(k *known) {
				for id := uint64(1); id <= 4; id++ {
					k.extend(id, 1, ki("a", 1), false)
					k.trust(id, mark, valid)
				}
			},
			trust: map[uint64]bool{1: true, 2: true, 3: false, 4: false}, kept: []uint64{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owned.reset()
			k := newKnown(2, 2, 100)
			tt.do(k)
			for id, want := range tt.trust {
				if got := k.trusted(id, valid); got != want {
					t.Errorf("feed %d trusted = %v, want %v", id, got, want)
				}
			}
			var kept []uint64
			for id := range uint64(8) {
				if _, ok := k.feeds[id]; ok {
					kept = append(kept, id)
				}
			}
			if !slices.Equal(kept, tt.kept) {
				t.Errorf("indexed feeds %v, want %v", kept, tt.kept)
			}
			n := 0
			for _, f := range k.feeds {
				if f.elem == nil {
					n++
				}
			}
			if n != k.nTrusted || k.order.Len()+n != len(k.feeds) {
				t.Errorf("%d trusted counted %d; %d in the order of %d", n, k.nTrusted, k.order.Len(), len(k.feeds))
			}
		})
	}
}

// TestKnownOwnedItems: the trusted indexes hold at most itemMax item
// entries in all, counted exactly as entries are added (a sync, an own
// publish), kept when retention removes their items (their keys stay
// known), and dropped as indexes lose their trust or are forgotten; a
// feed whose trust would go beyond the bound stays untrusted, and a
// trusted index that grows past it loses its trust.
func TestKnownOwnedItems(t *testing.T) {
	owned := ownedFeeds{}
	valid, mark := owned.valid, ownMark{gen: 1}
	tests := []struct {
		name  string
		do    func(k *known)
		count int             // item entries of the trusted indexes afterwards
		trust map[uint64]bool // feed → trusted afterwards
	}{
		{name: "trust counts the index",
			do: func(k *known) {
				k.extend(1, 2, ki("a", 1, "b", 2), false)
				k.trust(1, mark, valid)
			},
			count: 2, trust: map[uint64]bool{1: true}},
		{name: "trust up to the bound exactly",
			do: func(k *known) {
				k.extend(1, 2, ki("a", 1, "b", 2), false)
				k.trust(1, mark, valid)
				k.extend(2, 4, ki("c", 3, "d", 4), false)
				k.trust(2, mark, valid)
			},
			count: 4, trust: map[uint64]bool{1: true, 2: true}},
		{name: "a feed whose trust would go beyond the bound stays untrusted",
			do: func(k *known) {
				k.extend(1, 3, ki("a", 1, "b", 2, "c", 3), false)
				k.trust(1, mark, valid)
				k.extend(2, 5, ki("d", 4, "e", 5), false)
				k.trust(2, mark, valid)
			},
			count: 3, trust: map[uint64]bool{1: true, 2: false}},
		{name: "an index larger than the bound is never trusted",
			do: func(k *known) {
				k.extend(1, 5, ki("a", 1, "b", 2, "c", 3, "d", 4, "e", 5), false)
				k.trust(1, mark, valid)
			},
			count: 0, trust: map[uint64]bool{1: false}},
		{name: "an own publish is counted",
			do: func(k *known) {
				k.extend(1, 3, ki("a", 1, "b", 2, "c", 3), false)
				k.trust(1, mark, valid)
				k.advance(1, 3, knownItem{key: "d", seq: 4, at: 40})
			},
			count: 4, trust: map[uint64]bool{1: true}},
		{name: "an own publish past the bound ends the trust",
			do: func(k *known) {
				k.extend(1, 3, ki("a", 1, "b", 2, "c", 3), false)
				k.trust(1, mark, valid)
				k.advance(1, 3, knownItem{key: "d", seq: 4, at: 40})
				if !k.advance(1, 4, knownItem{key: "e", seq: 5, at: 50}) {
					t.Error("advance refused")
				}
				if k.stored(1, "e") != 5 {
					t.Error("the index lost the published item")
				}
			},
			count: 0, trust: map[uint64]bool{1: false}},
		{name: "a key published again is counted once",
			do: func(k *known) {
				k.extend(1, 2, ki("a", 1, "b", 2), false)
				k.trust(1, mark, valid)
				k.advance(1, 2, knownItem{key: "a", seq: 3, at: 30})
			},
			count: 2, trust: map[uint64]bool{1: true}},
		{name: "retention keeps the removed keys counted",
			do: func(k *known) {
				k.extend(1, 3, ki("a", 1, "b", 2, "c", 3), false)
				k.trust(1, mark, valid)
				k.removed(1, ki("a", 1, "b", 2))
				k.removed(1, ki("zz", 9)) // not in the index
			},
			count: 3, trust: map[uint64]bool{1: true}},
		{name: "a sync that extends a trusted index is counted",
			do: func(k *known) {
				k.extend(1, 1, ki("a", 1), false)
				k.trust(1, mark, valid)
				k.extend(1, 3, ki("b", 2, "c", 3), false)
			},
			count: 3, trust: map[uint64]bool{1: true}},
		{name: "a sync past the bound ends the trust",
			do: func(k *known) {
				k.extend(1, 2, ki("a", 1, "b", 2), false)
				k.trust(1, mark, valid)
				k.extend(2, 3, ki("c", 3), false)
				k.trust(2, mark, valid)
				k.extend(2, 5, ki("d", 4, "e", 5), false)
			},
			count: 2, trust: map[uint64]bool{1: true, 2: false}},
		{name: "an addition ends the trust and its count",
			do: func(k *known) {
				k.extend(1, 2, ki("a", 1, "b", 2), false)
				k.trust(1, mark, valid)
				k.add(1, ki("c", 5))
			},
			count: 0, trust: map[uint64]bool{1: false}},
		{name: "a reset ends the trust and its count",
			do: func(k *known) {
				k.extend(1, 3, ki("a", 1, "b", 2, "c", 3), false)
				k.trust(1, mark, valid)
				k.extend(1, 1, ki("x", 1), true)
			},
			count: 0, trust: map[uint64]bool{1: false}},
		{name: "a refused publish ends the trust and its count",
			do: func(k *known) {
				k.extend(1, 2, ki("a", 1, "b", 2), false)
				k.trust(1, mark, valid)
				k.distrust(1)
			},
			count: 0, trust: map[uint64]bool{1: false}},
		{name: "a forgotten feed makes room",
			do: func(k *known) {
				k.extend(1, 2, ki("a", 1, "b", 2), false)
				k.trust(1, mark, valid)
				k.extend(2, 4, ki("c", 3, "d", 4), false)
				k.trust(2, mark, valid)
				k.forget(1)
				k.extend(3, 6, ki("e", 5, "f", 6), false)
				k.trust(3, mark, valid)
			},
			count: 4, trust: map[uint64]bool{1: false, 2: true, 3: true}},
		{name: "a feed no longer owned drops its count when asked",
			do: func(k *known) {
				k.extend(1, 2, ki("a", 1, "b", 2), false)
				k.trust(1, mark, valid)
				k.extend(2, 3, ki("c", 3), false)
				k.trust(2, mark, valid)
				owned[1] = false
				k.trusted(1, valid)
			},
			count: 1, trust: map[uint64]bool{2: true}},
		{name: "a new ownership sweeps the count",
			do: func(k *known) {
				k.extend(1, 3, ki("a", 1, "b", 2, "c", 3), false)
				k.trust(1, mark, valid)
				owned[1] = false
				k.extend(2, 5, ki("d", 4, "e", 5), false)
				k.trust(2, ownMark{gen: 1, changed: make(chan struct{})}, valid) // a new mark: 1 is swept
			},
			count: 2, trust: map[uint64]bool{2: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owned.reset()
			k := newKnown(2, 8, 4)
			tt.do(k)
			n, trusted := 0, 0
			for _, f := range k.feeds {
				if f.elem == nil {
					n += len(f.items)
					trusted++
				}
			}
			if k.nItems != n || k.nTrusted != trusted {
				t.Errorf("counted %d entries of %d trusted feeds; the indexes hold %d of %d", k.nItems, k.nTrusted, n, trusted)
			}
			if k.nItems != tt.count {
				t.Errorf("%d entries trusted, want %d", k.nItems, tt.count)
			}
			if k.nItems > k.itemMax {
				t.Errorf("%d entries trusted beyond the bound of %d", k.nItems, k.itemMax)
			}
			for id, want := range tt.trust {
				if got := k.trusted(id, valid); got != want {
					t.Errorf("feed %d trusted = %v, want %v", id, got, want)
				}
			}
		})
	}
}

// TestKnownForgetsOldestRemoved: a trusted index of a feed at its
// retention for a long time, one new item a poll and its oldest removed,
// keeps the keys of at least the newest keptRemoved removed items and at
// most twice that, counted exactly, and stays trusted.
func TestKnownForgetsOldestRemoved(t *testing.T) {
	owned := ownedFeeds{}
	owned.reset()
	mark := ownMark{gen: 1}
	const keep, polls = 10, 1000
	k := newKnown(4, 8, 1<<20)
	k.extend(1, 0, nil, false)
	k.trust(1, mark, owned.valid)
	key := func(i int) string { return fmt.Sprintf("i%04d", i) }
	for i := 1; i <= polls; i++ {
		if !k.advance(1, uint64(i-1), knownItem{key: key(i), seq: uint64(i), at: int64(i) * 10}) {
			t.Fatalf("poll %d: advance refused", i)
		}
		if live, _ := k.live(1); len(live) > keep {
			k.removed(1, live[:len(live)-keep])
		}
		f := k.feeds[1]
		gone := 0
		for _, seq := range f.items {
			if seq == 0 {
				gone++
			}
		}
		if f.gone != gone {
			t.Fatalf("poll %d: counted %d removed keys, the index holds %d", i, f.gone, gone)
		}
		if gone >= 2*keptRemoved {
			t.Fatalf("poll %d: %d removed keys kept, want < %d", i, gone, 2*keptRemoved)
		}
		if k.nItems != len(f.items) {
			t.Fatalf("poll %d: %d trusted entries counted, the index holds %d", i, k.nItems, len(f.items))
		}
	}
	if !k.trusted(1, owned.valid) {
		t.Fatal("the index lost its trust")
	}
	lastRemoved := polls - keep
	for i := lastRemoved - keptRemoved + 1; i <= lastRemoved; i++ {
		if !k.has(1, key(i)) || k.stored(1, key(i)) != 0 {
			t.Fatalf("removed key %s: has %v, stored at %d; want known and removed", key(i), k.has(1, key(i)), k.stored(1, key(i)))
		}
	}
	if k.has(1, key(1)) {
		t.Error("the oldest removed key is still kept")
	}

	// A removed item stored again is a stored entry again.
	before := k.feeds[1].gone
	if !k.advance(1, polls, knownItem{key: key(lastRemoved), seq: polls + 1, at: polls * 10}) {
		t.Fatal("advance refused")
	}
	if f := k.feeds[1]; f.gone != before-1 || k.stored(1, key(lastRemoved)) != polls+1 {
		t.Errorf("stored again: %d removed keys counted (was %d), stored at %d", f.gone, before, k.stored(1, key(lastRemoved)))
	}
}

// TestKnownSweepOncePerChange: after a change of ownership, trusts whose
// marks began before it (their Changed channel closed) and after it
// interleave, as syncs of a takeover do; the trusted indexes are swept
// once for the change, not at each switch between the two marks.
func TestKnownSweepOncePerChange(t *testing.T) {
	const n = 1000
	k := newKnown(4, 2*n, 1<<20)
	before := make(chan struct{})
	m0 := ownMark{changed: before, gen: 1, tenure: 1}
	checks := 0
	own := func(uint64, ownMark) (bool, bool) { checks++; return true, false }
	for id := uint64(1); id <= n; id++ {
		k.extend(id, 1, []knownItem{{key: fmt.Sprint(id), seq: 1, at: 1}}, true)
		k.trust(id, m0, own)
	}
	if k.nTrusted != n {
		t.Fatalf("%d trusted, want %d", k.nTrusted, n)
	}
	close(before) // another shard gained or lost
	m1 := ownMark{changed: make(chan struct{}), gen: 1, tenure: 1}
	checks = 0
	for i := uint64(1); i <= 10; i++ {
		k.trust(i, m1, own)    // a sync begun after the change
		k.trust(i+10, m0, own) // one begun before it, ending now
	}
	if checks > n {
		t.Errorf("20 trusts after one change made %d ownership checks of %d trusted indexes, want one sweep (%d)", checks, n, n)
	}
}
