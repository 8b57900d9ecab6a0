package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
)

// viaJSON is o as JSON stores and reads it back, the reference the
// binary form must match.
func viaJSON(t testing.TB, o Observation) Observation {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var out Observation
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Published) == 0 {
		out.Published = nil
	}
	if len(out.LatencyS) == 0 {
		out.LatencyS = nil
	}
	return out
}

// TestObservationBinaryRoundTrip: every field of an observation reads back
// from its binary form as it reads back from its JSON, and the binary form
// is several times smaller.
func TestObservationBinaryRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 5, 23, 11, 31, 123456789, time.UTC)
	ist := time.FixedZone("IST", 5*3600+30*60)
	west := time.FixedZone("", -(11*3600 + 45*60))
	tests := []struct {
		name string
		o    Observation
		max  int // bytes the binary form may take at most
	}{
		{"zero", Observation{}, 12},
		{"miss", Observation{At: at, Status: 304}, 14},
		{"hit, latency derived from its publish time", Observation{At: at, Hit: true,
			Published: []time.Time{at.Add(-91*time.Second - 100*time.Millisecond)},
			LatencyS:  []float64{at.Sub(at.Add(-91*time.Second - 100*time.Millisecond)).Seconds()}, Status: 200}, 22},
		{"latencies derived out of order and raw", Observation{At: at, Hit: true,
			Published: []time.Time{at.Add(-time.Hour), at.Add(-time.Minute), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
			LatencyS:  []float64{60, 3600, 0.1, negZero, 1e300}, Status: 200}, 60},
		{"every hint", Observation{At: at, MoreData: true, Hints: schedule.Hints{Desync: time.Second, Phase: -3 * time.Second, HasPhase: true,
			CacheFor: time.Minute, Period: time.Hour, Due: 90 * time.Second, HasDue: true}}, 22},
		{"hints of nanoseconds", Observation{At: at, Hints: schedule.Hints{CacheFor: time.Minute, Period: time.Hour + 1}}, 26},
		{"flags without durations", Observation{At: at, Hints: schedule.Hints{HasPhase: true, HasDue: true}}, 14},
		{"error", Observation{At: at, Status: -1, Err: "dial tcp: lookup x: no such host \"<&>\" \u2028"}, 70},
		{"invalid UTF-8 in the error", Observation{At: at, Err: "bad \xff\xfe byte"}, 40},
		{"zones", Observation{At: at.In(ist), Published: []time.Time{at.In(west), at}}, 40},
		{"local zone", Observation{At: at.Local(), Published: []time.Time{at.Local().Add(-time.Hour)}}, 40},
		{"year 0 and 9999", Observation{At: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
			Published: []time.Time{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), {}}}, 50},
		{"years 9999 and 0 where they were taken", Observation{At: time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -5*3600)),
			Published: []time.Time{time.Date(0, 1, 1, 1, 0, 0, 0, time.FixedZone("", 23*3600))}}, 50},
		{"before 1970", Observation{At: time.Date(1969, 12, 31, 23, 59, 59, 1, time.UTC)}, 16},
		{"monotonic reading dropped", Observation{At: time.Now(), Published: []time.Time{time.Now()}, LatencyS: []float64{0}}, 40},
		{"empty slices", Observation{At: at, Published: []time.Time{}, LatencyS: []float64{}}, 14},
		{"large status", Observation{At: at, Status: 1 << 40}, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := marshalObservation(&tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if raw[0] != obsTag || len(raw) > tt.max {
				t.Errorf("encoded as %d bytes %x, want at most %d with tag %#x", len(raw), raw, tt.max, obsTag)
			}
			js, _ := json.Marshal(tt.o)
			if len(raw) >= len(js) {
				t.Errorf("binary %d bytes, JSON %d", len(raw), len(js))
			}
			got, err := decodeObservation(raw)
			if err != nil {
				t.Fatal(err)
			}
			want := viaJSON(t, tt.o)
			if tt.name == "invalid UTF-8 in the error" {
				want.Err = tt.o.Err // kept as it was; JSON replaced the bytes
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n %#v\nwant\n %#v", got, want)
			}
			for i := range got.LatencyS { // -0 and every bit of a float kept
				if math.Float64bits(got.LatencyS[i]) != math.Float64bits(tt.o.LatencyS[i]) {
					t.Errorf("latency %d: %v, want %v", i, got.LatencyS[i], tt.o.LatencyS[i])
				}
			}
			at, err := observationAt(raw)
			if err != nil || !reflect.DeepEqual(at, want.At) {
				t.Errorf("observationAt = %v, %v; want %v", at, err, want.At)
			}
			lat, err := appendLatencies([]float64{7}, raw)
			if err != nil || !reflect.DeepEqual(lat, append([]float64{7}, want.LatencyS...)) {
				t.Errorf("appendLatencies = %v, %v; want 7 then %v", lat, err, want.LatencyS)
			}
		})
	}
}

// TestObservationBinaryRefuses: what JSON could not hold is refused, so
// that both backends store the same observations.
func TestObservationBinaryRefuses(t *testing.T) {
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		o    Observation
	}{
		{"NaN latency", Observation{At: at, LatencyS: []float64{1, math.NaN()}}},
		{"infinite latency", Observation{At: at, LatencyS: []float64{math.Inf(-1)}}},
		{"year 10000", Observation{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"year -1 published", Observation{At: at, Published: []time.Time{time.Date(-1, 12, 31, 0, 0, 0, 0, time.UTC)}}},
		{"zone offset of a day", Observation{At: at.In(time.FixedZone("", 24*3600))}},
		{"JSON over the bound", Observation{At: at, Err: strings.Repeat("<", MaxObservationSize/6+1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if raw, err := marshalObservation(&tt.o); err == nil {
				t.Errorf("encoded as %x", raw)
			}
			if _, err := encodeObservation(1, tt.o); !errors.Is(err, ErrInvalid) {
				t.Errorf("encodeObservation = %v, want ErrInvalid", err)
			}
			if _, err := json.Marshal(tt.o); err == nil && tt.name != "JSON over the bound" {
				t.Errorf("JSON holds it")
			}
		})
	}
	// The bound is JSON's size, not the binary form's.
	fits := Observation{At: at, Err: strings.Repeat("<", MaxObservationSize/6-100)}
	if _, err := encodeObservation(1, fits); err != nil {
		t.Errorf("an error text whose JSON fits: %v", err)
	}
}

// TestObservationBinaryCorrupt: a damaged binary observation fails to
// decode with a clear error, never a panic or a huge allocation.
func TestObservationBinaryCorrupt(t *testing.T) {
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	good, err := marshalObservation(&Observation{At: at, Hit: true, Published: []time.Time{at.Add(-time.Minute)},
		LatencyS: []float64{60, 1.5}, Status: 200, Err: "x", Hints: schedule.Hints{CacheFor: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	// raw is a binary observation of these flags and the bytes after them.
	raw := func(flags uint64, rest ...byte) []byte {
		return append(binary.AppendUvarint([]byte{obsTag}, flags), rest...)
	}
	for n := range len(good) { // every truncation
		if _, err := decodeObservation(good[:n]); err == nil && n > 0 {
			t.Errorf("decoded %d of %d bytes", n, len(good))
		}
	}
	tests := []struct {
		name string
		raw  []byte
	}{
		{"unknown flag", raw(obsFAll+1, 0, 0)},
		{"trailing byte", append(bytes.Clone(good), 0)},
		{"nanoseconds of a second or more", raw(0, 0, 0x80, 0x94, 0xeb, 0xdc, 0x03)},
		{"year 10000", raw(0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0)},
		{"year 10000 by a second", append(binary.AppendVarint(raw(0), maxObsSec+1), 0)},
		{"year -1 by a second in its zone", append(binary.AppendVarint(raw(obsFZones), minObsSec-1), 0, 1)},
		{"forged published count", raw(obsFPublished, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0)},
		{"published before year 0", raw(obsFPublished, 0, 0, 1, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0)},
		{"forged latency count", raw(obsFLatency, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0)},
		{"latency of a missing publish time", raw(obsFLatency, 0, 0, 1, 1)},
		{"NaN latency", raw(obsFLatency, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f)},
		{"forged error length", raw(obsFErr, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 'x')},
		{"zero status", raw(obsFStatus, 0, 0, 0)},
		{"zero hint", raw(obsFCacheFor, 0, 0, 0)},
		{"seconds without a duration", raw(obsFSeconds, 0, 0)},
		{"hint of too many seconds", raw(obsFCacheFor|obsFSeconds, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{"zone of a day", binary.AppendVarint(raw(obsFZones, 0, 0), 24*3600)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if o, err := decodeObservation(tt.raw); !errors.Is(err, errObsCorrupt) {
				t.Errorf("decoded %x as %+v, %v", tt.raw, o, err)
			}
		})
	}
}

// FuzzDecodeObservation: any bytes decode to an observation or fail with
// an error, without panicking; what decodes encodes again (it is what JSON
// could hold) and reads back the same.
func FuzzDecodeObservation(f *testing.F) {
	at := time.Date(2026, 12, 5, 23, 11, 31, 123456789, time.UTC)
	for _, o := range []Observation{
		{},
		{At: at, Hit: true, Published: []time.Time{at.Add(-time.Minute)}, LatencyS: []float64{60, 0.5}, Status: 200},
		{At: at.In(time.FixedZone("", 3600)), Err: "timeout", Hints: schedule.Hints{Phase: time.Second, HasPhase: true, Due: -1}},
	} {
		raw, err := marshalObservation(&o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"at":"2026-12-05T23:11:31.123456789Z","hit":true,"latency_s":[91.1],"status":200}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, err := decodeObservation(raw)
		lat, lerr := appendLatencies(nil, raw)
		if err != nil {
			return
		}
		if raw[0] != obsTag {
			return // JSON: what json.Unmarshal takes
		}
		if lerr != nil || !reflect.DeepEqual(lat, o.LatencyS) {
			t.Fatalf("appendLatencies = %v, %v; decoded %v", lat, lerr, o.LatencyS)
		}
		again, err := marshalObservation(&o)
		if err != nil {
			t.Fatalf("decoded %+v, which does not encode: %v", o, err)
		}
		o2, err := decodeObservation(again)
		if err != nil || !reflect.DeepEqual(o2, o) {
			t.Fatalf("%+v encoded as %x reads %+v, %v", o, again, o2, err)
		}
	})
}

// BenchmarkObservationCodec encodes and decodes a poll's observation (one
// item, its latency, HTTP cache hints) as JSON, the form an older
// slogfeed stored, and in the binary form, side by side.
func BenchmarkObservationCodec(b *testing.B) {
	at := time.Date(2026, 12, 5, 23, 11, 31, 123456789, time.UTC)
	pub := at.Add(-91 * time.Second).Truncate(time.Second)
	o := Observation{At: at, Hit: true, Published: []time.Time{pub}, LatencyS: []float64{at.Sub(pub).Seconds()},
		Status: 200, Hints: schedule.Hints{CacheFor: time.Minute, Period: time.Hour}}
	js, err := json.Marshal(o)
	if err != nil {
		b.Fatal(err)
	}
	bin, err := marshalObservation(&o)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d bytes as JSON, %d binary", len(js), len(bin))
	b.Run("encode/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(&o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/binary", func(b *testing.B) {
		for b.Loop() {
			if _, err := marshalObservation(&o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeObservation(js); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/binary", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeObservation(bin); err != nil {
				b.Fatal(err)
			}
		}
	})
}
