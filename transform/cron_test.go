package transform

import (
	"strings"
	"testing"
	"time"
)

// A cron trigger fires at the same instants whatever the zone of the clock
// that drives it: UTC unless the schedule names a zone.
func TestCronParserZone(t *testing.T) {
	// 2026-11-21 07:00 in UTC-5 is 12:00 UTC.
	utcMinus5 := time.FixedZone("UTC-5", -5*60*60)
	at := time.Date(2026, 11, 21, 7, 0, 0, 0, utcMinus5)
	utc := func(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }
	tests := []struct {
		spec string
		next time.Time
	}{
		{"0 8 * * *", utc(22, 8)},
		{"0 13 * * *", utc(21, 13)},
		{"@daily", utc(22, 0)},
		{"@every 10m", at.Add(10 * time.Minute)},
		{"TZ=UTC 0 8 * * *", utc(22, 8)},
		// 19:00 in Tokyo is 10:00 UTC.
		{"CRON_TZ=Asia/Tokyo 0 19 * * *", utc(22, 10)},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			s, err := CronParser.Parse(tc.spec)
			if err != nil {
				if strings.Contains(err.Error(), "location") {
					t.Skipf("time zone database unavailable: %v", err)
				}
				t.Fatalf("Parse(%q): %v", tc.spec, err)
			}
			for _, now := range []time.Time{at, at.UTC()} {
				if got := s.Next(now); !got.Equal(tc.next) {
					t.Errorf("Next(%v) = %v, want %v", now, got.UTC(), tc.next)
				}
			}
		})
	}
}
