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

// ParseLocalNumber reads a number as people write it in titles and
// summaries: a decimal comma ("21,5"), thousands separators ("1,234.5",
// "1.234,5", "1 234", "1'234", "1_234"), and the Unicode minus sign.
// Without its spaces the text may be at most MaxNumberLen bytes, and what
// remains without separators must satisfy ParseNumber.
func ParseLocalNumber(s string) (float64, bool) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\u00a0', '\u202f', '\u2009', '\'', '_':
			return -1
		case '\u2212':
			return '-'
		}
		return r
	}, s)
	if s == "" || len(s) > MaxNumberLen {
		return 0, false
	}
	comma, dot := strings.LastIndexByte(s, ','), strings.LastIndexByte(s, '.')
	switch {
	case comma >= 0 && dot >= 0 && comma > dot: // 1.234,5
		s = strings.ReplaceAll(s, ".", "")
		s = strings.Replace(s, ",", ".", 1)
	case comma >= 0 && dot >= 0: // 1,234.5
		s = strings.ReplaceAll(s, ",", "")
	case strings.Count(s, ",") == 1: // 21,5
		s = strings.Replace(s, ",", ".", 1)
	case comma >= 0: // 1,234,567
		s = strings.ReplaceAll(s, ",", "")
	}
	return ParseNumber(s)
}
