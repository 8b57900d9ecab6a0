package publish

import (
	"encoding/xml"
	"fmt"
	"strconv"

	"github.com/gorilla/feeds"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/storage"
)

// XML namespaces the RSS document declares besides slogfeed's own.
const (
	nsAtom    = "http://www.w3.org/2005/Atom"
	nsContent = "http://purl.org/rss/1.0/modules/content/"
	nsDC      = "http://purl.org/dc/elements/1.1/"
)

// rssDoc is gorilla/feeds' RssFeedXml with the namespaces slogfeed uses.
type rssDoc struct {
	XMLName xml.Name   `xml:"rss"`
	Version string     `xml:"version,attr"`
	NS      []xml.Attr `xml:",any,attr"`
	Channel *rssChannel
}

// rssChannel adds self and hub links to gorilla's channel and replaces its
// items.
type rssChannel struct {
	XMLName   xml.Name      `xml:"channel"`
	AtomLinks []rssAtomLink `xml:"atom:link"`
	*feeds.RssFeed
	Items []*rssItem `xml:"item"`
}

type rssAtomLink struct {
	Href string `xml:"href,attr"`
	Rel  string `xml:"rel,attr"`
	Type string `xml:"type,attr,omitempty"`
}

// rssItem embeds gorilla's item and overrides what it writes wrong for
// slogfeed: empty <title>, <link> and <description> elements, a single category,
// <author> (which RSS wants to be an e-mail address) and the reading.
type rssItem struct {
	XMLName     xml.Name `xml:"item"`
	Title       string   `xml:"title,omitempty"`
	Link        string   `xml:"link,omitempty"`
	Description string   `xml:"description,omitempty"`
	*feeds.RssItem
	Categories []string    `xml:"category"`
	Author     string      `xml:"author,omitempty"`
	Creator    string      `xml:"dc:creator,omitempty"`
	Reading    *xmlReading `xml:"reading"`
}

// xmlReading is slogfeed's reading element, written with feedext's names.
type xmlReading storage.Reading

// MarshalXML writes <sf:reading .../>.
func (r *xmlReading) MarshalXML(e *xml.Encoder, _ xml.StartElement) error {
	start := xml.StartElement{Name: xml.Name{Local: feedext.Prefix + ":" + feedext.Element}}
	attr := func(name, value string) {
		start.Attr = append(start.Attr, xml.Attr{Name: xml.Name{Local: name}, Value: value})
	}
	attr(feedext.AttrValue, FormatValue(r.Value))
	if r.Unit != "" {
		attr(feedext.AttrUnit, r.Unit)
	}
	if r.Sensor != "" {
		attr(feedext.AttrSensor, r.Sensor)
	}
	if !r.Time.IsZero() {
		attr(feedext.AttrTime, formatTime(r.Time))
	}
	if r.Lat != nil && r.Lon != nil {
		attr(feedext.AttrLat, FormatValue(*r.Lat))
		attr(feedext.AttrLon, FormatValue(*r.Lon))
	}
	if err := e.EncodeToken(start); err != nil {
		return err
	}
	return e.EncodeToken(start.End())
}

func nsAttr(prefix, uri string) xml.Attr {
	return xml.Attr{Name: xml.Name{Local: "xmlns:" + prefix}, Value: uri}
}

// gorillaFeed builds the generic gorilla/feeds model of p.
func gorillaFeed(p *prepared) *feeds.Feed {
	gf := &feeds.Feed{
		Title:       p.title,
		Link:        &feeds.Link{Href: p.link},
		Description: p.desc,
		Updated:     p.updated,
		Id:          p.id,
		Author:      &feeds.Author{Name: p.author},
	}
	for i := range p.entries {
		e := &p.entries[i]
		it := &feeds.Item{
			Title:       e.title,
			Description: e.summary,
			Id:          e.id,
			IsPermaLink: "false",
			Created:     e.published,
			Updated:     e.updated,
			Content:     e.content,
		}
		if e.link != "" {
			it.Link = &feeds.Link{Href: e.link}
		}
		if e.author != "" {
			it.Author = &feeds.Author{Name: e.author}
		}
		if len(e.enclosures) > 0 {
			enc := e.enclosures[0]
			it.Enclosure = &feeds.Enclosure{Url: enc.URL, Type: enc.Type, Length: strconv.FormatInt(max(enc.Length, 0), 10)}
			if it.Enclosure.Type == "" {
				it.Enclosure.Type = "application/octet-stream"
			}
		}
		gf.Items = append(gf.Items, it)
	}
	return gf
}

// RSS renders f as an RSS 2.0 document.
func RSS(f Feed) ([]byte, error) {
	p, err := prepare(f)
	if err != nil {
		return nil, err
	}
	gf := gorillaFeed(p)
	rf := (&feeds.Rss{Feed: gf}).RssFeed()
	rf.ManagingEditor = "" // RSS wants an e-mail address there
	rf.Generator = Generator
	rf.Ttl = p.ttlMinutes
	ch := &rssChannel{RssFeed: rf}
	if p.self != "" {
		ch.AtomLinks = append(ch.AtomLinks, rssAtomLink{Href: p.self, Rel: "self", Type: "application/rss+xml"})
	}
	if p.hub != "" {
		ch.AtomLinks = append(ch.AtomLinks, rssAtomLink{Href: p.hub, Rel: "hub"})
	}
	if p.next != "" {
		ch.AtomLinks = append(ch.AtomLinks, rssAtomLink{Href: p.next, Rel: "next"}, rssAtomLink{Href: p.next, Rel: "prev-archive"})
	}
	if p.current != "" {
		ch.AtomLinks = append(ch.AtomLinks, rssAtomLink{Href: p.current, Rel: "current"}, rssAtomLink{Href: p.current, Rel: "first"})
	}
	for i, gi := range rf.Items {
		e := &p.entries[i]
		gi.Author = ""
		it := &rssItem{RssItem: gi, Title: gi.Title, Link: gi.Link, Description: gi.Description, Categories: e.categories, Creator: e.author}
		if it.Description == "" && e.title == "" {
			it.Description = e.content // an item needs a title or a description
		}
		if e.reading != nil {
			it.Reading = (*xmlReading)(e.reading)
		}
		ch.Items = append(ch.Items, it)
	}
	rf.Items = nil
	doc := &rssDoc{
		Version: "2.0",
		NS: []xml.Attr{
			nsAttr("content", nsContent),
			nsAttr("atom", nsAtom),
			nsAttr("dc", nsDC),
			nsAttr(feedext.Prefix, feedext.Namespace),
		},
		Channel: ch,
	}
	return marshalXML(doc)
}

func marshalXML(v any) ([]byte, error) {
	body, err := xml.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("publish: encoding XML: %w", err)
	}
	out := make([]byte, 0, len(xml.Header)+len(body)+1)
	out = append(out, xml.Header...)
	out = append(out, body...)
	return append(out, '\n'), nil
}
