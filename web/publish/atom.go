package publish

import (
	"encoding/xml"
	"strconv"

	"github.com/gorilla/feeds"

	"github.com/slogfeed/slogfeed/feedext"
)

// atomDoc is gorilla/feeds' AtomFeed with slogfeed's namespace, all of the
// feed's links, a generator and slogfeed's entries.
type atomDoc struct {
	XMLName xml.Name `xml:"feed"`
	*feeds.AtomFeed
	NS        []xml.Attr `xml:",any,attr"`
	Links     []feeds.AtomLink
	Generator string       `xml:"generator,omitempty"`
	Entries   []*atomEntry `xml:"entry"`
}

// atomEntry embeds gorilla's entry, replacing its single free-text
// category (Atom wants a term attribute) and adding the reading.
type atomEntry struct {
	XMLName xml.Name `xml:"entry"`
	*feeds.AtomEntry
	Categories []atomCategory `xml:"category"`
	Reading    *xmlReading    `xml:"reading"`
}

type atomCategory struct {
	Term string `xml:"term,attr"`
}

// Atom renders f as an Atom 1.0 document.
func Atom(f Feed) ([]byte, error) {
	p, err := prepare(f)
	if err != nil {
		return nil, err
	}
	af := (&feeds.Atom{Feed: gorillaFeed(p)}).AtomFeed()
	af.Id = p.id
	af.Updated = formatTime(p.updated)
	af.Link = nil
	doc := &atomDoc{
		AtomFeed:  af,
		NS:        []xml.Attr{nsAttr(feedext.Prefix, feedext.Namespace)},
		Generator: Generator,
	}
	doc.Links = append(doc.Links, feeds.AtomLink{Href: p.link, Rel: "alternate"})
	if p.self != "" {
		doc.Links = append(doc.Links, feeds.AtomLink{Href: p.self, Rel: "self", Type: "application/atom+xml"})
	}
	if p.hub != "" {
		doc.Links = append(doc.Links, feeds.AtomLink{Href: p.hub, Rel: "hub"})
	}
	if p.next != "" {
		doc.Links = append(doc.Links, feeds.AtomLink{Href: p.next, Rel: "next"}, feeds.AtomLink{Href: p.next, Rel: "prev-archive"})
	}
	if p.current != "" {
		doc.Links = append(doc.Links, feeds.AtomLink{Href: p.current, Rel: "current"}, feeds.AtomLink{Href: p.current, Rel: "first"})
	}
	for i, ae := range af.Entries {
		e := &p.entries[i]
		ae.Id = e.iri
		ae.Updated = formatTime(e.updated)
		ae.Published = formatTime(e.published)
		ae.Links = nil
		if e.link != "" {
			ae.Links = append(ae.Links, feeds.AtomLink{Href: e.link, Rel: "alternate"})
		}
		for _, enc := range e.enclosures {
			l := feeds.AtomLink{Href: enc.URL, Rel: "enclosure", Type: enc.Type}
			if enc.Length > 0 {
				l.Length = strconv.FormatInt(enc.Length, 10)
			}
			ae.Links = append(ae.Links, l)
		}
		if ae.Content == nil && e.link == "" {
			// An entry needs content or an alternate link: the summary
			// becomes the content, or the title when there is none.
			switch {
			case e.summary != "":
				ae.Content = &feeds.AtomContent{Content: e.summary, Type: "html"}
				ae.Summary = nil
			default:
				ae.Content = &feeds.AtomContent{Content: e.title, Type: "text"}
			}
		}
		we := &atomEntry{AtomEntry: ae}
		for _, c := range e.categories {
			we.Categories = append(we.Categories, atomCategory{Term: c})
		}
		if e.reading != nil {
			we.Reading = (*xmlReading)(e.reading)
		}
		doc.Entries = append(doc.Entries, we)
	}
	af.Entries = nil
	return marshalXML(doc)
}
