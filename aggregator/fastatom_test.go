package aggregator

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/mmcdole/gofeed"
	"github.com/mmcdole/gofeed/atom"
)

// frDiffAtom is frDiff for fastAtom against gofeed's Atom parser and
// translator.
func frDiffAtom(body []byte) (accepted bool, diff string) {
	fa, ok := fastAtom(body)
	ga, err := (&atom.Parser{}).Parse(bytes.NewReader(body))
	if !ok {
		return false, ""
	}
	if err != nil {
		return true, fmt.Sprintf("fastAtom accepted a document gofeed refuses: %v", err)
	}
	if !reflect.DeepEqual(fa, ga) {
		return true, "atom.Feed differs:\nfastAtom: " + frJSON(fa) + "\ngofeed:   " + frJSON(ga)
	}
	fa2, _ := fastAtom(body)
	ga2, _ := (&atom.Parser{}).Parse(bytes.NewReader(body))
	ft, ferr := (&gofeed.DefaultAtomTranslator{}).Translate(fa2)
	gt, gerr := (&gofeed.DefaultAtomTranslator{}).Translate(ga2)
	if (ferr == nil) != (gerr == nil) || !reflect.DeepEqual(ft, gt) {
		return true, fmt.Sprintf("translated feed differs (%v, %v):\nfastAtom: %s\ngofeed:   %s", ferr, gerr, frJSON(ft), frJSON(gt))
	}
	return true, ""
}

func TestFastAtomFixtures(t *testing.T) {
	accepted, declined := 0, 0
	var declinedNames []string
	for name, raw := range frFixtures(t) {
		body, ok := frPrepareRoot(raw, "feed")
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			acc, diff := frDiffAtom(body)
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
	t.Logf("Atom fixtures: %d accepted, %d declined %v", accepted, declined, declinedNames)
	if accepted == 0 {
		t.Error("no Atom fixture accepted")
	}
}

var frAtomCases = []struct {
	name   string
	doc    string
	accept bool
}{
	{"minimal", `<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title></feed>`, true},
	{"no namespace", `<feed><title>t</title><entry><id>x</id></entry></feed>`, true},
	{"atom 0.3", `<feed version="0.3" xmlns="http://purl.org/atom/ns#"><tagline>s</tagline><modified>2026-11-21T19:30:00Z</modified><copyright>c</copyright><entry><issued>2026-11-21T19:30:00Z</issued></entry></feed>`, true},
	{"prefixed root", `<a:feed xmlns:a="http://www.w3.org/2005/Atom"><a:title>t</a:title><a:entry><a:id>i</a:id></a:entry></a:feed>`, true},
	{"full", `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="en" xmlns:sf="https://slogfeed.org/ns/sensor/1" xmlns:dc="http://purl.org/dc/elements/1.1/">
<title type="text">A &amp; B</title><subtitle type="html">&lt;b&gt;s&lt;/b&gt;</subtitle><id> http://example.org/a b </id>
<updated>2026-11-21T19:30:00Z</updated><link href="/rel"/><link rel="self" href="http://example.org/feed?a=1&amp;b=%zz" type="application/atom+xml" hreflang="en" title="T" length="9"/>
<link rel="hub" href="https://hub.example/"/><generator uri="/gen" version="1">G</generator><generator url="http://g">G2</generator>
<icon>/i.png</icon><logo> l.png</logo><rights>R</rights><author><name>N</name><email>e@x</email><uri>/me</uri><extra/></author>
<contributor><name>C</name><homepage>http://h</homepage></contributor><category term="t" scheme="/s" label="L"/><dc:creator>dc</dc:creator>
<entry><id>urn:x:1</id><title type="html"><![CDATA[<i>x</i>]]></title><updated>Sat, 21 Nov 2026 19:30:00 GMT</updated>
<published>bad</published><summary>s &lt; t</summary><content type="text/plain" src="/c">body&#65;</content>
<author><name>A</name><url>http://u</url></author><category term="c"/><link href="http://e/1"/><rights>r</rights>
<source><id>src</id><title>S</title><updated>2026-11-21T19:30:00Z</updated><link href="http://s"/><author><name>SA</name></author><sf:x>1</sf:x></source>
<sf:reading value="1" unit="C"/><reading xmlns="https://slogfeed.org/ns/sensor/1" value="2"/><unknown>u</unknown></entry>
</feed>`, true},
	{"content html", `<feed><entry><content type="html">&lt;p&gt;x&lt;/p&gt;</content><summary type="HTML">&amp;amp;</summary></entry></feed>`, true},
	{"cdata any type", `<feed><entry><content type="xhtml"><![CDATA[<div>x</div>]]></content><title type="image/png"><![CDATA[abc]]></title></entry></feed>`, true},
	{"dates", `<feed><updated>nonsense</updated><entry><updated>2026-11-21T19:30:00Z</updated><updated>bad</updated><published>Mon, 02 Jan 2006 15:04:05 EST</published></entry></feed>`, true},
	{"two lang", `<feed lang="a" xml:lang="b"><title>t</title></feed>`, true},

	{"xhtml", `<feed><entry><content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p>x</p></div></content></entry></feed>`, false},
	{"base64", `<feed><entry><content type="image/png">aGVsbG8=</content></entry></feed>`, false},
	{"mode", `<feed><entry><content mode="escaped">x</content></entry></feed>`, false},
	{"two types", `<feed xmlns:x="u:x"><title type="text" x:type="html">t</title></feed>`, false},
	{"xml base", `<feed xml:base="http://a/"><link href="b"/></feed>`, false},
	{"empty default namespace", `<feed xmlns=""><title>t</title></feed>`, false},
}

func TestFastAtomCases(t *testing.T) {
	for _, tc := range frAtomCases {
		t.Run(tc.name, func(t *testing.T) {
			acc, diff := frDiffAtom([]byte(tc.doc))
			if diff != "" {
				t.Fatal(diff)
			}
			if acc != tc.accept {
				t.Fatalf("accepted %v, want %v", acc, tc.accept)
			}
		})
	}
}

// frAtomDocument writes a random Atom document (see frGen).
func (g *frGen) atomDocument() string {
	g.sb.Reset()
	g.sb.WriteString(g.pick("", `<?xml version="1.0" encoding="UTF-8"?>`+"\n"))
	g.sb.WriteString(g.pick(`<feed xmlns="http://www.w3.org/2005/Atom"`, `<feed`, `<feed xmlns="http://purl.org/atom/ns#" version="0.3"`, `<feed xmlns="urn:other"`))
	for p, u := range frGenPrefixes {
		if g.r.IntN(40) != 0 {
			fmt.Fprintf(&g.sb, ` xmlns:%s="%s"`, p, u)
		}
	}
	g.sb.WriteString(g.pick("", ` xml:lang="en"`) + ">")
	texts := []string{"title", "subtitle", "id", "icon", "logo", "rights", "updated", "generator", "tagline", "modified"}
	people := []string{"author", "contributor"}
	personKids := []string{"name", "email", "uri", "url", "homepage", "other", "x:name"}
	other := []string{"link", "category", "dc:creator", "x:custom", "s:reading", "atom:link", "unknown"}
	textElem := func(name string) {
		a := ""
		if g.r.IntN(3) == 0 {
			a = fmt.Sprintf(` type="%s"`, g.pick("text", "html", "HTML", "text/plain", "TEXT", ""))
		}
		if g.r.IntN(50) == 0 {
			a += g.pick(` mode="base64"`, ` type="xhtml"`, ` type="image/png"`)
		}
		fmt.Fprintf(&g.sb, "<%s%s>%s</%s>", name, a, g.text(), name)
	}
	section := func(extra []string, n int) {
		for range g.r.IntN(n) {
			switch k := g.r.IntN(10); {
			case k < 5:
				textElem(g.pick(append(texts, extra...)...))
			case k < 7:
				who := g.pick(people...)
				g.sb.WriteString("<" + who + ">")
				for range g.r.IntN(4) {
					textElem(g.pick(personKids...))
				}
				g.sb.WriteString("</" + who + ">")
			default:
				g.child(other, 2)
			}
		}
	}
	section(nil, 8)
	for range g.r.IntN(4) {
		g.sb.WriteString("<entry>")
		section([]string{"summary", "content", "published", "issued"}, 10)
		if g.r.IntN(4) == 0 {
			g.sb.WriteString("<source>")
			section(nil, 4)
			g.sb.WriteString("</source>")
		}
		g.sb.WriteString("</entry>")
	}
	g.sb.WriteString("</feed>")
	return g.sb.String()
}

func TestFastAtomGenerated(t *testing.T) {
	g := &frGen{r: rand.New(rand.NewPCG(15, 2026))}
	n := 3000
	accepted := 0
	for i := range n {
		doc := g.atomDocument()
		body, ok := frPrepareRoot([]byte(doc), "feed")
		if !ok {
			continue
		}
		acc, diff := frDiffAtom(body)
		if diff != "" {
			t.Fatalf("document %d:\n%s\n%s", i, doc, diff)
		}
		if acc {
			accepted++
		}
	}
	t.Logf("%d of %d generated Atom documents accepted", accepted, n)
	if accepted < n/2 {
		t.Errorf("only %d of %d generated Atom documents accepted", accepted, n)
	}
}

func FuzzFastAtom(f *testing.F) {
	for name, b := range frFixtures(f) {
		if strings.HasSuffix(name, ".atom") || bytes.Contains(b, []byte("<feed")) {
			f.Add(b)
		}
	}
	for _, tc := range frAtomCases {
		f.Add([]byte(tc.doc))
	}
	g := &frGen{r: rand.New(rand.NewPCG(3, 4))}
	for range 40 {
		f.Add([]byte(g.atomDocument()))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		body, ok := frPrepareRoot(raw, "feed")
		if !ok {
			return
		}
		if _, diff := frDiffAtom(body); diff != "" {
			t.Fatal(diff)
		}
	})
}

// BenchmarkFastAtom compares gofeed's Atom parser with fastAtom, each
// followed by the translator, on a 20-entry sensor feed.
func BenchmarkFastAtom(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom" xmlns:sf="https://slogfeed.org/ns/sensor/1"><title>Bench</title><id>urn:bench</id><link href="https://example.org/"/><updated>2026-11-21T19:30:00Z</updated>`)
	for i := range 20 {
		fmt.Fprintf(&sb, `<entry><id>urn:lab-1:%d</id><title>Lab temperature %d.5 °C</title><link href="https://example.org/r/%d"/>`+
			`<updated>2026-11-21T19:%02d:00Z</updated><summary type="html">&lt;p&gt;Measured &lt;b&gt;%d.5&lt;/b&gt; °C&lt;/p&gt;</summary>`+
			`<sf:reading value="%d.5" unit="C" sensor="lab-1" time="2026-11-21T19:%02d:00Z"/></entry>`, i, i, i, i, i, i, i)
	}
	sb.WriteString(`</feed>`)
	body := []byte(sb.String())
	b.Run("gofeed", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			af, err := (&atom.Parser{}).Parse(bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := (&gofeed.DefaultAtomTranslator{}).Translate(af); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fastAtom", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			af, ok := fastAtom(body)
			if !ok {
				b.Fatal("declined")
			}
			if _, err := (&gofeed.DefaultAtomTranslator{}).Translate(af); err != nil {
				b.Fatal(err)
			}
		}
	})
}
