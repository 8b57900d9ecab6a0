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
)

// itemViaJSON is it as an older slogfeed stored it under seq and read it
// back: the reference the binary form must match.
func itemViaJSON(t testing.TB, it Item, seq uint64) Item {
	t.Helper()
	raw, err := marshalItem(&it, seq)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeItem(seq, raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ptr(v float64) *float64 { return &v }

// sensorItem is an item as a sensor feed's poll stores it.
func sensorItem() Item {
	at := time.Date(2026, 12, 5, 23, 11, 31, 123456789, time.UTC)
	pub := at.Add(-3 * time.Minute).Truncate(time.Second)
	return Item{FeedID: 17, ID: "42-7", GUID: "42-7", Link: "https://sensors.example.org/station/42/readings/7",
		Title:   "Station 42: water level 107.7 cm",
		Summary: "<p>Water level at station 42, gauge 1, averaged over the hour: 107.7 cm.</p>",
		Fetched: at, Published: pub,
		Reading: &Reading{Value: 107.7, Unit: "cm", Sensor: "gauge-1", Time: pub}}
}

// TestItemBinaryRoundTrip: every field of an item reads back from its
// binary form as it reads back from its JSON, and the binary form is
// smaller.
func TestItemBinaryRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 5, 23, 11, 31, 123456789, time.UTC)
	ist := time.FixedZone("IST", 5*3600+30*60)
	west := time.FixedZone("", -(11*3600 + 45*60))
	lmt := time.FixedZone("LMT", -(4*3600 + 56*60 + 2)) // an offset of whole seconds
	full := Item{FeedID: 1 << 40, ID: "urn:uuid:1", GUID: "guid-1", Link: "https://example.org/a?b=1&c=<2>",
		Title: "Title \"quoted\" <b>&amp;</b>", Summary: "<p>summary</p>", Content: "<div>content \u2028 \u2029</div>",
		Author: "Ann <ann@example.org>", Categories: []string{"lab", "", "temperature"},
		Enclosures: []Enclosure{{URL: "https://example.org/a.mp3", Type: "audio/mpeg", Length: 1 << 33}, {}, {URL: "x", Length: -1}},
		Published:  at.Add(-time.Hour), Updated: at.Add(-time.Minute), Fetched: at,
		Reading: &Reading{Value: -12.25, Unit: "°C", Sensor: "lab-1", Time: at.Add(-2 * time.Hour), Lat: ptr(52.520008), Lon: ptr(0)},
		Digest: &Digest{Field: "value", Count: 12, Sum: 1e300, Min: negZero, Max: math.MaxFloat64,
			From: at.Add(-24 * time.Hour), To: at, Items: []string{"a", "b"}}}
	tests := []struct {
		name string
		it   Item
		max  int // bytes the binary form may take at most
	}{
		{"zero", Item{}, 12},
		{"id and fetch time", Item{FeedID: 3, ID: "x", Fetched: at}, 14},
		{"sensor item", sensorItem(), 200},
		{"link is the id", Item{FeedID: 3, ID: "https://example.org/1", Link: "https://example.org/1", GUID: "https://example.org/1", Fetched: at}, 40},
		{"every field", full, 400},
		{"digest without times or items", Item{ID: "d", Fetched: at, Digest: &Digest{Count: 3, Sum: 1.5, Min: 0.1, Max: 1.3}}, 30},
		{"digest of zero times in a zone", Item{ID: "d", Fetched: at, Digest: &Digest{From: time.Time{}.In(ist), To: time.Time{}.In(west)}}, 30},
		{"zones", Item{ID: "z", Fetched: at.In(ist), Published: at.In(west), Updated: at,
			Reading: &Reading{Value: 1, Time: at.In(west)}}, 60},
		{"reading at another zone than published", Item{ID: "z", Fetched: at, Published: at, Reading: &Reading{Value: 1, Time: at.In(ist)}}, 60},
		{"local zone", Item{ID: "l", Fetched: at.Local(), Published: at.Local().Add(-time.Hour), Reading: &Reading{Time: at.Local()}}, 60},
		{"offset of whole seconds", Item{ID: "s", Fetched: at.In(lmt), Published: time.Date(1880, 1, 1, 12, 0, 0, 0, lmt)}, 60},
		{"zero times in a zone", Item{ID: "z", Fetched: time.Time{}.In(ist), Published: time.Time{}.In(west), Updated: time.Time{}.In(ist)}, 60},
		{"reading without time", Item{ID: "r", Fetched: at, Published: at, Reading: &Reading{Value: 3}}, 40},
		{"reading at publish time without one", Item{ID: "r", Fetched: at, Reading: &Reading{Value: 3}}, 40},
		{"years 0 and 9999", Item{ID: "y", Fetched: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
			Published: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), Reading: &Reading{Time: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}}, 50},
		{"years 9999 and 0 where they were taken", Item{ID: "y", Fetched: time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -5*3600)),
			Published: time.Date(0, 1, 1, 1, 0, 0, 0, time.FixedZone("", 23*3600))}, 50},
		{"before 1970", Item{ID: "b", Fetched: at, Published: time.Date(1969, 12, 31, 23, 59, 59, 1, time.UTC)}, 40},
		{"monotonic reading dropped", Item{ID: "m", Fetched: time.Now(), Published: time.Now(), Reading: &Reading{Time: time.Now()}}, 50},
		{"empty lists", Item{ID: "e", Fetched: at, Categories: []string{}, Enclosures: []Enclosure{}, Digest: &Digest{Items: []string{}}}, 30},
		{"numbers", Item{ID: "n", Fetched: at, Reading: &Reading{Value: math.SmallestNonzeroFloat64, Lat: ptr(negZero), Lon: ptr(1e22)},
			Digest: &Digest{Sum: 0.1 + 0.2, Min: -9007199254740993, Max: 123456.789012345, Count: math.MinInt64}}, 80},
		{"HTML and control characters", Item{ID: "<&>", Title: "a\x00b\tc\u007f", Summary: "</script>", Fetched: at}, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := encodeItem(&tt.it, 7)
			if err != nil {
				t.Fatal(err)
			}
			if raw[0] != itemTag || len(raw) > tt.max {
				t.Errorf("encoded as %d bytes %x, want at most %d with tag %#x", len(raw), raw, tt.max, itemTag)
			}
			js, _ := marshalItem(&tt.it, 7)
			if len(raw) >= len(js) {
				t.Errorf("binary %d bytes, JSON %d", len(raw), len(js))
			}
			got, err := decodeItem(7, raw)
			if err != nil {
				t.Fatal(err)
			}
			if want := itemViaJSON(t, tt.it, 7); !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n %#v\nwant\n %#v", got, want)
			}
			if r := tt.it.Reading; r != nil { // every bit of a number kept
				for _, p := range [][2]*float64{{&r.Value, &got.Reading.Value}, {r.Lat, got.Reading.Lat}, {r.Lon, got.Reading.Lon}} {
					if p[0] != nil && math.Float64bits(*p[0]) != math.Float64bits(*p[1]) {
						t.Errorf("number %v read back as %v", *p[0], *p[1])
					}
				}
			}
			if d := tt.it.Digest; d != nil && math.Float64bits(d.Min) != math.Float64bits(got.Digest.Min) {
				t.Errorf("digest min %v read back as %v", d.Min, got.Digest.Min)
			}
			if id, err := itemRecordID(raw); err != nil || id != tt.it.ID {
				t.Errorf("itemRecordID = %q, %v; want %q", id, err, tt.it.ID)
			}
			if id, err := itemRecordID(js); err != nil || id != tt.it.ID {
				t.Errorf("itemRecordID of the JSON = %q, %v; want %q", id, err, tt.it.ID)
			}
		})
	}
}

// TestItemBinaryText: invalid UTF-8 is replaced byte by byte by U+FFFD, as
// JSON stores it, wherever it is.
func TestItemBinaryText(t *testing.T) {
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	bad := "a\xffb\xed\xa0\x80c\xe2\x82" // a stray byte, a surrogate, a cut sequence
	it := Item{ID: "ok", GUID: bad, Link: bad, Title: bad, Summary: bad, Content: bad, Author: bad,
		Categories: []string{bad}, Enclosures: []Enclosure{{URL: bad, Type: bad}}, Fetched: at,
		Reading: &Reading{Unit: bad, Sensor: bad, Time: at}, Digest: &Digest{Field: bad, Items: []string{bad}}}
	raw, err := encodeItem(&it, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeItem(1, raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := itemViaJSON(t, it, 1); !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n %#v\nwant\n %#v", got, want)
	}
	if want := "a\uFFFDb\uFFFD\uFFFD\uFFFDc\uFFFD\uFFFD"; got.Title != want {
		t.Errorf("title %q, want %q", got.Title, want)
	}
}

// TestItemBinaryTinyOffset: a zone offset of less than a minute, not 0,
// reads back as the time JSON reads back (the wall clock at offset 0), in
// UTC where JSON would keep a zone of offset 0.
func TestItemBinaryTinyOffset(t *testing.T) {
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.FixedZone("", 30))
	it := Item{ID: "t", Fetched: at}
	raw, err := encodeItem(&it, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeItem(1, raw)
	if err != nil {
		t.Fatal(err)
	}
	want := itemViaJSON(t, it, 1)
	if !got.Fetched.Equal(want.Fetched) || got.Fetched.Location() != time.UTC {
		t.Errorf("fetched %v (%v), want %v in UTC", got.Fetched, got.Fetched.Location(), want.Fetched)
	}
}

// TestItemBinaryRefuses: what JSON could not hold is refused, so that
// both backends store the same items; the size bound is JSON's.
func TestItemBinaryRefuses(t *testing.T) {
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		it   Item
	}{
		{"NaN digest sum", Item{ID: "a", Fetched: at, Digest: &Digest{Sum: math.NaN()}}},
		{"infinite digest max", Item{ID: "a", Fetched: at, Digest: &Digest{Max: math.Inf(1)}}},
		{"year 10000 published", Item{ID: "a", Fetched: at, Published: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"year -1 updated", Item{ID: "a", Fetched: at, Updated: time.Date(-1, 12, 31, 0, 0, 0, 0, time.UTC)}},
		{"reading time of year 10000", Item{ID: "a", Fetched: at, Reading: &Reading{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		{"digest to of year 10000", Item{ID: "a", Fetched: at, Digest: &Digest{To: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		{"zone offset of a day", Item{ID: "a", Fetched: at.In(time.FixedZone("", 24*3600))}},
		{"JSON over the bound", Item{ID: "a", Fetched: at, Content: strings.Repeat("<", MaxItemSize/6+1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if raw, err := encodeItem(&tt.it, 1); !errors.Is(err, ErrInvalid) {
				t.Errorf("encodeItem = %x, %v; want ErrInvalid", raw, err)
			}
			if raw, err := marshalItem(&tt.it, math.MaxUint64); err == nil && len(raw) <= MaxItemSize {
				t.Errorf("JSON holds it")
			}
		})
	}
	// The bound is JSON's size with the largest Seq, not the binary form's.
	fits := Item{ID: "a", Fetched: at, Content: strings.Repeat("<", (MaxItemSize-200)/6)}
	if _, err := encodeItem(&fits, math.MaxUint64); err != nil {
		t.Errorf("a content whose JSON fits: %v", err)
	}
	raw, _ := marshalItem(&fits, math.MaxUint64)
	over := fits
	over.Content += strings.Repeat("a", MaxItemSize-len(raw)+1)
	if _, err := encodeItem(&over, math.MaxUint64); !errors.Is(err, ErrInvalid) {
		t.Errorf("a content whose JSON is a byte too large: %v", err)
	}
}

// TestItemBinaryCorrupt: a damaged binary item fails to decode with a
// clear error, never a panic or a huge allocation.
func TestItemBinaryCorrupt(t *testing.T) {
	it := sensorItem()
	it.Categories = []string{"a"}
	it.Enclosures = []Enclosure{{URL: "u"}}
	it.Digest = &Digest{Field: "value", Items: []string{"x"}, From: it.Fetched}
	good, err := encodeItem(&it, 1)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(good) { // every truncation
		if _, err := decodeItem(1, good[:n]); err == nil {
			t.Errorf("decoded %d of %d bytes", n, len(good))
		}
		if n > 0 {
			if _, err := decodeBinaryItem(1, good[:n]); !errors.Is(err, errItemCorrupt) {
				t.Errorf("%d of %d bytes: %v", n, len(good), err)
			}
		}
	}
	// raw is a binary item of these flags, feed 1 and ID "x", then rest.
	raw := func(flags uint64, rest ...byte) []byte {
		b := binary.AppendUvarint([]byte{itemTag}, flags)
		return append(append(b, 1, 1, 'x'), rest...)
	}
	fetched := []byte{0, 0} // the Unix second 0, no nanoseconds
	tests := []struct {
		name string
		raw  []byte
	}{
		{"unknown flag", raw(itemFAll+1, fetched...)},
		{"trailing byte", append(bytes.Clone(good), 0)},
		{"guid twice", raw(itemFGUID|itemFGUIDIsID, append([]byte{1, 'g'}, fetched...)...)},
		{"forged id length", append(binary.AppendUvarint([]byte{itemTag, 0, 1}, 1<<40), 'x')},
		{"id not UTF-8", append([]byte{itemTag, 0, 1, 1, 0xff}, fetched...)},
		{"forged category count", raw(itemFCategories, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 'a')},
		{"empty category list", raw(itemFCategories, 0, 0, 0)},
		{"forged enclosure count", raw(itemFEnclosures, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0)},
		{"nanoseconds of a second or more", raw(0, 0, 0x80, 0x94, 0xeb, 0xdc, 0x03)},
		{"fetched in year 10000", append(binary.AppendVarint(raw(0), maxObsSec+1), 0)},
		{"published before year 0", append(binary.AppendVarint(raw(itemFPublished, fetched...), minObsSec-1), 0)},
		{"published offset overflowing", append(binary.AppendVarint(raw(itemFPublished, fetched...), math.MaxInt64), 0)},
		{"zone of a day", binary.AppendVarint(raw(itemFZones, 0, 0), 24*3600)},
		{"zone offset of whole seconds", binary.AppendVarint(raw(itemFZones, 0, 0), 24)},
		{"unknown reading flag", raw(itemFReading, 0, 0, rFAll+1, 1, 0)},
		{"NaN reading", raw(itemFReading, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f)},
		{"reading of too many decimals", raw(itemFReading, 0, 0, 0, maxDecimals+2, 2)},
		{"reading mantissa of 2^53", binary.AppendVarint(raw(itemFReading, 0, 0, 0, 1), 1<<53)},
		{"unknown digest flag", raw(itemFDigest, 0, 0, dFAll+1, 0, 1, 0, 1, 0, 1, 0)},
		{"forged digest item count", raw(itemFDigest, 0, 0, dFItems, 0, 1, 0, 1, 0, 1, 0, 0xff, 0xff, 0x03, 1, 'a')},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if it, err := decodeBinaryItem(1, tt.raw); !errors.Is(err, errItemCorrupt) {
				t.Errorf("decoded %x as %+v, %v", tt.raw, it, err)
			}
			if _, err := decodeItem(1, tt.raw); !errors.Is(err, ErrCorrupt) {
				t.Errorf("decodeItem: %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestItemRecordSeq: the binary record holds no Seq, so a record encoded
// before its Seq was known reads back with the Seq of its key; a JSON
// record must hold the Seq of its key.
func TestItemRecordSeq(t *testing.T) {
	it := sensorItem()
	raw, err := encodeItem(&it, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 42, math.MaxUint64} {
		got, err := decodeItem(seq, raw)
		if err != nil || got.Seq != seq {
			t.Errorf("decodeItem(%d) = seq %d, %v", seq, got.Seq, err)
		}
	}
	js, _ := marshalItem(&it, 42)
	if _, err := decodeItem(43, js); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a JSON record under another seq: %v", err)
	}
}

// FuzzDecodeItem: any bytes decode to an item or fail with an error,
// without panicking; what decodes encodes again (it is what JSON could
// hold) and reads back the same.
func FuzzDecodeItem(f *testing.F) {
	it := sensorItem()
	for _, it := range []Item{{}, it, {ID: "x", Fetched: it.Fetched.In(time.FixedZone("", 3600)), Categories: []string{"a", ""},
		Enclosures: []Enclosure{{URL: "u", Length: 3}}, Digest: &Digest{Field: "value", Count: 2, Sum: 1.5, Items: []string{"a"}}}} {
		raw, err := encodeItem(&it, 1)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	js, _ := marshalItem(&it, 1)
	f.Add(js)
	f.Fuzz(func(t *testing.T, raw []byte) {
		it, err := decodeItem(1, raw)
		id, idErr := itemRecordID(raw)
		if err != nil {
			return
		}
		if idErr != nil || id != it.ID {
			t.Fatalf("itemRecordID = %q, %v; decoded %q", id, idErr, it.ID)
		}
		if raw[0] != itemTag {
			return // JSON: what json.Unmarshal takes
		}
		again, err := appendItem(nil, &it)
		if err != nil {
			t.Fatalf("decoded %+v, which does not encode: %v", it, err)
		}
		it2, err := decodeItem(1, again)
		if err != nil || !reflect.DeepEqual(it2, it) {
			t.Fatalf("%+v encoded as %x reads %+v, %v", it, again, it2, err)
		}
		if !json.Valid(mustMarshalItem(t, &it)) {
			t.Fatalf("%+v has no JSON", it)
		}
	})
}

func mustMarshalItem(t *testing.T, it *Item) []byte {
	raw, err := marshalItem(it, 1)
	if err != nil {
		t.Fatalf("%+v: %v", it, err)
	}
	return raw
}

// BenchmarkItemCodec encodes and decodes a sensor item as JSON, the form
// an older slogfeed stored, and in the binary form, side by side.
func BenchmarkItemCodec(b *testing.B) {
	it := sensorItem()
	js, err := marshalItem(&it, 123456)
	if err != nil {
		b.Fatal(err)
	}
	bin, err := encodeItem(&it, 123456)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d bytes as JSON, %d binary", len(js), len(bin))
	b.Run("encode/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshalItem(&it, 123456); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeItem(&it, 123456); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeItem(123456, js); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeItem(123456, bin); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("id/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := itemRecordID(js); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("id/binary", func(b *testing.B) {
		for b.Loop() {
			if _, err := itemRecordID(bin); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// negZero is -0 (the literal -0.0 is +0 in Go).
var negZero = math.Copysign(0, -1)
