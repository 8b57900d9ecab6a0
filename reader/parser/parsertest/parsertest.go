// Package parsertest holds checks shared by the tests of the reader
// packages.
package parsertest

import (
	"bytes"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/parser"
)

// CheckText fails t when a text field of p is not valid UTF-8 or holds a
// control character: what every parsed feed must satisfy, however hostile
// its document.
func CheckText(t testing.TB, p *parser.Parsed) {
	t.Helper()
	fields := []string{p.Title, p.Site}
	for _, it := range p.Items {
		fields = append(fields, it.ID, it.GUID, it.Title, it.Summary, it.Content, it.Author, it.Link)
		fields = append(fields, it.Categories...)
	}
	for _, f := range fields {
		if !utf8.ValidString(f) {
			t.Errorf("invalid UTF-8 in %q", f)
		}
		for _, r := range f {
			if r < 0x20 && r != '\n' && r != '\t' && r != '\r' || r >= 0x7f && r < 0xa0 || r == 0xfffe || r == 0xffff {
				t.Errorf("control character %U in %q", r, f)
			}
		}
	}
}

// RSSItems returns an RSS document with n tiny items, guids i0, i1, ….
func RSSItems(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0"?><rss version="2.0"><channel><title>many</title>` + "\n")
	for i := range n {
		fmt.Fprintf(&b, "<item><guid>i%d</guid></item>\n", i)
	}
	b.WriteString("</channel></rss>\n")
	return b.Bytes()
}
