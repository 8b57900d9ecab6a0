package publish

import (
	"math"
	"strconv"
	"testing"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/storage"
)

// extremeValues are finite floats at and near the ends of float64's range.
var extremeValues = []float64{
	0, math.Copysign(0, -1), 21.3, -4e-3, 1e-7, 1e-20, 1e21,
	1.2345678901234567e-50, 1.23456789e68, -1.23456789e68,
	math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
	0x1p-1022, 0x1p-1022 - 0x1p-1074, 123456789012345678901234.0, 0.1234567890123456789,
	9007199254740993, 1e-6, 1.5e300,
}

// FormatValue writes the shortest form that reads back exactly, plain
// where that is short, never longer than what feedext reads.
func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{21.3, "21.3"},
		{-4e-3, "-0.004"},
		{1e-7, "0.0000001"},
		{1e21, "1000000000000000000000"},
		{1.2345678901234567e-50, "1.2345678901234566e-50"}, // the shortest form of the nearest float64
		{1.23456789e68, "1.23456789e+68"},
		{math.SmallestNonzeroFloat64, "5e-324"},
		{-math.MaxFloat64, "-1.7976931348623157e+308"},
	}
	for _, tt := range tests {
		if got := FormatValue(tt.v); got != tt.want {
			t.Errorf("FormatValue(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
	for _, v := range extremeValues {
		roundTrip(t, v)
	}
}

func roundTrip(t *testing.T, v float64) {
	t.Helper()
	s := FormatValue(v)
	got, ok := feedext.ParseNumber(s)
	if !ok || math.Float64bits(got) != math.Float64bits(v) {
		t.Errorf("FormatValue(%v) = %q reads back as %v, %v", v, s, got, ok)
	}
	if len(s) > MaxPlainValue && len(s) > len(strconv.FormatFloat(v, 'e', -1, 64)) {
		t.Errorf("FormatValue(%v) = %q: not the short form", v, s)
	}
}

// Every finite value a feed carries reaches a subscribing slogfeed
// unchanged, in every format.
func TestValuesReachSubscribers(t *testing.T) {
	for _, v := range extremeValues {
		feed := Feed{SelfURL: "https://ex.org/f", Items: []storage.Item{
			{ID: "r/1", Published: t0, Reading: &storage.Reading{Value: v, Unit: "A", Sensor: "s", Time: t0}},
		}}
		for _, ft := range formats {
			doc, err := ft.render(feed)
			if err != nil {
				t.Fatalf("%s: %v", ft.ext, err)
			}
			types := map[string]string{"rss": ContentTypeRSS, "atom": ContentTypeAtom, "json": ContentTypeJSON}
			p, err := parser.Parse(doc, types[ft.ext], parser.Options{})
			if err != nil {
				t.Fatalf("%v in %s: %v", v, ft.ext, err)
			}
			if len(p.Items) != 1 || p.Items[0].Reading == nil {
				t.Errorf("%v in %s: no reading read back", v, ft.ext)
				continue
			}
			if got := p.Items[0].Reading.Value; got != v {
				t.Errorf("%v in %s: read back as %v", v, ft.ext, got)
			}
		}
	}
}

// FuzzFormatValue checks the round trip over any finite float.
func FuzzFormatValue(f *testing.F) {
	for _, v := range extremeValues {
		f.Add(math.Float64bits(v))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		roundTrip(t, v)
	})
}
