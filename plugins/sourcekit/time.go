package sourcekit

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/feedext"
)

// Time formats of TimeFormat besides Go layouts.
const (
	// TimeAuto reads RFC 3339 text, and numbers (or numeric text) as Unix
	// seconds, or milliseconds when above 1e11.
	TimeAuto TimeFormat = "auto"
	// TimeRFC3339 reads RFC 3339 text, with or without a fraction.
	TimeRFC3339 TimeFormat = "rfc3339"
	// TimeUnix reads Unix seconds, optionally fractional.
	TimeUnix TimeFormat = "unix"
	// TimeUnixMilli reads Unix milliseconds.
	TimeUnixMilli TimeFormat = "unix_ms"
)

const (
	// MaxLayoutLen bounds a Go time layout.
	MaxLayoutLen = 64
	// milliAbove: auto numbers above it are milliseconds.
	milliAbove = 1e11
	// maxUnix is 9999-12-31T23:59:59Z.
	maxUnix = 253402300799
)

// probeTime tells a Go layout from other text: formatting it changes a
// layout (every element of Go's reference time differs in it) and leaves
// other text as it is.
var probeTime = time.Date(2031, 11, 23, 21, 37, 48, 987654321, time.FixedZone("", 3*3600))

// TimeFormat says how a record's time is written: TimeAuto,
// TimeRFC3339, TimeUnix, TimeUnixMilli, or a Go time layout such as
// "02.01.2006 15:04" (times without a zone are UTC).
type TimeFormat string

// ParseTimeFormat checks a configured time format; empty is TimeAuto.
func ParseTimeFormat(s string) (TimeFormat, error) {
	switch f := TimeFormat(s); f {
	case "":
		return TimeAuto, nil
	case TimeAuto, TimeRFC3339, TimeUnix, TimeUnixMilli:
		return f, nil
	}
	if len(s) > MaxLayoutLen {
		return "", fmt.Errorf("%w: time_format is %d bytes, more than %d", ErrConfig, len(s), MaxLayoutLen)
	}
	out := probeTime.Format(s)
	if out == s {
		return "", fmt.Errorf("%w: time_format %s is neither auto, rfc3339, unix, unix_ms nor a Go time layout (such as 2006-01-02 15:04:05)", ErrConfig, Quote(s))
	}
	if _, err := time.Parse(s, out); err != nil {
		return "", fmt.Errorf("%w: time_format %s cannot read its own times: %v", ErrConfig, Quote(s), err)
	}
	return TimeFormat(s), nil
}

// Text reads a time written as text.
func (f TimeFormat) Text(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("empty time")
	}
	if len(s) > MaxLayoutLen*2 {
		return time.Time{}, fmt.Errorf("%s is not a time", Quote(s))
	}
	switch f {
	case TimeUnix, TimeUnixMilli:
		v, ok := feedext.ParseNumber(s)
		if !ok {
			return time.Time{}, fmt.Errorf("%s is not a Unix time", Quote(s))
		}
		return f.Number(v)
	case TimeAuto, "":
		if v, ok := feedext.ParseNumber(s); ok {
			return f.Number(v)
		}
		fallthrough
	case TimeRFC3339:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s is not an RFC 3339 time", Quote(s))
		}
		return t.UTC(), nil
	}
	t, err := time.Parse(string(f), s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s does not match the time format %s", Quote(s), Quote(string(f)))
	}
	return t.UTC(), nil
}

// Number reads a time written as a number: Unix seconds (TimeUnix),
// milliseconds (TimeUnixMilli), either by magnitude (TimeAuto).
func (f TimeFormat) Number(v float64) (time.Time, error) {
	switch f {
	case TimeUnix:
	case TimeUnixMilli:
		v /= 1000
	case TimeAuto, "":
		if v > milliAbove {
			v /= 1000
		}
	default:
		return time.Time{}, fmt.Errorf("the number %v is not a time of format %s", v, Quote(string(f)))
	}
	if math.IsNaN(v) || v < 0 || v > maxUnix {
		return time.Time{}, fmt.Errorf("%v is not a Unix time between 1970 and 9999", v)
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1000).UTC(), nil
}
