package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func TestCronSchedule(t *testing.T) {
	// blBase is Friday 2024-03-01 10:00:00 UTC.
	tests := []struct {
		spec        string
		now         time.Time
		start, next time.Time // Start(now), Next(poll at now)
	}{
		{"*/15 * * * *", blAt(7*time.Minute + 30*time.Second),
			blAt(15 * time.Minute), blAt(15 * time.Minute)},
		{"*/15 * * * *", blAt(0), blAt(0), blAt(15 * time.Minute)},
		{"*/15 * * * *", blAt(500 * time.Millisecond),
			blAt(15 * time.Minute), blAt(15 * time.Minute)},
		{"  5 10 * * *  ", blAt(0), blAt(5 * time.Minute), blAt(5 * time.Minute)},
		{"5 10 * * *", blAt(5 * time.Minute), blAt(5 * time.Minute), blAt(24*time.Hour + 5*time.Minute)},
		// Optional seconds field.
		{"30 */15 * * * *", blAt(0), blAt(30 * time.Second), blAt(30 * time.Second)},
		{"30 */15 * * * *", blAt(30 * time.Second), blAt(30 * time.Second), blAt(15*time.Minute + 30*time.Second)},
		// Day-of-week names: the next Saturday 09:00 is 2024-03-02; the next
		// Monday is further than MaxDelay.
		{"0 9 * * sat", blAt(0), blAt(23 * time.Hour), blAt(23 * time.Hour)},
		{"0 9 * * mon", blAt(0), blAt(MaxDelay), blAt(MaxDelay)},
		// Descriptors.
		{"@hourly", blAt(0), blAt(0), blAt(time.Hour)},
		{"@hourly", blAt(time.Second), blAt(time.Hour), blAt(time.Hour)},
		{"@daily", blAt(0), blAt(14 * time.Hour), blAt(14 * time.Hour)},
		{"@every 5m", blAt(250 * time.Millisecond), blAt(250 * time.Millisecond), blAt(5 * time.Minute)},
		{"@every 90m", blAt(0), blAt(0), blAt(90 * time.Minute)},
		// Activations further away than MaxDelay are cut to MaxDelay.
		{"@yearly", blAt(0), blAt(MaxDelay), blAt(MaxDelay)},
		{"@every 100h", blAt(0), blAt(0), blAt(MaxDelay)},
		{"0 0 1 1 *", blAt(0), blAt(MaxDelay), blAt(MaxDelay)},
		// UTC by default, whatever time.Local is.
		{"0 9 * * *", blAt(0), blAt(23 * time.Hour), blAt(23 * time.Hour)},
		// and whatever the zone of the time given (05:00 in UTC-5).
		{"0 9 * * *", blAt(0).In(utcMinus5), blAt(23 * time.Hour), blAt(23 * time.Hour)},
		// Time zones: 09:00 in New York is 14:00 UTC in March before DST.
		{"CRON_TZ=America/New_York 0 9 * * *", blAt(0), blAt(4 * time.Hour), blAt(4 * time.Hour)},
		// 19:00 JST is 10:00 UTC: Start includes now, Next does not.
		{"TZ=Asia/Tokyo 0 19 * * *", blAt(0), blAt(0), blAt(24 * time.Hour)},
	}
	for _, tc := range tests {
		t.Run(strings.TrimSpace(tc.spec)+"@"+tc.now.Format("15:04:05.000"), func(t *testing.T) {
			c, err := NewCron(tc.spec)
			if err != nil {
				if strings.Contains(tc.spec, "TZ=") && strings.Contains(err.Error(), "location") {
					t.Skipf("time zone database unavailable: %v", err)
				}
				t.Fatalf("NewCron(%q): %v", tc.spec, err)
			}
			if c.Name() != "cron" {
				t.Errorf("Name() = %q, want cron", c.Name())
			}
			if c.Spec() != strings.TrimSpace(tc.spec) {
				t.Errorf("Spec() = %q, want %q", c.Spec(), strings.TrimSpace(tc.spec))
			}
			blSameTime(t, "Start", c.Start(tc.now), tc.start)
			blSameTime(t, "First", First(c, tc.now), tc.start)
			blSameTime(t, "Next", c.Next(blMiss(tc.now)), tc.next)
			blSameTime(t, "Next after a hit", c.Next(blHit(tc.now, tc.now)), tc.next)
		})
	}
}

// utcMinus5 is a zone five hours behind UTC (needs no zone database).
var utcMinus5 = time.FixedZone("UTC-5", -5*60*60)

func TestParseCron(t *testing.T) {
	fiveFields := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	// 2024-03-01 07:00 in UTC-5 is 12:00 UTC.
	at := time.Date(2024, 3, 1, 7, 0, 0, 0, utcMinus5)
	day := func(d, h int) time.Time { return time.Date(2024, 3, d, h, 0, 0, 0, time.UTC) }
	tests := []struct {
		name   string
		parser cron.ScheduleParser
		spec   string
		next   time.Time // Next(at); zero for an error
	}{
		{"UTC by default", fiveFields, "0 8 * * *", day(2, 8)},
		{"UTC by default, trimmed", fiveFields, "  0 13 * * *  ", day(1, 13)},
		{"UTC by default, seconds", cronSpecParser, "0 0 8 * * *", day(2, 8)},
		{"descriptor", fiveFields, "@daily", day(2, 0)},
		{"every", fiveFields, "@every 1h", at.Add(time.Hour)},
		{"zone of the spec", fiveFields, "CRON_TZ=Asia/Tokyo 0 19 * * *", day(2, 10)},
		{"short zone of the spec", fiveFields, "TZ=UTC 0 8 * * *", day(2, 8)},
		{"empty", fiveFields, "", time.Time{}},
		{"zone without expression", fiveFields, "CRON_TZ=Europe/Paris", time.Time{}},
		{"short zone without expression", fiveFields, "TZ=UTC", time.Time{}},
		{"bad expression", fiveFields, "0 8 * *", time.Time{}},
		{"seconds where not accepted", fiveFields, "0 0 8 * * *", time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseCron(tc.parser, tc.spec)
			if tc.next.IsZero() {
				if err == nil {
					t.Fatalf("ParseCron(%q) = %v, want an error", tc.spec, s)
				}
				return
			}
			if err != nil {
				if strings.Contains(err.Error(), "location") {
					t.Skipf("time zone database unavailable: %v", err)
				}
				t.Fatalf("ParseCron(%q): %v", tc.spec, err)
			}
			blSameTime(t, "Next", s.Next(at), tc.next)
			blSameTime(t, "Next of the same instant in UTC", s.Next(at.UTC()), tc.next)
		})
	}
}

func TestCronSequence(t *testing.T) {
	c, err := NewCron("0 */6 * * *")
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{2 * time.Hour, 8 * time.Hour, 14 * time.Hour, 20 * time.Hour}
	now := c.Start(blAt(0))
	blSameTime(t, "Start", now, blAt(want[0]))
	for i, w := range want[1:] {
		now = c.Next(blMiss(now))
		blSameTime(t, "poll "+string(rune('1'+i)), now, blAt(w))
	}
}

func TestCronInvalid(t *testing.T) {
	tests := []struct{ name, spec string }{
		{"empty", ""},
		{"blank", "   "},
		{"minute out of range", "61 * * * *"},
		{"too few fields", "* * *"},
		{"too many fields", "1 2 3 4 5 6 7"},
		{"bad step", "*/0 * * * *"},
		{"reversed range", "30-10 * * * *"},
		{"unknown name", "0 0 * * someday"},
		{"bad duration", "@every soon"},
		{"unknown descriptor", "@fortnightly"},
		{"unknown zone", "CRON_TZ=Nowhere/Atlantis 0 * * * *"},
		{"zone without expression", "CRON_TZ=UTC"},
		{"short zone without expression", "TZ=Europe/Paris"},
		{"never fires", "0 0 30 2 *"},
		{"too long", strings.Repeat("1,", MaxCronSpecLen) + "1 * * * *"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCron(tc.spec)
			if err == nil {
				t.Fatalf("NewCron(%q) = %v, want an error", tc.spec, c)
			}
			if !errors.Is(err, ErrCronSpec) {
				t.Errorf("NewCron(%q) error %v does not wrap ErrCronSpec", tc.spec, err)
			}
			if c != nil {
				t.Errorf("NewCron(%q) returned a policy with its error", tc.spec)
			}
		})
	}
}

// TestCronLeapDay covers an expression that fires, but rarely: the policy
// polls every MaxDelay in between.
func TestCronLeapDay(t *testing.T) {
	c, err := NewCron("0 12 29 2 *")
	if err != nil {
		t.Fatal(err)
	}
	feb28 := time.Date(2024, 2, 28, 13, 0, 0, 0, time.UTC)
	blSameTime(t, "Next", c.Next(blMiss(feb28)), time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC))
	blSameTime(t, "Next after", c.Next(blMiss(blAt(0))), blAt(MaxDelay))
}

// FuzzNewCron checks that no spec makes NewCron panic, that failures wrap
// ErrCronSpec, and that accepted specs honour the Policy contract.
func FuzzNewCron(f *testing.F) {
	for _, seed := range []string{
		"*/15 * * * *", "30 */15 * * * *", "@every 5m", "@hourly", "@yearly",
		"CRON_TZ=UTC", "TZ= 0 * * * *", "CRON_TZ=Asia/Tokyo 0 9 * * mon-fri",
		"0 0 30 2 *", "1-5/2,7 */3 1,15 jan-jun sun", "@every -1s", "*/99999999999999999999 * * * *",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := NewCron(spec)
		if err != nil {
			if !errors.Is(err, ErrCronSpec) {
				t.Fatalf("NewCron(%q) error %v does not wrap ErrCronSpec", spec, err)
			}
			return
		}
		for _, now := range []time.Time{blAt(0), blAt(1234567 * time.Millisecond)} {
			if s := c.Start(now); s.Before(now) || s.After(now.Add(MaxDelay)) {
				t.Fatalf("%q: Start(%v) = %v", spec, now, s)
			}
			if n := c.Next(blMiss(now)); !n.After(now) || n.After(now.Add(MaxDelay)) {
				t.Fatalf("%q: Next(%v) = %v", spec, now, n)
			}
		}
	})
}

// A new subscription's cron @every under a second is refused; a stored
// one still builds (robfig/cron rounds it up to a second).
func TestCheckNewPolicyEvery(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"cron:@every 1ns", false},
		{"cron:@every 0s", false},
		{"cron:CRON_TZ=Europe/Paris @every 500ms", false},
		{"cron:@every 1s", true},
		{"cron:*/5 * * * *", true},
		{"fixed-5m", true},
		{"sometimes", false},
	} {
		err := CheckNewPolicy(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckNewPolicy(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if _, err := ByName("cron:@every 500ms", 0); err != nil {
		t.Errorf("a stored feed's @every 500ms: %v, want it built", err)
	}
}
