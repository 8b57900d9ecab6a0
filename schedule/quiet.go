package schedule

import "time"

// Learned sleep. A sensor that sleeps (a solar sensor at night) publishes
// nothing in the same window of every day. Auto learns that window from the
// long gaps it sees and spends no poll inside it.
//
// Every gap of more than OutagePeriods+1 periods and less than a day is a
// quiet interval of the day (UTC): from the publish before it to the
// publish after it. When the quiet intervals of consecutive days begin and
// end within 2·sleepEdge (or two periods) of each other and overlap by at
// least MinLearnedSleep, the overlap of the last two is the learned
// window; it is in force once LearnedSleepDays days in a row have agreed.
// Long gaps must come one a day, on consecutive days: a second long gap on
// the same day, or a day without one, starts over (random outages do not
// make a sleep). A publish inside the window (seen by a later poll) near
// one of its edges (within sleepEdge or two periods) moves that edge past
// it, one deeper inside forgets the window, and so does less than
// MinLearnedSleep left: a publisher that stops sleeping gets its polls back
// after the first night it publishes through.
//
// The first poll after a publish is never moved (the publisher may still
// be awake a few minutes later than yesterday: a drifting sunset); only
// polls after a miss are moved out of the window, to its end.
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
	// sleepEdge is how close to an edge of the window (at least two
	// periods) a publish may come and only move that edge: the window of
	// a solar sensor drifts by minutes a day. A publish deeper inside
	// forgets the window.
	sleepEdge = 15 * time.Minute
)

const minutesPerDay = 24 * 60

// quiet is the state of the daily sleep learner: the last quiet interval
// seen and the overlap of the last two, in minutes of the day (UTC); an
// interval is [from, from+n) modulo a day.
type quiet struct {
	lastFrom, lastN uint16 // the last quiet interval
	lastDay         uint16 // the UTC day (Unix days, mod 2^16) the last quiet interval began on
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
		edge := max(int(sleepEdge/time.Minute), int(2*period/60))
		switch {
		case min(before, after) > edge:
			// Deep inside: the publisher does not sleep then.
			*q = quiet{off: q.off}
		case before >= after:
			q.n = uint16(before)
		default:
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
	day := uint16(prev / int64(24*time.Hour))
	switch {
	case q.lastN > 0 && day == q.lastDay:
		// A second long gap on one day: the publisher is not sleeping
		// through one window a day; keep the first.
		return
	case q.lastN > 0 && day != q.lastDay+1:
		// A day without a long gap in between: start over.
		q.from, q.n, q.lastN = 0, 0, 0
	}
	q.lastDay = day
	// Yesterday's quiet interval must have begun and ended about when
	// today's did: a sleeper keeps its hours (give or take a drifting
	// sunrise), two random outages that merely overlap do not.
	tol := max(int(2*sleepEdge/time.Minute), int(2*period/60))
	lastTo := (int(q.lastFrom) + int(q.lastN)) % minutesPerDay
	aligned := circDist(int(q.lastFrom), from) <= tol && circDist(lastTo, to) <= tol
	if q.lastN > 0 {
		if f, m := overlap(int(q.lastFrom), int(q.lastN), from, n); aligned && m >= int(MinLearnedSleep/time.Minute) && m <= int(maxLearnedSleep/time.Minute) {
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

// circDist is the distance between two minutes of the day, around the
// clock.
func circDist(a, b int) int {
	d := (a - b + minutesPerDay) % minutesPerDay
	return min(d, minutesPerDay-d)
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
