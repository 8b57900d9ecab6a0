package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseSleep(t *testing.T) {
	day := func(h, m int) time.Duration { return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute }
	tests := []struct {
		in    string
		daily []DailyWindow
		wins  []Window
		text  string // SleepText of the result
		err   string // substring of the error ("" = none)
	}{
		{in: "", text: ""},
		{in: " none ", text: ""},
		{in: "20:00-06:00", daily: []DailyWindow{{day(20, 0), day(6, 0)}}, text: "20:00-06:00"},
		{in: "12:00-24:00", daily: []DailyWindow{{day(12, 0), day(24, 0)}}, text: "12:00-24:00"},
		{in: "00:00-24:00", err: "whole day"},
		{in: "00:00-12:00,12:00-00:00", err: "whole day"},
		{in: "22:00-06:00, 05:00-23:00", err: "whole day"},
		{in: "22:00-06:00, 06:01-22:00", daily: []DailyWindow{{day(22, 0), day(6, 0)}, {day(6, 1), day(22, 0)}}, text: "22:00-06:00,06:01-22:00"},
		{in: " 01:30-02:45 , 2026-12-24T18:00:00+01:00/2026-12-26T06:00:00Z", daily: []DailyWindow{{day(1, 30), day(2, 45)}},
			wins: []Window{{time.Date(2026, 12, 24, 17, 0, 0, 0, time.UTC), time.Date(2026, 12, 26, 6, 0, 0, 0, time.UTC)}},
			text: "01:30-02:45,2026-12-24T17:00:00Z/2026-12-26T06:00:00Z"},
		{in: "06:00-06:00", err: "daily window 06:00-06:00 is empty"},
		{in: "24:01-02:00", err: "want HH:MM-HH:MM"},
		{in: "1:00-2:00", err: "want HH:MM-HH:MM"},
		{in: "12:60-13:00", err: "want HH:MM-HH:MM"},
		{in: "night", err: "want HH:MM-HH:MM"},
		{in: "20:00-06:00,", err: "want HH:MM-HH:MM"},
		{in: "2026-12-26T00:00:00Z/2026-12-24T00:00:00Z", err: "ends before it starts"},
		{in: "2026-12-26/2026-12-27", err: "RFC 3339"},
		{in: strings.Repeat("01:00-02:00,", MaxSleepWindows) + "01:00-02:00", err: "more than 64 windows"},
		{in: strings.Repeat("x", MaxSleepText+1), err: "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.in[:min(len(tc.in), 40)], func(t *testing.T) {
			p, err := ParseSleep(tc.in)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrSleepPlan) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want ErrSleepPlan containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Daily) != len(tc.daily) || len(p.Windows) != len(tc.wins) {
				t.Fatalf("plan %+v, want daily %v windows %v", p, tc.daily, tc.wins)
			}
			for i := range p.Daily {
				if p.Daily[i] != tc.daily[i] {
					t.Errorf("daily %d = %v, want %v", i, p.Daily[i], tc.daily[i])
				}
			}
			for i := range p.Windows {
				if !p.Windows[i].Start.Equal(tc.wins[i].Start) || !p.Windows[i].End.Equal(tc.wins[i].End) {
					t.Errorf("window %d = %v, want %v", i, p.Windows[i], tc.wins[i])
				}
			}
			if got := p.SleepText(); got != tc.text {
				t.Errorf("SleepText %q, want %q", got, tc.text)
			}
		})
	}
}

// FuzzParseSleep: any text either fails with ErrSleepPlan or gives a valid
// plan whose text form parses back to the same text.
func FuzzParseSleep(f *testing.F) {
	for _, s := range []string{"20:00-06:00", "01:30-02:45,2026-12-24T18:00:00Z/2026-12-26T06:00:00Z", "none", "24:00-00:00", "x/y", ",", "99:99-00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseSleep(s)
		if err != nil {
			if !errors.Is(err, ErrSleepPlan) {
				t.Fatalf("error %v is not ErrSleepPlan", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParseSleep(%q) gave an invalid plan: %v", s, err)
		}
		text := p.SleepText()
		q, err := ParseSleep(text)
		if err != nil || q.SleepText() != text {
			t.Fatalf("round trip of %q: %q, %v", text, q.SleepText(), err)
		}
	})
}
