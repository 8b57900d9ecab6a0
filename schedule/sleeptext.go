package schedule

import (
	"fmt"
	"strings"
	"time"
)

// MaxSleepText bounds the length of the text ParseSleep accepts.
const MaxSleepText = 4096

// ParseSleep reads a feed's own sleep windows from text, as `slogfeed add
// --sleep`, the API's "sleep" field and the UI take them: a comma-separated
// list of daily windows "HH:MM-HH:MM" (UTC; "22:00-06:00" runs over
// midnight, "24:00" is the end of the day) and one-off windows
// "START/END" (RFC 3339 times). The empty text (or "none") is no window.
// The result is a plan with Daily and Windows set; it is valid.
func ParseSleep(s string) (SleepPlan, error) {
	var p SleepPlan
	if len(s) > MaxSleepText {
		return SleepPlan{}, fmt.Errorf("%w: sleep text longer than %d bytes", ErrSleepPlan, MaxSleepText)
	}
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return p, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if start, end, ok := strings.Cut(part, "/"); ok {
			a, err1 := time.Parse(time.RFC3339, strings.TrimSpace(start))
			b, err2 := time.Parse(time.RFC3339, strings.TrimSpace(end))
			if err1 != nil || err2 != nil {
				return SleepPlan{}, fmt.Errorf("%w: window %.80q: want START/END in RFC 3339 (2026-12-24T18:00:00Z/2026-12-26T06:00:00Z)", ErrSleepPlan, part)
			}
			p.Windows = append(p.Windows, Window{Start: a.UTC(), End: b.UTC()})
		} else {
			from, to, ok := strings.Cut(part, "-")
			f, okF := parseClock(from)
			t, okT := parseClock(to)
			if !ok || !okF || !okT {
				return SleepPlan{}, fmt.Errorf("%w: daily window %.80q: want HH:MM-HH:MM in UTC (22:00-06:00)", ErrSleepPlan, part)
			}
			p.Daily = append(p.Daily, DailyWindow{From: f, To: t})
		}
		if len(p.Daily) > MaxSleepWindows || len(p.Windows) > MaxSleepWindows {
			return SleepPlan{}, fmt.Errorf("%w: more than %d windows", ErrSleepPlan, MaxSleepWindows)
		}
	}
	if err := p.Validate(); err != nil {
		return SleepPlan{}, err
	}
	if wholeDay(p.Daily) {
		return SleepPlan{}, fmt.Errorf("%w: the daily windows cover the whole day, so the feed would never be polled (unsubscribe it instead, or leave some time free)", ErrSleepPlan)
	}
	return p, nil
}

// wholeDay reports whether daily windows (of whole minutes, as
// ParseSleep reads them) leave no minute of the day free.
func wholeDay(daily []DailyWindow) bool {
	const day = 24 * 60
	var asleep [day]bool
	mark := func(from, to int) {
		for m := from; m < to; m++ {
			asleep[m] = true
		}
	}
	for _, w := range daily {
		from, to := int(w.From/time.Minute), int(w.To/time.Minute)
		if from <= to {
			mark(from, to)
		} else {
			mark(from, day)
			mark(0, to)
		}
	}
	for _, a := range asleep {
		if !a {
			return false
		}
	}
	return true
}

// parseClock reads "HH:MM" (00:00 to 24:00) as an offset from midnight.
func parseClock(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	h, m := 0, 0
	for i, c := range []byte(s) {
		if i == 2 {
			continue
		}
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	h = int(s[0]-'0')*10 + int(s[1]-'0')
	m = int(s[3]-'0')*10 + int(s[4]-'0')
	if m > 59 || h > 24 || (h == 24 && m != 0) {
		return 0, false
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute, true
}

// String writes the window as "HH:MM-HH:MM" (UTC).
func (w DailyWindow) String() string {
	return clock(w.From) + "-" + clock(w.To)
}

func clock(d time.Duration) string {
	m := int(d / time.Minute)
	return fmt.Sprintf("%02d:%02d", m/60, m%60)
}

// SleepText writes the plan's own windows (Daily and Windows, not the
// publisher's skipHours/skipDays) in the form ParseSleep reads.
func (p *SleepPlan) SleepText() string {
	var parts []string
	for _, w := range p.Daily {
		parts = append(parts, w.String())
	}
	for _, w := range p.Windows {
		parts = append(parts, w.Start.UTC().Format(time.RFC3339)+"/"+w.End.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ",")
}
