package aggregator

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// scanCases are documents for the scanner tests: plain ones the fast path
// must take, and ones it must leave to the tokenizer.
var scanCases = []struct {
	name  string
	doc   string
	plain bool // scanPlain takes it
}{
	{"rss", `<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>t &amp; u</title>` +
		`<item><title>a</title><description><![CDATA[<b>x</b>]]></description></item><!-- c --><item/></channel></rss>`, true},
	{"atom with prefixes and spaces", "<feed xmlns='http://www.w3.org/2005/Atom'\n\txmlns:s=\"urn:x\" >\r\n<entry ><s:v a = 'x>y' b=\"1\"/></entry >\n</feed>trailing garbage <", true},
	{"rdf", `<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><channel/><item><title>x</title></item></rdf:RDF>`, true},
	{"processing instruction", `<?xml-stylesheet href="s.xsl"?><rss><channel><item/></channel></rss>`, true},
	{"doctype", `<!DOCTYPE rss><rss><channel/></rss>`, false},
	{"html doctype", `<!DOCTYPE html><html><body/></html>`, false},
	{"html root", `<html><body/></html>`, false},
	{"xml 1.1", `<?xml version="1.1"?><rss/>`, false},
	{"xml version in single quotes", `<?xml version='1.0'?><rss/>`, true},
	{"unclosed root", `<rss><channel><item>`, false},
	{"empty", ``, false},
	{"text only", `just text`, false},
	{"unquoted attribute", `<rss version=2.0></rss>`, false},
	{"value-less attribute", `<rss checked></rss>`, false},
	{"lt in attribute", `<rss a="<"></rss>`, false},
	{"cdata end in text", `<rss>a ]]> b</rss>`, false},
	{"double dash in comment", `<rss><!-- a -- b --></rss>`, false},
	{"control character", "<rss>\x01</rss>", false},
	{"U+FFFE", "<rss>\uFFFE</rss>", false},
	{"non-ASCII name", `<rss><é/></rss>`, false},
	{"two colons", `<a:b:c/>`, false},
	{"end tag first", `</rss><rss/>`, false},
	{"bad end tag", `<rss></rss x>`, false},
	{"slash without gt", `<rss/ >`, false},
	{"lone lt", `<rss>< a</rss>`, false},
	{"cdata at top", `<![CDATA[x]]><rss/>`, false},
	{"deep", strings.Repeat("<a>", MaxDepth+1) + strings.Repeat("</a>", MaxDepth+1), false},
	{"at depth limit", strings.Repeat("<a>", MaxDepth) + strings.Repeat("</a>", MaxDepth), true},
	{"too many items", "<rss><channel>" + strings.Repeat("<item/>", 3) + "</channel></rss>", false},
}

// TestScanPlain: the fast path takes plain documents and leaves the rest
// to the tokenizer; whatever it takes, it scans as the tokenizer does.
func TestScanPlain(t *testing.T) {
	for _, tc := range scanCases {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := scanPlain([]byte(tc.doc), 2)
			if ok != tc.plain {
				t.Fatalf("scanPlain ok = %v, want %v", ok, tc.plain)
			}
			checkScanPlain(t, []byte(tc.doc), 2)
		})
	}
	// Every fixture: the same result either way.
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.xml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b, _ = toUTF8(b, "")
			checkScanPlain(t, b, 1000)
			checkScanPlain(t, b, 1)
		})
	}
}

// checkScanPlain fails when scanPlain takes doc and its result differs
// from the tokenizer's (or the tokenizer refuses doc).
func checkScanPlain(t *testing.T, doc []byte, maxItems int) {
	t.Helper()
	got, ok := scanPlain(doc, maxItems)
	if !ok {
		return
	}
	if n := longestTag(doc); got.longest != n {
		t.Fatalf("scanPlain(%q) measured the longest tag at %d bytes, longestTag at %d", doc, got.longest, n)
	}
	got.longest = 0 // the tokenizer's scan does not measure it
	want, err := scanTokens(doc, maxItems)
	if err != nil {
		t.Fatalf("scanPlain took %q, the tokenizer refuses it: %v", doc, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scanPlain(%q) = %+v, the tokenizer says %+v", doc, got, want)
	}
}

// FuzzScanPlain: whatever the fast path takes, it scans as the tokenizer.
func FuzzScanPlain(f *testing.F) {
	for _, tc := range scanCases {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkScanPlain(t, doc, 3)
	})
}
