package parser

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/storage"
)

// testNow is the fixed clock of the parse tests.
var testNow = time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)

// The golden files pin the details; these are the properties that matter,
// spelt out.
func TestReadings(t *testing.T) {
	parse := func(file string) *Parsed {
		t.Helper()
		body, err := os.ReadFile(filepath.Join("testdata", "readings", file))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse(body, "", Options{Now: testNow, BaseURL: "https://example.org/feeds/lab.xml",
			Extract: &storage.ExtractRule{Regex: `temperature (-?[\d.,]+)`, Unit: "C"}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	byID := func(p *Parsed) map[string]storage.Item {
		m := map[string]storage.Item{}
		for _, it := range p.Items {
			m[it.ID] = it
		}
		return m
	}
	f64 := func(v float64) *float64 { return &v }
	type want struct {
		value    float64
		unit     string
		sensor   string
		time     time.Time
		lat, lon *float64
	}
	check := func(t *testing.T, it storage.Item, w *want) {
		t.Helper()
		r := it.Reading
		if w == nil {
			if r != nil {
				t.Errorf("%s: reading %+v, want none", it.ID, *r)
			}
			return
		}
		if r == nil {
			t.Fatalf("%s: no reading, want %+v", it.ID, *w)
		}
		if r.Value != w.value || r.Unit != w.unit || r.Sensor != w.sensor || !r.Time.Equal(w.time) {
			t.Errorf("%s: reading %+v, want %+v", it.ID, *r, *w)
		}
		if (r.Lat == nil) != (w.lat == nil) || r.Lat != nil && (*r.Lat != *w.lat || *r.Lon != *w.lon) {
			t.Errorf("%s: position %v,%v want %v,%v", it.ID, r.Lat, r.Lon, w.lat, w.lon)
		}
	}

	rss := byID(parse("rss.xml"))
	check(t, rss["lab-1/2026-11-21T19:30:00Z"], &want{21.3, "C", "lab-1", time.Date(2026, 11, 21, 19, 29, 58, 0, time.UTC), f64(50.81), f64(4.38)})
	check(t, rss["roof-1/2026-11-21T19:25:00Z"], &want{-45, "%", "", time.Date(2026, 11, 21, 19, 25, 0, 0, time.UTC), f64(50.8), f64(4.4)})
	check(t, rss["bad-1"], nil)
	check(t, rss["infinite-1"], nil)
	cellar := hashID("https://example.org/cellar|Cellar temperature 12,5 °C|Sat, 21 Nov 2026 19:15:00 GMT")
	check(t, rss[cellar], &want{12.5, "C", "", time.Date(2026, 11, 21, 19, 15, 0, 0, time.UTC), f64(50.1), f64(4.1)})

	atom := byID(parse("atom.xml"))
	check(t, atom["urn:station:nord:42"], &want{7.2, "m/s", "nord-wind", time.Date(2026, 11, 21, 19, 29, 0, 0, time.UTC), nil, nil})
	check(t, atom["urn:station:nord:41"], &want{1013.25, "hPa", "nord-baro", time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC), nil, nil})

	js := byID(parse("jsonfeed.json"))
	check(t, js["gh-3"], &want{612, "ppm", "gh-co2", time.Date(2026, 11, 21, 19, 29, 30, 0, time.UTC), f64(50.81), f64(4.38)})
	check(t, js["gh-2"], &want{33.5, "%", "", time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC), nil, nil})
	check(t, js["gh-1"], nil)
	check(t, js["17"], nil)
}

func TestParseFeedFields(t *testing.T) {
	body, _ := os.ReadFile("testdata/readings/rss.xml")
	p, err := Parse(body, "", Options{Now: testNow, BaseURL: "https://example.org/feeds/lab.xml"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "Lab & roof sensors" || p.Site != "https://example.org/site/" {
		t.Errorf("title %q site %q", p.Title, p.Site)
	}
	if p.TTL != 15*time.Minute || p.UpdateHint != 15*time.Minute {
		t.Errorf("ttl %v update hint %v", p.TTL, p.UpdateHint)
	}
	if p.Sleep.SkipHours != 0b11 || p.Sleep.SkipDays != 1<<time.Sunday {
		t.Errorf("sleep %+v", p.Sleep)
	}
	lab := p.Items[0]
	if lab.Link != "https://example.org/readings/1" {
		t.Errorf("link %q", lab.Link)
	}
	if strings.Contains(lab.Summary, "script") || !strings.Contains(lab.Summary, `href="https://example.org/about"`) ||
		!strings.Contains(lab.Summary, `rel="nofollow noopener"`) {
		t.Errorf("summary %q", lab.Summary)
	}
	if strings.Join(lab.Categories, ",") != "temperature,lab" {
		t.Errorf("categories %q", lab.Categories)
	}
	roof := p.Items[1]
	if len(roof.Enclosures) != 1 || roof.Enclosures[0] != (storage.Enclosure{URL: "https://example.org/img/roof.png", Type: "image/png", Length: 1234}) {
		t.Errorf("enclosures %+v", roof.Enclosures)
	}
}

func TestParseTTLAndUpdateHint(t *testing.T) {
	for _, c := range []struct {
		ttl, period, freq string
		wantTTL, wantHint time.Duration
	}{
		{"60", "daily", "2", time.Hour, 12 * time.Hour},
		{"0", "weekly", "", 0, 7 * 24 * time.Hour},
		{"-5", "", "6", 0, 4 * time.Hour},
		{"99999999", "fortnightly", "1", fetcher.MaxCacheFor, 0},
		{"soon", "hourly", "0", 0, 0},
		{"", "hourly", "999999999", 0, time.Second},
	} {
		var b strings.Builder
		b.WriteString(`<rss xmlns:sy="http://purl.org/rss/1.0/modules/syndication/"><channel>`)
		if c.ttl != "" {
			fmt.Fprintf(&b, "<ttl>%s</ttl>", c.ttl)
		}
		if c.period != "" {
			fmt.Fprintf(&b, "<sy:updatePeriod>%s</sy:updatePeriod>", c.period)
		}
		if c.freq != "" {
			fmt.Fprintf(&b, "<sy:updateFrequency>%s</sy:updateFrequency>", c.freq)
		}
		b.WriteString(`</channel></rss>`)
		p, err := Parse([]byte(b.String()), "", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if p.TTL != c.wantTTL || p.UpdateHint != c.wantHint {
			t.Errorf("%+v: ttl %v hint %v", c, p.TTL, p.UpdateHint)
		}
	}
}

func TestParseBadSkip(t *testing.T) {
	p, err := Parse([]byte(`<rss><channel><skipHours><hour>25</hour></skipHours><skipDays><day>Caturday</day></skipDays></channel></rss>`), "", Options{})
	if err != nil || !p.Sleep.IsZero() {
		t.Errorf("%v %+v", err, p)
	}
}

// Feeds with more than MaxItems items are cut before parsing, in every
// format, and the cut document still parses.
func TestParseTruncation(t *testing.T) {
	var rdf, atom, js bytes.Buffer
	rdf.WriteString(`<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"><channel><title>r</title></channel>`)
	atom.WriteString(`<feed xmlns="http://www.w3.org/2005/Atom"><title>a</title>`)
	js.WriteString(`{"version":"https://jsonfeed.org/version/1.1","title":"j","items":[`)
	for i := range 10 {
		fmt.Fprintf(&rdf, `<item rdf:about="urn:%d"><title>%d</title><link>https://x.org/%d</link></item>`, i, i, i)
		fmt.Fprintf(&atom, `<entry><id>urn:%d</id><title>%d</title></entry>`, i, i)
		if i > 0 {
			js.WriteString(",")
		}
		fmt.Fprintf(&js, `{"id":"urn:%d","title":"%d","_slogfeed":{"value":%d}}`, i, i, i)
	}
	rdf.WriteString(`</rdf:RDF>`)
	atom.WriteString(`</feed>`)
	js.WriteString(`]}`)
	var items10 bytes.Buffer
	items10.WriteString(`<rss version="2.0"><channel><title>many</title>`)
	for i := range 10 {
		fmt.Fprintf(&items10, "<item><guid>i%d</guid></item>", i)
	}
	items10.WriteString(`</channel></rss>`)
	for name, body := range map[string][]byte{"rss": items10.Bytes(), "rdf": rdf.Bytes(), "atom": atom.Bytes(), "json": js.Bytes()} {
		for _, max := range []int{1, 3, 10, 11} {
			orig := bytes.Clone(body)
			p, err := Parse(body, "", Options{MaxItems: max})
			if err != nil {
				t.Fatalf("%s max %d: %v", name, max, err)
			}
			want := min(max, 10)
			if len(p.Items) != want || p.Truncated != (max < 10) {
				t.Errorf("%s max %d: %d items truncated=%v", name, max, len(p.Items), p.Truncated)
			}
			if name == "json" && (p.Items[want-1].Reading == nil || p.Items[want-1].Reading.Value != float64(want-1)) {
				t.Errorf("json max %d: readings out of step: %+v", max, p.Items[want-1].Reading)
			}
			if !bytes.Equal(body, orig) {
				t.Errorf("%s: Parse changed its input", name)
			}
		}
	}
}

// Items beyond the node budget are cut like items beyond MaxItems.
func TestParseNodeBudget(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`<rss xmlns:x="urn:x"><channel><title>heavy</title>`)
	for i := range 3000 {
		fmt.Fprintf(&b, "<item><guid>%d</guid>%s</item>", i, strings.Repeat("<x:a/>", 48))
	}
	b.WriteString(`</channel></rss>`)
	p, err := Parse(b.Bytes(), "", Options{MaxItems: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Truncated || len(p.Items) >= 3000 || len(p.Items) < MaxNodes/60 || p.Title != "heavy" {
		t.Errorf("truncated=%v, %d items", p.Truncated, len(p.Items))
	}
}

func TestLongestTag(t *testing.T) {
	for in, want := range map[string]int{
		`<a>text</a>`:                      4,
		`<a href="x>y">t</a>`:              14,
		`<!-- <aaaaaaaaaaaaaaaaa> --><b/>`: 4,
		`<![CDATA[<aaaaaaaaaaaa>]]><b/>`:   4,
		`<?xml version="1.0"?><b/>`:        4,
		`<a x='"'>`:                        9,
		`<unterminated attr="`:             20,
	} {
		if got := longestTag([]byte(in)); got != want {
			t.Errorf("%s: %d, want %d", in, got, want)
		}
	}
}

func TestParseCharsets(t *testing.T) {
	const want = "Température à Liège"
	latin1 := []byte("<rss><channel><item><title>Temp\xe9rature \xe0 Li\xe8ge</title></item></channel></rss>")
	utf8Body := []byte("<rss><channel><item><title>" + want + "</title></item></channel></rss>")
	decl := func(enc string, b []byte) []byte {
		return append([]byte(`<?xml version="1.0" encoding="`+enc+`"?>`), b...)
	}
	utf16 := func(b []byte) []byte {
		out := []byte{0xff, 0xfe}
		for _, r := range string(b) {
			out = append(out, byte(r), byte(r>>8))
		}
		return out
	}
	for _, c := range []struct {
		name, contentType string
		body              []byte
	}{
		{"latin-1 declared", "", decl("ISO-8859-1", latin1)},
		{"windows-1252 declared, single quotes", "", []byte(`<?xml version='1.0' encoding='windows-1252'?>` + string(latin1))},
		{"latin-1 from Content-Type", "text/xml; charset=ISO-8859-1", latin1},
		{"latin-1 undeclared", "", latin1},
		{"latin-1 declared UTF-8", "", decl("UTF-8", latin1)},
		{"UTF-8 declared latin-1", "", decl("ISO-8859-1", utf8Body)},
		{"UTF-8 with Content-Type latin-1", "application/rss+xml; charset=latin1", utf8Body},
		{"UTF-8 with BOM", "", append([]byte("\xef\xbb\xbf"), utf8Body...)},
		{"UTF-16 with BOM", "", utf16(decl("UTF-16", utf8Body))},
		{"UTF-16 declared, UTF-8 sent", "", decl("UTF-16", utf8Body)},
		{"unknown charset", "", decl("x-klingon", utf8Body)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse(c.body, c.contentType, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != 1 || p.Items[0].Title != want {
				t.Errorf("items %+v", p.Items)
			}
		})
	}
	// UTF-16 that is pure ASCII once converted.
	ascii := utf16(decl("UTF-16", []byte("<rss><channel><item><title>plain</title></item></channel></rss>")))
	if p, err := Parse(ascii, "", Options{}); err != nil || p.Items[0].Title != "plain" {
		t.Errorf("UTF-16 ASCII: %v %+v", err, p)
	}
	// A real legacy charset that is not Latin.
	cyr := []byte(`<?xml version="1.0" encoding="windows-1251"?><rss><channel><item><title>` + "\xcf\xf0\xe8\xe2\xe5\xf2" + `</title></item></channel></rss>`)
	p, err := Parse(cyr, "", Options{})
	if err != nil || p.Items[0].Title != "Привет" {
		t.Errorf("windows-1251: %v %+v", err, p)
	}
}

func TestParseDates(t *testing.T) {
	at := func(s string) *Parsed {
		body := `<rss><channel><item><guid>x</guid><pubDate>` + s + `</pubDate></item></channel></rss>`
		p, err := Parse([]byte(body), "", Options{Now: testNow})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for s, want := range map[string]time.Time{
		"Sat, 21 Nov 2026 19:30:00 GMT":   time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC),
		"2026-11-21T20:59:00Z":            time.Date(2026, 11, 21, 20, 59, 0, 0, time.UTC), // within the hour of slack
		"2026-11-21T21:01:00Z":            {},                                              // too far ahead
		"1989-12-31T23:59:59Z":            {},
		"Sat, 21 Nov 2026 21:30:00 +0200": time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC),
		"yesterday":                       {},
	} {
		if got := at(s).Items[0].Published; !got.Equal(want) {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
	// Without Now only the lower bound applies.
	p, _ := Parse([]byte(`<rss><channel><item><pubDate>2100-01-01T00:00:00Z</pubDate></item></channel></rss>`), "", Options{})
	if p.Items[0].Published.IsZero() {
		t.Errorf("future date dropped without Now")
	}
}

func TestItemIDs(t *testing.T) {
	body := `<rss><channel>
<item><guid>same</guid><title>first</title></item>
<item><guid>same</guid><title>duplicate</title></item>
<item><guid>` + strings.Repeat("g", 300) + `</guid></item>
<item><link>https://x.org/a</link><title>A</title><pubDate>Sat, 21 Nov 2026 19:30:00 GMT</pubDate></item>
<item><description>only a description</description></item>
</channel></rss>`
	p, err := Parse([]byte(body), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 4 || p.Items[0].ID != "same" || p.Items[0].Title != "first" {
		t.Fatalf("items %+v", p.Items)
	}
	if id := p.Items[1].ID; len(id) != 32 || id != hashID(strings.Repeat("g", 300)) {
		t.Errorf("long guid id %q", id)
	}
	if id := p.Items[2].ID; id != hashID("https://x.org/a|A|Sat, 21 Nov 2026 19:30:00 GMT") {
		t.Errorf("hashed id %q", id)
	}
	if p.Items[3].ID == "" || p.Items[3].ID == hashID("||") {
		t.Errorf("description-only item id %q", p.Items[3].ID)
	}
	// IDs are stable: the same feed parses to the same IDs.
	q, _ := Parse([]byte(body), "", Options{Now: testNow})
	for i := range p.Items {
		if p.Items[i].ID != q.Items[i].ID {
			t.Errorf("item %d: id changed %q → %q", i, p.Items[i].ID, q.Items[i].ID)
		}
	}
}

func TestParseTitleLimit(t *testing.T) {
	long := strings.Repeat("é", 5000)
	p, err := Parse([]byte(`<rss><channel><item><title>`+long+`</title></item></channel></rss>`), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(p.Items[0].Title); n != MaxTitleRunes {
		t.Errorf("title of %d runes", n)
	}
}

func TestParseExtractErr(t *testing.T) {
	p, err := Parse([]byte(`<rss><channel><item><title>t 1</title></item></channel></rss>`), "",
		Options{Extract: &storage.ExtractRule{Regex: `(unclosed`}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(p.ExtractErr, ErrExtractRule) || len(p.Items) != 1 || p.Items[0].Reading != nil {
		t.Errorf("%v %+v", p.ExtractErr, p.Items)
	}
}

func BenchmarkParse(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`<?xml version="1.0" encoding="UTF-8"?><rss version="2.0" xmlns:sf="https://slogfeed.org/ns/sensor/1"><channel><title>Bench</title><link>https://example.org/</link>`)
	for i := range 20 {
		fmt.Fprintf(&buf, `<item><guid>lab-1/%d</guid><title>Lab temperature %d.5 °C</title><link>https://example.org/r/%d</link>`+
			`<description>&lt;p&gt;Measured &lt;b&gt;%d.5&lt;/b&gt; °C at the &lt;a href="/lab"&gt;lab&lt;/a&gt;&lt;/p&gt;</description>`+
			`<pubDate>Sat, 21 Nov 2026 19:%02d:00 GMT</pubDate><category>lab</category>`+
			`<sf:reading value="%d.5" unit="C" sensor="lab-1" time="2026-11-21T19:%02d:00Z"/></item>`, i, i, i, i, i, i, i)
	}
	buf.WriteString(`</channel></rss>`)
	body := buf.Bytes()
	opt := Options{Now: testNow, BaseURL: "https://example.org/feed.xml"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := Parse(body, "application/rss+xml", opt)
		if err != nil || len(p.Items) != 20 {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseJSONSteady: a 20-item JSON Feed of typed readings parsed
// whole, then as a steady-state poll parses it (the 19 items the last
// poll stored cut by Options.Seen, one new).
func BenchmarkParseJSONSteady(b *testing.B) {
	doc := func(from int) []byte {
		var buf bytes.Buffer
		buf.WriteString(`{"version":"https://jsonfeed.org/version/1.1","title":"Bench","home_page_url":"https://example.org/","items":[`)
		for i := from + 19; i >= from; i-- {
			if i != from+19 {
				buf.WriteString(",")
			}
			fmt.Fprintf(&buf, `{"id":"lab-1/%d","title":"Lab temperature %d.5 °C","url":"https://example.org/r/%d",`+
				`"content_html":"<p>Measured <b>%d.5</b> °C at the <a href=\"/lab\">lab</a></p>","date_published":"2026-11-21T19:%02d:00Z","tags":["lab"],`+
				`"_slogfeed":{"value":%d.5,"unit":"C","sensor":"lab-1","time":"2026-11-21T19:%02d:00Z"}}`, i, i, i, i, i%60, i, i%60)
		}
		buf.WriteString(`]}`)
		return buf.Bytes()
	}
	opt := Options{Now: testNow, BaseURL: "https://example.org/feed.json"}
	first, err := Parse(doc(0), "application/feed+json", opt)
	if err != nil || len(first.Items) != 20 {
		b.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, h := range first.ItemHashes {
		seen[h] = true
	}
	next := doc(1)
	for _, tc := range []struct {
		name  string
		seen  func(uint64) bool
		items int
	}{
		{"whole", nil, 20},
		{"one new", func(h uint64) bool { return seen[h] }, 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o := opt
			o.Seen = tc.seen
			b.SetBytes(int64(len(next)))
			b.ReportAllocs()
			for b.Loop() {
				p, err := Parse(next, "application/feed+json", o)
				if err != nil || len(p.Items) != tc.items {
					b.Fatalf("%v: %d items", err, len(p.Items))
				}
			}
		})
	}
}
