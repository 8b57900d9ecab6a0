package aggregator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mmcdole/gofeed"
	"github.com/mmcdole/gofeed/rss"
)

// frPrepare gives a document the treatment parseXML gives it before the
// feed parser (charset, sanitising, the scan and its cut); ok is false
// for documents parseXML would not hand to the RSS parser.
func frPrepare(body []byte) ([]byte, bool) { return frPrepareRoot(body, "rss") }

// frPrepareRoot is frPrepare for documents whose root is root.
func frPrepareRoot(body []byte, root string) ([]byte, bool) {
	body = fromUTF16(body)
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	body, _ = toUTF8(body, "")
	if longestTag(body) > MaxTagBytes {
		return nil, false
	}
	sc, err := scanXML(body, DefaultMaxItems)
	if err != nil || sc.html || sc.root != root {
		return nil, false
	}
	if sc.cut > 0 {
		body = append(body[:sc.cut:sc.cut], sc.closers...)
	}
	return body, true
}

// frDiff compares fastRSS with gofeed's parser and translator on a
// prepared document. It returns whether fastRSS accepted it, and a
// description of the first divergence ("" for none).
func frDiff(body []byte) (accepted bool, diff string) {
	fr, ok := fastRSS(body)
	gf, err := (&rss.Parser{}).Parse(bytes.NewReader(body))
	if !ok {
		return false, ""
	}
	if err != nil {
		return true, fmt.Sprintf("fastRSS accepted a document gofeed refuses: %v", err)
	}
	if !reflect.DeepEqual(fr, gf) {
		return true, "rss.Feed differs:\nfastRSS: " + frJSON(fr) + "\ngofeed:  " + frJSON(gf)
	}
	// Translate each from its own parse: the translator may share or
	// change what it is given.
	fr2, _ := fastRSS(body)
	gf2, _ := (&rss.Parser{}).Parse(bytes.NewReader(body))
	tr := &gofeed.DefaultRSSTranslator{DisableContentImageScan: true}
	ft, ferr := tr.Translate(fr2)
	gt, gerr := tr.Translate(gf2)
	if (ferr == nil) != (gerr == nil) || !reflect.DeepEqual(ft, gt) {
		return true, fmt.Sprintf("translated feed differs (%v, %v):\nfastRSS: %s\ngofeed:  %s", ferr, gerr, frJSON(ft), frJSON(gt))
	}
	return true, ""
}

func frJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// frFixtures returns the XML feed fixtures of the repository.
func frFixtures(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, dir := range []string{"testdata", "../web/testdata", "../web/publish/testdata", "../transform", "../plugins", "../storage/testdata"} {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".xml", ".rss", ".atom", ".rdf":
			default:
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out[path] = b
			return nil
		})
	}
	out["bench publisher"] = frBenchDocument()
	out["BenchmarkParse"] = benchParseDocument()
	return out
}

// frBenchDocument is a response of BenchmarkIngest's publisher
// (benchPublisher.serve in bench_test.go, an external test package).
func frBenchDocument() []byte {
	epoch := time.Date(2026, 11, 21, 18, 0, 0, 0, time.UTC)
	var sb strings.Builder
	const i, base = "7", 12345
	fmt.Fprintf(&sb, `<?xml version="1.0"?><rss version="2.0"><channel><title>feed %s</title><link>http://127.0.0.1/</link><description>bench</description>`, i)
	for k := int64(19); k >= 0; k-- {
		n := base + k
		fmt.Fprintf(&sb, `<item><title>reading %d</title><link>http://127.0.0.1/f/%s/%d</link><guid isPermaLink="false">%s-%d</guid><pubDate>%s</pubDate><description>value &lt;b&gt;%d.%d&lt;/b&gt; C</description></item>`,
			n, i, n, i, n, epoch.Add(time.Duration(n)*time.Second).Format(time.RFC1123Z), n%50, n%10)
	}
	sb.WriteString(`</channel></rss>`)
	return []byte(sb.String())
}

func TestFastRSSFixtures(t *testing.T) {
	fixtures := frFixtures(t)
	accepted, declined, other := 0, 0, 0
	var declinedNames []string
	for name, raw := range fixtures {
		t.Run(name, func(t *testing.T) {
			body, ok := frPrepare(raw)
			if !ok {
				other++
				return
			}
			acc, diff := frDiff(body)
			if diff != "" {
				t.Fatal(diff)
			}
			if acc {
				accepted++
			} else {
				declined++
				declinedNames = append(declinedNames, name)
			}
		})
	}
	t.Logf("RSS fixtures: %d accepted, %d declined %v; %d not RSS", accepted, declined, declinedNames, other)
	for _, must := range []string{"bench publisher", "BenchmarkParse", "testdata/readings/rss.xml", "testdata/syndication/update-period.xml"} {
		body, _ := frPrepare(fixtures[must])
		if _, ok := fastRSS(body); !ok {
			t.Errorf("%s: declined, want accepted", must)
		}
	}
}

// frCases are hand-written documents: accept is whether fastRSS must
// take them (false: it must decline); either way, what it accepts must be
// gofeed's result.
var frCases = []struct {
	name   string
	doc    string
	accept bool
}{
	{"minimal", `<rss version="2.0"><channel><title>t</title></channel></rss>`, true},
	{"empty root", `<rss/>`, true},
	{"no channel", `<rss version="2.0"></rss>`, true},
	{"root items", `<rss><item><title>a</title></item><channel><item><title>b</title></item></channel><item><title>c</title></item></rss>`, true},
	{"two channels", `<rss><channel><title>a</title><item/></channel><channel><title>b</title></channel></rss>`, true},
	{"upper case names", `<RSS version="0.91"><Channel><TITLE>t</TITLE><Item><Title>x</Title><PubDate>Mon, 02 Jan 2006 15:04:05 -0700</PubDate></Item></Channel></RSS>`, true},
	{"declaration and comments", "<?xml version='1.0' encoding='utf-8' standalone='yes'?>\n<!-- a -->\n<?xml-stylesheet type=\"text/xsl\" href=\"s.xsl\"?><rss><!-- b --><channel><!--c--><title>t</title></channel></rss><!-- after -->", true},
	{"crlf", "<rss>\r\n<channel>\r\n<title>\r\n a\r\nb \r\n</title><description><![CDATA[x\r\ny]]></description><x:e xmlns:x=\"u:x\">a\r\nb<![CDATA[c\rd]]></x:e></channel></rss>", true},
	{"entities", `<rss><channel><title>a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos; &#65;&#x42; &nbsp; &copy; &eacute;t&eacute; &unknown; & alone &amp;amp; &#xD800; &#1114111;</title></channel></rss>`, true},
	{"entities without semicolon", `<rss><channel><title>AT&T &copy=2; &#65 &#x; &#; &#X41; a&b=c</title></channel></rss>`, true},
	{"cdata", `<rss><channel><title> <![CDATA[<b>bold</b> &amp;]]> </title><description>x &amp; <![CDATA[y]]> &lt; <![CDATA[z]]></description></channel></rss>`, true},
	{"cdata in extension", `<rss xmlns:x="u:x"><channel><x:a>1 <![CDATA[<2>]]> &amp; 3<x:b c="d&amp;e">in</x:b>4<!-- no --></x:a></channel></rss>`, true},
	{"whitespace and text between elements", `<rss> junk <channel> more <title>t</title> text &amp; <![CDATA[cd]]> </channel> tail </rss>`, true},
	{"items", `<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel>
<item><title>t</title><link>http://a/b?x=1&amp;y=2</link><link href="/rel path"/><description>&lt;p&gt;d&lt;/p&gt;</description>
<content:encoded><![CDATA[<p>c</p>]]></content:encoded><author>a@b.c (A)</author><comments>http://c</comments>
<guid isPermaLink="false">g1</guid><category domain="d">c1</category><category>c2</category>
<enclosure url="http://e/1.mp3" length="12" type="audio/mpeg"/><enclosure url="http://e/2.mp3"></enclosure>
<source url="http://s">S</source><dc:creator>Me</dc:creator><dc:date>2026-11-21T19:30:00Z</dc:date>
<pubDate>Sat, 21 Nov 2026 19:30:00 GMT</pubDate><encoded>plain</encoded><Value>12.5</Value><value>13</value></item>
</channel></rss>`, true},
	{"guid permalink forms", `<rss><channel><item><guid>a</guid></item><item><guid isPermalink="false">b</guid></item><item><guid isPermaLink="">c</guid></item><item><guid x:isPermaLink="no" xmlns:x="u:x">d</guid></item></channel></rss>`, true},
	{"channel fields", `<rss version="2.0" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd" xmlns:atom="http://www.w3.org/2005/Atom" xmlns:sy="http://purl.org/rss/1.0/modules/syndication/"><channel>
<title>T</title><link>http://l</link><link>http://l2</link><description>D</description><language>en</language><copyright>C</copyright>
<managingEditor>m@e</managingEditor><webMaster>w@m</webMaster><pubDate>Sat, 21 Nov 2026 19:30:00 +0100</pubDate>
<lastBuildDate>2026-11-21T19:30:00+01:00</lastBuildDate><generator>G</generator><docs>http://d</docs><ttl> 15 </ttl><rating>R</rating>
<skipHours><hour>0</hour><hour> 23 </hour><other>x</other></skipHours><skipDays/><cloud domain="c" port="80" path="/p" registerProcedure="r" protocol="xml-rpc"/>
<category>c</category><image><url>http://i</url><title>I</title><link>http://il</link><width>1</width><height>2</height><description>ID</description><extra/></image>
<textInput><title>TI</title><description>TD</description><name>N</name><link>http://tl</link></textInput>
<atom:link href="https://hub.example/ " rel="hub"/><atom:link href="http://example.org/feed?a=1&amp;b=%zz" rel="self" type="application/rss+xml"/>
<itunes:author>IA</itunes:author><itunes:summary>IS</itunes:summary><itunes:category text="Tech"><itunes:category text="Sub"/></itunes:category>
<sy:updatePeriod>hourly</sy:updatePeriod><sy:updateFrequency>2</sy:updateFrequency><unknown><nested>x</nested></unknown>
</channel></rss>`, true},
	{"root image and textinput", `<rss><channel><title>t</title><image><url>a</url></image></channel><image><url>b</url></image><textinput><name>n</name></textinput><x:e xmlns:x="u:x"/><other>o</other></rss>`, true},
	{"namespace on item", `<rss><channel><item xmlns:s="https://slogfeed.org/ns/sensor/1"><s:reading value="1" unit="C"/></item><item><s:reading xmlns:s="https://slogfeed.org/ns/sensor/1" value="2"/></item></channel></rss>`, true},
	{"two prefixes one namespace", `<rss xmlns:a="u:n" xmlns:b="u:n"><channel><a:x>1</a:x><b:x>2</b:x><item xmlns:c="u:n"><a:y>3</a:y></item></channel></rss>`, true},
	{"shadowed prefix", `<rss xmlns:a="u:1" xmlns:b="u:2"><channel><item xmlns:b="u:1"><a:y>3</a:y><b:y>4</b:y></item></channel></rss>`, true},
	{"native namespace prefix", `<rss xmlns:r="http://purl.org/rss/1.0/"><channel><r:title>t</r:title><item><r:title>i</r:title></item></channel></rss>`, true},
	{"prefix named content", `<rss xmlns:content="u:other"><channel><item><content:encoded>x</content:encoded></item></channel></rss>`, true},
	{"content under another prefix", `<rss xmlns:c="http://purl.org/rss/1.0/modules/content/"><channel><item><c:encoded>x</c:encoded></item></channel></rss>`, true},
	{"extension attributes", `<rss xmlns:x="u:x" xmlns:y="u:y"><channel><item><x:e a="1" y:a="2" href=" rel/a b" src="%zz" URI="http://h/p?q#f" xml:lang="en"><x:c href="rel"/></x:e></item></channel></rss>`, true},
	{"attribute entities", `<rss><channel><link href="http://a/?x=1&amp;y=&#50;&#x33;&lt;"/><item><guid isPermaLink="&#102;alse">g</guid></item></channel></rss>`, true},
	{"dates", `<rss><channel><item><pubDate>Mon, 02 Jan 2006 15:04:05 EST</pubDate></item><item><pubDate>2006-01-02</pubDate></item><item><pubDate>nonsense</pubDate></item><item><pubDate/></item><item><pubDate>02 Jan 06 15:04 -0700</pubDate></item><item><pubDate>Mon, 02 Jan 2006 15:04:05 UTC</pubDate></item><item><pubDate>Mon, 02 Jan 2006 15:04:05 UT</pubDate></item></channel></rss>`, true},
	{"whitespace text", "<rss><channel><title>  \u00a0 a \u00a0 </title><description>\u2003</description></channel></rss>", true},
	{"empty elements", `<rss><channel><title/><link/><item><title></title><guid/><category/><source url="u"/></item></channel></rss>`, true},
	{"self closing with space", `<rss ><channel ><title >t</title ><item /></channel ></rss >`, true},
	{"tab separated attributes", "<rss\tversion=\"2.0\"\n><channel><item><guid\nisPermaLink = 'false' >x</guid></item></channel></rss>", true},
	{"trailing garbage", `<rss><channel/></rss><rss><x`, true},
	{"gt in text", `<rss><channel><title>a > b ]] > c ]]</title></channel></rss>`, true},

	// Declined.
	{"doctype", `<!DOCTYPE rss [<!ENTITY e "x">]><rss><channel><title>&e;</title></channel></rss>`, false},
	{"default namespace", `<rss xmlns="http://purl.org/rss/1.0/"><channel><title>t</title></channel></rss>`, false},
	{"undeclared prefix", `<rss><channel><dc:creator>x</dc:creator></channel></rss>`, false},
	{"xml base", `<rss xml:base="http://a/"><channel><link>b</link></channel></rss>`, false},
	{"element in text", `<rss><channel><description><p>x</p></description></channel></rss>`, false},
	{"comment in text", `<rss><channel><title>a<!-- b -->c</title></channel></rss>`, false},
	{"mismatched end tag", `<rss><channel><title>t</TITLE></channel></rss>`, false},
	{"unquoted attribute", `<rss version=2.0><channel/></rss>`, false},
	{"attribute without value", `<rss version><channel/></rss>`, false},
	{"prefixed root", `<x:rss xmlns:x="u:x"><channel/></x:rss>`, false},
	{"rdf root", `<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><channel/></rdf:RDF>`, false},
	{"other encoding", `<?xml version="1.0" encoding="ISO-8859-1"?><rss><channel/></rss>`, false},
	{"xml 1.1", `<?xml version="1.1"?><rss><channel/></rss>`, false},
	{"double dash comment", `<rss><channel><!-- a -- b --><title>t</title></channel></rss>`, false},
	{"cdata end in text", `<rss><channel><title>a ]]> b</title></channel></rss>`, false},
	{"bad character reference", `<rss><channel><title>&#x0000000000;</title></channel></rss>`, false},
	{"unterminated", `<rss><channel><title>t</title>`, false},
	{"non-ascii name", `<rss><channel><tïtle>t</tïtle></channel></rss>`, false},
	{"two colons", `<rss xmlns:a="u:a"><channel><a:b:c>t</a:b:c></channel></rss>`, false},
	{"repeated attribute", `<rss version="1" version="2"><channel/></rss>`, false},
	{"lt in attribute", `<rss version="<"><channel/></rss>`, false},
	{"processing instruction in body", `<rss><channel><?pi x?><title>t</title></channel></rss>`, false},
	{"namespace with spaces", `<rss xmlns:x=" u:x "><channel><x:a/></channel></rss>`, false},
	{"empty namespace", `<rss xmlns:x=""><channel/></rss>`, false},
	{"control character", "<rss><channel><title>a\x01b</title></channel></rss>", false},
	{"invalid utf-8", "<rss><channel><title>a\xffb</title></channel></rss>", false},
	{"bom", "\xef\xbb\xbf<rss><channel/></rss>", false},
}

func TestFastRSSCases(t *testing.T) {
	for _, tc := range frCases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.doc)
			acc, diff := frDiff(body)
			if diff != "" {
				t.Fatal(diff)
			}
			if acc != tc.accept {
				t.Fatalf("accepted %v, want %v", acc, tc.accept)
			}
		})
	}
}

// TestFrDate checks frDate against gofeed's own date parser, on the forms
// it reads directly above all: every weekday, month and zone of the
// RFC 1123 form it takes without gofeed's list of layouts.
func TestFrDate(t *testing.T) {
	var dates []string
	start := time.Date(1999, 12, 25, 23, 59, 58, 0, time.UTC)
	for i := range 400 {
		d := start.Add(time.Duration(i) * 26 * time.Hour).Add(time.Duration(i*37) * time.Second)
		dates = append(dates,
			d.Format("Mon, 02 Jan 2006 15:04:05 GMT"), d.Format("Mon, 02 Jan 2006 15:04:05 UTC"),
			d.Format(time.RFC1123Z), d.Format(time.RFC3339), d.Format(time.RFC822Z), d.Format(time.RubyDate),
			d.Format(time.RFC1123), d.Format("Mon, 2 Jan 2006 15:04:05 MST"), d.Format("2006-01-02 15:04:05"))
	}
	dates = append(dates, "", " ", "x", "Mon, 02 Jan 2006 15:04:05 GMT ", "Mon, 32 Jan 2006 15:04:05 GMT",
		"Xyz, 02 Jan 2006 15:04:05 GMT", "Mon, 02 Jan 2006 25:04:05 GMT", "Mon, 02 Jan 2006 15:04:05 EST",
		"Mon, 02 Jan 2006 15:04:05 CEST", "Fri, 02 Jan 2006 15:04:05 GMT", "Mon,02 Jan 2006 15:04:05 -0700",
		"200,01-02", "Mon, 2 Jan 2006 15:04:05 -0700", "Mon, 02 Jan 2006 15:04:05 -07:00", "Tue, 2 January 2006")
	for _, s := range dates {
		got, want := frDate(s), gofeedDate(s)
		if (got == nil) != (want == nil) || got != nil && !got.Equal(*want) || got != nil && got.Location() != time.UTC {
			t.Errorf("frDate(%q) = %v, gofeed %v", s, got, want)
		}
	}
}

func FuzzFastRSS(f *testing.F) {
	for _, b := range frFixtures(f) {
		f.Add(b)
	}
	for _, tc := range frCases {
		f.Add([]byte(tc.doc))
	}
	g := &frGen{r: rand.New(rand.NewPCG(1, 2))}
	for range 40 {
		f.Add([]byte(g.document()))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		body, ok := frPrepare(raw)
		if !ok {
			return
		}
		if _, diff := frDiff(body); diff != "" {
			t.Fatal(diff)
		}
	})
}

// benchParseDocument is BenchmarkParse's document (parse_test.go).
func benchParseDocument() []byte {
	var buf bytes.Buffer
	buf.WriteString(`<?xml version="1.0" encoding="UTF-8"?><rss version="2.0" xmlns:sf="https://slogfeed.org/ns/sensor/1"><channel><title>Bench</title><link>https://example.org/</link>`)
	for i := range 20 {
		fmt.Fprintf(&buf, `<item><guid>lab-1/%d</guid><title>Lab temperature %d.5 °C</title><link>https://example.org/r/%d</link>`+
			`<description>&lt;p&gt;Measured &lt;b&gt;%d.5&lt;/b&gt; °C at the &lt;a href="/lab"&gt;lab&lt;/a&gt;&lt;/p&gt;</description>`+
			`<pubDate>Sat, 21 Nov 2026 19:%02d:00 GMT</pubDate><category>lab</category>`+
			`<sf:reading value="%d.5" unit="C" sensor="lab-1" time="2026-11-21T19:%02d:00Z"/></item>`, i, i, i, i, i, i, i)
	}
	buf.WriteString(`</channel></rss>`)
	return buf.Bytes()
}

// BenchmarkFastRSS compares gofeed's RSS parser with fastRSS, each
// followed by the translator, on the ingest benchmark's response and
// BenchmarkParse's document.
func BenchmarkFastRSS(b *testing.B) {
	docs := []struct {
		name string
		body []byte
	}{{"bench-publisher", frBenchDocument()}, {"parse-doc", benchParseDocument()}}
	tr := &gofeed.DefaultRSSTranslator{DisableContentImageScan: true}
	for _, d := range docs {
		b.Run(d.name+"/gofeed", func(b *testing.B) {
			b.SetBytes(int64(len(d.body)))
			b.ReportAllocs()
			for b.Loop() {
				rf, err := (&rss.Parser{}).Parse(bytes.NewReader(d.body))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tr.Translate(rf); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(d.name+"/fastRSS", func(b *testing.B) {
			b.SetBytes(int64(len(d.body)))
			b.ReportAllocs()
			for b.Loop() {
				rf, ok := fastRSS(d.body)
				if !ok {
					b.Fatal("declined")
				}
				if _, err := tr.Translate(rf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFrValidBody checks the word-wise check against the byte-wise one.
func TestFrValidBody(t *testing.T) {
	simple := func(b []byte) bool { return frValidBytes(b, 0, len(b)) && utf8.Valid(b) }
	tests := []struct {
		name string
		b    string
		want bool
	}{
		{"empty", "", true},
		{"text", "<rss>\r\n\t<channel/></rss> é ☺", true},
		{"control", "<rss><channel/></rss>\x01", false},
		{"nul early", "\x00<rss><channel/></rss>", false},
		{"fffe", "<rss><channel>\uFFFE</channel></rss>", false},
		{"ffff at a word end", "1234567\xef\xbf\xbf", false},
		{"fffd", "1234567\xef\xbf\xbd", true},
		{"bad utf-8", "12345678\xff", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := frValidBody([]byte(tc.b)); got != tc.want {
				t.Errorf("frValidBody(%q) = %v, want %v", tc.b, got, tc.want)
			}
		})
	}
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab\t\n\r\x00\x1f\x20\xef\xbf\xbe\xbd\x7f\x80")
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if got, want := frValidBody(b), simple(b); got != want {
			t.Fatalf("frValidBody(%q) = %v, byte-wise %v", b, got, want)
		}
	}
}
