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
