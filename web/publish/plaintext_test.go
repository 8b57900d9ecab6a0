package publish

import (
	"html"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/reader/sanitize/sanitizetest"
	"github.com/slogfeed/slogfeed/storage"
)

// TestPlainTextFields publishes every value of sanitizetest as the store
// may hold it (as meant, and escaped once more) in every plain-text field
// (the feed's title, items' titles, authors, categories, a reading's
// sensor and unit, JSON Feed's plain-text summary of an HTML summary) and
// checks each field of each format as a reader decodes it: no markup
// after any number of decodings (sanitizetest.Check), and ordinary text
// as meant.
func TestPlainTextFields(t *testing.T) {
	for _, v := range sanitizetest.Values() {
		for _, stored := range []string{v.Text, html.EscapeString(v.Text)} {
			f := Feed{Title: stored, ID: "tag:example.org,2026-11-21:feeds/x", Items: []storage.Item{{
				ID: "i", Title: stored, Author: stored, Categories: []string{stored}, Published: t0,
				Summary: "<p>" + html.EscapeString(stored) + "</p>", Content: "<p>body</p>",
			}, {
				ID: "r", Published: t0, Reading: &storage.Reading{Value: 1, Unit: stored, Sensor: stored},
			}}}
			for _, ft := range formats {
				doc, err := ft.render(f)
				if err != nil {
					t.Fatal(err)
				}
				fields, err := sanitizetest.PlainFields(doc)
				if err != nil {
					t.Fatalf("%s: %v\n%s", ft.ext, err, doc)
				}
				seen := 0
				for _, fd := range fields {
					if err := sanitizetest.Check(fd.Value); err != nil {
						t.Errorf("%s %s (%s): %v", v.Name, ft.ext, fd.Path, err)
					}
					if !v.Hostile && stored == v.Text && strings.Contains(fd.Value, v.Text) {
						seen++
					}
				}
				// Feed title, item title, author, category, summary
				// (JSON), sensor and unit, and the reading's title.
				if want := map[string]int{"rss": 6, "atom": 6, "json": 7}[ft.ext]; !v.Hostile && stored == v.Text && seen < want {
					t.Errorf("%s %s: %q in %d plain-text fields, want %d or more: %+v", v.Name, ft.ext, v.Text, seen, want, fields)
				}
			}
		}
	}
}
