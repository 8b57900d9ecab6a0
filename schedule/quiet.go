package schedule

import "time"

// Learned sleep. A sensor that sleeps (a solar sensor at night) publishes
// nothing in the same window of every day. Auto learns that window from the
// long gaps it sees and spends no poll inside it.
//
// Every gap of more than OutagePeriods+1 periods and less than a day is a
// quiet interval of the day (UTC): from the publish before it to the
// publish after it. When the quiet intervals of consecutive days overlap
// by at least MinLearnedSleep, the overlap of the last two is the learned
// window; it is in force once LearnedSleepDays days in a row have agreed.
// A publish inside the window (seen by a later poll) cuts the window at its
// minute, keeping the longer side, and forgets it when less than
// MinLearnedSleep is left: a publisher that stops sleeping gets its polls
// back after the first night it publishes through.
// Times are kept as minutes of the day: the window starts on the minute
// after the one of the last publish before it and ends at the start of the
// minute of the earliest first publish after it, so a poll at wake-up is
// never late for the earliest wake-up seen.

// Learned sleep constants.
const (
	// MinLearnedSleep is the shortest daily window Auto learns as a sleep.
	MinLearnedSleep = time.Hour
	// maxLearnedSleep is the longest: a publisher quiet for more than this
	// of every day is not sleeping, it is down.
	maxLearnedSleep = 20 * time.Hour
	// LearnedSleepDays is how many days in a row must agree on a window
	// before Auto keeps its polls out of it.
	LearnedSleepDays = 3
)

const minutesPerDay = 24 * 60

// quiet is the state of the daily sleep learner: the last quiet interval
// seen and the overlap of the last two, in minutes of the day (UTC); an
// interval is [from, from+n) modulo a day.
type quiet struct {
	lastFrom, lastN uint16 // the last quiet interval
	from, n         uint16 // the learned window (n = 0: none)
	days            uint8  // days in a row whose quiet intervals overlapped
	woke            uint8  // polls since one was moved to a wake-up (0: none)
	off             bool   // learning switched off (WithoutSleepLearning)
}

// WithoutSleepLearning switches Auto's daily sleep learning off.
func WithoutSleepLearning() Option { return func(o *options) { o.noSleep = true } }

// minuteOfDay returns the minute of the UTC day of t (Unix ns).
func minuteOfDay(ns int64) int {
	const day = int64(24 * time.Hour)
	d := ns % day
	if d < 0 {
		d += day
	}
	return int(d / int64(time.Minute))
}

// learn takes the gap between publishes at prev and next (Unix ns) of a
// publisher whose period is period seconds (0 while unknown).
func (q *quiet) learn(prev, next int64, period float64) {
	if q.off || period <= 0 {
		return
	}
	// A publish inside the learned window: the publisher is awake then
	// (jitter at an edge, or it no longer sleeps). Cut the window at that
	// minute, keeping its longer side; forget it when less than
	// MinLearnedSleep is left.
	if m := minuteOfDay(next); q.n > 0 && q.inside(m) {
		before := (m - int(q.from) + minutesPerDay) % minutesPerDay
		after := int(q.n) - before - 1
		if before >= after {
			q.n = uint16(before)
		} else {
			q.from, q.n = uint16((m+1)%minutesPerDay), uint16(after)
		}
		if int(q.n) < int(MinLearnedSleep/time.Minute) {
			*q = quiet{off: q.off}
		}
	}
	g := time.Duration(next - prev)
	if g.Seconds() <= float64(OutagePeriods+1)*period || g < MinLearnedSleep || g >= 24*time.Hour {
		return
	}
	from := (minuteOfDay(prev) + 1) % minutesPerDay
	to := minuteOfDay(next)
	n := (to - from + minutesPerDay) % minutesPerDay
	if n < int(MinLearnedSleep/time.Minute) {
		return
	}
	if q.lastN > 0 {
		if f, m := overlap(int(q.lastFrom), int(q.lastN), from, n); m >= int(MinLearnedSleep/time.Minute) && m <= int(maxLearnedSleep/time.Minute) {
			q.from, q.n = uint16(f), uint16(m)
			q.days = min(q.days+1, 250)
		} else {
			q.from, q.n, q.days = 0, 0, 1
		}
	} else {
		q.days = 1
	}
	q.lastFrom, q.lastN = uint16(from), uint16(n)
}

// overlap returns the overlap of two intervals of the day, [f1, f1+n1) and
// [f2, f2+n2) modulo a day, as a start and a length (0: none). Of two
// overlaps (intervals that wrap around), the longer.
func overlap(f1, n1, f2, n2 int) (from, n int) {
	for _, shift := range []int{-minutesPerDay, 0, minutesPerDay} {
		lo := max(f1, f2+shift)
		hi := min(f1+n1, f2+shift+n2)
		if hi-lo > n {
			from, n = lo, hi-lo
		}
	}
	return (from%minutesPerDay + minutesPerDay) % minutesPerDay, n
}

// inside reports whether minute m of the day falls in the learned window.
func (q *quiet) inside(m int) bool {
	return (m-int(q.from)+minutesPerDay)%minutesPerDay < int(q.n)
}

// active reports whether the learned window is in force.
func (q *quiet) active() bool { return q.n > 0 && q.days >= LearnedSleepDays }

// wake returns the end of the learned window when t falls inside it.
func (q *quiet) wake(t time.Time) (time.Time, bool) {
	if !q.active() {
		return t, false
	}
	ns := t.UnixNano()
	m := minuteOfDay(ns)
	if !q.inside(m) {
		return t, false
	}
	left := (int(q.from) + int(q.n) - m + minutesPerDay) % minutesPerDay
	if left == 0 {
		left = minutesPerDay
	}
	start := t.Truncate(time.Minute)
	return start.Add(time.Duration(left) * time.Minute), true
}

// window returns the learned window as a DailyWindow, when in force.
func (q *quiet) window() (DailyWindow, bool) {
	if !q.active() {
		return DailyWindow{}, false
	}
	from := time.Duration(q.from) * time.Minute
	to := time.Duration((int(q.from)+int(q.n))%minutesPerDay) * time.Minute
	return DailyWindow{From: from, To: to}, true
}
