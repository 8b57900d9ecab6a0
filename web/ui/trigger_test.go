package ui

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
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

// The builder page's note on mdpt shows for an mdpt pipe only (the
// builder shows and hides it as its trigger changes).
func TestTriggerNote(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	var def transform.Pipe
	if err := json.Unmarshal([]byte(`{"name": "Rounds", "nodes": [{"id": "lab", "op": "source", "config": {"feed": "sensor/lab-1"}}],
		"edges": [], "output": {"slug": "rounds"}, "trigger": {"on": "mdpt", "m": 1}}`), &def); err != nil {
		t.Fatal(err)
	}
	mdpt, err := e.pipes.Create(context.Background(), def)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want string
	}{
		{"/ui/pipes/new", `<p class="hint" id="trigger-note" hidden>`},
		{"/ui/pipes/" + strconv.FormatUint(e.pipe.ID, 10), `<p class="hint" id="trigger-note" hidden>`},
		{"/ui/pipes/" + strconv.FormatUint(mdpt.ID, 10), `<p class="hint" id="trigger-note">`},
	} {
		r := c.get(t, tt.path)
		checkPage(t, r)
		if !strings.Contains(r.body, tt.want) {
			t.Errorf("%s lacks %s", tt.path, tt.want)
		}
	}
}
