package web

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
)

// TestSleepView: the schedule's sleep plan in the API's terms (hours,
// weekday names, "HH:MM-HH:MM", RFC 3339), never the plan's bit masks
// and nanoseconds.
func TestSleepView(t *testing.T) {
	skip, err := schedule.ParseSkip([]string{"0", "23", "5"}, []string{"saturday", "Sunday"})
	if err != nil {
		t.Fatal(err)
	}
	own, err := schedule.ParseSleep("22:30-06:00,2026-12-24T18:00:00+01:00/2026-12-26T06:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	both := skip
	both.Daily, both.Windows = own.Daily, own.Windows
	tests := []struct {
		name string
		plan schedule.SleepPlan
		want string
	}{
		{"none", schedule.SleepPlan{}, `{"skip_hours":[],"skip_days":[],"daily":[],"windows":[]}`},
		{"the publisher's", skip, `{"skip_hours":[0,5,23],"skip_days":["Sunday","Saturday"],"daily":[],"windows":[]}`},
		{"both", both, `{"skip_hours":[0,5,23],"skip_days":["Sunday","Saturday"],"daily":["22:30-06:00"],"windows":[{"start":"2026-12-24T17:00:00Z","end":"2026-12-26T06:00:00Z"}]}`},
		{"a window's end", schedule.SleepPlan{Daily: []schedule.DailyWindow{{From: 0, To: 24 * time.Hour}}}, `{"skip_hours":[],"skip_days":[],"daily":["00:00-24:00"],"windows":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(sleepView(tc.plan))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}
