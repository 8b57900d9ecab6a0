package aggregator

import (
	"bytes"
	"net/url"
	"strings"

	"github.com/mmcdole/gofeed/atom"
	ext "github.com/mmcdole/gofeed/extensions"
)

const (
	atom10NS = "http://www.w3.org/2005/Atom"
	atom03NS = "http://purl.org/atom/ns#"
)

// fastAtom is fastRSS for Atom: exactly the *atom.Feed that
// (&atom.Parser{}).Parse returns (gofeed v1.4.2, atom/parser.go), for the
// same subset of XML as fastRSS except that a default namespace is
// allowed, and for text constructs of type text, html or a text/* media
// type (or any type in CDATA), without mode; xhtml and base64 content
// are declined. ok is false (declined) for anything else, and the caller
// runs gofeed's parser.
func fastAtom(body []byte) (*atom.Feed, bool) {
	if !frValidBody(body) {
		return nil, false
	}
	p := frParser{b: body, defaultNS: true}
	return p.atomDocument()
}

// atomNative reports an element of Atom's own vocabulary.
func (p *frParser) atomNative(t *frTag) bool {
	switch p.space(t) {
	case "", atom10NS, atom03NS:
		return true
	}
	return false
}

// attrOnly returns the value of the attributes named local in any
// namespace (encoding/xml's match for an `xml:"local,attr"` field); ok is
// false when there are several.
func (p *frParser) attrOnly(local string) (string, bool) {
	v, n := "", 0
	for _, a := range p.attrs {
		if a.local == local {
			v, n = a.value, n+1
		}
	}
	return v, n <= 1
}

// atomText is gofeed's parseAtomText without an xml:base, for the text
// constructs fastAtom accepts.
func (p *frParser) atomText(t *frTag) (string, bool) {
	typ, ok1 := p.attrOnly("type")
	mode, ok2 := p.attrOnly("mode")
	if !ok1 || !ok2 {
		return "", false
	}
	raw, ok := p.rawText(t)
	if !ok {
		return "", false
	}
	raw = bytes.TrimSpace(raw)
	lt := strings.ToLower(typ)
	var s string
	switch {
	case bytes.Contains(raw, []byte(cdataStart)):
		s = stripCDATA(string(raw)) // ResolveHTML without a base is a no-op
	case mode != "":
		return "", false
	case lt == "" || lt == "text" || strings.HasPrefix(lt, "text/"):
		s = decodeEntities(string(raw))
	case lt == "html":
		// gofeed first strips a wrapping <div>: raw holds no element
		// (rawText refuses them), so there is none.
		s = decodeEntities(string(raw))
	default:
		return "", false
	}
	switch strings.ToLower(t.local) {
	case "icon", "id", "logo", "uri", "url":
		if u, err := url.Parse(strings.TrimLeft(s, " ")); err == nil && u != nil {
			s = u.String()
		}
	}
	return s, true
}

// atomDocument is gofeed's atom parseRoot.
func (p *frParser) atomDocument() (*atom.Feed, bool) {
	if !p.prolog() {
		return nil, false
	}
	root, ok := p.startTag()
	if !ok || !strings.EqualFold(root.local, "feed") {
		return nil, false
	}
	f := &atom.Feed{Entries: []*atom.Entry{}}
	f.Version = p.attr("version")
	if f.Version == "" {
		switch p.space(&root) {
		case atom03NS:
			f.Version = "0.3"
		case atom10NS:
			f.Version = "1.0"
		}
	}
	f.Language = p.attr("lang")
	var contributors, authors []*atom.Person
	var categories []*atom.Category
	var links []*atom.Link
	var exts ext.Extensions
	ok = p.children(&root, func(c *frTag) bool {
		if !p.atomNative(c) {
			return p.extension(&exts, c)
		}
		var ok bool
		switch strings.ToLower(c.local) {
		case "title":
			f.Title, ok = p.atomText(c)
		case "id":
			f.ID, ok = p.atomText(c)
		case "updated", "modified":
			if f.Updated, ok = p.atomText(c); ok {
				f.UpdatedParsed = frDate(f.Updated)
			}
		case "subtitle", "tagline":
			f.Subtitle, ok = p.atomText(c)
		case "link":
			var l *atom.Link
			if l, ok = p.atomLink(c); ok {
				links = append(links, l)
			}
		case "generator":
			f.Generator, ok = p.atomGenerator(c)
		case "icon":
			f.Icon, ok = p.atomText(c)
		case "logo":
			f.Logo, ok = p.atomText(c)
		case "rights", "copyright":
			f.Rights, ok = p.atomText(c)
		case "contributor":
			var person *atom.Person
			if person, ok = p.atomPerson(c); ok {
				contributors = append(contributors, person)
			}
		case "author":
			var person *atom.Person
			if person, ok = p.atomPerson(c); ok {
				authors = append(authors, person)
			}
		case "category":
			var cat *atom.Category
			if cat, ok = p.atomCategory(c); ok {
				categories = append(categories, cat)
			}
		case "entry":
			var e *atom.Entry
			if e, ok = p.atomEntry(c); ok {
				f.Entries = append(f.Entries, e)
			}
		default:
			ok = p.skip(c)
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	if len(categories) > 0 {
		f.Categories = categories
	}
	if len(authors) > 0 {
		f.Authors = authors
	}
	if len(contributors) > 0 {
		f.Contributors = contributors
	}
	if len(links) > 0 {
		f.Links = links
	}
	if len(exts) > 0 {
		f.Extensions = exts
	}
	return f, true
}

// atomEntry is gofeed's parseEntry.
func (p *frParser) atomEntry(t *frTag) (*atom.Entry, bool) {
	e := &atom.Entry{}
	var contributors, authors []*atom.Person
	var categories []*atom.Category
	var links []*atom.Link
	var exts ext.Extensions
	ok := p.children(t, func(c *frTag) bool {
		if !p.atomNative(c) {
			return p.extension(&exts, c)
		}
		var ok bool
		switch strings.ToLower(c.local) {
		case "title":
			e.Title, ok = p.atomText(c)
		case "id":
			e.ID, ok = p.atomText(c)
		case "rights", "copyright":
			e.Rights, ok = p.atomText(c)
		case "summary":
			e.Summary, ok = p.atomText(c)
		case "source":
			e.Source, ok = p.atomSource(c)
		case "updated", "modified":
			if e.Updated, ok = p.atomText(c); ok {
				e.UpdatedParsed = frDate(e.Updated)
			}
		case "contributor":
			var person *atom.Person
			if person, ok = p.atomPerson(c); ok {
				contributors = append(contributors, person)
			}
		case "author":
			var person *atom.Person
			if person, ok = p.atomPerson(c); ok {
				authors = append(authors, person)
			}
		case "category":
			var cat *atom.Category
			if cat, ok = p.atomCategory(c); ok {
				categories = append(categories, cat)
			}
		case "link":
			var l *atom.Link
			if l, ok = p.atomLink(c); ok {
				links = append(links, l)
			}
		case "published", "issued":
			if e.Published, ok = p.atomText(c); ok {
				e.PublishedParsed = frDate(e.Published)
			}
		case "content":
			content := &atom.Content{Type: p.attr("type"), Src: p.attr("src")}
			if content.Value, ok = p.atomText(c); ok {
				e.Content = content
			}
		default:
			ok = p.skip(c)
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	if len(categories) > 0 {
		e.Categories = categories
	}
	if len(authors) > 0 {
		e.Authors = authors
	}
	if len(links) > 0 {
		e.Links = links
	}
	if len(contributors) > 0 {
		e.Contributors = contributors
	}
	if len(exts) > 0 {
		e.Extensions = exts
	}
	return e, true
}

// atomSource is gofeed's parseSource.
func (p *frParser) atomSource(t *frTag) (*atom.Source, bool) {
	s := &atom.Source{}
	var contributors, authors []*atom.Person
	var categories []*atom.Category
	var links []*atom.Link
	var exts ext.Extensions
	ok := p.children(t, func(c *frTag) bool {
		if !p.atomNative(c) {
			return p.extension(&exts, c)
		}
		var ok bool
		switch strings.ToLower(c.local) {
		case "title":
			s.Title, ok = p.atomText(c)
		case "id":
			s.ID, ok = p.atomText(c)
		case "updated", "modified":
			if s.Updated, ok = p.atomText(c); ok {
				s.UpdatedParsed = frDate(s.Updated)
			}
		case "subtitle", "tagline":
			s.Subtitle, ok = p.atomText(c)
		case "link":
			var l *atom.Link
			if l, ok = p.atomLink(c); ok {
				links = append(links, l)
			}
		case "generator":
			s.Generator, ok = p.atomGenerator(c)
		case "icon":
			s.Icon, ok = p.atomText(c)
		case "logo":
			s.Logo, ok = p.atomText(c)
		case "rights", "copyright":
			s.Rights, ok = p.atomText(c)
		case "contributor":
			var person *atom.Person
			if person, ok = p.atomPerson(c); ok {
				contributors = append(contributors, person)
			}
		case "author":
			var person *atom.Person
			if person, ok = p.atomPerson(c); ok {
				authors = append(authors, person)
			}
		case "category":
			var cat *atom.Category
			if cat, ok = p.atomCategory(c); ok {
				categories = append(categories, cat)
			}
		default:
			ok = p.skip(c)
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	if len(categories) > 0 {
		s.Categories = categories
	}
	if len(authors) > 0 {
		s.Authors = authors
	}
	if len(contributors) > 0 {
		s.Contributors = contributors
	}
	if len(links) > 0 {
		s.Links = links
	}
	if len(exts) > 0 {
		s.Extensions = exts
	}
	return s, true
}

// atomPerson is gofeed's parsePerson.
func (p *frParser) atomPerson(t *frTag) (*atom.Person, bool) {
	person := &atom.Person{}
	ok := p.children(t, func(c *frTag) bool {
		var ok bool
		switch strings.ToLower(c.local) {
		case "name":
			person.Name, ok = p.atomText(c)
		case "email":
			person.Email, ok = p.atomText(c)
		case "uri", "url", "homepage":
			person.URI, ok = p.atomText(c)
		default:
			ok = p.skip(c)
		}
		return ok
	})
	return person, ok
}

// atomLink is gofeed's parseLink.
func (p *frParser) atomLink(t *frTag) (*atom.Link, bool) {
	l := &atom.Link{
		Href:     p.attr("href"),
		Hreflang: p.attr("hreflang"),
		Type:     p.attr("type"),
		Length:   p.attr("length"),
		Title:    p.attr("title"),
		Rel:      p.attr("rel"),
	}
	if l.Rel == "" {
		l.Rel = "alternate"
	}
	return l, p.skip(t)
}

// atomCategory is gofeed's parseCategory.
func (p *frParser) atomCategory(t *frTag) (*atom.Category, bool) {
	c := &atom.Category{Term: p.attr("term"), Scheme: p.attr("scheme"), Label: p.attr("label")}
	return c, p.skip(t)
}

// atomGenerator is gofeed's parseGenerator.
func (p *frParser) atomGenerator(t *frTag) (*atom.Generator, bool) {
	g := &atom.Generator{}
	if uri := p.attr("uri"); uri != "" {
		g.URI = uri
	} else if u := p.attr("url"); u != "" {
		g.URI = u
	}
	g.Version = p.attr("version")
	var ok bool
	g.Value, ok = p.atomText(t)
	return g, ok
}
