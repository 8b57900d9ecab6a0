package transform

import (
	"math"
	"strconv"
)

// TidyValue rounds a computed reading to 15 significant digits, the
// precision a float64 holds for any decimal: sums, means and unit
// conversions of decimal readings then read as decimals again (12.95, not
// 12.950000000000001), and a value that was typed in with 15 digits or
// fewer comes back unchanged. Operators that compute a value pass it
// through TidyValue before they emit it. NaN and infinities are returned
// as they are.
func TidyValue(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	var buf [32]byte
	t, err := strconv.ParseFloat(string(strconv.AppendFloat(buf[:0], v, 'g', 15, 64)), 64)
	if err != nil {
		return v
	}
	return t
}
