package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// digestWritten is the written time of the tests' digests: it has
// nanoseconds, which the encoding drops.
var digestWritten = time.Date(2026, 12, 5, 23, 11, 31, 123456789, time.UTC)

// digestWant is d as DecodeDigest gives it back: times to the
// millisecond in UTC, weight 0 as 1, no entries as an empty slice.
func digestWant(d ScheduleDigest) ScheduleDigest {
	d.Written = time.UnixMilli(d.Written.UnixMilli()).UTC()
	d.Entries = digestWantEntries(d.Entries)
	return d
}

func digestWantEntries(entries []DigestEntry) []DigestEntry {
	out := make([]DigestEntry, len(entries))
	for i, e := range entries {
		e.Next = time.UnixMilli(e.Next.UnixMilli()).UTC()
		if e.Weight == 0 {
			e.Weight = 1
		}
		out[i] = e
	}
	return out
}

// digestDiff describes how got differs from want ("" when it does not):
// times compare with Equal, weights exactly.
func digestDiff(got, want ScheduleDigest) string {
	if got.Shard != want.Shard || got.Part != want.Part || got.Parts != want.Parts || !got.Written.Equal(want.Written) {
		return fmt.Sprintf("header shard %d part %d of %d written %v, want shard %d part %d of %d written %v",
			got.Shard, got.Part, got.Parts, got.Written, want.Shard, want.Part, want.Parts, want.Written)
	}
	return digestEntriesDiff(got.Entries, want.Entries)
}

func digestEntriesDiff(got, want []DigestEntry) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d entries, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || !g.Next.Equal(w.Next) || g.Host != w.Host || g.Weight != w.Weight {
			return fmt.Sprintf("entry %d = {%d %v %q %v}, want {%d %v %q %v}",
				i, g.ID, g.Next, g.Host, g.Weight, w.ID, w.Next, w.Host, w.Weight)
		}
	}
	return ""
}

// digestEntries makes n entries (ascending IDs with gaps of 1 to 127,
// hosts of a few dozen or none, weights 0, 1, 2.5 and 0.25, next fetches
// within two days either side of written, to the nanosecond), the same
// for the same seed.
func digestEntries(seed uint64, n int, written time.Time) []DigestEntry {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	weights := []float64{0, 1, 2.5, 0.25}
	entries := make([]DigestEntry, n)
	var id uint64
	for i := range entries {
		id += 1 + r.Uint64N(127)
		host := ""
		if k := r.IntN(41); k > 0 {
			host = fmt.Sprintf("feeds-%d.example.org", k)
		}
		entries[i] = DigestEntry{
			ID:     id,
			Next:   written.Add(time.Duration(r.Int64N(int64(96*time.Hour))) - 48*time.Hour),
			Host:   host,
			Weight: weights[r.IntN(len(weights))],
		}
	}
	return entries
}

// TestDigestRoundTrip: what AppendDigest writes DecodeDigest reads back,
// to the millisecond, with weight 0 as 1.
func TestDigestRoundTrip(t *testing.T) {
	w := digestWritten
	long := strings.Repeat("h", maxDigestHostLen)
	tests := []struct {
		name string
		d    ScheduleDigest
	}{
		{"no entries", ScheduleDigest{Shard: 3, Written: w, Parts: 1}},
		{"empty entries", ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{}}},
		{"zero written", ScheduleDigest{Parts: 1, Entries: []DigestEntry{{ID: 1}}}},
		{"one entry", ScheduleDigest{Shard: 1, Written: w, Parts: 1,
			Entries: []DigestEntry{{ID: 42, Next: w.Add(90 * time.Second), Host: "example.org", Weight: 1}}}},
		{"ID 0", ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{{ID: 0, Next: w}, {ID: 1, Next: w}}}},
		{"mixed hosts and weights, next before and after written", ScheduleDigest{Shard: 17, Written: w, Parts: 1,
			Entries: []DigestEntry{
				{ID: 1, Next: w.Add(-time.Hour), Host: "", Weight: 0},
				{ID: 2, Next: w, Host: "a.example", Weight: 2.5},
				{ID: 3, Next: w.Add(time.Millisecond), Host: "a.example", Weight: 0},
				{ID: 5, Next: w.Add(-time.Millisecond), Host: "b.example", Weight: 2.5},
				{ID: 8, Next: w.Add(30 * 24 * time.Hour), Host: "", Weight: 2.5},
				{ID: 13, Next: w.Add(-400 * 24 * time.Hour), Host: "a.example", Weight: 1},
				{ID: 21, Next: w.Add(time.Second), Host: "b.example", Weight: math.Copysign(0, -1)},
				{ID: 34, Next: w.Add(time.Minute), Host: long, Weight: 1e-300},
				{ID: 55, Next: w.Add(2 * time.Minute), Host: "\xff\x00 not UTF-8", Weight: 1e300},
			}}},
		{"sub-millisecond next fetches", ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{
			{ID: 1, Next: w.Add(999 * time.Microsecond)},
			{ID: 2, Next: w.Add(-999 * time.Microsecond)},
			{ID: 3, Next: w.Add(time.Nanosecond)},
			{ID: 4, Next: time.Date(2026, 1, 1, 0, 0, 0, 999999999, time.UTC)},
			{ID: 5, Next: time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC)},
			{ID: 6, Next: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
			{ID: 7, Next: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		}}},
		{"zones and a monotonic reading", ScheduleDigest{Written: time.Now(), Parts: 1, Entries: []DigestEntry{
			{ID: 1, Next: time.Now().Add(time.Hour)},
			{ID: 2, Next: w.In(time.FixedZone("IST", 5*3600+30*60))},
			{ID: 3, Next: w.Local()},
		}}},
		{"written before 1970", ScheduleDigest{Written: time.Date(1969, 7, 20, 20, 17, 40, 500000, time.UTC), Parts: 1,
			Entries: []DigestEntry{{ID: 9, Next: w}}}},
		{"large IDs and sparse gaps", ScheduleDigest{Shard: 2, Written: w, Parts: 1, Entries: []DigestEntry{
			{ID: 1, Next: w}, {ID: 2, Next: w}, {ID: 1 << 40, Next: w}, {ID: 1<<63 - 1, Next: w},
			{ID: 1 << 63, Next: w}, {ID: 1<<63 + 1, Next: w}, {ID: math.MaxUint64 - 1, Next: w}, {ID: math.MaxUint64, Next: w},
		}}},
		{"one entry of the largest ID", ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{{ID: math.MaxUint64, Next: w}}}},
		{"shard 4095, part 2 of 5", ScheduleDigest{Shard: 4095, Written: w, Part: 2, Parts: 5,
			Entries: []DigestEntry{{ID: 7, Next: w.Add(time.Hour), Host: "x", Weight: 3}}}},
		{"last of the most parts", ScheduleDigest{Shard: math.MaxInt32, Written: w, Part: MaxDigestParts - 1, Parts: MaxDigestParts}},
		{"generated", ScheduleDigest{Shard: 9, Written: w, Parts: 1, Entries: digestEntries(1, 1000, w)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("prefix")
			b, err := AppendDigest(slices.Clone(prefix), tt.d)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, prefix) {
				t.Fatalf("AppendDigest lost dst: %q", b)
			}
			got, err := DecodeDigest(b[len(prefix):])
			if err != nil {
				t.Fatalf("DecodeDigest(%x): %v", b[len(prefix):], err)
			}
			if diff := digestDiff(got, digestWant(tt.d)); diff != "" {
				t.Fatal(diff)
			}
			// Sub-millisecond precision is truncated, never rounded.
			if !got.Written.Equal(tt.d.Written.Truncate(time.Millisecond)) {
				t.Errorf("written %v, want %v", got.Written, tt.d.Written.Truncate(time.Millisecond))
			}
			for i, e := range got.Entries {
				if e.Next.UnixMilli() != tt.d.Entries[i].Next.UnixMilli() {
					t.Errorf("entry %d: next %d ms, want %d", i, e.Next.UnixMilli(), tt.d.Entries[i].Next.UnixMilli())
				}
				if e.Next.Location() != time.UTC {
					t.Errorf("entry %d: next in %v, want UTC", i, e.Next.Location())
				}
			}
			// The encoding is a function of the digest read back.
			again, err := AppendDigest(nil, got)
			if err != nil || !bytes.Equal(again, b[len(prefix):]) {
				t.Errorf("re-encoded %x, %v; want %x", again, err, b[len(prefix):])
			}
		})
	}
}

// TestDecodeDigestCopies: a decoded digest does not share the input's
// bytes.
func TestDecodeDigestCopies(t *testing.T) {
	b, err := AppendDigest(nil, ScheduleDigest{Written: digestWritten, Parts: 1,
		Entries: []DigestEntry{{ID: 1, Host: "example.org", Weight: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeDigest(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'X'
	}
	if d.Entries[0].Host != "example.org" {
		t.Fatalf("host %q after the input changed", d.Entries[0].Host)
	}
}

// TestDigestMaxHosts: a part holds up to MaxDigestHosts distinct
// (host, weight) pairs.
func TestDigestMaxHosts(t *testing.T) {
	entries := make([]DigestEntry, MaxDigestHosts+1)
	for i := range entries {
		entries[i] = DigestEntry{ID: uint64(i), Host: fmt.Sprint(i), Weight: 1}
	}
	d := ScheduleDigest{Written: digestWritten, Parts: 1, Entries: entries[:MaxDigestHosts]}
	b, err := AppendDigest(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDigest(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := digestDiff(got, digestWant(d)); diff != "" {
		t.Fatal(diff)
	}
	d.Entries = entries
	if _, err := AppendDigest(nil, d); !errors.Is(err, ErrDigest) {
		t.Fatalf("%d hosts: %v, want ErrDigest", len(entries), err)
	}
	// The same host with other weights is another pair.
	for i := range entries {
		entries[i] = DigestEntry{ID: uint64(i), Host: "h", Weight: float64(i + 1)}
	}
	if _, err := AppendDigest(nil, d); !errors.Is(err, ErrDigest) {
		t.Fatalf("%d weights: %v, want ErrDigest", len(entries), err)
	}
}

// TestAppendDigestRefuses: a digest AppendDigest cannot write fails with
// ErrDigest and leaves dst as it was.
func TestAppendDigestRefuses(t *testing.T) {
	w := digestWritten
	one := []DigestEntry{{ID: 1, Next: w, Weight: 1}}
	entry := func(id uint64, host string, weight float64) ScheduleDigest {
		return ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{{ID: 1, Next: w}, {ID: id, Next: w, Host: host, Weight: weight}}}
	}
	tests := []struct {
		name string
		d    ScheduleDigest
	}{
		{"IDs not ascending", ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{{ID: 5}, {ID: 7}, {ID: 6}}}},
		{"IDs descending from the largest", ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{{ID: math.MaxUint64}, {ID: 0}}}},
		{"duplicate IDs", ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{{ID: 5}, {ID: 5}}}},
		{"duplicate ID 0", ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{{ID: 0}, {ID: 0}}}},
		{"negative weight", entry(2, "", -1)},
		{"negative weight of the first entry", ScheduleDigest{Written: w, Parts: 1, Entries: []DigestEntry{{ID: 1, Weight: -0.5}}}},
		{"NaN weight", entry(2, "h", math.NaN())},
		{"+Inf weight", entry(2, "h", math.Inf(1))},
		{"-Inf weight", entry(2, "h", math.Inf(-1))},
		{"host of 256 bytes", entry(2, strings.Repeat("h", maxDigestHostLen+1), 1)},
		{"host of 64 KiB", entry(2, strings.Repeat("h", 1<<16), 1)},
		{"parts 0", ScheduleDigest{Written: w, Parts: 0, Entries: one}},
		{"parts 0, no entries", ScheduleDigest{Written: w}},
		{"negative parts", ScheduleDigest{Written: w, Parts: -1, Entries: one}},
		{"part = parts", ScheduleDigest{Written: w, Part: 3, Parts: 3, Entries: one}},
		{"part > parts", ScheduleDigest{Written: w, Part: 9, Parts: 3, Entries: one}},
		{"negative part", ScheduleDigest{Written: w, Part: -1, Parts: 3, Entries: one}},
		{"parts > MaxDigestParts", ScheduleDigest{Written: w, Part: 0, Parts: MaxDigestParts + 1, Entries: one}},
		{"negative shard", ScheduleDigest{Shard: -1, Written: w, Parts: 1, Entries: one}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("dst")
			got, err := AppendDigest(dst, tt.d)
			if !errors.Is(err, ErrDigest) {
				t.Fatalf("AppendDigest = %x, %v; want ErrDigest", got, err)
			}
			if string(got) != "dst" {
				t.Errorf("dst %q after a refusal, want %q", got, "dst")
			}
		})
	}
}

// digestHeader is a hand-made encoding's version, shard 0, written,
// part 0 of 1.
func digestHeader(written int64) []byte {
	b := []byte{digestVersion}
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendVarint(b, written)
	b = binary.AppendUvarint(b, 0)
	return binary.AppendUvarint(b, 1)
}

// digestPair appends a host table pair.
func digestPair(b []byte, host string, weight float64) []byte {
	b = binary.AppendUvarint(b, uint64(len(host)))
	b = append(b, host...)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(weight))
}

// digestEntry appends an entry (ID delta, next from written, pair).
func digestEntry(b []byte, delta uint64, next int64, ref uint64) []byte {
	b = binary.AppendUvarint(b, delta)
	b = binary.AppendVarint(b, next)
	return binary.AppendUvarint(b, ref)
}

// digestHand is a hand-made encoding: a header, one pair ("h", 1) and
// the entries given as (delta, next, ref) triples.
func digestHand(entries ...[3]int64) []byte {
	b := digestHeader(1_700_000_000_000)
	b = binary.AppendUvarint(b, 1)
	b = digestPair(b, "h", 1)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, e := range entries {
		b = digestEntry(b, uint64(e[0]), e[1], uint64(e[2]))
	}
	return b
}

// TestDecodeDigestHostile: DecodeDigest refuses what AppendDigest does
// not write with ErrDigest, without panicking or allocating what the
// input does not justify.
func TestDecodeDigestHostile(t *testing.T) {
	valid := digestHand([3]int64{5, 0, 0}, [3]int64{1, -1000, 0})
	if _, err := DecodeDigest(valid); err != nil {
		t.Fatalf("the hand-made encoding: %v", err)
	}
	header := func(shard, written int64, part, parts uint64) []byte {
		b := []byte{digestVersion}
		b = binary.AppendUvarint(b, uint64(shard))
		b = binary.AppendVarint(b, written)
		b = binary.AppendUvarint(b, part)
		b = binary.AppendUvarint(b, parts)
		b = binary.AppendUvarint(b, 0) // no pairs
		return binary.AppendUvarint(b, 0)
	}
	table := func(pairs ...[]byte) []byte {
		b := digestHeader(0)
		b = binary.AppendUvarint(b, uint64(len(pairs)))
		for _, p := range pairs {
			b = append(b, p...)
		}
		return binary.AppendUvarint(b, 0)
	}
	manyPairs := binary.AppendUvarint(digestHeader(0), 1000) // a count of 1000 pairs and few bytes
	manyPairs = digestPair(manyPairs, "h", 1)
	manyPairs = binary.AppendUvarint(manyPairs, 0)
	hugePairs := binary.AppendUvarint(digestHeader(0), math.MaxUint64)
	hugePairs = append(hugePairs, make([]byte, 64)...)
	tooManyPairs := binary.AppendUvarint(digestHeader(0), MaxDigestHosts+1)
	for range MaxDigestHosts + 1 {
		tooManyPairs = digestPair(tooManyPairs, "", 1)
	}
	tooManyPairs = binary.AppendUvarint(tooManyPairs, 0)
	manyEntries := binary.AppendUvarint(digestHeader(0), 1)
	manyEntries = digestPair(manyEntries, "h", 1)
	manyEntries = binary.AppendUvarint(manyEntries, 1000)
	manyEntries = digestEntry(manyEntries, 1, 0, 0)
	hugeEntries := binary.AppendUvarint(digestHeader(0), 1)
	hugeEntries = digestPair(hugeEntries, "h", 1)
	hugeEntries = binary.AppendUvarint(hugeEntries, math.MaxUint64)
	hugeEntries = append(hugeEntries, make([]byte, 64)...)
	longHost := binary.AppendUvarint(digestHeader(0), 1)
	longHost = digestPair(longHost, strings.Repeat("h", maxDigestHostLen+1), 1)
	longHost = binary.AppendUvarint(longHost, 0)
	hugeHost := binary.AppendUvarint(digestHeader(0), 1)
	hugeHost = binary.AppendUvarint(hugeHost, math.MaxUint64)
	hugeHost = append(hugeHost, make([]byte, 64)...)
	noPairs := binary.AppendUvarint(digestHeader(0), 0)
	noPairs = binary.AppendUvarint(noPairs, 1)
	noPairs = digestEntry(noPairs, 1, 0, 0)
	overlong := append(digestHeader(0)[:0:0], digestVersion) // an 11-byte varint shard
	overlong = append(overlong, bytes.Repeat([]byte{0xff}, 10)...)
	overlong = append(overlong, 0x01)
	overlong = append(overlong, header(0, 0, 0, 1)[2:]...)

	tests := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"version 0", append([]byte{0}, valid[1:]...)},
		{"version 2", append([]byte{2}, valid[1:]...)},
		{"JSON", []byte(`{"shard":1}`)},
		{"trailing byte", append(slices.Clone(valid), 0)},
		{"trailing bytes", append(slices.Clone(valid), valid...)},
		{"overlong varint", overlong},
		{"shard beyond int32", header(math.MaxInt32+1, 0, 0, 1)},
		{"shard 2^64-1", header(-1, 0, 0, 1)},
		{"written beyond 2^50 ms", header(0, 1<<50+1, 0, 1)},
		{"written before -2^50 ms", header(0, -1<<50-1, 0, 1)},
		{"parts 0", header(0, 0, 0, 0)},
		{"part = parts", header(0, 0, 2, 2)},
		{"parts beyond MaxDigestParts", header(0, 0, 0, MaxDigestParts+1)},
		{"part 2^64-1", header(0, 0, math.MaxUint64, 1)},
		{"host table count larger than the input", manyPairs},
		{"host table count 2^64-1", hugePairs},
		{"host table count beyond MaxDigestHosts", tooManyPairs},
		{"host of 256 bytes", longHost},
		{"host length 2^64-1", hugeHost},
		{"NaN weight", table(digestPair(nil, "h", math.NaN()))},
		{"NaN weight of the second pair", table(digestPair(nil, "h", 1), digestPair(nil, "i", math.NaN()))},
		{"zero weight", table(digestPair(nil, "h", 0))},
		{"negative zero weight", table(digestPair(nil, "h", math.Copysign(0, -1)))},
		{"negative weight", table(digestPair(nil, "h", -2))},
		{"+Inf weight", table(digestPair(nil, "h", math.Inf(1)))},
		{"-Inf weight", table(digestPair(nil, "h", math.Inf(-1)))},
		{"entry count larger than the input", manyEntries},
		{"entry count 2^64-1", hugeEntries},
		{"zero ID delta after the first entry", digestHand([3]int64{5, 0, 0}, [3]int64{0, 0, 0})},
		{"zero ID delta after two entries", digestHand([3]int64{0, 0, 0}, [3]int64{1, 0, 0}, [3]int64{0, 0, 0})},
		{"IDs beyond 2^64-1", digestHand([3]int64{-1, 0, 0}, [3]int64{1, 0, 0})},
		{"pair index out of range", digestHand([3]int64{1, 0, 0}, [3]int64{1, 0, 1})},
		{"pair index 2^64-1", digestHand([3]int64{1, 0, -1})},
		{"pair index without pairs", noPairs},
		{"next beyond 2^50 ms", digestHand([3]int64{1, 1<<50 + 1, 0})},
		{"next before -2^50 ms", digestHand([3]int64{1, -1<<50 - 1, 0})},
		{"fewer entries than counted", valid[:len(valid)-3]},
		{"more entries than counted", append(slices.Clone(valid), digestEntry(nil, 1, 0, 0)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d, err := DecodeDigest(tt.b); !errors.Is(err, ErrDigest) {
				t.Fatalf("DecodeDigest(%x) = %+v, %v; want ErrDigest", tt.b, d, err)
			}
		})
	}

	// Every prefix of a valid encoding is refused.
	for _, d := range []ScheduleDigest{
		{Parts: 1},
		{Shard: 4095, Written: digestWritten, Part: 2, Parts: 5, Entries: digestEntries(2, 20, digestWritten)},
		{Written: digestWritten, Parts: 1, Entries: []DigestEntry{{ID: math.MaxUint64, Next: digestWritten.Add(-time.Hour),
			Host: strings.Repeat("h", maxDigestHostLen), Weight: 2.5}}},
	} {
		b, err := AppendDigest(nil, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeDigest(b); err != nil {
			t.Fatalf("the whole of %x: %v", b, err)
		}
		for n := range len(b) {
			if got, err := DecodeDigest(b[:n]); !errors.Is(err, ErrDigest) {
				t.Fatalf("DecodeDigest(%x), %d of %d bytes = %+v, %v; want ErrDigest", b[:n], n, len(b), got, err)
			}
		}
	}

	// A count the input cannot hold allocates nothing for it.
	for _, b := range [][]byte{manyEntries, hugeEntries, manyPairs, hugePairs} {
		if allocs := testing.AllocsPerRun(10, func() { _, _ = DecodeDigest(b) }); allocs > 8 {
			t.Errorf("DecodeDigest(%x): %v allocations", b, allocs)
		}
	}
}

// TestSplitJoinDigest: SplitDigest cuts a digest into parts that fit the
// limit, and JoinDigests puts the decoded parts of each shard's writing
// back together, whatever their order and whatever else comes with them.
func TestSplitJoinDigest(t *testing.T) {
	w := digestWritten
	// longHosts are entries each with its own host of 200 bytes: a run
	// that does not fit for its pairs is cut again.
	longHosts := func(n int) []DigestEntry {
		entries := make([]DigestEntry, n)
		for i := range entries {
			entries[i] = DigestEntry{ID: uint64(i) * 1000, Next: w.Add(time.Duration(i) * time.Second),
				Host: fmt.Sprintf("%03d", i) + strings.Repeat("h", 197), Weight: 1}
		}
		return entries
	}
	tests := []struct {
		name    string
		entries []DigestEntry
		limit   int
		wantErr bool // true: more than MaxDigestParts parts however the entries are cut
		mayErr  bool // the entries fit in MaxDigestParts parts, SplitDigest may not see it
	}{
		{"no entries", nil, 1 << 20, false, false},
		{"no entries, tiny limit", nil, 1, false, false},
		{"one entry", digestEntries(3, 1, w), 1 << 20, false, false},
		{"100,000 entries in 1 MiB parts", digestEntries(4, 100_000, w), 1 << 20, false, false},
		{"100,000 entries in the 1 MiB JetStream payload", digestEntries(4, 100_000, w), 1<<20 - 4096, false, false},
		{"40,000 entries in 4 KiB parts", digestEntries(5, 40_000, w), 4096, false, false},
		// 100,000 entries take about 600 KB: they would fit in some 150
		// parts of 4 KiB.
		{"100,000 entries in 4 KiB parts", digestEntries(4, 100_000, w), 4096, false, true},
		{"200 entries in 64 byte parts", digestEntries(6, 200, w), 64, false, false},
		{"256 entries in parts of 1 byte", digestEntries(7, 256, w), 1, false, false},
		{"257 entries in parts of 1 byte", digestEntries(7, 257, w), 1, true, false},
		{"100,000 entries in 64 byte parts", digestEntries(4, 100_000, w), 64, true, false},
		{"2000 long hosts in 4 KiB parts", longHosts(2000), 4096, false, false},
		{"256 long hosts in 64 byte parts", longHosts(256), 64, false, false},
		{"257 long hosts in 64 byte parts", longHosts(257), 64, true, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ScheduleDigest{Shard: 4095, Written: w, Part: 7, Parts: 9, Entries: tt.entries}
			want := digestWant(ScheduleDigest{Shard: d.Shard, Written: w, Parts: 1, Entries: tt.entries})
			raw, err := SplitDigest(d, tt.limit)
			if tt.wantErr || (tt.mayErr && err != nil) {
				if !errors.Is(err, ErrDigest) {
					t.Fatalf("SplitDigest = %d parts, %v; want ErrDigest", len(raw), err)
				}
				if tt.mayErr {
					t.Logf("SplitDigest refused %d entries in parts of %d bytes: %v", len(tt.entries), tt.limit, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) < 1 || len(raw) > MaxDigestParts {
				t.Fatalf("%d parts", len(raw))
			}
			parts := make([]ScheduleDigest, len(raw))
			var all []DigestEntry
			size := 0
			for i, b := range raw {
				p, err := DecodeDigest(b)
				if err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
				if p.Shard != d.Shard || !p.Written.Equal(want.Written) || p.Part != i || p.Parts != len(raw) {
					t.Fatalf("part %d is shard %d written %v part %d of %d", i, p.Shard, p.Written, p.Part, p.Parts)
				}
				if len(b) > tt.limit && len(p.Entries) > 1 {
					t.Fatalf("part %d of %d entries takes %d bytes, limit %d", i, len(p.Entries), len(b), tt.limit)
				}
				if len(p.Entries) == 0 && len(tt.entries) > 0 {
					t.Fatalf("part %d has no entries", i)
				}
				size += len(b)
				all = append(all, p.Entries...)
				parts[i] = p
			}
			t.Logf("%d entries: %d parts, %d bytes, %.1f%% of the limit's", len(tt.entries), len(raw), size,
				100*float64(size)/float64(len(raw))/float64(tt.limit))
			if diff := digestEntriesDiff(all, want.Entries); diff != "" {
				t.Fatalf("the parts in order: %s", diff)
			}

			// Another shard's parts, and a part of this shard's earlier
			// writing, in no particular order.
			otherWant := digestWant(ScheduleDigest{Shard: 12, Written: w.Add(-time.Minute), Parts: 1,
				Entries: digestEntries(100+uint64(i), 3000, w)})
			otherRaw, err := SplitDigest(otherWant, 8192)
			if err != nil {
				t.Fatal(err)
			}
			otherWant.Parts = len(otherRaw)
			var others []ScheduleDigest
			for _, b := range otherRaw {
				p, err := DecodeDigest(b)
				if err != nil {
					t.Fatal(err)
				}
				others = append(others, p)
			}
			staleEntries := []DigestEntry{{ID: 1, Next: w.Add(-time.Hour), Host: "stale", Weight: 1}}
			if len(want.Entries) > 0 {
				stale := want.Entries[len(want.Entries)/2]
				stale.Next, stale.Host = stale.Next.Add(time.Hour), "stale"
				staleEntries = append(staleEntries, stale, DigestEntry{ID: math.MaxUint64, Next: w, Weight: 1})
			}
			stale := ScheduleDigest{Shard: d.Shard, Written: want.Written.Add(-time.Millisecond), Part: 1,
				Parts: max(2, len(parts)), Entries: staleEntries}
			want.Parts = len(parts)

			r := rand.New(rand.NewPCG(uint64(i), 7))
			mixed := append(append(slices.Clone(parts), others...), stale)
			r.Shuffle(len(mixed), func(i, j int) { mixed[i], mixed[j] = mixed[j], mixed[i] })
			head0 := slices.Clone(parts[0].Entries)
			joined := JoinDigests(mixed)
			if len(joined) != 2 {
				t.Fatalf("JoinDigests gives %d digests, want 2", len(joined))
			}
			if diff := digestDiff(joined[0], otherWant); diff != "" {
				t.Errorf("shard 12: %s", diff)
			}
			if diff := digestDiff(joined[1], want); diff != "" {
				t.Errorf("shard %d: %s", d.Shard, diff)
			}
			if diff := digestEntriesDiff(parts[0].Entries, head0); diff != "" {
				t.Errorf("JoinDigests changed part 0: %s", diff)
			}

			// A part missing leaves only its entries out.
			if len(parts) > 1 {
				k := len(parts) / 2
				var rest []ScheduleDigest
				for _, p := range mixed {
					if p.Shard != d.Shard || p.Part != k || !p.Written.Equal(want.Written) {
						rest = append(rest, p)
					}
				}
				missing := want
				missing.Entries = nil
				for _, e := range want.Entries {
					if _, found := slices.BinarySearchFunc(parts[k].Entries, e.ID, func(e DigestEntry, id uint64) int {
						return cmpUint64(e.ID, id)
					}); !found {
						missing.Entries = append(missing.Entries, e)
					}
				}
				if len(missing.Entries) != len(want.Entries)-len(parts[k].Entries) {
					t.Fatalf("part %d shares entries with others", k)
				}
				joined := JoinDigests(rest)
				if len(joined) != 2 {
					t.Fatalf("without part %d: %d digests, want 2", k, len(joined))
				}
				if diff := digestDiff(joined[1], missing); diff != "" {
					t.Errorf("without part %d: %s", k, diff)
				}
			}

			// Without part 0, the shard has no digest.
			var headless []ScheduleDigest
			for _, p := range mixed {
				if p.Shard != d.Shard || p.Part != 0 {
					headless = append(headless, p)
				}
			}
			joined = JoinDigests(headless)
			if len(joined) != 1 || joined[0].Shard != otherWant.Shard {
				t.Fatalf("without part 0: %d digests", len(joined))
			}
			if diff := digestDiff(joined[0], otherWant); diff != "" {
				t.Errorf("shard 12 without shard %d's part 0: %s", d.Shard, diff)
			}
		})
	}
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestJoinDigestsEdges: JoinDigests of nothing is nothing; parts of a
// writing whose Parts disagree with part 0's are left out, and an entry
// twice is there once.
func TestJoinDigestsEdges(t *testing.T) {
	if got := JoinDigests(nil); len(got) != 0 {
		t.Fatalf("JoinDigests(nil) = %+v", got)
	}
	w := time.UnixMilli(digestWritten.UnixMilli()).UTC()
	e := func(id uint64) DigestEntry { return DigestEntry{ID: id, Next: w, Weight: 1} }
	got := JoinDigests([]ScheduleDigest{
		{Shard: 5, Written: w, Part: 2, Parts: 3, Entries: []DigestEntry{e(7), e(8)}},
		{Shard: 5, Written: w, Part: 1, Parts: 4, Entries: []DigestEntry{e(100)}}, // another writing's count
		{Shard: 5, Written: w, Part: 0, Parts: 3, Entries: []DigestEntry{e(2), e(3)}},
		{Shard: 5, Written: w, Part: 1, Parts: 3, Entries: []DigestEntry{e(3), e(5)}},
		{Shard: 5, Written: w, Part: 2, Parts: 3, Entries: []DigestEntry{e(7), e(8)}}, // read twice
		{Shard: 1, Written: w, Part: 0, Parts: 1},
	})
	if len(got) != 2 || got[0].Shard != 1 || got[1].Shard != 5 {
		t.Fatalf("JoinDigests = %+v, want shards 1 and 5", got)
	}
	if len(got[0].Entries) != 0 {
		t.Errorf("shard 1: %+v", got[0].Entries)
	}
	want := ScheduleDigest{Shard: 5, Written: w, Parts: 3, Entries: []DigestEntry{e(2), e(3), e(5), e(7), e(8)}}
	if diff := digestDiff(got[1], want); diff != "" {
		t.Error(diff)
	}
}

// TestDigestSize: a shard's digest takes under 8 bytes a feed: 15,625
// feeds (a million IDs over 64 shards), one host, weight 1, next fetches
// within the hour.
func TestDigestSize(t *testing.T) {
	r := rand.New(rand.NewPCG(64, 15625))
	w := digestWritten
	entries := make([]DigestEntry, 15_625)
	var id uint64
	for i := range entries {
		id += 1 + r.Uint64N(127) // 64 on average
		entries[i] = DigestEntry{ID: id, Next: w.Add(time.Duration(r.Int64N(int64(time.Hour)))), Host: "feeds.example.org", Weight: 1}
	}
	d := ScheduleDigest{Shard: 63, Written: w, Parts: 1, Entries: entries}
	b, err := AppendDigest(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	per := float64(len(b)) / float64(len(entries))
	t.Logf("%d entries: %d bytes, %.2f bytes an entry", len(entries), len(b), per)
	if per >= 8 {
		t.Errorf("%.2f bytes an entry, want fewer than 8", per)
	}
	got, err := DecodeDigest(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := digestDiff(got, digestWant(d)); diff != "" {
		t.Fatal(diff)
	}
	parts, err := SplitDigest(d, 1<<20-4096)
	if err != nil || len(parts) != 1 {
		t.Fatalf("SplitDigest: %d parts, %v; want 1", len(parts), err)
	}
}

// FuzzDecodeDigest: any bytes decode to a digest or fail with ErrDigest,
// without panicking; what decodes encodes again, and that encoding reads
// back the same digest and encodes to itself.
func FuzzDecodeDigest(f *testing.F) {
	w := digestWritten
	for _, d := range []ScheduleDigest{
		{Parts: 1},
		{Shard: 1, Written: w, Parts: 1, Entries: []DigestEntry{{ID: 42, Next: w.Add(time.Minute), Host: "example.org", Weight: 1}}},
		{Shard: 4095, Written: w, Part: 2, Parts: 5, Entries: digestEntries(8, 12, w)},
		{Written: w, Part: MaxDigestParts - 1, Parts: MaxDigestParts, Entries: []DigestEntry{
			{ID: 0, Next: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), Weight: 1e-300},
			{ID: math.MaxUint64, Next: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), Host: strings.Repeat("h", maxDigestHostLen), Weight: 2.5}}},
	} {
		b, err := AppendDigest(nil, d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{digestVersion})
	f.Add([]byte{digestVersion, 0, 0, 0, 1, 0, 0})
	f.Add(bytes.Repeat([]byte{0xff}, 24))
	f.Add(digestHand([3]int64{5, 0, 0}, [3]int64{0, 0, 0}))
	f.Add(digestHand([3]int64{1, 0, 0}, [3]int64{1, 0, 1}))
	f.Add(append(binary.AppendUvarint(digestHeader(0), 1000), 0, 0, 0))
	f.Add([]byte(`{"shard":1,"parts":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := DecodeDigest(raw)
		if err != nil {
			if !errors.Is(err, ErrDigest) {
				t.Fatalf("DecodeDigest: %v, want ErrDigest", err)
			}
			return
		}
		if 3*len(d.Entries) > len(raw) {
			t.Fatalf("%d entries from %d bytes", len(d.Entries), len(raw))
		}
		again, err := AppendDigest(nil, d)
		if err != nil {
			t.Fatalf("decoded %+v, which does not encode: %v", d, err)
		}
		d2, err := DecodeDigest(again)
		if err != nil {
			t.Fatalf("%+v encoded as %x: %v", d, again, err)
		}
		if diff := digestDiff(d2, d); diff != "" {
			t.Fatalf("%+v encoded as %x reads back: %s", d, again, diff)
		}
		if third, err := AppendDigest(nil, d2); err != nil || !bytes.Equal(third, again) {
			t.Fatalf("%+v encodes as %x then %x, %v", d, again, third, err)
		}
	})
}

// TestSplitDigestManyHosts: a shard whose feeds have more distinct hosts
// than one part may hold is cut into parts that each hold fewer.
func TestSplitDigestManyHosts(t *testing.T) {
	d := ScheduleDigest{Shard: 9, Written: digestWritten, Parts: 1}
	for i := range MaxDigestHosts + 5000 {
		d.Entries = append(d.Entries, DigestEntry{ID: uint64(1 + i), Next: digestWritten, Host: fmt.Sprint("h", i), Weight: 1})
	}
	parts, err := SplitDigest(d, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var decoded []ScheduleDigest
	for _, b := range parts {
		p, err := DecodeDigest(b)
		if err != nil {
			t.Fatal(err)
		}
		decoded = append(decoded, p)
	}
	joined := JoinDigests(decoded)
	if len(parts) < 2 || len(joined) != 1 || len(joined[0].Entries) != len(d.Entries) {
		t.Fatalf("%d parts joined to %d digests", len(parts), len(joined))
	}
}
