package parser

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// readUnbalanced reads testdata/unbalanced/name.
func readUnbalanced(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "unbalanced", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An element left open inside an item is closed by an enclosing end tag:
// each item's range still ends with the item's own end tag, so that
// cutting the unchanged items leaves the rest of the document (the root's
// end tag) whole, poll after poll.
func TestParseSeenUnclosedElement(t *testing.T) {
	tests := []struct {
		file, endTag string
		items        []string
	}{
		{"atom-unclosed.xml", "</entry>", []string{"urn:example:greenhouse:2", "urn:example:greenhouse:1"}},
		{"rss-unclosed.xml", "</item>", []string{"g-2", "g-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			doc := readUnbalanced(t, tc.file)
			sc, err := scanXML(doc, DefaultMaxItems)
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.items) != len(tc.items) {
				t.Fatalf("%d item ranges, want %d", len(sc.items), len(tc.items))
			}
			for i, sp := range sc.items {
				if !bytes.HasSuffix(doc[sp.start:sp.end], []byte(tc.endTag)) {
					t.Errorf("item %d's range ends %q, want it to end with %s", i, clipEnd(doc[sp.start:sp.end]), tc.endTag)
				}
			}
			first, err := Parse(doc, "", Options{Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, it := range first.Items {
				ids = append(ids, it.ID)
			}
			if !slices.Equal(ids, tc.items) {
				t.Fatalf("first parse: items %q, want %q", ids, tc.items)
			}
			seen := func(h uint64) bool { return slices.Contains(first.ItemHashes, h) }
			for poll := 2; poll <= 3; poll++ {
				p, err := Parse(doc, "", Options{Now: testNow, Seen: seen})
				if err != nil {
					t.Fatalf("poll %d: %v", poll, err)
				}
				if len(p.Items) != 0 || p.Unchanged != len(tc.items) || p.Title != "Greenhouse" {
					t.Fatalf("poll %d: %d items, %d unchanged, title %q; want 0, %d, Greenhouse", poll, len(p.Items), p.Unchanged, p.Title, len(tc.items))
				}
			}
		})
	}
}

// When the document without its unchanged items does not read, the whole
// document is read: a seen item can never make a poll fail.
func TestParseSeenFallsBackToWholeDocument(t *testing.T) {
	doc := readUnbalanced(t, "atom-unclosed.xml")
	first, err := Parse(doc, "", Options{Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	// Ranges that break the document when cut (the last one runs on
	// over the root's end tag), as a scan that lost count would find.
	sc, err := scanXML(doc, DefaultMaxItems)
	if err != nil {
		t.Fatal(err)
	}
	sc.items[len(sc.items)-1].end = len(bytes.TrimRight(doc, "\n"))
	hashes := itemHashes(doc, sc.items, Options{})
	all := func(uint64) bool { return true }
	cut, n := dropSeen(doc, sc.items, hashes, all)
	if _, _, _, err := parseTree(sc.root, cut); err == nil || n != len(sc.items) {
		t.Fatalf("a document cut past the root's end tag reads (err %v, %d cut)", err, n)
	}
	tr, err := parseSeen(sc.root, doc, sc.items, hashes, all)
	if err != nil {
		t.Fatalf("parseSeen: %v", err)
	}
	if tr.unchanged != 0 || tr.seen != nil || !bytes.Equal(tr.body, doc) || len(tr.atom.Entries) != 2 {
		t.Fatalf("parseSeen: %d unchanged, seen set %v, whole body %v, %d entries; want the whole document read",
			tr.unchanged, tr.seen != nil, bytes.Equal(tr.body, doc), len(tr.atom.Entries))
	}
	// Parse itself, every hash seen: the document reads, all unchanged.
	p, err := Parse(doc, "", Options{Now: testNow, Seen: func(h uint64) bool { return slices.Contains(first.ItemHashes, h) }})
	if err != nil || p.Unchanged != 2 {
		t.Fatalf("seen parse: %v, want every item unchanged", err)
	}
}

// clipEnd returns the last 40 bytes of b, for a message.
func clipEnd(b []byte) []byte { return b[max(0, len(b)-40):] }

// Every complete item element the scan finds is returned, or the feed is
// warned and no hash is reported (no item may pass for stored unread).
func TestParseReturnsEveryItem(t *testing.T) {
	foreign := []byte(`<rss version="2.0"><channel><title>t</title>` +
		`<item xmlns="urn:example:other"><guid>x-2</guid></item><item><guid>x-1</guid></item></channel></rss>`)
	tests := []struct {
		name    string
		doc     []byte
		items   []string
		warning string // "" for none
	}{
		{"a stray end tag in an item", readUnbalanced(t, "rss-stray-end.xml"), []string{"s-4", "s-3", "s-2", "s-1"}, ""},
		{"a stray end tag before the items", []byte(`<rss version="2.0"><channel><title>t</i></title>` +
			`<item><guid>a</guid></item><item><guid>b</guid></item></channel></rss>`), []string{"a", "b"}, ""},
		{"an item in another namespace", foreign, []string{"x-1"}, "1 of 2 items could not be read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.doc, "application/rss+xml", Options{Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, it := range p.Items {
				ids = append(ids, it.ID)
			}
			if !slices.Equal(ids, tc.items) || p.Warning() != tc.warning {
				t.Fatalf("items %q, warning %q; want %q, %q", ids, p.Warning(), tc.items, tc.warning)
			}
			if tc.warning != "" && len(p.ItemHashes) != 0 {
				t.Fatalf("%d item hashes reported beside unread items", len(p.ItemHashes))
			}
			if tc.warning == "" && len(p.ItemHashes) != len(tc.items) {
				t.Fatalf("%d item hashes, want %d", len(p.ItemHashes), len(tc.items))
			}
		})
	}
}

// A document whose new items the feed parser does not all return once
// the unchanged ones are cut is read whole.
func TestParseSeenShortReadsWhole(t *testing.T) {
	doc := readUnbalanced(t, "rss-stray-end.xml")
	sc, err := scanXML(doc, DefaultMaxItems)
	if err != nil {
		t.Fatal(err)
	}
	hashes := itemHashes(doc, sc.items, Options{})
	// The stray end tag left in (as Parse drops it): cutting the first
	// item leaves a document whose parser stops at that tag.
	first := func(h uint64) bool { return h == hashes[0] }
	tr, err := parseSeen(sc.root, doc, sc.items, hashes, first)
	if err != nil {
		t.Fatal(err)
	}
	if tr.unchanged != 0 || tr.want != 4 || !bytes.Equal(tr.body, doc) {
		t.Fatalf("%d unchanged, %d expected, whole document %v; want 0, 4, true", tr.unchanged, tr.want, bytes.Equal(tr.body, doc))
	}
}
