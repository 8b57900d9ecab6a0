package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// utc builds a UTC time; 2025-01-06 is a Monday.
func sleepAt(day, hour, minute int) time.Time {
	return time.Date(2025, time.January, day, hour, minute, 0, 0, time.UTC)
}

func hoursMask(hs ...int) uint32 {
	var m uint32
	for _, h := range hs {
		m |= 1 << h
	}
	return m
}

func daysMask(ds ...time.Weekday) uint8 {
	var m uint8
	for _, d := range ds {
		m |= 1 << d
	}
	return m
}

func TestSleepPlanWake(t *testing.T) {
	night := SleepPlan{SkipHours: hoursMask(22, 23, 0, 1)}
	weekend := SleepPlan{SkipHours: hoursMask(23), SkipDays: daysMask(time.Saturday, time.Sunday)}
	overnight := SleepPlan{Daily: []DailyWindow{{From: 22 * time.Hour, To: 6 * time.Hour}}}
	chained := SleepPlan{
		Windows: []Window{{Start: sleepAt(7, 10, 0), End: sleepAt(7, 12, 0)}},
		Daily:   []DailyWindow{{From: 12 * time.Hour, To: 13*time.Hour + 30*time.Minute}},
	}
	tests := []struct {
		name string
		plan SleepPlan
		t    time.Time
		want time.Time
	}{
		{"zero plan", SleepPlan{}, sleepAt(6, 3, 7), sleepAt(6, 3, 7)},
		{"awake before skipped hours", night, sleepAt(5, 21, 59), sleepAt(5, 21, 59)},
		{"skipped hours over midnight", night, sleepAt(5, 22, 15), sleepAt(6, 2, 0)},
		{"skipped hour start", night, sleepAt(6, 0, 0), sleepAt(6, 2, 0)},
		{"end of skipped hours is awake", night, sleepAt(6, 2, 0), sleepAt(6, 2, 0)},
		{"friday night into weekend", weekend, sleepAt(10, 23, 10), sleepAt(13, 0, 0)},
		{"saturday noon", weekend, sleepAt(11, 12, 0), sleepAt(13, 0, 0)},
		{"sunday last second", weekend, sleepAt(12, 23, 59).Add(59 * time.Second), sleepAt(13, 0, 0)},
		{"weekday morning awake", weekend, sleepAt(8, 9, 0), sleepAt(8, 9, 0)},
		{"daily window evening", overnight, sleepAt(6, 23, 0), sleepAt(7, 6, 0)},
		{"daily window at its start", overnight, sleepAt(6, 22, 0), sleepAt(7, 6, 0)},
		{"daily window morning", overnight, sleepAt(7, 5, 0), sleepAt(7, 6, 0)},
		{"daily window end is awake", overnight, sleepAt(7, 6, 0), sleepAt(7, 6, 0)},
		{"daily window just before", overnight, sleepAt(6, 21, 59), sleepAt(6, 21, 59)},
		{"window then abutting daily window", chained, sleepAt(7, 10, 30), sleepAt(7, 13, 30)},
		{"window end into daily", chained, sleepAt(7, 11, 59), sleepAt(7, 13, 30)},
		{"daily only, other day", chained, sleepAt(8, 12, 5), sleepAt(8, 13, 30)},
		{"window ended", chained, sleepAt(7, 9, 59), sleepAt(7, 9, 59)},
		{"sunday only awake mornings off", SleepPlan{
			SkipHours: hoursMask(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
			SkipDays:  daysMask(time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday),
		}, sleepAt(6, 8, 0), sleepAt(12, 12, 0)},
		{"every hour skipped", SleepPlan{SkipHours: 1<<24 - 1}, sleepAt(6, 8, 0), sleepAt(6, 8, 0).Add(MaxDelay)},
		{"every day skipped", SleepPlan{SkipDays: 1<<7 - 1}, sleepAt(6, 8, 0), sleepAt(6, 8, 0).Add(MaxDelay)},
		{"every hour skipped but a window", SleepPlan{
			SkipHours: 1<<24 - 1,
			Windows:   []Window{{Start: sleepAt(6, 0, 0), End: sleepAt(20, 0, 0)}},
		}, sleepAt(6, 8, 0), sleepAt(6, 8, 0).Add(MaxDelay)},
		{"window longer than MaxDelay", SleepPlan{Windows: []Window{{Start: sleepAt(6, 0, 0), End: sleepAt(9, 0, 0)}}},
			sleepAt(6, 8, 0), sleepAt(9, 0, 0)},
		{"month-long window then skipped hour", SleepPlan{
			SkipHours: hoursMask(0),
			Windows:   []Window{{Start: sleepAt(1, 0, 0), End: time.Date(2025, 2, 3, 0, 0, 0, 0, time.UTC)}},
		}, sleepAt(6, 8, 0), time.Date(2025, 2, 3, 1, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.plan.Validate(); err != nil {
				t.Fatal(err)
			}
			got := tc.plan.Wake(tc.t)
			if !got.Equal(tc.want) {
				t.Fatalf("Wake(%v) = %v, want %v", tc.t, got, tc.want)
			}
			if asleep := tc.plan.Asleep(tc.t); asleep != !tc.want.Equal(tc.t) {
				t.Fatalf("Asleep(%v) = %v", tc.t, asleep)
			}
			if !got.Equal(tc.t.Add(MaxDelay)) && tc.plan.Asleep(got) {
				t.Fatalf("Wake returned %v, which is asleep", got)
			}
		})
	}
}

func TestSleepPlanWakeKeepsLocation(t *testing.T) {
	loc := time.FixedZone("UTC+2", 2*3600)
	p := SleepPlan{SkipHours: hoursMask(10)}
	in := time.Date(2025, 1, 6, 12, 30, 0, 0, loc) // 10:30 UTC
	got := p.Wake(in)
	want := time.Date(2025, 1, 6, 13, 0, 0, 0, loc)
	if !got.Equal(want) || got.Location() != loc {
		t.Fatalf("Wake = %v, want %v in %v", got, want, loc)
	}
}

func TestParseSkip(t *testing.T) {
	tests := []struct {
		name        string
		hours, days []string
		want        SleepPlan
		err         bool
	}{
		{"empty", nil, nil, SleepPlan{}, false},
		{"hours and days", []string{" 0", "23", "24", "7"}, []string{"monday", " SUNDAY "},
			SleepPlan{SkipHours: hoursMask(0, 7, 23), SkipDays: daysMask(time.Monday, time.Sunday)}, false},
		{"hour too large", []string{"25"}, nil, SleepPlan{}, true},
		{"negative hour", []string{"-1"}, nil, SleepPlan{}, true},
		{"not a number", []string{"noon"}, nil, SleepPlan{}, true},
		{"long number", []string{"0000000000001"}, nil, SleepPlan{}, true},
		{"bad day", nil, []string{"Funday"}, SleepPlan{}, true},
		{"huge day", nil, []string{strings.Repeat("x", 1<<16)}, SleepPlan{}, true},
		{"too many entries", make([]string, MaxSleepWindows+1), nil, SleepPlan{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSkip(tc.hours, tc.days)
			if tc.err {
				if !errors.Is(err, ErrSleepPlan) {
					t.Fatalf("err = %v, want ErrSleepPlan", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.SkipHours != tc.want.SkipHours || got.SkipDays != tc.want.SkipDays {
				t.Fatalf("got hours %b days %b, want %b %b", got.SkipHours, got.SkipDays, tc.want.SkipHours, tc.want.SkipDays)
			}
		})
	}
}

func TestSleepPlanValidate(t *testing.T) {
	tests := []struct {
		name string
		plan SleepPlan
	}{
		{"hour bit 24", SleepPlan{SkipHours: 1 << 24}},
		{"day bit 7", SleepPlan{SkipDays: 1 << 7}},
		{"empty daily window", SleepPlan{Daily: []DailyWindow{{From: time.Hour, To: time.Hour}}}},
		{"daily beyond a day", SleepPlan{Daily: []DailyWindow{{From: time.Hour, To: 25 * time.Hour}}}},
		{"negative daily", SleepPlan{Daily: []DailyWindow{{From: -time.Hour, To: time.Hour}}}},
		{"inverted window", SleepPlan{Windows: []Window{{Start: sleepAt(7, 0, 0), End: sleepAt(6, 0, 0)}}}},
		{"too many windows", SleepPlan{Windows: make([]Window, MaxSleepWindows+1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.plan.Validate(); !errors.Is(err, ErrSleepPlan) {
				t.Fatalf("Validate = %v, want ErrSleepPlan", err)
			}
		})
	}
}

// FuzzSleepPlanWake checks Wake on arbitrary plans: the result is not
// before t, it is awake (or the t+MaxDelay fallback), and the feed sleeps
// all the way from t to it.
func FuzzSleepPlanWake(f *testing.F) {
	f.Add(uint32(0xC00003), uint8(0x41), int64(22*3600), int64(6*3600), int64(0), int64(3600), int64(1736150400))
	f.Add(uint32(0xFFFFFF), uint8(0), int64(0), int64(1), int64(0), int64(0), int64(0))
	f.Add(uint32(1), uint8(0x7F), int64(3600), int64(7200), int64(-86400), int64(86400*30), int64(1736200000))
	f.Fuzz(func(t *testing.T, hours uint32, days uint8, from, to, wstart, wlen, at int64) {
		base := time.Unix(1736150400, 0).UTC() // a Monday
		p := SleepPlan{SkipHours: hours & (1<<24 - 1), SkipDays: days & (1<<7 - 1)}
		d := DailyWindow{From: time.Duration(from%86400) * time.Second, To: time.Duration(to%86400) * time.Second}
		if d.From >= 0 && d.To >= 0 && d.From != d.To {
			p.Daily = []DailyWindow{d}
		}
		if wlen > 0 && wlen < 1e8 && wstart > -1e8 && wstart < 1e8 {
			s := base.Add(time.Duration(wstart) * time.Second)
			p.Windows = []Window{{Start: s, End: s.Add(time.Duration(wlen) * time.Second)}}
		}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		tt := base.Add(time.Duration(at%(1e8)) * time.Second)
		got := p.Wake(tt)
		if got.Before(tt) {
			t.Fatalf("Wake(%v) = %v, before t", tt, got)
		}
		if got.Equal(tt.Add(MaxDelay)) {
			return // the fallback for a plan that (nearly) never wakes
		}
		if p.Asleep(got) {
			t.Fatalf("Wake(%v) = %v, which is asleep", tt, got)
		}
		// Every instant in [t, got) is asleep: sample 64 of them.
		span := got.Sub(tt)
		for i := range 64 {
			x := tt.Add(span / 64 * time.Duration(i))
			if x.Before(got) && !p.Asleep(x) {
				t.Fatalf("Wake(%v) = %v, but %v is awake", tt, got, x)
			}
		}
	})
}
