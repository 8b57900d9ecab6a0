package aggregator

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// frGen writes random RSS documents mostly inside fastRSS's subset, with
// the things gofeed treats specially (entities, CDATA, CR LF, namespaces,
// URL attributes, case, empty elements) and some outside it.
type frGen struct {
	r  *rand.Rand
	sb strings.Builder
}

func (g *frGen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

var frGenPrefixes = map[string]string{
	"dc":      "http://purl.org/dc/elements/1.1/",
	"content": "http://purl.org/rss/1.0/modules/content/",
	"atom":    "http://www.w3.org/2005/Atom",
	"itunes":  "http://www.itunes.com/DTDs/PodCast-1.0.dtd",
	"s":       "https://slogfeed.org/ns/sensor/1",
	"x":       "urn:x",
	"y":       "urn:x",
	"r":       "http://purl.org/rss/1.0/",
	"sy":      "http://purl.org/rss/1.0/modules/syndication/",
}

func (g *frGen) text() string {
	var b strings.Builder
	for range g.r.IntN(5) {
		b.WriteString(g.pick("a", " ", "\r\n", "\r", "\n", "\t", "b c", "&amp;", "&lt;p&gt;", "&#65;", "&#x263a;", "&#xD800;",
			"&nbsp;", "&copy=1;", "&eacute;", "& ", "&#12", "]]", ">", "<![CDATA[<b>&amp;\r\n</b>]]>", "<![CDATA[]]>",
			"\u00a0", "é", "2026-11-21T19:30:00Z", "Sat, 21 Nov 2026 19:30:00 GMT", "Mon, 02 Jan 2006 15:04:05 -0700",
			"http://h/p?a=1&amp;b=2", "  ", "true", "false", "&quot;'", "&apos;"))
	}
	if g.r.IntN(200) == 0 {
		b.WriteString(g.pick("<!-- c -->", "<b>x</b>", "]]>", "&#0;", "<?pi?>"))
	}
	return b.String()
}

func (g *frGen) attrs(names ...string) string {
	var b strings.Builder
	seen := map[string]bool{}
	for range g.r.IntN(3) {
		n := g.pick(names...)
		if seen[n] {
			continue
		}
		seen[n] = true
		q := g.pick(`"`, `'`)
		v := g.pick("", "1", "false", "true", " rel/a b", "http://a/b?c=1&amp;d=2", "%zz", "a&#10;b", "x\r\ny", "&bogus;", "urn:x")
		fmt.Fprintf(&b, "%s%s=%s%s%s", g.pick(" ", "\n", "\t "), n, q, v, q)
	}
	return b.String()
}

func (g *frGen) elem(name, attrNames string, depth int) {
	a := ""
	if attrNames != "" {
		a = g.attrs(strings.Split(attrNames, ",")...)
	}
	if g.r.IntN(6) == 0 {
		fmt.Fprintf(&g.sb, "<%s%s%s/>", name, a, g.pick("", " "))
		return
	}
	fmt.Fprintf(&g.sb, "<%s%s>", name, a)
	nests := strings.Contains(name, ":") && !strings.HasPrefix(name, "r:") && !strings.HasPrefix(name, "content:") || g.r.IntN(30) == 0
	if depth > 0 && nests && g.r.IntN(2) == 0 {
		for range g.r.IntN(3) {
			g.sb.WriteString(g.text())
			g.elem(g.pick("x:c", "x:d", "y:c", "s:v", "title"), "href,a,x:a,src", depth-1)
		}
	}
	g.sb.WriteString(g.text())
	fmt.Fprintf(&g.sb, "</%s>", name)
}

func (g *frGen) child(names []string, depth int) {
	name := g.pick(names...)
	if k := strings.IndexByte(name, ':') + 1; g.r.IntN(8) == 0 {
		name = name[:k] + strings.ToUpper(name[k:k+1]) + name[k+1:]
	}
	attrs := "href,domain,url,length,type,isPermaLink,isPermalink,rel,src,URI,x:isPermaLink,xml:lang"
	g.elem(name, attrs, depth)
	g.sb.WriteString(g.pick("", "\n", " ", "<!-- between -->", " stray &amp; "))
}

func (g *frGen) document() string {
	g.sb.Reset()
	g.sb.WriteString(g.pick("", `<?xml version="1.0" encoding="UTF-8"?>`+"\n", "<?xml version='1.0'?>", "<!-- c -->\n"))
	g.sb.WriteString(`<rss version="2.0"`)
	for p, u := range frGenPrefixes {
		if g.r.IntN(40) != 0 {
			fmt.Fprintf(&g.sb, ` xmlns:%s="%s"`, p, u)
		}
	}
	g.sb.WriteString("><channel>")
	channel := []string{"cloud", "textInput", "skipDays", "image", "item", "title", "link", "description", "language", "pubDate", "lastBuildDate", "ttl", "category", "generator",
		"docs", "copyright", "managingEditor", "webMaster", "rating", "dc:date", "dc:title", "atom:link", "sy:updatePeriod",
		"itunes:author", "itunes:summary", "x:custom", "r:title", "unknown"}
	for range g.r.IntN(8) {
		switch g.r.IntN(10) {
		case 0:
			g.sb.WriteString("<skipHours>")
			for range g.r.IntN(4) {
				g.child([]string{"hour", "hour", "x:hour", "other"}, 0)
			}
			g.sb.WriteString("</skipHours>")
		case 1:
			g.sb.WriteString("<image>")
			for range g.r.IntN(4) {
				g.child([]string{"url", "title", "link", "width", "x:height", "other"}, 1)
			}
			g.sb.WriteString("</image>")
		default:
			g.child(channel, 2)
		}
	}
	item := []string{"title", "link", "description", "guid", "pubDate", "author", "comments", "category", "enclosure", "source",
		"content:encoded", "encoded", "dc:creator", "dc:date", "s:reading", "x:a", "y:a", "value", "Value", "r:link", "atom:link", "itunes:duration"}
	for range g.r.IntN(4) {
		if g.r.IntN(6) == 0 {
			g.sb.WriteString(`<item xmlns:x="urn:other">`)
		} else {
			g.sb.WriteString("<item>")
		}
		for range g.r.IntN(8) {
			g.child(item, 2)
		}
		g.sb.WriteString("</item>")
	}
	g.sb.WriteString("</channel></rss>")
	return g.sb.String()
}

// TestFastRSSGenerated runs the differential check on generated
// documents, and requires most of them to be accepted (the generator aims
// inside the subset).
func TestFastRSSGenerated(t *testing.T) {
	g := &frGen{r: rand.New(rand.NewPCG(14, 2026))}
	n := 3000
	if testing.Short() {
		n = 300
	}
	accepted := 0
	for i := range n {
		doc := g.document()
		body, ok := frPrepare([]byte(doc))
		if !ok {
			continue
		}
		acc, diff := frDiff(body)
		if diff != "" {
			t.Fatalf("document %d:\n%s\n%s", i, doc, diff)
		}
		if acc {
			accepted++
		}
	}
	t.Logf("%d of %d generated documents accepted", accepted, n)
	if accepted < n/2 {
		t.Errorf("only %d of %d generated documents accepted", accepted, n)
	}
}
