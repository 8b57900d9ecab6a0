package jsonsource_test

import (
	"time"

	"encoding/json"
	"testing"

	"github.com/slogfeed/slogfeed/plugins/jsonsource"
	"github.com/slogfeed/slogfeed/reader/parser"
)

// FuzzParse: no document and no configuration makes the adapter panic,
// and what it returns is bounded and well formed.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"good.json", "wrong-types.json", "all-bad.json", "malformed.json", "unix-ms-array.json"} {
		f.Add(fixture(f, name), goodConfig)
	}
	f.Add([]byte(`[{"t": 1, "v": "1,5"}]`), `{"time": "t", "value": "v", "id": "to_number(v)"}`)
	f.Add([]byte(`{"a": [[1, 2], [3]]}`), `{"items": "a[]", "time": "@", "value": "@"}`)
	f.Add([]byte(`[{"t": "2025-01-01T00:00:00Z", "v": 1}]`), `{"time": "t", "value": "v | abs(@) * `+"`-1`"+`"}`)
	f.Fuzz(func(t *testing.T, body []byte, cfg string) {
		opt := parser.Options{Now: now, MaxItems: 50}
		p, err := jsonsource.Source{}.Parse(body, "application/json", json.RawMessage(cfg), opt)
		if err != nil {
			return
		}
		if len(p.Items) > opt.MaxItems {
			t.Fatalf("%d items, more than MaxItems", len(p.Items))
		}
		seen := map[string]bool{}
		for _, it := range p.Items {
			if it.ID == "" || seen[it.ID] || it.Reading == nil || it.Published.After(now.Add(time.Hour)) {
				t.Fatalf("bad item %+v", it)
			}
			seen[it.ID] = true
		}
	})
}
