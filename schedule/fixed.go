package schedule

import (
	"strconv"
	"time"
)

// MinFixedPeriod is the shortest period of a Fixed policy. NewFixed raises a
// shorter (or non-positive) period to it and lowers one above MaxDelay to
// MaxDelay, so that a Fixed policy always honours the Policy contract.
const MinFixedPeriod = time.Second

// Fixed polls on a fixed grid: the instants Unix epoch + phase + k·period
// for every integer k. It reproduces the fixed-interval polling of classic
// feed readers and of the Park & Heidemann evaluation (e.g. the 15-minute
// baseline of the MDPT experiment), phase-aligned so that runs are
// reproducible and several feeds can be staggered on purpose.
//
// Fixed ignores what it observes. Its zero value is not usable; build it with
// NewFixed.
type Fixed struct {
	period time.Duration
	phase  time.Duration // in [0, period)
	shift  time.Duration // grid offset relative to Go's zero time, in [0, period)
}

// NewFixed returns a policy polling every period, offset by phase from the
// Unix epoch. The period is clamped to [MinFixedPeriod, MaxDelay]; any phase,
// negative or larger than the period, is reduced modulo the period.
func NewFixed(period, phase time.Duration) *Fixed {
	period = min(max(period, MinFixedPeriod), MaxDelay)
	phase %= period
	if phase < 0 {
		phase += period
	}
	// Truncate rounds against Go's zero time (January 1, year 1, UTC), not
	// the Unix epoch: measure where the epoch falls on that grid.
	epoch := time.Unix(0, 0)
	shift := (epoch.Sub(epoch.Truncate(period)) + phase) % period
	return &Fixed{period: period, phase: phase, shift: shift}
}

// Period returns the (clamped) polling period.
func (f *Fixed) Period() time.Duration { return f.period }

// Phase returns the phase, in [0, Period()).
func (f *Fixed) Phase() time.Duration { return f.phase }

// Name returns the eval name: "fixed-" and the period in its largest whole
// unit, e.g. fixed-15m, fixed-1h, fixed-24h, fixed-90s, fixed-1500ms.
func (f *Fixed) Name() string { return "fixed-" + compactDuration(f.period) }

// floor returns the latest grid point not after t.
func (f *Fixed) floor(t time.Time) time.Time {
	// Truncate rounds relative to the zero time and works for any instant,
	// so shift the grid there instead of doing nanosecond arithmetic that
	// could overflow.
	return t.Add(-f.shift).Truncate(f.period).Add(f.shift)
}

// Start implements Starter: the first grid point at or after now.
func (f *Fixed) Start(now time.Time) time.Time {
	g := f.floor(now)
	if g.Before(now) {
		g = g.Add(f.period)
	}
	return g
}

// Next implements Policy: the first grid point strictly after obs.At.
func (f *Fixed) Next(obs Observation) time.Time {
	return clampNext(obs.At, f.floor(obs.At).Add(f.period))
}

// compactDuration prints d in the largest unit that divides it exactly:
// hours, minutes, seconds or milliseconds (nanoseconds as a last resort).
func compactDuration(d time.Duration) string {
	units := []struct {
		unit time.Duration
		sfx  string
	}{
		{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"},
		{time.Millisecond, "ms"}, {time.Microsecond, "us"},
	}
	for _, u := range units {
		if d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.sfx
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}
