package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxSleepWindows bounds the number of daily and of absolute windows in a
// SleepPlan, and the number of entries ParseSkip accepts per list.
const MaxSleepWindows = 64

// ErrSleepPlan is returned for a malformed sleep plan (bad skipHours or
// skipDays value, an inverted or empty window, too many windows).
var ErrSleepPlan = errors.New("schedule: invalid sleep plan")

// SleepPlan says when a feed must not be polled: a sensor that sleeps, or a
// publisher that asks, through RSS <skipHours> and <skipDays>, not to be
// read at certain times. The zero SleepPlan never sleeps.
//
// A poll that would fall inside a sleep is moved to the instant the feed
// wakes up (see Wake), so the first poll after a sleep lands right at the
// wake-up, when the data gathered during the night is fresh.
type SleepPlan struct {
	// SkipHours has bit h set when hour h (0–23, UTC) is skipped.
	SkipHours uint32
	// SkipDays has bit d set when weekday d (time.Weekday: Sunday = 0, in
	// UTC) is skipped.
	SkipDays uint8
	// Daily are windows repeated every day.
	Daily []DailyWindow
	// Windows are one-off windows.
	Windows []Window
}

// DailyWindow is a sleep repeated every day from From to To, both offsets
// from midnight UTC in [0, 24h]. The window is [From, To); when From > To it
// runs over midnight (From to 24h, then 0 to To).
type DailyWindow struct {
	From, To time.Duration
}

// Window is a one-off sleep [Start, End).
type Window struct {
	Start, End time.Time
}

// ParseSkip builds a SleepPlan from the text of RSS <skipHours><hour>
// elements ("0"–"23"; "24", which some publishers write for midnight, is
// read as 0) and <skipDays><day> elements ("Monday"…"Sunday", case and
// surrounding space ignored).
func ParseSkip(hours, days []string) (SleepPlan, error) {
	var p SleepPlan
	if len(hours) > MaxSleepWindows || len(days) > MaxSleepWindows {
		return SleepPlan{}, fmt.Errorf("%w: too many skipHours/skipDays entries", ErrSleepPlan)
	}
	for _, s := range hours {
		s = strings.TrimSpace(s)
		if len(s) > 2 {
			return SleepPlan{}, fmt.Errorf("%w: skipHours value %.8q", ErrSleepPlan, s)
		}
		h, err := strconv.Atoi(s)
		if err != nil || h < 0 || h > 24 {
			return SleepPlan{}, fmt.Errorf("%w: skipHours value %q", ErrSleepPlan, s)
		}
		p.SkipHours |= 1 << (h % 24)
	}
	for _, s := range days {
		d, ok := parseWeekday(s)
		if !ok {
			return SleepPlan{}, fmt.Errorf("%w: skipDays value %.16q", ErrSleepPlan, s)
		}
		p.SkipDays |= 1 << d
	}
	return p, nil
}

func parseWeekday(s string) (time.Weekday, bool) {
	s = strings.TrimSpace(s)
	if len(s) > len("wednesday") {
		return 0, false
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(s, d.String()) {
			return d, true
		}
	}
	return 0, false
}

// IsZero reports whether the plan never sleeps.
func (p *SleepPlan) IsZero() bool {
	return p.SkipHours == 0 && p.SkipDays == 0 && len(p.Daily) == 0 && len(p.Windows) == 0
}

// Validate checks the plan: hour bits 0–23 and day bits 0–6 only, daily
// offsets in [0, 24h] with From ≠ To, windows with End after Start, at most
// MaxSleepWindows of each kind. A plan that sleeps all the time is valid:
// Wake then falls back to polling every MaxDelay.
func (p *SleepPlan) Validate() error {
	if p.SkipHours>>24 != 0 {
		return fmt.Errorf("%w: skip hour above 23", ErrSleepPlan)
	}
	if p.SkipDays>>7 != 0 {
		return fmt.Errorf("%w: skip day above 6", ErrSleepPlan)
	}
	if len(p.Daily) > MaxSleepWindows || len(p.Windows) > MaxSleepWindows {
		return fmt.Errorf("%w: more than %d windows", ErrSleepPlan, MaxSleepWindows)
	}
	for _, w := range p.Daily {
		switch {
		case w.From < 0 || w.From > 24*time.Hour || w.To < 0 || w.To > 24*time.Hour:
			return fmt.Errorf("%w: daily window %v–%v: times of day run from 00:00 to 24:00", ErrSleepPlan, w.From, w.To)
		case w.From == w.To:
			return fmt.Errorf("%w: daily window %s is empty (to sleep all day, use 00:00-24:00)", ErrSleepPlan, w)
		}
	}
	for _, w := range p.Windows {
		if !w.End.After(w.Start) {
			return fmt.Errorf("%w: window ends before it starts", ErrSleepPlan)
		}
	}
	return nil
}

// Asleep reports whether t falls inside one of the plan's sleeps.
func (p *SleepPlan) Asleep(t time.Time) bool {
	_, asleep := p.until(t)
	return asleep
}

// until returns the end of the first sleep that covers t (which may itself
// be asleep, when sleeps abut or overlap).
func (p *SleepPlan) until(t time.Time) (time.Time, bool) {
	u := t.UTC()
	if p.SkipDays != 0 && p.SkipDays&(1<<u.Weekday()) != 0 {
		y, m, d := u.Date()
		return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC), true
	}
	if p.SkipHours != 0 && p.SkipHours&(1<<u.Hour()) != 0 {
		return u.Truncate(time.Hour).Add(time.Hour), true
	}
	if len(p.Daily) > 0 {
		y, m, d := u.Date()
		midnight := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		off := u.Sub(midnight)
		for _, w := range p.Daily {
			switch {
			case w.From < w.To && off >= w.From && off < w.To:
				return midnight.Add(w.To), true
			case w.From > w.To && off >= w.From:
				return midnight.Add(24*time.Hour + w.To), true
			case w.From > w.To && off < w.To:
				return midnight.Add(w.To), true
			}
		}
	}
	for _, w := range p.Windows {
		if !t.Before(w.Start) && t.Before(w.End) {
			return w.End, true
		}
	}
	return t, false
}

// wakeHorizon is how far past t (or past the end of an absolute window
// that covers the search) Wake looks for an awake instant. Skipped hours,
// skipped days and daily windows repeat every week, so a plan with no awake
// instant within 8 days of periodic rules never wakes.
const wakeHorizon = 8 * 24 * time.Hour

// Wake returns the first instant at or after t when the feed is awake: t
// itself when it is awake, otherwise the end of the sleep (or chain of
// abutting sleeps) that covers t, however far away (a weekend of skipDays
// after a skipped Friday night hour is 49 hours). A plan that is asleep all
// the time (every hour or every day skipped) would never be polled; for it
// Wake returns t+MaxDelay, so the feed is still polled, rarely, instead of
// never. The search is bounded.
func (p *SleepPlan) Wake(t time.Time) time.Time {
	if p.IsZero() {
		return t
	}
	limit := t.Add(wakeHorizon)
	u := t
	// Each step moves u past an hour or day boundary, a daily window end or
	// a window end: ≤ 24·8 + 8 + 9·MaxSleepWindows steps per horizon, and
	// an absolute window extends the horizon at most once.
	for range 1 << 14 {
		end, asleep := p.until(u)
		if !asleep {
			if u.Equal(t) {
				return t
			}
			return u.In(t.Location())
		}
		if !end.After(u) {
			break
		}
		if end.After(limit) {
			if !p.inWindow(u) {
				break
			}
			limit = end.Add(wakeHorizon)
		}
		u = end
	}
	return t.Add(MaxDelay)
}

// inWindow reports whether an absolute window covers t.
func (p *SleepPlan) inWindow(t time.Time) bool {
	for _, w := range p.Windows {
		if !t.Before(w.Start) && t.Before(w.End) {
			return true
		}
	}
	return false
}
