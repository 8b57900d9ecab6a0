package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Schedule digests. A cluster node that owns a shard writes, now and
// then, where each of the shard's feeds stands in its queue: the feed's
// next fetch, with the host and weight the queue groups it by. A node
// that takes the shard over (its owner died, or the leases moved)
// queues the shard's feeds from the digest at once, in one read per
// shard, and reads each feed's record (its policy state, the truth) in
// the background or just before the feed's first fetch there, whichever
// comes first. A digest is a hint: an entry that is stale, missing or
// refers to a feed of another shard costs at most a record read, never
// a wrong decision.

// DigestEntry is one feed of a ScheduleDigest.
type DigestEntry struct {
	ID     uint64
	Next   time.Time // the feed's next fetch as its owner had it
	Host   string    // the host the feed's fetches count against ("" none)
	Weight float64   // the feed's weight (1 when the feed has none)
}

// ScheduleDigest is a shard's digest, or one part of it: a digest too
// large for one message is written as Parts parts with the same Written,
// each holding a run of the entries.
type ScheduleDigest struct {
	Shard   int
	Written time.Time // when the owner wrote it (millisecond precision)
	Part    int       // this part's index, 0 ≤ Part < Parts
	Parts   int
	Entries []DigestEntry // ascending, distinct IDs
}

// ScheduleDigester is a store that keeps the cluster's schedule digests
// (storage/jetstream's Backend).
type ScheduleDigester interface {
	// PutScheduleDigest stores d, a shard's digest whole (Part 0, Parts
	// 1): the store splits it into parts as its message size requires.
	PutScheduleDigest(d ScheduleDigest) error
	// ScheduleDigests returns the newest digest of each shard of shards
	// that has one, each whole (the parts of one writing joined); a part
	// missing or from another writing leaves its entries out.
	ScheduleDigests(shards []int) ([]ScheduleDigest, error)
}

// Bounds of an encoded ScheduleDigest.
const (
	// MaxDigestParts bounds the parts of one shard's digest.
	MaxDigestParts = 256
	// MaxDigestHosts bounds the distinct (host, weight) pairs of one
	// part (SplitDigest cuts a shard with more into parts).
	MaxDigestHosts = 1 << 16
	// maxDigestHostLen bounds a host name (schedule.MaxHostLen).
	maxDigestHostLen = 1024
)

// ErrDigest reports an encoded ScheduleDigest that cannot be read.
var ErrDigest = errors.New("schedule digest: malformed")

// errManyHosts is AppendDigest's ErrDigest for a part with more than
// MaxDigestHosts pairs.
var errManyHosts = fmt.Errorf("%w: more than %d (host, weight) pairs in a part", ErrDigest, MaxDigestHosts)

// digestVersion is the first byte of an encoded ScheduleDigest.
const digestVersion = 1

// AppendDigest appends d's encoding to dst: a version byte, the shard,
// written (Unix ms), part and parts, a table of the distinct (host,
// weight) pairs, then each entry as its ID's distance from the previous
// one, its next fetch in ms from written, and its pair's index; about 6
// bytes an entry. Entries must be ascending by ID, with hosts of at most
// 1,024 bytes and positive weights.
func AppendDigest(dst []byte, d ScheduleDigest) ([]byte, error) {
	written := d.Written.UnixMilli()
	if d.Shard < 0 || d.Shard > math.MaxInt32 || d.Parts < 1 || d.Parts > MaxDigestParts || d.Part < 0 || d.Part >= d.Parts ||
		!digestTime(written) {
		return dst, fmt.Errorf("%w: shard %d, part %d of %d, written %v", ErrDigest, d.Shard, d.Part, d.Parts, d.Written)
	}
	type pair struct {
		host   string
		weight float64
	}
	index := map[pair]uint64{}
	var pairs []pair
	refs := make([]uint64, len(d.Entries))
	var prev uint64
	for i, e := range d.Entries {
		if i > 0 && e.ID <= prev {
			return dst, fmt.Errorf("%w: IDs not ascending at %d", ErrDigest, e.ID)
		}
		prev = e.ID
		w := e.Weight
		if w == 0 {
			w = 1
		}
		if len(e.Host) > maxDigestHostLen || !(w > 0) || math.IsInf(w, 0) || !digestTime(e.Next.UnixMilli()) {
			return dst, fmt.Errorf("%w: feed %d: host of %d bytes, weight %v, next %v", ErrDigest, e.ID, len(e.Host), e.Weight, e.Next)
		}
		p := pair{e.Host, w}
		k, ok := index[p]
		if !ok {
			if len(pairs) == MaxDigestHosts {
				return dst, errManyHosts
			}
			k = uint64(len(pairs))
			index[p] = k
			pairs = append(pairs, p)
		}
		refs[i] = k
	}
	dst = append(dst, digestVersion)
	dst = binary.AppendUvarint(dst, uint64(d.Shard))
	dst = binary.AppendVarint(dst, written)
	dst = binary.AppendUvarint(dst, uint64(d.Part))
	dst = binary.AppendUvarint(dst, uint64(d.Parts))
	dst = binary.AppendUvarint(dst, uint64(len(pairs)))
	for _, p := range pairs {
		dst = binary.AppendUvarint(dst, uint64(len(p.host)))
		dst = append(dst, p.host...)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.weight))
	}
	dst = binary.AppendUvarint(dst, uint64(len(d.Entries)))
	prev = 0
	for i, e := range d.Entries {
		dst = binary.AppendUvarint(dst, e.ID-prev)
		prev = e.ID
		dst = binary.AppendVarint(dst, e.Next.UnixMilli()-written)
		dst = binary.AppendUvarint(dst, refs[i])
	}
	return dst, nil
}

// DecodeDigest reads an encoding AppendDigest made. Anything else,
// however hostile, is refused with ErrDigest: it allocates no more than
// the input's length justifies.
func DecodeDigest(b []byte) (ScheduleDigest, error) {
	r := digestReader{b: b}
	var d ScheduleDigest
	if v := r.byte(); v != digestVersion {
		return d, fmt.Errorf("%w: version %d", ErrDigest, v)
	}
	shard := r.uvarint()
	written := r.varint()
	part, parts := r.uvarint(), r.uvarint()
	if r.err != nil || shard > math.MaxInt32 || parts < 1 || parts > MaxDigestParts || part >= parts ||
		!digestTime(written) {
		return d, fmt.Errorf("%w: header", ErrDigest)
	}
	d.Shard, d.Part, d.Parts = int(shard), int(part), int(parts)
	d.Written = time.UnixMilli(written).UTC()
	npairs := r.uvarint()
	// A pair takes at least 9 bytes.
	if r.err != nil || npairs > MaxDigestHosts || npairs > uint64(r.left()/9) {
		return d, fmt.Errorf("%w: host table", ErrDigest)
	}
	hosts := make([]string, npairs)
	weights := make([]float64, npairs)
	for i := range hosts {
		n := r.uvarint()
		if n > maxDigestHostLen {
			return d, fmt.Errorf("%w: host of %d bytes", ErrDigest, n)
		}
		hosts[i] = string(r.bytes(int(n)))
		weights[i] = math.Float64frombits(r.uint64())
		if r.err != nil || !(weights[i] > 0) || math.IsInf(weights[i], 0) {
			return d, fmt.Errorf("%w: host table", ErrDigest)
		}
	}
	n := r.uvarint()
	// An entry takes at least 3 bytes.
	if r.err != nil || n > uint64(r.left()/3) {
		return d, fmt.Errorf("%w: entry count", ErrDigest)
	}
	d.Entries = make([]DigestEntry, 0, n)
	var id uint64
	for i := uint64(0); i < n; i++ {
		delta := r.uvarint()
		next := r.varint()
		ref := r.uvarint()
		if r.err != nil || (i > 0 && delta == 0) || delta > math.MaxUint64-id || ref >= npairs ||
			next < -1<<50 || next > 1<<50 || !digestTime(written+next) {
			return ScheduleDigest{}, fmt.Errorf("%w: entry %d", ErrDigest, i)
		}
		id += delta
		d.Entries = append(d.Entries, DigestEntry{
			ID: id, Next: time.UnixMilli(written + next).UTC(), Host: hosts[ref], Weight: weights[ref],
		})
	}
	if r.left() != 0 {
		return ScheduleDigest{}, fmt.Errorf("%w: %d bytes after the entries", ErrDigest, r.left())
	}
	return d, nil
}

// SplitDigest encodes d as parts whose encodings each take at most
// limit bytes (at least one entry a part), all with d's shard and
// written time.
func SplitDigest(d ScheduleDigest, limit int) ([][]byte, error) {
	for i := 1; i < len(d.Entries); i++ {
		if d.Entries[i].ID <= d.Entries[i-1].ID {
			return nil, fmt.Errorf("%w: IDs not ascending at %d", ErrDigest, d.Entries[i].ID)
		}
	}
	// Runs are sized with the widest part header, so that stamping each
	// with its index and the count does not make it longer.
	wide := func(run []DigestEntry) ([]byte, error) {
		return AppendDigest(nil, ScheduleDigest{Shard: d.Shard, Written: d.Written,
			Part: MaxDigestParts - 1, Parts: MaxDigestParts, Entries: run})
	}
	d.Part, d.Parts = 0, 1
	if b, err := AppendDigest(nil, d); err == nil && (len(b) <= limit || len(d.Entries) == 0) {
		return [][]byte{b}, nil
	} else if err != nil && !errors.Is(err, errManyHosts) {
		return nil, err
	}
	// A run is cut at 90% of what the mean entry size of the first
	// entries lets a part hold, or at the longest that fits when that
	// does not (a run with more distinct hosts than the mean).
	sample, err := wide(d.Entries[:min(len(d.Entries), 4096)])
	if err != nil {
		return nil, err
	}
	mean := float64(len(sample)) / float64(min(len(d.Entries), 4096))
	per := max(1, int(0.9*float64(limit-64)/mean))
	fits := func(run []DigestEntry) bool {
		b, err := wide(run)
		return err == nil && len(b) <= limit
	}
	var runs [][]DigestEntry
	for entries := d.Entries; len(entries) > 0; {
		n := min(per, len(entries))
		if n > 1 && !fits(entries[:n]) {
			n = max(1, sort.Search(n, func(k int) bool { return k > 0 && !fits(entries[:k+1]) }))
		}
		if len(runs) == MaxDigestParts {
			return nil, fmt.Errorf("%w: more than %d parts", ErrDigest, MaxDigestParts)
		}
		runs = append(runs, entries[:n])
		entries = entries[n:]
	}
	out := make([][]byte, len(runs))
	for i, run := range runs {
		b, err := AppendDigest(nil, ScheduleDigest{Shard: d.Shard, Written: d.Written,
			Part: i, Parts: len(runs), Entries: run})
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// JoinDigests joins the parts of one shard's writing: the parts with
// the newest part 0's Written, entries merged by ID. parts may hold parts of
// several shards; the result has one digest per shard that has a part 0.
func JoinDigests(parts []ScheduleDigest) []ScheduleDigest {
	heads := map[int]*ScheduleDigest{}
	for i := range parts {
		if h := heads[parts[i].Shard]; parts[i].Part == 0 && (h == nil || parts[i].Written.After(h.Written)) {
			d := parts[i]
			d.Entries = slices.Clone(d.Entries)
			heads[d.Shard] = &d
		}
	}
	for _, p := range parts {
		h := heads[p.Shard]
		if h == nil || p.Part == 0 || !p.Written.Equal(h.Written) || p.Parts != h.Parts {
			continue
		}
		h.Entries = append(h.Entries, p.Entries...)
	}
	out := make([]ScheduleDigest, 0, len(heads))
	for _, h := range heads {
		slices.SortFunc(h.Entries, func(a, b DigestEntry) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
		h.Entries = slices.CompactFunc(h.Entries, func(a, b DigestEntry) bool { return a.ID == b.ID })
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b ScheduleDigest) int { return a.Shard - b.Shard })
	return out
}

// digestTime reports whether t (Unix ms) is within the years 0 to 9999,
// the instants a digest holds.
func digestTime(t int64) bool { return t >= minDigestTime && t <= maxDigestTime }

// The bounds of digestTime: 0000-01-01 and 9999-12-31 UTC, in Unix ms.
const (
	minDigestTime = -62167219200000
	maxDigestTime = 253402300799999
)

// digestReader reads a digest's encoding, remembering the first error.
type digestReader struct {
	b   []byte
	err error
}

func (r *digestReader) left() int { return len(r.b) }

func (r *digestReader) fail() {
	if r.err == nil {
		r.err = ErrDigest
	}
	r.b = nil
}

func (r *digestReader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *digestReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *digestReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *digestReader) bytes(n int) []byte {
	if n > len(r.b) {
		r.fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *digestReader) uint64() uint64 {
	v := r.bytes(8)
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}
