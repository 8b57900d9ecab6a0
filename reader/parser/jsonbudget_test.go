package parser

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// manyEmptyItems returns a JSON Feed of n empty items (which all have
// the same ID: one is kept), its title after them.
func manyEmptyItems(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"version":"https://jsonfeed.org/version/1.1","items":[`)
	b.WriteString(strings.Repeat("{},", n-1))
	b.WriteString(`{}],"title":"after the items"}`)
	return b.Bytes()
}

// manyItems returns a JSON Feed of n items with IDs, its title after
// them.
func manyItems(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"version":"https://jsonfeed.org/version/1.1","items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"%d"}`, i)
	}
	b.WriteString(`],"title":"after the items"}`)
	return b.Bytes()
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	fn()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// A JSON Feed's items past the cap are read over, not decoded: a million
// items cost what a thousand do, and the members after them are read.
func TestParseJSONItemsBounded(t *testing.T) {
	doc := manyItems(1_000_000)
	var p *Parsed
	var err error
	got := allocated(func() { p, err = Parse(doc, "application/feed+json", Options{Now: testNow}) })
	if err != nil {
		t.Fatal(err)
	}
	if !p.Truncated || len(p.Items) != DefaultMaxItems || p.Title != "after the items" {
		t.Fatalf("truncated %v, %d items, title %q", p.Truncated, len(p.Items), p.Title)
	}
	small := manyItems(DefaultMaxItems + 1)
	want := allocated(func() { _, _ = Parse(small, "application/feed+json", Options{Now: testNow}) })
	if got > 2*want+1<<20 {
		t.Fatalf("a feed of a million items allocates %d bytes; one of %d items %d", got, DefaultMaxItems+1, want)
	}
}

// Items beyond the element budget are cut like items beyond MaxItems; a
// first item over it is refused.
func TestParseJSONNodeBudget(t *testing.T) {
	item := func(i int) string {
		return fmt.Sprintf(`{"id":"%d","tags":[%s"t"]}`, i, strings.Repeat(`"t",`, 98))
	}
	var b strings.Builder
	b.WriteString(`{"version":"https://jsonfeed.org/version/1.1","title":"heavy","items":[`)
	for i := range 3000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(item(i))
	}
	b.WriteString(`]}`)
	p, err := Parse([]byte(b.String()), "", Options{MaxItems: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Truncated || len(p.Items) >= 3000 || len(p.Items) < MaxNodes/110 || p.Title != "heavy" {
		t.Errorf("truncated=%v, %d items, title %q", p.Truncated, len(p.Items), p.Title)
	}
	huge := `{"version":"https://jsonfeed.org/version/1.1","items":[{"id":"a","tags":[` + strings.Repeat(`"t",`, MaxNodes) + `"t"]}]}`
	if _, err := Parse([]byte(huge), "", Options{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("a first item over the budget: %v, want ErrMalformed", err)
	}
}

// BenchmarkParseJSONManyItems parses a 9 MB JSON Feed of three million
// empty items (B/op stays that of the thousand items kept).
func BenchmarkParseJSONManyItems(b *testing.B) {
	doc := manyEmptyItems(3_000_000)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(doc, "application/feed+json", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
