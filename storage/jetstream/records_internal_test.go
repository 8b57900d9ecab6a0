package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/slogfeed/slogfeed/storage"
)

// sampleRecord is the JSON of a polled remote feed's record with a policy
// state, as a poll writes it.
func sampleRecord(t testing.TB, id uint64) []byte {
	t.Helper()
	at := time.Date(2026, 12, 6, 11, 28, 43, 838981035, time.UTC)
	policy := make([]byte, 280) // a DPT state: mostly small numbers and zeros
	for i := range policy {
		if i%9 == 0 {
			policy[i] = byte(i)
		}
	}
	rec := feedRecord{
		Feed: storage.Feed{
			ID: id, Kind: storage.KindRemote, URL: "http://127.0.0.4:38407/f/92979", Title: "sensor 92979",
			Site: "http://127.0.0.1/", Policy: "auto", ETag: `"92979-5"`, Polls: 6, Hits: 6, Items: 6,
			LatencySumS: 2.838981035, LatencyCount: 1, LastFetch: at, LastHit: at,
			Created: at.Add(-time.Hour), Updated: at,
		},
		State: &recordState{Next: at.Add(10 * time.Minute), Last: at, Policy: policy},
	}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestPackRecord(t *testing.T) {
	rec := sampleRecord(t, 92980)
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	random := make([]byte, 4096) // no repeats for S2 to find
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = letters[r.IntN(len(letters))]
	}
	incompressible, _ := json.Marshal(map[string]string{"title": string(random)})
	short := []byte(`{"id":1,"kind":"remote","policy":"auto"}`)
	for _, tc := range []struct {
		name       string
		data       []byte
		compress   bool
		packed     bool
		maxPercent int // of the JSON, when packed
	}{
		{"a record with its state", rec, true, true, 60},
		{"compression off", rec, false, false, 0},
		{"a short record", short, true, false, 0},
		{"an incompressible record", incompressible, true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := packRecord(tc.data, tc.compress)
			if got := len(stored) > 0 && stored[0] == recordS2; got != tc.packed {
				t.Fatalf("packed %v, want %v (%d of %d bytes)", got, tc.packed, len(stored), len(tc.data))
			}
			if !tc.packed && !bytes.Equal(stored, tc.data) {
				t.Fatal("a record stored as it is was changed")
			}
			if tc.packed && len(stored)*100 > len(tc.data)*tc.maxPercent {
				t.Errorf("compressed to %d of %d bytes, want at most %d%%", len(stored), len(tc.data), tc.maxPercent)
			}
			back, err := unpackRecord(stored)
			if err != nil || !bytes.Equal(back, tc.data) {
				t.Fatalf("unpack: %v, equal %v", err, bytes.Equal(back, tc.data))
			}
			got, err := decodeRecord(92980, packRecord(rec, tc.compress))
			if err != nil || got.ID != 92980 || got.State == nil || !bytes.Equal(got.State.Policy, mustRecord(t, rec).State.Policy) {
				t.Fatalf("decodeRecord: %+v, %v", got, err)
			}
		})
	}
}

func mustRecord(t *testing.T, data []byte) feedRecord {
	t.Helper()
	var rec feedRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestUnpackRecordRefuses: a stored value that is not a record is
// refused as corrupt, never decoded past storage.MaxFeedSize.
func TestUnpackRecordRefuses(t *testing.T) {
	bomb := append([]byte{recordS2}, s2.Encode(nil, []byte(`{"id":1,"title":"`+strings.Repeat("a", storage.MaxFeedSize)+`"}`))...)
	if len(bomb) > 64<<10 {
		t.Fatalf("the test's bomb is %d bytes", len(bomb))
	}
	packed := packRecord(sampleRecord(t, 7), true)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"decodes past the record limit", bomb},
		{"the tag alone", []byte{recordS2}},
		{"not S2", append([]byte{recordS2}, "{\"id\":7}"...)},
		{"truncated", packed[:len(packed)/2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := unpackRecord(tc.data); !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("unpack: %d bytes, %v; want ErrCorrupt", len(out), err)
			}
			if _, err := decodeRecord(7, tc.data); !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("decodeRecord: %v; want ErrCorrupt", err)
			}
		})
	}
}

// FuzzUnpackRecord: any stored value unpacks to at most
// storage.MaxFeedSize bytes or is refused, and a record packed unpacks to
// itself.
func FuzzUnpackRecord(f *testing.F) {
	f.Add(sampleRecord(f, 3))
	f.Add(packRecord(sampleRecord(f, 3), true))
	f.Add([]byte{recordS2, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := unpackRecord(data)
		if err == nil && len(out) > storage.MaxFeedSize && len(data) > 0 && data[0] == recordS2 {
			t.Fatalf("unpacked %d bytes", len(out))
		}
		if len(data) <= storage.MaxFeedSize && (len(data) == 0 || data[0] != recordS2) {
			back, err := unpackRecord(packRecord(data, true))
			if err != nil || !bytes.Equal(back, data) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}
