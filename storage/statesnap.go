package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// State snapshots. A cluster node that owns a shard writes, every few
// minutes, the learned policy state of each of the shard's feeds it
// polls, in a few large messages instead of one record a feed. A node
// that takes the shard over gives every feed of the snapshot whose
// record was not written since (no poll, no edit) its policy from the
// snapshot at once, and reads the records of the others (schedule
// digests, ScheduleDigest, then queue them by due time). A snapshot is
// a hint like a digest: an entry for a feed written since is not used.

// StateEntry is one feed of a StateSnapshot.
type StateEntry struct {
	ID uint64
	// Policy is the name of the feed's policy (schedule.ByName with the
	// feed's ID as seed builds it before State is restored).
	Policy string
	// Respect: the feed's polls respect its publisher's cache lifetime.
	Respect bool
	// Last is when the newest observation the policy learned from was
	// made (zero while none).
	Last time.Time
	// State is the policy's state (schedule.Stateful), at most
	// MaxSnapshotStateSize bytes.
	State []byte
}

// StateSnapshot is a shard's snapshot, or one part of it: a snapshot too
// large for one message is written as Parts parts with the same Written,
// each holding a run of the entries.
type StateSnapshot struct {
	Shard   int
	Written time.Time // when the owner began it (millisecond precision)
	Part    int       // this part's index, 0 ≤ Part < Parts
	Parts   int
	Entries []StateEntry // ascending, distinct IDs
}

// StateSnapshotter is a store that keeps the cluster's state snapshots
// and tells which feed records were written since a time
// (storage/jetstream's Backend).
type StateSnapshotter interface {
	// PutStateSnapshot stores d, a shard's snapshot whole (Part 0,
	// Parts 1): the store splits it into parts as its message size
	// requires.
	PutStateSnapshot(d StateSnapshot) error
	// StateSnapshots returns the newest snapshot of each shard of
	// shards that has one whose parts can all be read, each whole.
	StateSnapshots(shards []int) ([]StateSnapshot, error)
	// FeedsWrittenSince returns the feeds whose records were written
	// (created, updated or deleted) at or after t, by the store's clock,
	// with the time of each one's newest write.
	FeedsWrittenSince(t time.Time) (map[uint64]time.Time, error)
}

// Bounds of an encoded StateSnapshot.
const (
	// MaxSnapshotParts bounds the parts of one shard's snapshot.
	MaxSnapshotParts = 1024
	// MaxSnapshotPolicies bounds the distinct policy names of one
	// snapshot; feeds past it are left out by SplitStateSnapshot.
	MaxSnapshotPolicies = 256
	// maxSnapshotNameLen bounds a policy name.
	maxSnapshotNameLen = 256
	// MaxSnapshotStateSize bounds one feed's state (schedule.MaxStateSize).
	MaxSnapshotStateSize = 4096
)

// ErrSnapshot reports an encoded StateSnapshot that cannot be read.
var ErrSnapshot = errors.New("state snapshot: malformed")

// snapshotVersion is the first byte of an encoded StateSnapshot.
const snapshotVersion = 1

// Entry flags of the encoding: the flags varint holds the entry's policy
// index shifted left by two.
const (
	snapRespect = 1 << iota
	snapHasLast
	snapFlagBits = 2
)

// AppendStateSnapshot appends d's encoding to dst: a version byte, the
// shard, written (Unix ms), part and parts, a table of the policy names,
// then each entry as its ID's distance from the previous one, its policy
// index and flags, its Last in ns from written (when set), and its
// state's length and bytes. Entries must be ascending by ID, with at
// most MaxSnapshotPolicies names of at most 256 bytes and states of at
// most MaxSnapshotStateSize bytes.
func AppendStateSnapshot(dst []byte, d StateSnapshot) ([]byte, error) {
	written := d.Written.UnixMilli()
	if d.Shard < 0 || d.Shard > math.MaxInt32 || d.Parts < 1 || d.Parts > MaxSnapshotParts || d.Part < 0 || d.Part >= d.Parts ||
		!digestTime(written) {
		return dst, fmt.Errorf("%w: shard %d, part %d of %d, written %v", ErrSnapshot, d.Shard, d.Part, d.Parts, d.Written)
	}
	index := map[string]uint64{}
	var names []string
	for i, e := range d.Entries {
		if i > 0 && e.ID <= d.Entries[i-1].ID {
			return dst, fmt.Errorf("%w: IDs not ascending at %d", ErrSnapshot, e.ID)
		}
		if len(e.State) > MaxSnapshotStateSize || len(e.Policy) > maxSnapshotNameLen || !snapTime(e.Last, written) {
			return dst, fmt.Errorf("%w: feed %d: policy %q, state of %d bytes, last %v", ErrSnapshot, e.ID, e.Policy, len(e.State), e.Last)
		}
		if _, ok := index[e.Policy]; !ok {
			if len(names) == MaxSnapshotPolicies {
				return dst, fmt.Errorf("%w: more than %d policies", ErrSnapshot, MaxSnapshotPolicies)
			}
			index[e.Policy] = uint64(len(names))
			names = append(names, e.Policy)
		}
	}
	dst = append(dst, snapshotVersion)
	dst = binary.AppendUvarint(dst, uint64(d.Shard))
	dst = binary.AppendVarint(dst, written)
	dst = binary.AppendUvarint(dst, uint64(d.Part))
	dst = binary.AppendUvarint(dst, uint64(d.Parts))
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, n := range names {
		dst = binary.AppendUvarint(dst, uint64(len(n)))
		dst = append(dst, n...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(d.Entries)))
	var prev uint64
	for _, e := range d.Entries {
		dst = appendSnapEntry(dst, e, e.ID-prev, index[e.Policy], written)
		prev = e.ID
	}
	return dst, nil
}

func appendSnapEntry(dst []byte, e StateEntry, delta, policy uint64, written int64) []byte {
	flags := policy << snapFlagBits
	if e.Respect {
		flags |= snapRespect
	}
	if !e.Last.IsZero() {
		flags |= snapHasLast
	}
	dst = binary.AppendUvarint(dst, delta)
	dst = binary.AppendUvarint(dst, flags)
	if !e.Last.IsZero() {
		dst = binary.AppendVarint(dst, int64(e.Last.Sub(time.UnixMilli(written))))
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.State)))
	return append(dst, e.State...)
}

// snapTime reports whether last is zero or an instant whose distance
// from written (Unix ms) is a time.Duration (within 292 years).
func snapTime(last time.Time, written int64) bool {
	if last.IsZero() {
		return true
	}
	d := last.Sub(time.UnixMilli(written))
	return d > math.MinInt64 && d < math.MaxInt64
}

// DecodeStateSnapshot reads an encoding AppendStateSnapshot made.
// Anything else, however hostile, is refused with ErrSnapshot: it
// allocates no more than the input's length justifies. The entries'
// states are slices of b.
func DecodeStateSnapshot(b []byte) (StateSnapshot, error) {
	r := digestReader{b: b}
	var d StateSnapshot
	if v := r.byte(); v != snapshotVersion {
		return d, fmt.Errorf("%w: version %d", ErrSnapshot, v)
	}
	shard := r.uvarint()
	written := r.varint()
	part, parts := r.uvarint(), r.uvarint()
	if r.err != nil || shard > math.MaxInt32 || parts < 1 || parts > MaxSnapshotParts || part >= parts || !digestTime(written) {
		return d, fmt.Errorf("%w: header", ErrSnapshot)
	}
	d.Shard, d.Part, d.Parts = int(shard), int(part), int(parts)
	d.Written = time.UnixMilli(written).UTC()
	nnames := r.uvarint()
	// A name takes at least a byte.
	if r.err != nil || nnames > MaxSnapshotPolicies || nnames > uint64(r.left()) {
		return d, fmt.Errorf("%w: policy table", ErrSnapshot)
	}
	names := make([]string, nnames)
	for i := range names {
		n := r.uvarint()
		if r.err != nil || n > maxSnapshotNameLen {
			return d, fmt.Errorf("%w: policy table", ErrSnapshot)
		}
		names[i] = string(r.bytes(int(n)))
	}
	n := r.uvarint()
	// An entry takes at least 3 bytes.
	if r.err != nil || n > uint64(r.left()/3) {
		return d, fmt.Errorf("%w: entry count", ErrSnapshot)
	}
	d.Entries = make([]StateEntry, 0, n)
	base := time.UnixMilli(written)
	var id uint64
	for i := uint64(0); i < n; i++ {
		delta := r.uvarint()
		flags := r.uvarint()
		var last int64
		if flags&snapHasLast != 0 {
			last = r.varint()
		}
		size := r.uvarint()
		ref := flags >> snapFlagBits
		if r.err != nil || (i > 0 && delta == 0) || delta > math.MaxUint64-id || ref >= nnames || size > MaxSnapshotStateSize ||
			last == math.MinInt64 || last == math.MaxInt64 {
			return StateSnapshot{}, fmt.Errorf("%w: entry %d", ErrSnapshot, i)
		}
		id += delta
		e := StateEntry{ID: id, Policy: names[ref], Respect: flags&snapRespect != 0, State: r.bytes(int(size))}
		if flags&snapHasLast != 0 {
			e.Last = base.Add(time.Duration(last)).UTC()
		}
		if r.err != nil {
			return StateSnapshot{}, fmt.Errorf("%w: entry %d", ErrSnapshot, i)
		}
		d.Entries = append(d.Entries, e)
	}
	if r.left() != 0 {
		return StateSnapshot{}, fmt.Errorf("%w: %d bytes after the entries", ErrSnapshot, r.left())
	}
	return d, nil
}

// SplitStateSnapshot encodes d as parts whose encodings each take at
// most limit bytes (at least one entry a part), all with d's shard and
// written time.
func SplitStateSnapshot(d StateSnapshot, limit int) ([][]byte, error) {
	d.Part, d.Parts = 0, 1
	whole, err := AppendStateSnapshot(nil, d)
	if err != nil {
		return nil, err
	}
	if len(whole) <= limit || len(d.Entries) <= 1 {
		return [][]byte{whole}, nil
	}
	// Every part carries the whole policy table; an entry's size is
	// exact but for its ID's distance from the previous one, which a
	// part's first entry gives from 0 (at most 10 bytes).
	head, _ := AppendStateSnapshot(nil, StateSnapshot{Shard: d.Shard, Written: d.Written,
		Part: MaxSnapshotParts - 1, Parts: MaxSnapshotParts, Entries: policyEntries(d.Entries)})
	room := limit - len(head) - binary.MaxVarintLen64 - binary.MaxVarintLen64
	written := d.Written.UnixMilli()
	var runs [][]StateEntry
	start, used := 0, 0
	for i, e := range d.Entries {
		size := len(appendSnapEntry(nil, e, e.ID, MaxSnapshotPolicies, written))
		if i > start && used+size > room {
			runs = append(runs, d.Entries[start:i])
			start, used = i, 0
		}
		used += size
	}
	runs = append(runs, d.Entries[start:])
	if len(runs) > MaxSnapshotParts {
		return nil, fmt.Errorf("%w: more than %d parts", ErrSnapshot, MaxSnapshotParts)
	}
	out := make([][]byte, len(runs))
	for i, run := range runs {
		// Each part's table names only its own policies.
		b, err := AppendStateSnapshot(nil, StateSnapshot{Shard: d.Shard, Written: d.Written, Part: i, Parts: len(runs), Entries: run})
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// policyEntries returns one entry per distinct policy of entries, with
// ascending IDs and no state: what a part's policy table costs at most.
func policyEntries(entries []StateEntry) []StateEntry {
	seen := map[string]bool{}
	var out []StateEntry
	for _, e := range entries {
		if !seen[e.Policy] {
			seen[e.Policy] = true
			out = append(out, StateEntry{ID: uint64(len(out) + 1), Policy: e.Policy})
		}
	}
	return out
}
