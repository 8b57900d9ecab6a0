package transform

import (
	"math"
	"strconv"
	"testing"
)

func TestTidyValue(t *testing.T) {
	tests := []struct {
		name     string
		in, want float64
	}{
		{"a mean's binary noise", (12.1 + 12.2 + 13.0 + 14.5) / 4, 12.95},
		{"a calibration's", 12.3 - 0.4, 11.9},
		{"a sum's", 0.1 + 0.2, 0.3},
		{"a typed decimal is kept", 21.345678901234, 21.345678901234},
		{"fifteen digits are kept", 123456.789012345, 123456.789012345},
		{"small", 1.0000000000000002e-9, 1e-9},
		{"large", 1e300 * 3, 3e300},
		{"zero", 0, 0},
		{"negative", -(0.1 + 0.2), -0.3},
		{"infinity", math.Inf(-1), math.Inf(-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TidyValue(tt.in); got != tt.want {
				t.Errorf("TidyValue(%v) = %s, want %s", tt.in, strconv.FormatFloat(got, 'g', -1, 64), strconv.FormatFloat(tt.want, 'g', -1, 64))
			}
		})
	}
	if got := TidyValue(math.NaN()); !math.IsNaN(got) {
		t.Errorf("TidyValue(NaN) = %v", got)
	}
}

func FuzzTidyValue(f *testing.F) {
	for _, v := range []float64{0.1 + 0.2, 12.95, -1e-300, 1e308, 5e-324} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		got := TidyValue(v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		// Within a relative 1e-14 of the input, and idempotent.
		if d := math.Abs(got - v); d > 1e-14*math.Abs(v) {
			t.Fatalf("TidyValue(%v) = %v, off by %v", v, got, d)
		}
		if again := TidyValue(got); again != got {
			t.Fatalf("TidyValue not idempotent at %v: %v then %v", v, got, again)
		}
	})
}
