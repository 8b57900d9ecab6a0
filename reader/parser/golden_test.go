package parser_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/reader/parser/parsertest"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// goldenView is what the golden files pin of a Parsed.
type goldenView struct {
	Title, Site string
	TTL         string
	UpdateHint  string
	Sleep       schedule.SleepPlan
	Truncated   bool
	Items       []storage.Item
}

// now is the fixed clock of these tests.
var now = time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)

func TestGoldenReadings(t *testing.T) {
	rule := &storage.ExtractRule{Field: "title", Regex: `temperature (-?[\d.,]+)`, Unit: "C"}
	for _, c := range []struct{ file, contentType string }{
		{"rss.xml", "application/rss+xml"},
		{"atom.xml", "application/atom+xml"},
		{"jsonfeed.json", "application/feed+json"},
	} {
		t.Run(c.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "readings", c.file))
			if err != nil {
				t.Fatal(err)
			}
			p, err := parser.Parse(body, c.contentType, parser.Options{
				Now: now, BaseURL: "https://example.org/feeds/lab.xml", Extract: rule,
			})
			if err != nil {
				t.Fatal(err)
			}
			parsertest.CheckText(t, p)
			got, err := json.MarshalIndent(goldenView{
				Title: p.Title, Site: p.Site, TTL: p.TTL.String(), UpdateHint: p.UpdateHint.String(),
				Sleep: p.Sleep, Truncated: p.Truncated, Items: p.Items,
			}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "readings", strings.TrimSuffix(c.file, filepath.Ext(c.file))+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the golden file; got:\n%s", c.file, got)
			}
		})
	}
}

// checkParsed is FuzzParse's property: no panic (the fuzzer reports it),
// valid UTF-8 without control characters, at most MaxItems items, unique
// IDs, errors wrapping a sentinel.
func checkParsed(t *testing.T, body []byte, p *parser.Parsed, err error, maxItems int) {
	if err != nil {
		if !errors.Is(err, parser.ErrNotFeed) && !errors.Is(err, parser.ErrMalformed) {
			t.Fatalf("error without a sentinel: %v", err)
		}
		if !utf8.ValidString(err.Error()) {
			t.Fatalf("error message not UTF-8: %q", err)
		}
		return
	}
	if len(p.Items) > maxItems {
		t.Fatalf("%d items > %d", len(p.Items), maxItems)
	}
	parsertest.CheckText(t, p)
	seen := map[string]bool{}
	for _, it := range p.Items {
		if it.ID == "" || seen[it.ID] {
			t.Fatalf("empty or duplicate id %q", it.ID)
		}
		seen[it.ID] = true
	}
}

func FuzzParse(f *testing.F) {
	for _, dir := range []string{"testdata/hostile", "testdata/readings", "testdata/unbalanced"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, file := range files {
			if strings.HasSuffix(file, ".golden.json") {
				continue
			}
			b, err := os.ReadFile(file)
			if err == nil {
				f.Add(b, "")
			}
		}
	}
	f.Add([]byte(`<rss><channel><item><title>x</title></item><item/><item/></channel></rss>`), "text/xml; charset=latin1")
	f.Add([]byte(`{"version":"https://jsonfeed.org/version/1","items":[{"id":1},{"id":"1"},{}]}`), "application/json")
	f.Add([]byte(`{"items":[{"id":"a"},{},{},{},{},{},{"id":"b","tags":["x",["y"]]}],"title":"t","items":[{"id":"c"}]}`), "application/feed+json")
	f.Add([]byte(`{"version":"https://jsonfeed.org/version/1.1","items":null,"title":"t"} {}`), "")
	f.Add([]byte("<rss><channel><title>\x00</title><item><title>caf\xe9\x01&#1;</title></item></channel></rss>"), "")
	f.Add([]byte(`<feed><entry><x:reading xmlns:x="https://slogfeed.org/ns/sensor/1" value="1"/></entry></feed>`), "")
	const maxItems = 5
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		p, err := parser.Parse(body, contentType, parser.Options{MaxItems: maxItems, Now: now, BaseURL: "https://example.org/f",
			Extract: &storage.ExtractRule{Regex: `(\d+)`}})
		checkParsed(t, body, p, err, maxItems)
	})
}

// FuzzParseSeen: a document that parses parses again, as the same feed,
// when every item the first parse hashed is reported seen (a poll of an
// unchanged document), and no item is both unchanged and parsed again.
func FuzzParseSeen(f *testing.F) {
	for _, dir := range []string{"testdata/readings", "testdata/unbalanced"} {
		for _, pattern := range []string{"*.xml", "*.json"} {
			files, _ := filepath.Glob(filepath.Join(dir, pattern))
			for _, file := range files {
				if b, err := os.ReadFile(file); err == nil {
					f.Add(b)
				}
			}
		}
	}
	f.Add([]byte(`<rss><channel><item><guid>a</guid><description>x<b>y</description></item><item><guid>b</guid></item></channel></rss>`))
	f.Add([]byte(`{"version":"https://jsonfeed.org/version/1.1","title":"t","items":[{"id":"a","title":"a"},{"id":"a","title":"b"},{"id":"c"}]}`))
	f.Add([]byte(`<feed><entry><id>a</id><summary>a<br>b</summary></entry></feed>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		first, err := parser.Parse(body, "", parser.Options{Now: now})
		if err != nil {
			return
		}
		seen := map[uint64]bool{}
		for _, h := range first.ItemHashes {
			seen[h] = true
		}
		p, err := parser.Parse(body, "", parser.Options{Now: now, Seen: func(h uint64) bool { return seen[h] }})
		if err != nil {
			t.Fatalf("the whole document parses, without its unchanged items it fails: %v", err)
		}
		if p.Title != first.Title || p.Unchanged+len(p.Items) > len(first.Items)+len(first.ItemHashes) {
			t.Fatalf("title %q, %d unchanged + %d items; first parse: title %q, %d items, %d hashes",
				p.Title, p.Unchanged, len(p.Items), first.Title, len(first.Items), len(first.ItemHashes))
		}
	})
}
