package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

// A cron trigger that names a time zone and no expression is a bad
// definition (400 naming trigger.cron) on every route that compiles a
// pipe, not a handler panic.
func TestPipeCronZoneWithoutExpression(t *testing.T) {
	e := newHostileEnv(t, transform.Limits{}, 0)
	feed := e.bigFeed(t, 2, 10)
	pipe := func(slug, cron string) string {
		trigger := `{"on":"update"}`
		if cron != "" {
			trigger = fmt.Sprintf(`{"on":"cron","cron":%q}`, cron)
		}
		return fmt.Sprintf(`{"nodes":[{"id":"src","op":"source","config":{"feed":"feed/%d"}}],"output":{"slug":%q},"trigger":%s}`,
			feed, slug, trigger)
	}
	status, body, _ := e.do(t, "POST", "/api/v1/pipes", pipe("good", ""), true)
	if status != http.StatusCreated {
		t.Fatalf("creating a pipe: status %d: %.300s", status, body)
	}
	var created struct{ ID uint64 }
	if err := json.Unmarshal(body, &created); err != nil || created.ID == 0 {
		t.Fatalf("created %s: %v", body, err)
	}
	for _, cron := range []string{"TZ=Europe/Paris", "CRON_TZ=UTC", "  TZ=UTC  "} {
		for _, rt := range []struct{ method, path string }{
			{"POST", "/api/v1/pipes"},
			{"POST", "/api/v1/pipes/preview"},
			{"PUT", fmt.Sprintf("/api/v1/pipes/%d", created.ID)},
			{"POST", fmt.Sprintf("/api/v1/pipes/%d/preview", created.ID)},
		} {
			t.Run(rt.method+" "+rt.path+" "+cron, func(t *testing.T) {
				status, body, _ := e.do(t, rt.method, rt.path, pipe("zoned", cron), true)
				if status != http.StatusBadRequest || !strings.Contains(string(body), "trigger.cron") {
					t.Errorf("status %d, %.300s; want 400 naming trigger.cron", status, body)
				}
			})
		}
	}
	if logs := e.logs.String(); strings.Contains(logs, "panic") {
		t.Errorf("logged a panic:\n%s", logs)
	}
}
