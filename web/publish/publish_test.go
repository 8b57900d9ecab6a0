package publish

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/storage"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var t0 = time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)

func fp(v float64) *float64 { return &v }

// fixtures are the feeds rendered to the golden files; testdata/README.md
// describes each.
func fixtures() map[string]Feed {
	return map[string]Feed{
		"sensor": {
			Title:   "lab-1",
			Link:    "https://slog.example.org/sensors/lab-1",
			SelfURL: "https://slog.example.org/sensors/lab-1.rss",
			ID:      "tag:slog.example.org,2026-11-21:sensor/lab-1",
			TTL:     5 * time.Minute,
			HubURL:  "https://hub.example.org/",
			Items: []storage.Item{
				{ID: "lab-1/2026-11-21T19:30:00Z/3", Published: t0.Add(2500 * time.Millisecond),
					Reading: &storage.Reading{Value: 21.3, Unit: "C", Sensor: "lab-1", Time: t0, Lat: fp(50.81), Lon: fp(4.38)}},
				{ID: "lab-1/2026-11-21T19:25:00Z/2", Published: t0.Add(-5*time.Minute + time.Second),
					Reading: &storage.Reading{Value: -0.25, Unit: "hPa", Sensor: "lab-1", Time: t0.Add(-5 * time.Minute)}},
				{ID: "lab-1/2026-11-21T19:20:00.123456789Z/1", Published: t0.Add(-10 * time.Minute),
					Title: "lab-1: 1e-07", Summary: "tiny", Reading: &storage.Reading{Value: 1e-7, Sensor: "lab-1", Time: t0.Add(-10*time.Minute + 123456789)}},
			},
		},
		"mixed": {
			Title:       "pipe\x00 <demo> \xff",
			Link:        "https://slog.example.org/pipes/demo",
			Description: "fused & filtered\x1b",
			ID:          "pipe demo",
			Updated:     t0.Add(time.Hour),
			TTL:         90 * time.Second,
			Items: []storage.Item{
				{ID: "a b%#c", Title: "HTML <b>bold</b> \ufffe", Link: "https://example.com/a?x=1&y=2",
					Summary: "<p>s &amp; t</p>", Content: "<p>c]]>d\x07</p>", Author: "Ann",
					Categories: []string{"x", "\x01", "y & z"}, Published: t0.Add(-time.Hour), Updated: t0.Add(-30 * time.Minute),
					Enclosures: []storage.Enclosure{{URL: "https://example.com/a.bin"}, {URL: "https://example.com/b.mp3", Type: "audio/mpeg", Length: 42}}},
				{Title: "no id", Link: "https://example.com/b", Published: t0.Add(-2 * time.Hour)},
				{ID: "fetched-only", Summary: "only a fetch time", Fetched: t0.Add(-3 * time.Hour)},
				{ID: "undated", Content: "<i>no date at all</i>"},
				{ID: "nan", Reading: &storage.Reading{Value: math.NaN(), Sensor: "s"}, Title: "NaN reading", Published: t0.Add(-4 * time.Hour)},
				{ID: "half-position", Reading: &storage.Reading{Value: 7, Unit: "F", Lat: fp(10)}, Published: t0.Add(-5 * time.Hour)},
				{ID: "bad-position", Reading: &storage.Reading{Value: 8, Lat: fp(91), Lon: fp(0)}, Published: t0.Add(-6 * time.Hour)},
			},
		},
		"empty": {
			SelfURL: "https://slog.example.org/sensors/idle.rss",
		},
		"plaintext": {
			Title:   "Lab <b>alerts</b> & co",
			SelfURL: "https://slog.example.org/feeds/alerts.rss",
			ID:      "tag:slog.example.org,2026-11-21:feeds/alerts",
			Items: []storage.Item{
				{ID: "issue-title", Title: "<script>alert(1)</script> <img src=x onerror=alert(2)> lab-1 hot",
					Summary: "<p>21.5 C</p>", Published: t0},
				{ID: "escaped-summary", Title: "&lt;script&gt;alert(3)&lt;/script&gt;lab-2 hot",
					Summary: "<p>&lt;img src=x onerror=alert(4)&gt; rising</p>", Content: "<p>body</p>", Published: t0.Add(-time.Minute)},
				{ID: "ordinary", Title: "temperature < 5 & rising", Author: `Ann "on" O'Neil`,
					Summary: "<p>temperature &lt; 5 &amp; rising, a&lt;b</p>", Content: "<p>body</p>",
					Categories: []string{"a<b", "1 <2"}, Published: t0.Add(-2 * time.Minute)},
				{ID: "author-and-reading", Author: `x" onmouseover="alert(5)`, Categories: []string{"<b>bold</b>"},
					Reading: &storage.Reading{Value: 4, Unit: "°C", Sensor: "<svg/onload=alert(6)>lab-3", Time: t0}, Published: t0.Add(-3 * time.Minute)},
			},
		},
	}
}

var formats = []struct {
	ext    string
	render func(Feed) ([]byte, error)
}{
	{"rss", RSS}, {"atom", Atom}, {"json", JSON},
}

func TestGolden(t *testing.T) {
	for name, f := range fixtures() {
		for _, ft := range formats {
			t.Run(name+"."+ft.ext, func(t *testing.T) {
				got, err := ft.render(f)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join("testdata", "golden", name+"."+ft.ext)
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from the golden file (run with -update after checking):\n%s", path, got)
				}
				again, _ := ft.render(f)
				if !bytes.Equal(got, again) {
					t.Error("rendering is not deterministic")
				}
			})
		}
	}
}

// TestRoundTrip re-parses every document with gofeed and with strict
// decoders and checks titles, ids, dates and readings.
func TestRoundTrip(t *testing.T) {
	for name, f := range fixtures() {
		p, err := prepare(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ft := range formats {
			t.Run(name+"."+ft.ext, func(t *testing.T) {
				doc, err := ft.render(f)
				if err != nil {
					t.Fatal(err)
				}
				checkDoc(t, ft.ext, doc, p)
			})
		}
	}
}

// checkDoc validates doc, of format ext, against the prepared feed p.
func checkDoc(t *testing.T, ext string, doc []byte, p *prepared) {
	t.Helper()
	var readings []*storage.Reading
	switch ext {
	case "rss", "atom":
		strictXML(t, doc)
		readings = xmlReadings(t, doc)
	case "json":
		readings = validJSONFeed(t, doc, p.self != "")
	}
	gf, err := gofeed.NewParser().Parse(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("gofeed: %v\n%s", err, doc)
	}
	if gf.Title != p.title {
		t.Errorf("title = %q, want %q", gf.Title, p.title)
	}
	if len(gf.Items) != len(p.entries) || len(readings) != len(p.entries) {
		t.Fatalf("%d items (%d reading slots), want %d", len(gf.Items), len(readings), len(p.entries))
	}
	if ext == "atom" && (gf.UpdatedParsed == nil || !gf.UpdatedParsed.Equal(p.updated)) {
		t.Errorf("feed updated = %v, want %v", gf.UpdatedParsed, p.updated)
	}
	for i, it := range gf.Items {
		e := &p.entries[i]
		wantID := e.id
		if ext == "atom" {
			wantID = e.iri
		}
		if it.GUID != wantID {
			t.Errorf("item %d: id = %q, want %q", i, it.GUID, wantID)
		}
		if it.Title != e.title {
			t.Errorf("item %d: title = %q, want %q", i, it.Title, e.title)
		}
		pub := e.published
		if ext == "rss" {
			pub = pub.Truncate(time.Second) // RFC 1123 has whole seconds
		}
		if it.PublishedParsed == nil || !it.PublishedParsed.Equal(pub) {
			t.Errorf("item %d: published = %v, want %v", i, it.PublishedParsed, pub)
		}
		if ext == "atom" && (it.UpdatedParsed == nil || !it.UpdatedParsed.Equal(e.updated)) {
			t.Errorf("item %d: updated = %v, want %v", i, it.UpdatedParsed, e.updated)
		}
		if ext != "json" {
			// gofeed keeps the element among the item's extensions.
			var fromExt *storage.Reading
			if rs := it.Extensions[feedext.Prefix][feedext.Element]; len(rs) > 0 {
				fromExt = decodeReading(t, func(k string) (string, bool) { v, ok := rs[0].Attrs[k]; return v, ok })
			}
			sameReading(t, i, fromExt, e.reading)
		}
		sameReading(t, i, readings[i], e.reading)
	}
}

func sameReading(t *testing.T, i int, got, want *storage.Reading) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Errorf("item %d: reading = %+v, want %+v", i, got, want)
		return
	}
	if got == nil {
		return
	}
	if got.Value != want.Value || got.Unit != want.Unit || got.Sensor != want.Sensor || !got.Time.Equal(want.Time) ||
		!sameCoord(got.Lat, want.Lat) || !sameCoord(got.Lon, want.Lon) {
		t.Errorf("item %d: reading = %+v, want %+v", i, *got, *want)
	}
}

func sameCoord(a, b *float64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// strictXML checks that doc is well-formed XML with every prefix declared.
func strictXML(t *testing.T, doc []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("strict XML: %v\n%s", err, doc)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Space != "" && !strings.Contains(se.Name.Space, "/") {
			t.Errorf("element %s:%s has an undeclared prefix", se.Name.Space, se.Name.Local)
		}
	}
}

// xmlReadings decodes the reading of every RSS item or Atom entry with a
// namespace-aware strict decoder: matched on feedext.Namespace, not on the
// prefix. A nil slot means the item has no reading.
func xmlReadings(t *testing.T, doc []byte) []*storage.Reading {
	t.Helper()
	type entry struct {
		Reading []struct {
			Attrs []xml.Attr `xml:",any,attr"`
		} `xml:"https://slogfeed.org/ns/sensor/1 reading"`
	}
	var v struct {
		Items   []entry `xml:"channel>item"`
		Entries []entry `xml:"http://www.w3.org/2005/Atom entry"`
	}
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	out := []*storage.Reading{}
	for _, e := range append(v.Items, v.Entries...) {
		if len(e.Reading) > 1 {
			t.Errorf("%d readings in one item", len(e.Reading))
		}
		if len(e.Reading) == 0 {
			out = append(out, nil)
			continue
		}
		attrs := e.Reading[0].Attrs
		out = append(out, decodeReading(t, func(k string) (string, bool) {
			for _, a := range attrs {
				if a.Name.Space == "" && a.Name.Local == k {
					return a.Value, true
				}
			}
			return "", false
		}))
	}
	return out
}

// decodeReading is a minimal reader of slogfeed's reading element.
func decodeReading(t *testing.T, attr func(string) (string, bool)) *storage.Reading {
	t.Helper()
	num := func(k string) *float64 {
		s, ok := attr(k)
		if !ok {
			return nil
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || strings.ContainsAny(s, "eE") {
			t.Errorf("%s=%q is not a decimal number", k, s)
		}
		return &v
	}
	v := num(feedext.AttrValue)
	if v == nil {
		t.Error("reading without value")
		return nil
	}
	r := &storage.Reading{Value: *v, Lat: num(feedext.AttrLat), Lon: num(feedext.AttrLon)}
	r.Unit, _ = attr(feedext.AttrUnit)
	r.Sensor, _ = attr(feedext.AttrSensor)
	if s, ok := attr(feedext.AttrTime); ok {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Errorf("time=%q: %v", s, err)
		}
		r.Time = tm
	}
	return r
}

// validJSONFeed checks the JSON Feed 1.1 requirements and returns the
// items' readings.
func validJSONFeed(t *testing.T, doc []byte, wantSelf bool) []*storage.Reading {
	t.Helper()
	var v struct {
		Version *string `json:"version"`
		Title   *string `json:"title"`
		FeedURL *string `json:"feed_url"`
		Items   *[]struct {
			ID          *string          `json:"id"`
			ContentHTML *string          `json:"content_html"`
			ContentText *string          `json:"content_text"`
			Published   *string          `json:"date_published"`
			Modified    *string          `json:"date_modified"`
			Reading     *json.RawMessage `json:"_slogfeed"`
		} `json:"items"`
	}
	d := json.NewDecoder(bytes.NewReader(doc))
	if err := d.Decode(&v); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if v.Version == nil || *v.Version != "https://jsonfeed.org/version/1.1" {
		t.Errorf("version = %v", v.Version)
	}
	if v.Title == nil || *v.Title == "" {
		t.Error("no title")
	}
	if wantSelf && (v.FeedURL == nil || *v.FeedURL == "") {
		t.Error("no feed_url")
	}
	if v.Items == nil {
		t.Fatal("no items array")
	}
	var out []*storage.Reading
	for i, it := range *v.Items {
		if it.ID == nil || *it.ID == "" {
			t.Errorf("item %d: no id", i)
		}
		if it.ContentHTML == nil && it.ContentText == nil {
			t.Errorf("item %d: neither content_html nor content_text", i)
		}
		for _, s := range []*string{it.Published, it.Modified} {
			if s != nil {
				if _, err := time.Parse(time.RFC3339, *s); err != nil {
					t.Errorf("item %d: %v", i, err)
				}
			}
		}
		if it.Reading == nil {
			out = append(out, nil)
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(*it.Reading, &m); err != nil {
			t.Fatalf("item %d: _slogfeed: %v", i, err)
		}
		out = append(out, decodeReading(t, func(k string) (string, bool) {
			raw, ok := m[k]
			if !ok {
				return "", false
			}
			var s string
			if json.Unmarshal(raw, &s) == nil {
				return s, true
			}
			return string(raw), true
		}))
	}
	return out
}

func TestFeedDefaults(t *testing.T) {
	f := fixtures()
	p, err := prepare(f["empty"])
	if err != nil {
		t.Fatal(err)
	}
	if p.id != "https://slog.example.org/sensors/idle.rss" || p.title != p.id || p.link != p.self || p.desc != p.title {
		t.Errorf("defaults: %+v", p)
	}
	if !p.updated.Equal(time.Unix(0, 0)) {
		t.Errorf("updated = %v, want the epoch", p.updated)
	}
	p, _ = prepare(f["mixed"])
	// "<demo>" is a tag in a plain-text field: removed.
	if p.title != "pipe" || p.desc != "fused & filtered" || p.id != "urn:slogfeed:pipe%20demo" {
		t.Errorf("cleaning: title %q desc %q id %q", p.title, p.desc, p.id)
	}
	if !p.updated.Equal(t0.Add(time.Hour)) || p.ttlMinutes != 2 {
		t.Errorf("updated %v ttl %d", p.updated, p.ttlMinutes)
	}
	if e := p.entries[0]; !e.updated.Equal(t0.Add(-30*time.Minute)) || !e.published.Equal(t0.Add(-time.Hour)) {
		t.Errorf("entry 0 dates %v %v", e.updated, e.published)
	}
	if e := p.entries[2]; !e.updated.Equal(t0.Add(-3 * time.Hour)) {
		t.Errorf("fetched-only entry updated = %v", e.updated)
	}
	if e := p.entries[3]; !e.updated.Equal(p.updated) {
		t.Errorf("undated entry updated = %v, want the feed's %v", e.updated, p.updated)
	}
	if e := p.entries[1]; !strings.HasPrefix(e.id, "sha256:") {
		t.Errorf("derived id %q", e.id)
	}
	if p.entries[4].reading != nil || p.entries[5].reading.Lat != nil || p.entries[6].reading.Lat != nil {
		t.Error("non-finite value or partial/invalid position published")
	}
	p, _ = prepare(f["sensor"])
	if !p.updated.Equal(t0.Add(2500 * time.Millisecond)) {
		t.Errorf("feed updated = %v, want the newest item's", p.updated)
	}
	if _, err := RSS(Feed{Title: "no identity"}); !errors.Is(err, ErrNoID) {
		t.Errorf("err = %v, want ErrNoID", err)
	}
}

func TestEntryID(t *testing.T) {
	tests := []struct{ feed, item, want string }{
		{"tag:ex.org,2026-11-21:sensor/lab-1", "lab-1/2026-11-21T19:30:00Z/3", "tag:ex.org,2026-11-21:sensor/lab-1:lab-1/2026-11-21T19:30:00Z/3"},
		{"urn:slogfeed:pipe", "a b", "urn:slogfeed:pipe:a%20b"},
		{"https://ex.org/f.atom", "x#y%", "https://ex.org/f.atom#x%23y%25"},
		{"https://ex.org/f.atom#frag", "é", "https://ex.org/f.atom#frag:%C3%A9"},
	}
	for _, tt := range tests {
		t.Run(tt.item, func(t *testing.T) {
			if got := EntryID(tt.feed, tt.item); got != tt.want {
				t.Errorf("EntryID(%q, %q) = %q, want %q", tt.feed, tt.item, got, tt.want)
			}
		})
	}
	if EntryID("urn:x", "a b") == EntryID("urn:x", "a%20b") {
		t.Error("distinct item ids collide")
	}
}

func TestReadingText(t *testing.T) {
	tests := []struct {
		r            storage.Reading
		title, summa string
	}{
		{storage.Reading{Value: 21.3, Unit: "C", Sensor: "lab-1", Time: t0}, "lab-1: 21.3 °C", "21.3 C at 2026-11-21 19:30:00 UTC"},
		{storage.Reading{Value: 1013, Unit: "hPa", Sensor: "p", Time: t0, Lat: fp(50.81), Lon: fp(-4.5)}, "p: 1013 hPa", "1013 hPa at 2026-11-21 19:30:00 UTC, position 50.81, -4.5"},
		{storage.Reading{Value: -0.5}, "-0.5", "-0.5"},
		{storage.Reading{Value: 1e21, Unit: "F"}, "1000000000000000000000 °F", "1000000000000000000000 F"},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			if got := ReadingTitle(tt.r); got != tt.title {
				t.Errorf("title %q, want %q", got, tt.title)
			}
			if got := ReadingSummary(tt.r); got != tt.summa {
				t.Errorf("summary %q, want %q", got, tt.summa)
			}
		})
	}
}

func TestClean(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"tab\tnl\ncr\r", "tab\tnl\ncr\r"},
		{"nul\x00bel\x07esc\x1b", "nulbelesc"},
		{"bad\xffutf8\xc3", "badutf8"},
		{"nonchar\ufffe\uffff", "nonchar"},
		{"ok\ufffd\U0001F600", "ok\ufffd\U0001F600"},
	}
	for _, tt := range tests {
		if got := Clean(tt.in); got != tt.want {
			t.Errorf("Clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzDocuments feeds hostile strings and numbers into every field a
// publisher copies from input and checks that all three documents stay
// valid.
func FuzzDocuments(f *testing.F) {
	f.Add("title", "id", "<p>summary</p>", "C", "lab-1", 21.3, int64(0))
	f.Add("\x00\xff]]>", "a b#%", "\x1b<![CDATA[", "\ufffe", "", math.Inf(1), int64(-1))
	f.Fuzz(func(t *testing.T, title, id, summary, unit, sensor string, v float64, sec int64) {
		ts := time.Unix(sec%(1<<34), 0)
		feed := Feed{Title: title, ID: id, SelfURL: "https://ex.org/f", Items: []storage.Item{
			{ID: id, Title: title, Summary: summary, Content: summary, Published: ts, Link: id,
				Categories: []string{title}, Reading: &storage.Reading{Value: v, Unit: unit, Sensor: sensor, Time: ts}},
		}}
		p, err := prepare(feed)
		if err != nil {
			t.Fatal(err)
		}
		for _, ft := range formats {
			doc, err := ft.render(feed)
			if err != nil {
				t.Fatalf("%s: %v", ft.ext, err)
			}
			if ft.ext == "json" {
				if !json.Valid(doc) {
					t.Fatalf("invalid JSON:\n%s", doc)
				}
				validJSONFeed(t, doc, true)
				continue
			}
			strictXML(t, doc)
			rs := xmlReadings(t, doc)
			if len(rs) != 1 {
				t.Fatalf("%s: %d readings", ft.ext, len(rs))
			}
			sameReading(t, 0, rs[0], p.entries[0].reading)
		}
	})
}
