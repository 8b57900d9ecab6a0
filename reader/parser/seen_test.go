package parser

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestParseSeen: items whose hashes the previous parse reported are cut
// before parsing; a changed item, a new one, another base URL or another
// extraction rule make them count as new again.
func TestParseSeen(t *testing.T) {
	rss := func(items ...string) string {
		var b strings.Builder
		b.WriteString(`<?xml version="1.0"?><rss version="2.0"><channel><title>t</title><link>https://example.org/</link><ttl>7</ttl>`)
		for _, it := range items {
			fmt.Fprintf(&b, `<item><guid>%s</guid><title>%s</title><description>&lt;p&gt;%s&lt;/p&gt;</description></item>`, it, it, it)
		}
		b.WriteString(`</channel></rss>`)
		return b.String()
	}
	atom := func(items ...string) string {
		var b strings.Builder
		b.WriteString(`<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>urn:x</id><updated>2026-01-01T00:00:00Z</updated>`)
		for _, it := range items {
			fmt.Fprintf(&b, `<entry><id>%s</id><title>%s</title><updated>2026-01-01T00:00:00Z</updated></entry>`, it, it)
		}
		b.WriteString(`</feed>`)
		return b.String()
	}
	jsonFeed := func(home string) func(...string) string {
		return func(items ...string) string {
			var b strings.Builder
			fmt.Fprintf(&b, `{"version":"https://jsonfeed.org/version/1.1","title":"t","home_page_url":%q,"items":[`, home)
			for i, it := range items {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `{"id":%q,"title":%q,"content_html":"<p>%s</p>"}`, it, it, it)
			}
			b.WriteString(`]}`)
			return b.String()
		}
	}
	const base = "https://example.org/feed"
	tests := []struct {
		name      string
		doc       func(...string) string
		next      []string // the second document's items
		base      string   // the second parse's BaseURL
		wantItems []string
		unchanged int
	}{
		{"rss: one new item", rss, []string{"d", "a", "b", "c"}, base, []string{"d"}, 3},
		{"rss: nothing new", rss, []string{"a", "b", "c"}, base, nil, 3},
		{"rss: a changed item", rss, []string{"a", "b2", "c"}, base, []string{"b2"}, 2},
		{"rss: another base URL", rss, []string{"a", "b", "c"}, "https://example.org/other", []string{"a", "b", "c"}, 0},
		{"atom: one new entry", atom, []string{"d", "a", "b", "c"}, base, []string{"d"}, 3},
		{"json: one new item", jsonFeed("https://example.org/"), []string{"d", "a", "b", "c"}, base, []string{"d"}, 3},
		{"json: nothing new", jsonFeed("https://example.org/"), []string{"a", "b", "c"}, base, nil, 3},
		{"json: a changed item", jsonFeed("https://example.org/"), []string{"a", "b2", "c"}, base, []string{"b2"}, 2},
		{"json: another base URL", jsonFeed("https://example.org/"), []string{"a", "b", "c"}, "https://example.org/other", []string{"a", "b", "c"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first, err := Parse([]byte(tc.doc("a", "b", "c")), "", Options{BaseURL: base})
			if err != nil {
				t.Fatal(err)
			}
			if len(first.ItemHashes) != 3 || len(first.Items) != 3 || first.Unchanged != 0 {
				t.Fatalf("first parse: %d hashes, %d items, %d unchanged", len(first.ItemHashes), len(first.Items), first.Unchanged)
			}
			seen := func(h uint64) bool { return slices.Contains(first.ItemHashes, h) }
			p, err := Parse([]byte(tc.doc(tc.next...)), "", Options{BaseURL: tc.base, Seen: seen})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range p.Items {
				got = append(got, it.Title)
			}
			if !slices.Equal(got, tc.wantItems) || p.Unchanged != tc.unchanged || len(p.ItemHashes) != len(tc.next) {
				t.Fatalf("items %q, unchanged %d, %d hashes; want %q, %d, %d", got, p.Unchanged, len(p.ItemHashes), tc.wantItems, tc.unchanged, len(tc.next))
			}
			if p.Title != "t" {
				t.Fatalf("channel lost: title %q", p.Title)
			}
		})
	}
}

// A JSON Feed whose members beside its items changed reads every item
// again: they can change how an item is read.
func TestParseSeenJSONMembersChange(t *testing.T) {
	doc := func(home string) string {
		return fmt.Sprintf(`{"version":"https://jsonfeed.org/version/1.1","title":"t","home_page_url":%q,"items":[{"id":"a","title":"a"},{"id":"b","title":"b"}]}`, home)
	}
	first, err := Parse([]byte(doc("https://example.org/")), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := func(h uint64) bool { return slices.Contains(first.ItemHashes, h) }
	tests := []struct {
		name      string
		home      string
		items     int
		unchanged int
	}{
		{"same members", "https://example.org/", 0, 2},
		{"another home page", "https://example.org/v2/", 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(doc(tc.home)), "", Options{Seen: seen})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != tc.items || p.Unchanged != tc.unchanged || p.Title != "t" {
				t.Fatalf("%d items, %d unchanged, title %q; want %d, %d, %q", len(p.Items), p.Unchanged, p.Title, tc.items, tc.unchanged, "t")
			}
		})
	}
}

// A document cut at the element limit hashes only the items it keeps, so
// that the next parse, told those hashes, neither reads past the cut nor
// fails.
func TestParseSeenAfterNodeLimitCut(t *testing.T) {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>`)
	for _, id := range []string{"a", "b", "c"} {
		fmt.Fprintf(&b, `<item><guid>%s</guid><title>%s</title></item>`, id, id)
	}
	for range MaxNodes + 1 {
		b.WriteString(`<x/>`)
	}
	b.WriteString(`</channel></rss>`)
	doc := []byte(b.String())
	first, err := Parse(doc, "application/rss+xml", Options{BaseURL: "https://example.org/feed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.ItemHashes) != len(first.Items) {
		t.Fatalf("%d hashes for %d items kept", len(first.ItemHashes), len(first.Items))
	}
	seen := map[uint64]bool{}
	for _, h := range first.ItemHashes {
		seen[h] = true
	}
	second, err := Parse(doc, "application/rss+xml", Options{BaseURL: "https://example.org/feed", Seen: func(h uint64) bool { return seen[h] }})
	if err != nil {
		t.Fatalf("second parse: %v", err)
	}
	if len(second.Items) != 0 || second.Unchanged != len(first.Items) {
		t.Errorf("second parse: %d items, %d unchanged; want 0 and %d", len(second.Items), second.Unchanged, len(first.Items))
	}
}

// A change to the root's namespace declarations (which reading extraction
// goes by) makes every item new to parsing, though its own bytes are the
// same.
func TestParseSeenRootChange(t *testing.T) {
	doc := func(ns string) []byte {
		return []byte(`<?xml version="1.0"?><!-- a feed --><rss version="2.0" xmlns:sf="` + ns + `"><channel><title>t</title>` +
			`<item><guid>a</guid><title>a</title></item><item><guid>b</guid><title>b</title></item></channel></rss>`)
	}
	first, err := Parse(doc("urn:old"), "application/rss+xml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, h := range first.ItemHashes {
		seen[h] = true
	}
	for _, tc := range []struct {
		ns        string
		unchanged int
	}{{"urn:old", 2}, {"urn:new", 0}} {
		p, err := Parse(doc(tc.ns), "application/rss+xml", Options{Seen: func(h uint64) bool { return seen[h] }})
		if err != nil {
			t.Fatal(err)
		}
		if p.Unchanged != tc.unchanged {
			t.Errorf("root with %s: %d unchanged, want %d", tc.ns, p.Unchanged, tc.unchanged)
		}
	}
}
