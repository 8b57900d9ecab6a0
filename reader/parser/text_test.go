package parser

import (
	"bytes"
	"mime"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
)

// TestPlainTextBytes puts every byte value at every offset of buffers of
// several lengths (the eight-byte words, their tails, a word's every
// lane) and checks plainText against its definition, byte by byte.
func TestPlainTextBytes(t *testing.T) {
	def := func(b []byte) bool {
		for _, c := range b {
			if c >= 0x80 || c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return false
			}
		}
		return true
	}
	for _, n := range []int{0, 1, 7, 8, 9, 16, 23} {
		base := bytes.Repeat([]byte("a"), n)
		if !plainText(base) {
			t.Fatalf("len %d: plain text refused", n)
		}
		for at := 0; at < n; at++ {
			for c := 0; c < 256; c++ {
				b := bytes.Clone(base)
				b[at] = byte(c)
				if got, want := plainText(b), def(b); got != want {
					t.Fatalf("len %d, byte %#x at %d: plainText %v, want %v", n, c, at, got, want)
				}
			}
		}
	}
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"xml", "<?xml version=\"1.0\"?>\n<rss>\r\n\t<channel/></rss>", true},
		{"delete is allowed", "a\x7fb", true},
		{"form feed", "<rss>\f</rss>", false},
		{"nul in the second word", "<rss><channel>\x00</channel></rss>", false},
		{"utf-8", "<title>25 °C</title>", false},
		{"tab, newline and carriage return in one word", "\t\n\r\t\n\r\t\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plainText([]byte(tc.in)); got != tc.want {
				t.Errorf("plainText(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// toUTF8Reference is toUTF8 without its shortcuts: the declaration found
// by the expression alone, the charset parameter looked for in every
// content type, every byte of the document checked whatever it holds.
// FuzzToUTF8 holds toUTF8 to it.
func toUTF8Reference(body []byte, contentType string) (_ []byte, bad int) {
	var label string
	declared := false
	decl := xmlDeclRe.Find(body)
	if m := encodingRe.FindSubmatch(decl); m != nil {
		label = strings.Trim(string(m[0][len(m[1]):]), `"'`)
		declared = true
	}
	if label == "" {
		if _, params, err := mime.ParseMediaType(contentType); err == nil {
			label = params["charset"]
		}
	}
	enc, name := charset.Lookup(strings.TrimSpace(label))
	switch {
	case enc == nil || name == "utf-8" || label == "":
		bad = invalidUTF8(body)
		body = repairUTF8(body)
	case strings.HasPrefix(name, "utf-16") && bytes.IndexByte(body, 0) < 0:
		bad = invalidUTF8(body)
		body = repairUTF8(body)
	case utf8.Valid(body) && hasNonASCII(body):
	default:
		if out, err := enc.NewDecoder().Bytes(body); err == nil {
			body = out
		} else {
			bad = invalidUTF8(body)
			body = repairUTF8(body)
		}
	}
	if declared && !strings.EqualFold(label, "utf-8") {
		fixed := encodingRe.ReplaceAll(decl, []byte(`${1}"UTF-8"`))
		body = append(fixed, body[len(decl):]...)
	}
	return stripNonChars(body), bad
}

func FuzzToUTF8(f *testing.F) {
	for _, seed := range []struct{ body, ct string }{
		{`<?xml version="1.0"?><rss/>`, "application/rss+xml"},
		{`<?xml version="1.0" encoding="utf-8"?><rss>&#0;&#x41;</rss>`, ""},
		{"<?xml version='1.0' encoding='ISO-8859-1'?><rss>caf\xe9</rss>", ""},
		{"  \n<?xml version=\"1.0\" encoding=\"UTF-16\"?><rss/>", ""},
		{"<rss>\x01\x02\xef\xbf\xbe</rss>", "text/xml; CHARSET=windows-1252"},
		{"<rss>25 \xc2\xb0C</rss>", "text/xml; charset=latin1"},
		{"<rss>caf\xe9 \xff</rss>", ""},
		{strings.Repeat(" \n", 600) + "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><rss>caf\xe9</rss>", ""},
		{"\f<?xml version=\"1.0\" encoding=\"IBM037\"?><a/>", "text/xml; charset=\"utf-8\""},
	} {
		f.Add([]byte(seed.body), seed.ct)
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		got, gotBad := toUTF8(bytes.Clone(body), contentType)
		want, wantBad := toUTF8Reference(bytes.Clone(body), contentType)
		if !bytes.Equal(got, want) || gotBad != wantBad {
			t.Fatalf("toUTF8(%q, %q) = %q, %d; want %q, %d", body, contentType, got, gotBad, want, wantBad)
		}
	})
}
