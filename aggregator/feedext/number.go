package feedext

import (
	"math"
	"strconv"
	"strings"
)

// MaxNumberLen bounds the text of a number ParseNumber reads.
const MaxNumberLen = 64

// ParseNumber reads a finite decimal number as slogfeed writes and reads
// sensor values: an optional sign, digits with an optional fraction and
// exponent ("21.3", "-4e-3"), surrounding space ignored. Hexadecimal,
// "Inf", "NaN", digit separators and text longer than MaxNumberLen are
// refused.
func ParseNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > MaxNumberLen {
		return 0, false
	}
	digits := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' || c == 'e' || c == 'E':
		case c == '+' || c == '-':
			if i != 0 && s[i-1] != 'e' && s[i-1] != 'E' {
				return 0, false
			}
		default:
			return 0, false
		}
	}
	if !digits {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}
