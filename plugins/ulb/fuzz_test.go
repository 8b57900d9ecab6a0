package ulb_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/plugins/ulb"
	"github.com/slogfeed/slogfeed/reader/parser"
)

// FuzzParse: no trace and no configuration makes the adapter panic; what
// it returns is bounded, deduplicated and never after the fetch.
func FuzzParse(f *testing.F) {
	f.Add([]byte(synthetic), `{"mote": 1, "speed": 2, "start": "2025-06-01T12:00:00Z"}`, int64(100))
	f.Add(fixture(f, excerpt)[:4000], `{"mote": 20, "quantity": "par", "start": "2025-06-01T12:00:00Z", "backlog": 1000}`, int64(86400*3))
	f.Add([]byte("1 1 1 1 1 1 1 1 1\n"), `{"mote": 1, "loop": false, "speed": 10000, "start": "2025-06-01T12:00:00Z"}`, int64(-1))
	f.Fuzz(func(t *testing.T, body []byte, cfg string, after int64) {
		now := start.Add(time.Duration(after) * time.Second)
		opt := parser.Options{Now: now, MaxItems: 50}
		p, err := ulb.Source{}.Parse(body, "text/plain", json.RawMessage(cfg), opt)
		if err != nil {
			return
		}
		if len(p.Items) > opt.MaxItems {
			t.Fatalf("%d items, more than MaxItems", len(p.Items))
		}
		seen := map[string]bool{}
		for _, it := range p.Items {
			if it.ID == "" || seen[it.ID] || it.Reading == nil || it.Published.After(now) {
				t.Fatalf("bad item %+v (now %v)", it, now)
			}
			seen[it.ID] = true
		}
	})
}
