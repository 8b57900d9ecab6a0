package runner

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// What operators write into an item's HTML fields, link and enclosures is
// held to the rules of fetched items before it is stored and republished:
// sanitised HTML, http(s) URLs only. A preview shows the output so too.
func TestOutputCleaned(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, schedule.NewVirtualClock(t0))
	lab := e.sensor(t, "lab-1")
	e.post(t, lab, t0.Add(-time.Minute), 21)
	set := func(id, field, value string) transform.Node {
		cfg, _ := json.Marshal(map[string]string{"field": field, "value": value})
		return transform.Node{ID: id, Op: "set", Config: cfg}
	}
	def := transform.Pipe{
		Nodes: []transform.Node{
			{ID: "in", Op: "source", Config: json.RawMessage(`{"feed":"sensor/lab-1"}`)},
			set("c", "content", `<script>alert(1)</script><b onclick="alert(3)">bold</b><a href="javascript:alert(2)">x</a>`),
			set("s", "summary", `<img src=x onerror=alert(5)><p>ok</p>`),
			set("l", "link", "javascript:alert(4)"),
		},
		Edges:  []transform.Edge{{From: "in", To: "c"}, {From: "c", To: "s"}, {From: "s", To: "l"}},
		Output: transform.Output{Slug: "xss", From: "l"},
	}
	check := func(what string, it storage.Item) {
		t.Helper()
		for _, s := range []string{it.Content, it.Summary, it.Link} {
			for _, bad := range []string{"<script", "onclick", "onerror", "javascript:"} {
				if strings.Contains(strings.ToLower(s), bad) {
					t.Errorf("%s: %q holds %q", what, s, bad)
				}
			}
		}
		if !strings.Contains(it.Content, "<b>bold</b>") || !strings.Contains(it.Summary, "<p>ok</p>") {
			t.Errorf("%s: safe markup lost: content %q, summary %q", what, it.Content, it.Summary)
		}
	}
	pv, err := e.r.Preview(ctx, def, 0)
	if err != nil || len(pv.Output) != 1 {
		t.Fatalf("preview: %v, %+v", err, pv)
	}
	check("preview", pv.Output[0])
	info, err := e.r.Create(ctx, def)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.RunNow(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	out := e.output(t, info.ID)
	if len(out) != 1 {
		t.Fatalf("output %d items", len(out))
	}
	check("stored", out[0])
}
