package opml

import (
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Write writes outlines to w as an OPML 2.0 document titled title, created
// at now (written in UTC as dateCreated).
//
// Subscriptions are grouped into nested folders by Category and sorted by
// category path, then title, then URL (then site), so that the same set of
// outlines always gives the same document; in each folder the
// subscriptions come before the sub-folders. Characters that XML cannot
// carry (control characters, invalid UTF-8) are removed from every string,
// surrounding white space is trimmed, empty category names are dropped, and
// so is a Site that is not an http or https URL.
//
// Write refuses, before writing anything, outlines that Parse would not read
// back: a URL that is not an http or https URL (an error matching
// ErrUnsupportedURL, listing them as *OutlineError values) or a Category
// with more than MaxDepth-1 names (ErrTooDeep). Parse reads the document
// back to the same outlines, in Write's order, as long as the document stays
// within Parse's limits and the outlines had distinct URLs.
func Write(w io.Writer, title string, outlines []Outline, now time.Time) error {
	clean := make([]Outline, 0, len(outlines))
	var errs []error
	for _, o := range outlines {
		c := Outline{
			URL:   cleanText(o.URL),
			Title: cleanText(o.Title),
			Site:  cleanText(o.Site),
			// Settings are cleaned as attributes are written.
			Settings: o.Settings,
		}
		for _, name := range o.Category {
			if name = cleanText(name); name != "" {
				c.Category = append(c.Category, name)
			}
		}
		if _, err := checkURL(c.URL); err != nil {
			errs = append(errs, &OutlineError{URL: c.URL, Err: err})
			continue
		}
		if _, err := checkURL(c.Site); err != nil {
			c.Site = ""
		}
		if len(c.Category) > MaxDepth-1 {
			errs = append(errs, &OutlineError{URL: c.URL, Err: fmt.Errorf("%w: category path of %d names", ErrTooDeep, len(c.Category))})
			continue
		}
		clean = append(clean, c)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("opml: nothing written: %w", err)
	}
	slices.SortStableFunc(clean, compareOutlines)

	doc := xmlOPML{
		Version: "2.0",
		Head: xmlHead{
			Title:       cleanText(title),
			DateCreated: now.UTC().Format(time.RFC1123Z),
		},
	}
	// open[i] is the folder at depth i+1 that is being filled.
	var open []*xmlOutline
	var path []string
	for _, o := range clean {
		common := 0
		for common < len(path) && common < len(o.Category) && path[common] == o.Category[common] {
			common++
		}
		open, path = open[:common], path[:common]
		for _, name := range o.Category[common:] {
			folder := &xmlOutline{Text: name}
			addChild(&doc, open, folder)
			open = append(open, folder)
			path = append(path, name)
		}
		attrs := o.Settings.attrs()
		if len(attrs) > 0 {
			doc.NS = Namespace
		}
		addChild(&doc, open, &xmlOutline{
			Text:     o.Title,
			Type:     "rss",
			XMLURL:   o.URL,
			HTMLURL:  o.Site,
			Settings: attrs,
		})
	}

	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("opml: writing: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("opml: writing: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("opml: writing: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("opml: writing: %w", err)
	}
	return nil
}

func addChild(doc *xmlOPML, open []*xmlOutline, child *xmlOutline) {
	if len(open) == 0 {
		doc.Body.Outlines = append(doc.Body.Outlines, child)
		return
	}
	parent := open[len(open)-1]
	parent.Children = append(parent.Children, child)
}

// compareOutlines orders outlines by category path (name by name, a path
// before its extensions), then title, URL and site.
func compareOutlines(a, b Outline) int {
	if c := slices.Compare(a.Category, b.Category); c != 0 {
		return c
	}
	return cmp.Or(
		strings.Compare(a.Title, b.Title),
		strings.Compare(a.URL, b.URL),
		strings.Compare(a.Site, b.Site),
	)
}

// cleanText trims s and removes what XML 1.0 cannot carry: invalid UTF-8 and
// characters outside the Char production.
func cleanText(s string) string {
	s = strings.TrimSpace(s)
	valid := true
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") || !isXMLChar(r) {
			valid = false
			break
		}
	}
	if valid {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") || !isXMLChar(r) {
			continue
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// isXMLChar reports whether r matches the Char production of XML 1.0.
func isXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

type xmlOPML struct {
	XMLName xml.Name `xml:"opml"`
	Version string   `xml:"version,attr"`
	NS      string   `xml:"xmlns:slogfeed,attr,omitempty"`
	Head    xmlHead  `xml:"head"`
	Body    xmlBody  `xml:"body"`
}

type xmlBody struct {
	Outlines []*xmlOutline `xml:"outline"`
}

type xmlHead struct {
	Title       string `xml:"title"`
	DateCreated string `xml:"dateCreated"`
}

type xmlOutline struct {
	Text     string        `xml:"text,attr"`
	Type     string        `xml:"type,attr,omitempty"`
	XMLURL   string        `xml:"xmlUrl,attr,omitempty"`
	HTMLURL  string        `xml:"htmlUrl,attr,omitempty"`
	Settings []xml.Attr    `xml:",any,attr"`
	Children []*xmlOutline `xml:"outline"`
}
