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
