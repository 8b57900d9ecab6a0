package ui

import (
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

// The pipe pages say what each trigger does in this slogfeed; for mdpt,
// that it runs like update (serve brings no fetch forward).
func TestTriggerText(t *testing.T) {
	tests := []struct {
		t    transform.Trigger
		want string
	}{
		{transform.Trigger{}, "on update"},
		{transform.Trigger{On: transform.OnUpdate}, "on update"},
		{transform.Trigger{On: transform.OnCron, Cron: "@every 10m"}, "cron @every 10m"},
		{transform.Trigger{On: transform.OnMDPT, M: 2}, "mdpt (m = 2): runs on every input update, like update; rounds of m inputs are tracked, input fetches are not brought forward"},
		{transform.Trigger{On: transform.OnMDPT}, "mdpt (m = all): runs on every input update, like update; rounds of m inputs are tracked, input fetches are not brought forward"},
		{transform.Trigger{On: transform.OnManual}, "manual"},
	}
	for _, tc := range tests {
		if got := triggerText(tc.t); got != tc.want {
			t.Errorf("triggerText(%+v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}
