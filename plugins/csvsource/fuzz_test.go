package csvsource_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/plugins/csvsource"
	"github.com/slogfeed/slogfeed/reader/parser"
)

// FuzzParse: no document and no configuration makes the adapter panic,
// and what it returns is bounded and well formed.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"good.csv", "wrong-types.csv", "semicolon-decimal-comma.csv", "bom.csv", "missing-column.csv", "no-header.csv"} {
		f.Add(fixture(f, name), goodConfig)
	}
	f.Add(fixture(f, "tab.tsv"), `{"header": false, "decimal_comma": false, "columns": {"time": 0, "value": 1, "id": 2}}`)
	f.Add([]byte("a;b\n\"1\";\"2,5\"\n"), `{"decimal_comma": true, "time_format": "unix", "columns": {"time": "a", "value": "b"}}`)
	f.Fuzz(func(t *testing.T, body []byte, cfg string) {
		opt := parser.Options{Now: now, MaxItems: 50}
		p, err := csvsource.Source{}.Parse(body, "text/csv", json.RawMessage(cfg), opt)
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
