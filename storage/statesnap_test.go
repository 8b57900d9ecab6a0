package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// snapEntries returns n entries from ID first, every third without a
// Last, states of growing length, two policies.
func snapEntries(first uint64, n int, w time.Time) []StateEntry {
	out := make([]StateEntry, n)
	for i := range out {
		e := StateEntry{ID: first + uint64(i)*3, Policy: "auto", Respect: i%2 == 0, State: bytes.Repeat([]byte{byte(i)}, 1+i%300)}
		if i%5 == 4 {
			e.Policy = "fixed-10m"
		}
		if i%3 != 0 {
			e.Last = w.Add(-time.Duration(i)*time.Minute - 123*time.Nanosecond)
		}
		out[i] = e
	}
	return out
}

// snapWant is d as DecodeStateSnapshot gives it back: written to the
// millisecond in UTC, times in UTC, no entries as an empty slice.
func snapWant(d StateSnapshot) StateSnapshot {
	d.Written = time.UnixMilli(d.Written.UnixMilli()).UTC()
	out := make([]StateEntry, len(d.Entries))
	for i, e := range d.Entries {
		if !e.Last.IsZero() {
			e.Last = e.Last.UTC()
		}
		if e.State == nil {
			e.State = []byte{}
		}
		out[i] = e
	}
	d.Entries = out
	return d
}

func TestStateSnapshotRoundTrip(t *testing.T) {
	w := digestWritten
	tests := []struct {
		name string
		d    StateSnapshot
	}{
		{"empty", StateSnapshot{Written: w, Parts: 1}},
		{"one", StateSnapshot{Shard: 3, Written: w, Parts: 1, Entries: []StateEntry{{ID: 42, Policy: "auto", Respect: true, Last: w.Add(-time.Hour), State: []byte("state")}}}},
		{"no state, no last, empty name", StateSnapshot{Shard: 3, Written: w, Parts: 1, Entries: []StateEntry{{ID: 0}, {ID: 1}}}},
		{"extremes", StateSnapshot{Shard: math.MaxInt32, Written: w, Part: MaxSnapshotParts - 1, Parts: MaxSnapshotParts, Entries: []StateEntry{
			{ID: 0, Policy: strings.Repeat("p", maxSnapshotNameLen), Last: time.Date(1800, 1, 1, 0, 0, 0, 1, time.UTC), State: bytes.Repeat([]byte{7}, MaxSnapshotStateSize)},
			{ID: math.MaxUint64, Policy: "dpt-l", Last: time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC)},
		}}},
		{"generated", StateSnapshot{Shard: 9, Written: w, Parts: 1, Entries: snapEntries(5, 1000, w)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := AppendStateSnapshot([]byte("prefix"), tt.d)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte("prefix")) {
				t.Fatal("the prefix was not kept")
			}
			got, err := DecodeStateSnapshot(b[len("prefix"):])
			if err != nil {
				t.Fatal(err)
			}
			if want := snapWant(tt.d); !reflect.DeepEqual(got, want) {
				t.Errorf("decoded %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestAppendStateSnapshotRefuses(t *testing.T) {
	w := digestWritten
	one := []StateEntry{{ID: 1, Policy: "auto"}}
	tooMany := make([]StateEntry, MaxSnapshotPolicies+1)
	for i := range tooMany {
		tooMany[i] = StateEntry{ID: uint64(i), Policy: fmt.Sprint("p", i)}
	}
	tests := []struct {
		name string
		d    StateSnapshot
	}{
		{"IDs not ascending", StateSnapshot{Written: w, Parts: 1, Entries: []StateEntry{{ID: 2}, {ID: 2}}}},
		{"state too large", StateSnapshot{Written: w, Parts: 1, Entries: []StateEntry{{ID: 1, State: make([]byte, MaxSnapshotStateSize+1)}}}},
		{"name too long", StateSnapshot{Written: w, Parts: 1, Entries: []StateEntry{{ID: 1, Policy: strings.Repeat("p", maxSnapshotNameLen+1)}}}},
		{"last out of range", StateSnapshot{Written: w, Parts: 1, Entries: []StateEntry{{ID: 1, Last: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}}}},
		{"too many policies", StateSnapshot{Written: w, Parts: 1, Entries: tooMany}},
		{"no parts", StateSnapshot{Written: w, Entries: one}},
		{"part past parts", StateSnapshot{Written: w, Part: 1, Parts: 1, Entries: one}},
		{"parts > MaxSnapshotParts", StateSnapshot{Written: w, Parts: MaxSnapshotParts + 1, Entries: one}},
		{"negative shard", StateSnapshot{Shard: -1, Written: w, Parts: 1, Entries: one}},
		{"written out of range", StateSnapshot{Written: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Parts: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("dst")
			got, err := AppendStateSnapshot(dst, tt.d)
			if !errors.Is(err, ErrSnapshot) {
				t.Errorf("err %v, want ErrSnapshot", err)
			}
			if string(got) != "dst" {
				t.Errorf("dst changed to %q", got)
			}
		})
	}
}

// TestSplitStateSnapshot: the parts each fit the limit, carry the
// shard, the written time and their index, and together hold every
// entry once, in order.
func TestSplitStateSnapshot(t *testing.T) {
	w := digestWritten
	for _, tt := range []struct {
		name      string
		entries   int
		limit     int
		wantParts int // 0: more than one
	}{
		{"fits", 100, 1 << 20, 1},
		{"empty", 0, 64, 1},
		{"one too large entry", 1, 16, 1},
		{"many parts", 3000, 16 << 10, 0},
		{"one entry a part", 4, 400, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			entries := snapEntries(1, tt.entries, w)
			if tt.name == "one entry a part" {
				for i := range entries {
					entries[i].State = bytes.Repeat([]byte{1}, 300)
				}
			}
			d := StateSnapshot{Shard: 7, Written: w, Parts: 1, Entries: entries}
			parts, err := SplitStateSnapshot(d, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantParts > 0 && len(parts) != tt.wantParts || tt.wantParts == 0 && len(parts) < 2 {
				t.Fatalf("%d parts, want %d (0: more than one)", len(parts), tt.wantParts)
			}
			var all []StateEntry
			for i, b := range parts {
				if len(b) > tt.limit && len(parts) > 1 {
					t.Errorf("part %d: %d bytes, limit %d", i, len(b), tt.limit)
				}
				p, err := DecodeStateSnapshot(b)
				if err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
				if p.Shard != 7 || p.Part != i || p.Parts != len(parts) || !p.Written.Equal(snapWant(d).Written) {
					t.Errorf("part %d: shard %d, part %d of %d, written %v", i, p.Shard, p.Part, p.Parts, p.Written)
				}
				all = append(all, p.Entries...)
			}
			if want := snapWant(d).Entries; !reflect.DeepEqual(all, want) && len(want) > 0 {
				t.Errorf("the parts hold %d entries, want the %d given, in order", len(all), len(want))
			}
		})
	}
}

// TestDecodeStateSnapshotHostile: encodings that lie about their counts
// and sizes are refused with ErrSnapshot.
func TestDecodeStateSnapshotHostile(t *testing.T) {
	good, err := AppendStateSnapshot(nil, StateSnapshot{Shard: 1, Written: digestWritten, Parts: 1, Entries: snapEntries(1, 3, digestWritten)})
	if err != nil {
		t.Fatal(err)
	}
	header := good[:1]
	tests := map[string][]byte{
		"empty":         {},
		"version":       append([]byte{snapshotVersion + 1}, good[1:]...),
		"truncated":     good[:len(good)-1],
		"trailing":      append(bytes.Clone(good), 0),
		"header only":   header,
		"huge counts":   append([]byte{snapshotVersion, 1, 0, 0, 1}, bytes.Repeat([]byte{0xff}, 12)...),
		"name count":    {snapshotVersion, 1, 0, 0, 1, 0xff, 0x7f},
		"entry count":   {snapshotVersion, 1, 0, 0, 1, 0, 0xff, 0x7f},
		"policy index":  {snapshotVersion, 1, 0, 0, 1, 0, 1, 1, 4, 0},
		"state size":    {snapshotVersion, 1, 0, 0, 1, 1, 1, 'a', 1, 1, 0, 0xff, 0x7f},
		"repeated ID":   {snapshotVersion, 1, 0, 0, 1, 1, 1, 'a', 2, 1, 0, 0, 0, 0, 0},
		"part >= parts": {snapshotVersion, 1, 0, 2, 2, 0, 0},
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			if d, err := DecodeStateSnapshot(b); !errors.Is(err, ErrSnapshot) {
				t.Errorf("decoded %+v, err %v; want ErrSnapshot", d, err)
			}
		})
	}
}

func FuzzDecodeStateSnapshot(f *testing.F) {
	w := digestWritten
	for _, d := range []StateSnapshot{
		{Parts: 1},
		{Shard: 1, Written: w, Parts: 1, Entries: []StateEntry{{ID: 42, Policy: "auto", Respect: true, Last: w, State: []byte{1, 2}}}},
		{Shard: 4095, Written: w, Part: 2, Parts: 5, Entries: snapEntries(8, 12, w)},
	} {
		b, err := AppendStateSnapshot(nil, d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{snapshotVersion, 1, 0, 0, 1, 0, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := DecodeStateSnapshot(raw)
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("DecodeStateSnapshot: %v, want ErrSnapshot", err)
			}
			return
		}
		b, err := AppendStateSnapshot(nil, d)
		if err != nil {
			t.Fatalf("a decoded snapshot does not encode: %v", err)
		}
		again, err := DecodeStateSnapshot(b)
		if err != nil || !reflect.DeepEqual(again, snapWant(d)) {
			t.Fatalf("encoded again and decoded: %+v, %v; want %+v", again, err, d)
		}
	})
}
