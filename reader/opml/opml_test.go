package opml

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func openFixture(t testing.TB, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func parseString(s string) ([]Outline, error) { return Parse(strings.NewReader(s)) }

func diffOutlines(t *testing.T, got, want []Outline) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	for i := range max(len(got), len(want)) {
		var g, w any = "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("outline %d:\n got %#v\nwant %#v", i, g, w)
		}
	}
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file    string
		want    []Outline
		skipped []string // URLs of the outlines reported as skipped
	}{
		{
			file: "miniflux.opml",
			want: []Outline{
				{URL: "https://github.com/miniflux/v2/releases.atom", Title: "Miniflux Releases", Site: "https://github.com/miniflux/v2/releases", Category: []string{"All"}},
				{URL: "https://tides.example.org/gauge/12/feed.xml?format=rss&window=24h", Title: "Harbour tide gauge 12", Site: "https://tides.example.org/gauge/12", Category: []string{"Sensors"}},
				{URL: "http://wx.example.net/roof/atom.xml", Title: "Roof weather station", Site: "http://wx.example.net/roof/", Category: []string{"Sensors"}},
				{URL: "https://farm.example.com/plots/b/moisture.json", Title: "Soil moisture — plot B", Site: "https://farm.example.com/plots/b", Category: []string{"Sensors"}},
				{URL: "https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/2.5_day.atom", Title: "USGS M2.5+ earthquakes, past day", Site: "https://earthquake.usgs.gov/earthquakes/", Category: []string{"Seismology & volcanoes"}},
			},
		},
		{
			file: "freshrss.opml",
			want: []Outline{
				{URL: "https://github.com/FreshRSS/FreshRSS/releases.atom", Title: "FreshRSS releases", Site: "https://github.com/FreshRSS/FreshRSS/", Category: []string{"Uncategorized"}},
				{URL: "https://air.example.org/stations/7/pm25.rss", Title: "Station 7 PM2.5", Site: "https://air.example.org/stations/7", Category: []string{"Air quality"}},
				{URL: "https://air.example.org/ozone.atom", Title: "Ozone <city> summary", Site: "https://air.example.org/", Category: []string{"Air quality"}},
				{URL: "https://pollen.example.com/today.html", Title: "Pollen counts (scraped)", Site: "https://pollen.example.com/today.html", Category: []string{"Air quality"}},
				{URL: "http://rivers.example.net/gauges/4711.xml", Title: "Gauge 4711 discharge", Category: []string{"Rivers"}},
			},
		},
		{
			file: "nested.opml",
			want: []Outline{
				{URL: "https://top.example.org/feed.xml", Title: "Top level feed"},
				{URL: "https://wx.example.org/roof/rain.xml", Title: "Rain gauge (roof)", Site: "https://wx.example.org/roof/", Category: []string{"Sensors", "Weather", "Roof"}},
				{URL: "https://wx.example.org/roof/wind.xml", Title: "Anemometer", Category: []string{"Sensors", "Weather", "Roof", "calibrated"}},
				{URL: "https://wx.example.org/garden/temp.xml", Title: "Garden thermometer", Category: []string{"Sensors", "Weather", "Outdoor", "Garden", "tagged"}},
				{URL: "https://unnamed.example.org/feed", Title: "Unnamed folder member", Category: []string{"Sensors"}},
				{URL: "https://parent.example.org/feed", Title: "Parent feed", Category: []string{"Sensors"}},
				{URL: "https://child.example.org/feed", Title: "Child of a feed", Category: []string{"Sensors"}},
				{URL: "https://untitled.example.org/feed"},
				{URL: "https://tags.example.org/feed", Title: "Tagged only", Category: []string{"alpha", "beta", "gamma"}},
			},
		},
		{
			file: "latin1.opml",
			want: []Outline{
				{URL: "https://meteo.example.fr/temp.rss", Title: "Température extérieure", Category: []string{"Météo"}},
			},
		},
		{
			file: "skipped.opml",
			want: []Outline{
				{URL: "https://good.example.org/feed.xml", Title: "Good", Duplicates: 2},
				{URL: "http://second.example.org/rss", Title: "Second good"},
			},
			skipped: []string{
				"javascript:alert(document.cookie)",
				"file:///etc/passwd",
				"feed://legacy.example.org/rss",
				"ftp://ftp.example.org/feed.xml",
				"/feed.xml",
				"http:///feed.xml",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Parse(openFixture(t, tt.file))
			diffOutlines(t, got, tt.want)
			if len(tt.skipped) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrSkipped) || !errors.Is(err, ErrUnsupportedURL) {
				t.Fatalf("Parse error = %v, want ErrSkipped and ErrUnsupportedURL", err)
			}
			var urls []string
			for _, oe := range Skipped(err) {
				urls = append(urls, oe.URL)
				if oe.Line == 0 {
					t.Errorf("skipped %q without a line number", oe.URL)
				}
			}
			if !slices.Equal(urls, tt.skipped) {
				t.Errorf("skipped = %q, want %q", urls, tt.skipped)
			}
		})
	}
}

func TestParseSkippedLine(t *testing.T) {
	_, err := parseString("<opml><body>\n\n<outline xmlUrl=\"gopher://x\"/>\n</body></opml>")
	s := Skipped(err)
	if len(s) != 1 || s[0].Line != 3 {
		t.Fatalf("Skipped = %+v, want one on line 3", s)
	}
	if msg := err.Error(); !strings.Contains(msg, "line 3") || !strings.Contains(msg, "gopher://x") {
		t.Errorf("error %q names neither line nor URL", msg)
	}
}

func TestParseSkippedCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("<opml><body>")
	for i := range maxReported + 50 {
		fmt.Fprintf(&b, `<outline xmlUrl="ftp://h/%d"/>`, i)
	}
	b.WriteString(`<outline xmlUrl="https://ok.example/"/></body></opml>`)
	got, err := parseString(b.String())
	if len(got) != 1 {
		t.Fatalf("got %d outlines, want 1", len(got))
	}
	if n := len(Skipped(err)); n != maxReported {
		t.Errorf("%d skipped outlines listed, want %d", n, maxReported)
	}
	if !errors.Is(err, ErrSkipped) || !strings.Contains(err.Error(), "50 more") {
		t.Errorf("error does not count the rest: %v", err)
	}
}

func TestParseFatal(t *testing.T) {
	tests := []struct {
		name string
		doc  func(t *testing.T) io.Reader
		want error
	}{
		{"billion laughs", fixture("billion-laughs.opml"), ErrMalformed},
		{"external entity", fixture("external-entity.opml"), ErrMalformed},
		{"bad charset", fixture("bad-charset.opml"), ErrCharset},
		{"not opml", fixture("not-opml.opml"), ErrNotOPML},
		{"empty", text(""), ErrNotOPML},
		{"only a comment", text("<!-- nothing -->"), ErrNotOPML},
		{"a text file", text("# Feeds\n\nSleeps by `<skipHours>`.\n"), ErrNotOPML},
		{"unclosed", text(`<opml><body><outline xmlUrl="https://a.example/">`), ErrMalformed},
		{"mismatched tags", text(`<opml><body></opml></body>`), ErrMalformed},
		{"two roots", text(`<opml/><opml/>`), ErrMalformed},
		{"undefined entity", text(`<opml><body><outline text="&nbsp;" xmlUrl="https://a.example/"/></body></opml>`), ErrMalformed},
		{"control character", text("<opml><body><outline text=\"\x01\" xmlUrl=\"https://a.example/\"/></body></opml>"), ErrMalformed},
		{"outlines too deep", text(nest("outline", MaxDepth+1)), ErrTooDeep},
		{"elements too deep", text("<opml><body>" + strings.Repeat("<x>", 1000) + strings.Repeat("</x>", 1000) + "</body></opml>"), ErrTooDeep},
		{"too many outlines", text(many(MaxOutlines + 1)), ErrTooManyOutlines},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.doc(t))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse error = %v, want %v", err, tt.want)
			}
			if strings.HasPrefix(tt.name, "a text file") && !strings.Contains(err.Error(), "not an XML document") {
				t.Errorf("Parse error = %v, want it to say it is not XML", err)
			}
			if errors.Is(err, ErrSkipped) {
				t.Errorf("fatal error %v matches ErrSkipped", err)
			}
			if got != nil {
				t.Errorf("Parse returned %d outlines with a fatal error", len(got))
			}
		})
	}
}

// TestParseAtLimits checks that documents just inside each limit are read.
func TestParseAtLimits(t *testing.T) {
	t.Run("depth", func(t *testing.T) {
		got, err := parseString(nest("outline", MaxDepth))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || len(got[0].Category) != MaxDepth-1 {
			t.Fatalf("got %+v, want one outline under %d folders", got, MaxDepth-1)
		}
		var buf bytes.Buffer
		if err := Write(&buf, "deep", got, time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(&buf)
		if err != nil {
			t.Fatal(err)
		}
		diffOutlines(t, again, got)
	})
	t.Run("outlines", func(t *testing.T) {
		if _, err := parseString(many(MaxOutlines)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("size", func(t *testing.T) {
		if _, err := Parse(sized(MaxSize)(t)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("category attribute capped", func(t *testing.T) {
		attr := strings.Repeat("/c", 2*MaxDepth)
		for i := range 2 * MaxDepth {
			attr += fmt.Sprintf(",t%d", i)
		}
		got, err := parseString(`<opml><body><outline text="f"><outline xmlUrl="https://a.example/" category="` + attr + `"/></outline></body></opml>`)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got[0].Category); n != MaxDepth-1 {
			t.Fatalf("Category has %d names, want %d", n, MaxDepth-1)
		}
	})
}

// TestParseReadsAtMostMaxSize feeds an endless document and checks that
// Parse fails with ErrTooLarge after reading at most MaxSize+1 bytes.
func TestParseReadsAtMostMaxSize(t *testing.T) {
	r := &endless{prefix: []byte("<opml><body>")}
	_, err := Parse(r)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Parse error = %v, want ErrTooLarge", err)
	}
	if r.n > MaxSize+1 {
		t.Errorf("read %d bytes, want at most %d", r.n, MaxSize+1)
	}
}

func TestParseReaderError(t *testing.T) {
	boom := errors.New("boom")
	_, err := Parse(io.MultiReader(strings.NewReader("<opml><body>"), errReader{boom}))
	if !errors.Is(err, boom) {
		t.Fatalf("Parse error = %v, want it to wrap the reader's error", err)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, file := range []string{"miniflux.opml", "freshrss.opml", "nested.opml", "latin1.opml", "skipped.opml"} {
		t.Run(file, func(t *testing.T) {
			first, _ := Parse(openFixture(t, file))
			if len(first) == 0 {
				t.Fatal("fixture has no outlines")
			}
			roundTrip(t, first)
		})
	}
}

// roundTrip checks Parse(Write(outlines)) == outlines in Write's order.
func roundTrip(t *testing.T, outlines []Outline) {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, "round trip", outlines, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	again, err := Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("Parse(Write(…)): %v\n%s", err, buf.Bytes())
	}
	want := slices.Clone(outlines)
	for i := range want { // what Parse says of the document it read, not written
		want[i].Ignored, want[i].Duplicates = nil, 0
	}
	slices.SortStableFunc(want, compareOutlines)
	if !reflect.DeepEqual(again, want) {
		diffOutlines(t, again, want)
		t.Logf("document:\n%s", buf.Bytes())
	}
}

func TestWriteGolden(t *testing.T) {
	outlines := []Outline{
		{URL: "https://wx.example.org/roof/wind.xml", Title: "Anemometer", Category: []string{"Sensors", "Weather", "Roof"}},
		{URL: "https://wx.example.org/roof/rain.xml", Title: "Rain gauge", Site: "https://wx.example.org/roof/", Category: []string{"Sensors", "Weather", "Roof"}},
		{URL: "https://top.example.org/feed.xml", Title: "Top level"},
		{URL: "https://wx.example.org/garden.xml", Title: "Garden", Category: []string{"Sensors", "Weather"}},
		{URL: "https://air.example.org/b.rss", Title: "Air", Category: []string{"Sensors", "Air"}},
		{URL: "https://air.example.org/a.rss", Title: "Air", Category: []string{"Sensors", "Air"}},
		{URL: "https://esc.example.org/feed?a=1&b=2", Title: "Quotes \"&\" <tags>\tand\nnewline", Site: "javascript:alert(1)", Category: []string{"", "  Odd / names, too  ", ""}},
		{URL: "https://bad.example.org/feed", Title: "Bad\x00chars\x1b here\uFFFE and \xff invalid UTF-8", Category: []string{"Control\x07s"}},
		{URL: "  https://untitled.example.org/feed  "},
	}
	var buf bytes.Buffer
	if err := Write(&buf, "slogfeed subscriptions", outlines, time.Date(2025, 3, 14, 15, 9, 26, 0, time.FixedZone("CET", 3600))); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "write.golden.opml")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("Write output differs from %s (go test -update rewrites it):\n%s", golden, buf.Bytes())
	}

	// The golden document reads back to the cleaned outlines.
	got, err := Parse(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	wantOutlines := []Outline{
		{URL: "https://untitled.example.org/feed"},
		{URL: "https://bad.example.org/feed", Title: "Badchars here and  invalid UTF-8", Category: []string{"Controls"}},
		{URL: "https://esc.example.org/feed?a=1&b=2", Title: "Quotes \"&\" <tags>\tand\nnewline", Category: []string{"Odd / names, too"}},
		{URL: "https://air.example.org/a.rss", Title: "Air", Category: []string{"Sensors", "Air"}},
		{URL: "https://air.example.org/b.rss", Title: "Air", Category: []string{"Sensors", "Air"}},
		{URL: "https://wx.example.org/garden.xml", Title: "Garden", Category: []string{"Sensors", "Weather"}},
		{URL: "https://wx.example.org/roof/wind.xml", Title: "Anemometer", Category: []string{"Sensors", "Weather", "Roof"}},
		{URL: "https://wx.example.org/roof/rain.xml", Title: "Rain gauge", Site: "https://wx.example.org/roof/", Category: []string{"Sensors", "Weather", "Roof"}},
		{URL: "https://top.example.org/feed.xml", Title: "Top level"},
	}
	slices.SortStableFunc(wantOutlines, compareOutlines)
	diffOutlines(t, got, wantOutlines)
}

func TestWriteEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, "", nil, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "<body></body>") || !strings.Contains(buf.String(), "<dateCreated>Thu, 01 Jan 1970 00:00:00 +0000</dateCreated>") {
		t.Errorf("unexpected document:\n%s", buf.String())
	}
	got, err := Parse(&buf)
	if err != nil || len(got) != 0 {
		t.Fatalf("Parse = %v, %v; want no outlines", got, err)
	}
}

func TestWriteRefuses(t *testing.T) {
	deep := make([]string, MaxDepth)
	for i := range deep {
		deep[i] = fmt.Sprint("c", i)
	}
	tests := []struct {
		name     string
		outlines []Outline
		want     error
	}{
		{"empty URL", []Outline{{Title: "x"}}, ErrUnsupportedURL},
		{"non-http URL", []Outline{{URL: "https://ok.example/"}, {URL: "ftp://x/"}}, ErrUnsupportedURL},
		{"category too deep", []Outline{{URL: "https://ok.example/", Category: deep}}, ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, "t", tt.outlines, time.Unix(0, 0))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Write error = %v, want %v", err, tt.want)
			}
			if len(Skipped(err)) != 1 {
				t.Errorf("Skipped(err) = %v, want one outline", Skipped(err))
			}
			if buf.Len() != 0 {
				t.Errorf("Write wrote %d bytes despite the error", buf.Len())
			}
		})
	}
}

func TestWriteWriterError(t *testing.T) {
	boom := errors.New("disk full")
	err := Write(errWriter{boom}, "t", []Outline{{URL: "https://a.example/"}}, time.Unix(0, 0))
	if !errors.Is(err, boom) {
		t.Fatalf("Write error = %v, want it to wrap the writer's error", err)
	}
}

func TestWriteNestedThreeDeep(t *testing.T) {
	outlines := []Outline{
		{URL: "https://c.example/", Title: "c", Category: []string{"A", "B", "C"}},
		{URL: "https://b.example/", Title: "b", Category: []string{"A", "B"}},
		{URL: "https://a.example/", Title: "a", Category: []string{"A"}},
		{URL: "https://d.example/", Title: "d", Category: []string{"A", "B", "D"}},
	}
	roundTrip(t, outlines)
	var buf bytes.Buffer
	if err := Write(&buf, "t", outlines, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	// Each folder appears once.
	for _, name := range []string{"A", "B", "C", "D"} {
		if n := strings.Count(buf.String(), `<outline text="`+name+`">`); n != 1 {
			t.Errorf("folder %s written %d times", name, n)
		}
	}
}

func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.opml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`<opml><body><outline text="a" category="/x/y,z"><outline xmlUrl="HTTP://A.example/f" htmlUrl="https://a.example/"/></outline></body></opml>`))
	f.Add([]byte(nest("outline", 4)))
	f.Fuzz(func(t *testing.T, doc []byte) {
		outlines, err := Parse(bytes.NewReader(doc))
		if err != nil && !errors.Is(err, ErrSkipped) && outlines != nil {
			t.Fatalf("fatal error %v with %d outlines", err, len(outlines))
		}
		for _, o := range outlines {
			if _, err := checkURL(o.URL); err != nil {
				t.Fatalf("returned URL %q: %v", o.URL, err)
			}
			if !strings.HasPrefix(strings.ToLower(o.URL), "http://") && !strings.HasPrefix(strings.ToLower(o.URL), "https://") {
				t.Fatalf("returned URL %q is not http(s)", o.URL)
			}
		}
		if len(outlines) > 0 {
			roundTrip(t, outlines)
		}
	})
}

// fixture returns a reader of a file in testdata.
func fixture(name string) func(t *testing.T) io.Reader {
	return func(t *testing.T) io.Reader { return openFixture(t, name) }
}

func text(s string) func(t *testing.T) io.Reader {
	return func(*testing.T) io.Reader { return strings.NewReader(s) }
}

// nest returns a document with depth nested outlines, the innermost a
// subscription.
func nest(elem string, depth int) string {
	var b strings.Builder
	b.WriteString("<opml><body>")
	for i := range depth - 1 {
		fmt.Fprintf(&b, `<%s text="f%d">`, elem, i)
	}
	fmt.Fprintf(&b, `<%s xmlUrl="https://deep.example/"/>`, elem)
	for range depth - 1 {
		fmt.Fprintf(&b, "</%s>", elem)
	}
	b.WriteString("</body></opml>")
	return b.String()
}

// many returns a document with n empty folder outlines.
func many(n int) string {
	return "<opml><body>" + strings.Repeat(`<outline text="f"/>`, n) + "</body></opml>"
}

// sized returns a well-formed document of exactly n bytes.
func sized(n int) func(t *testing.T) io.Reader {
	return func(*testing.T) io.Reader {
		head, tail := "<opml><body>", "</body></opml>"
		return io.MultiReader(
			strings.NewReader(head),
			io.LimitReader(spaces{}, int64(n-len(head)-len(tail))),
			strings.NewReader(tail),
		)
	}
}

// spaces is an endless reader of blanks.
type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// endless returns prefix and then blanks forever, counting what it returns.
type endless struct {
	prefix []byte
	n      int
}

func (e *endless) Read(p []byte) (int, error) {
	var n int
	if e.n < len(e.prefix) {
		n = copy(p, e.prefix[e.n:])
	} else {
		n, _ = spaces{}.Read(p)
	}
	e.n += n
	return n, nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

// benchmarkOutlines returns n subscriptions spread over nested folders.
func benchmarkOutlines(n int) []Outline {
	out := make([]Outline, n)
	for i := range out {
		out[i] = Outline{
			URL:      fmt.Sprintf("https://sensors%d.example.org/station/%d/feed.xml", i%50, i),
			Title:    fmt.Sprintf("Station %d", i),
			Site:     fmt.Sprintf("https://sensors%d.example.org/station/%d", i%50, i),
			Category: []string{fmt.Sprint("Region ", i%7), fmt.Sprint("Site ", i%13)},
		}
	}
	return out
}

func BenchmarkParse(b *testing.B) {
	var buf bytes.Buffer
	if err := Write(&buf, "bench", benchmarkOutlines(1000), time.Unix(0, 0)); err != nil {
		b.Fatal(err)
	}
	doc := buf.Bytes()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(doc)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWrite(b *testing.B) {
	outlines := benchmarkOutlines(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := Write(io.Discard, "bench", outlines, time.Unix(0, 0)); err != nil {
			b.Fatal(err)
		}
	}
}

// An outline refused for its URL is named with the URL's credentials
// masked, as every read of a feed's URL shows it.
func TestOutlineErrorMasksCredentials(t *testing.T) {
	tests := []struct{ url, want string }{
		{"ftp://bob:hunter2@files.example/feed.xml", `outline "ftp://bob:xxxxx@files.example/feed.xml"`},
		{"ftp://token123@files.example/feed.xml", `outline "ftp://xxxxx@files.example/feed.xml"`},
		{"ftp://files.example/feed.xml", `outline "ftp://files.example/feed.xml"`},
	}
	for _, tt := range tests {
		e := &OutlineError{Line: 3, URL: tt.url, Err: ErrUnsupportedURL}
		if got := e.Error(); !strings.Contains(got, tt.want) || strings.Contains(got, "hunter2") || strings.Contains(got, "token123") {
			t.Errorf("%q: %q, want it to hold %q", tt.url, got, tt.want)
		}
	}
}
