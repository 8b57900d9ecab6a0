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
	var l atomLists
	ok = p.children(&root, func(c *frTag) bool {
		name, done, ok := l.read(p, c)
		if done {
			return ok
		}
		switch name {
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
		case "generator":
			f.Generator, ok = p.atomGenerator(c)
		case "icon":
			f.Icon, ok = p.atomText(c)
		case "logo":
			f.Logo, ok = p.atomText(c)
		case "rights", "copyright":
			f.Rights, ok = p.atomText(c)
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
	l.set(&f.Categories, &f.Authors, &f.Contributors, &f.Links, &f.Extensions)
	return f, true
}

// atomEntry is gofeed's parseEntry.
func (p *frParser) atomEntry(t *frTag) (*atom.Entry, bool) {
	e := &atom.Entry{}
	var l atomLists
	ok := p.children(t, func(c *frTag) bool {
		name, done, ok := l.read(p, c)
		if done {
			return ok
		}
		switch name {
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
	l.set(&e.Categories, &e.Authors, &e.Contributors, &e.Links, &e.Extensions)
	return e, true
}

// atomSource is gofeed's parseSource.
func (p *frParser) atomSource(t *frTag) (*atom.Source, bool) {
	s := &atom.Source{}
	var l atomLists
	ok := p.children(t, func(c *frTag) bool {
		name, done, ok := l.read(p, c)
		if done {
			return ok
		}
		switch name {
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
		case "generator":
			s.Generator, ok = p.atomGenerator(c)
		case "icon":
			s.Icon, ok = p.atomText(c)
		case "logo":
			s.Logo, ok = p.atomText(c)
		case "rights", "copyright":
			s.Rights, ok = p.atomText(c)
		default:
			ok = p.skip(c)
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	l.set(&s.Categories, &s.Authors, &s.Contributors, &s.Links, &s.Extensions)
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

// atomLists gathers the children a feed, an entry and a source read the
// same way (gofeed's parseFeed, parseEntry and parseSource): links,
// people, categories, and the extension elements.
type atomLists struct {
	contributors, authors []*atom.Person
	categories            []*atom.Category
	links                 []*atom.Link
	exts                  ext.Extensions
}

// read reads child c when it is an extension element or one of the shared
// children (done), and otherwise returns its lower-cased name for the
// caller's own cases.
func (l *atomLists) read(p *frParser, c *frTag) (name string, done, ok bool) {
	if !p.atomNative(c) {
		return "", true, p.extension(&l.exts, c)
	}
	name = strings.ToLower(c.local)
	switch name {
	case "link":
		var x *atom.Link
		if x, ok = p.atomLink(c); ok {
			l.links = append(l.links, x)
		}
	case "author", "contributor":
		people := &l.authors
		if name == "contributor" {
			people = &l.contributors
		}
		var x *atom.Person
		if x, ok = p.atomPerson(c); ok {
			*people = append(*people, x)
		}
	case "category":
		var x *atom.Category
		if x, ok = p.atomCategory(c); ok {
			l.categories = append(l.categories, x)
		}
	default:
		return name, false, false
	}
	return name, true, ok
}

// set stores what was gathered; lists left empty stay nil, as gofeed
// leaves them.
func (l *atomLists) set(categories *[]*atom.Category, authors, contributors *[]*atom.Person, links *[]*atom.Link, exts *ext.Extensions) {
	if len(l.categories) > 0 {
		*categories = l.categories
	}
	if len(l.authors) > 0 {
		*authors = l.authors
	}
	if len(l.contributors) > 0 {
		*contributors = l.contributors
	}
	if len(l.links) > 0 {
		*links = l.links
	}
	if len(l.exts) > 0 {
		*exts = l.exts
	}
}
