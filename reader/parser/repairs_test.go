package parser

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseRepairs(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "hostile", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	p, err := Parse(read("dates.xml"), "application/rss+xml", Options{Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	// garbage, 2100 (the future) and 1970 (before 1990) are replaced; an
	// empty or missing date is no repair.
	if got := strings.Join(p.Repairs.BadDates, ","); got != "d-garbage,d-future,d-ancient" {
		t.Errorf("bad dates %q", got)
	}
	if p.Repairs.InvalidUTF8 != 0 || !strings.Contains(p.Repairs.Last, "d-ancient") || !strings.Contains(p.Warning(), "3 items with an unreadable or implausible date") {
		t.Errorf("repairs %+v, warning %q", p.Repairs, p.Warning())
	}

	p, err = Parse(read("invalid-utf8.xml"), "application/rss+xml", Options{Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if p.Repairs.InvalidUTF8 == 0 || !slices.Equal(p.Repairs.UTF8Items, []string{"u-1"}) || !strings.Contains(p.Warning(), "invalid UTF-8") {
		t.Errorf("repairs %+v, warning %q", p.Repairs, p.Warning())
	}

	j := []byte(`{"version":"https://jsonfeed.org/version/1.1","items":[{"id":"j1","title":"a` + "\xff\xfe" + `b","date_published":"9999-01-01T00:00:00Z"}]}`)
	p, err = Parse(j, "application/feed+json", Options{Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if p.Repairs.InvalidUTF8 != 2 || len(p.Repairs.BadDates) != 1 || !slices.Equal(p.Repairs.UTF8Items, []string{"j1"}) || !p.Items[0].Published.IsZero() {
		t.Errorf("JSON repairs %+v, published %v", p.Repairs, p.Items[0].Published)
	}
}

// The items holding invalid UTF-8 are found whatever else the document
// holds that the repair strips (control characters, U+FFFE, references
// to characters XML forbids).
func TestParseUTF8ItemsBesideStrippedCharacters(t *testing.T) {
	doc := func(head, item1, item2 string) []byte {
		return []byte(`<rss version="2.0"><channel><title>t` + head + `</title>` +
			`<item><guid>u-1</guid><title>` + item1 + `</title></item>` +
			`<item><guid>u-2</guid><title>` + item2 + `</title></item></channel></rss>`)
	}
	tests := []struct {
		name  string
		doc   []byte
		items []string
		bytes int
	}{
		{"a control character beside the invalid byte", doc("", "caf\xe9\x01", "ok"), []string{"u-1"}, 1},
		{"a NUL in another item", doc("", "caf\xe9", "a\x00b"), []string{"u-1"}, 1},
		{"a NUL in the channel", doc("\x00", "ok", "caf\xe9"), []string{"u-2"}, 1},
		{"U+FFFE and a reference to U+0001", doc("\uFFFE&#1;", "caf\xe9", "caf\xe9 &#x1;"), []string{"u-1", "u-2"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.doc, "application/rss+xml", Options{Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			if p.Repairs.InvalidUTF8 != tc.bytes || !slices.Equal(p.Repairs.UTF8Items, tc.items) {
				t.Fatalf("%d invalid bytes in items %q; want %d in %q", p.Repairs.InvalidUTF8, p.Repairs.UTF8Items, tc.bytes, tc.items)
			}
		})
	}
}
