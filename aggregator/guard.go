package aggregator

import (
	"math"
	"time"
)

// stamp is an instant in 8 bytes instead of a time.Time's 24: Unix
// nanoseconds, the zero stamp standing for the zero time. A feedGuard keeps
// six, one set per feed. An instant comes back in UTC and without a
// monotonic clock reading, as the scheduler's core keeps its times (Unix
// nanoseconds); instants before 1678 or after 2262 saturate to those
// years.
type stamp int64

// stampFlip maps Unix nanoseconds to a stamp and back: the zero stamp is
// the least int64, a 1677 instant no feed has (it saturates one
// nanosecond later).
const stampFlip = math.MinInt64

var (
	stampMin = time.Unix(0, math.MinInt64+1)
	stampMax = time.Unix(0, math.MaxInt64)
)

// stampOf returns t as a stamp.
func stampOf(t time.Time) stamp {
	switch {
	case t.IsZero():
		return 0
	case !t.After(stampMin):
		return stamp(stampMin.UnixNano() ^ stampFlip)
	case !t.Before(stampMax):
		return stamp(stampMax.UnixNano() ^ stampFlip)
	}
	return stamp(t.UnixNano() ^ stampFlip)
}

// time returns the instant s stands for (the zero time for the zero stamp).
func (s stamp) time() time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(s)^stampFlip).UTC()
}

// isZero reports whether s stands for the zero time.
func (s stamp) isZero() bool { return s == 0 }
