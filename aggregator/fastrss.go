package aggregator

import (
	"bytes"
	"encoding/binary"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mmcdole/gofeed"
	ext "github.com/mmcdole/gofeed/extensions"
	"github.com/mmcdole/gofeed/rss"
)

// fastRSS parses the RSS 2.0 documents of a plain, common subset into
// exactly the *rss.Feed that (&rss.Parser{}).Parse returns for them,
// without encoding/xml: a hand-written scanner over the bytes, one string
// per field kept. ok is false (declined) for anything outside the subset,
// and the caller then runs gofeed's parser, which also produces the error
// of a malformed document: fastRSS never reports one.
//
// The subset: a UTF-8 document (no control characters) with an optional
// XML declaration (version 1.0, encoding UTF-8), comments and processing
// instructions before an unprefixed <rss> root; no DOCTYPE; element and
// attribute names of ASCII letters, digits, '_', '.', '-' with at most one
// prefix, every element prefix declared; namespace declarations anywhere
// but no default namespace (xmlns="…"), no xml:base; quoted attribute
// values; end tags that repeat their start tag's name; the text elements
// gofeed reads with its text reader (title, description, guid, …) holding
// only text and CDATA sections (no child element, comment or processing
// instruction). Extension elements (any namespace not RSS's own) may nest
// freely with text, CDATA and comments. Everything gofeed would refuse is
// declined.
//
// It mirrors gofeed v1.4.2's rss/parser.go and internal/shared (text
// reading, entity decoding, CDATA, extensions, the URL attribute
// round-trip of its tag reader, date parsing): the differential tests and
// FuzzFastRSS compare both on every fixture and on generated documents.
// A gofeed upgrade must rerun them.
func fastRSS(body []byte) (*rss.Feed, bool) {
	if !frValidBody(body) {
		return nil, false
	}
	p := frParser{b: body}
	return p.document()
}

// frParser is fastRSS's cursor over the document.
type frParser struct {
	b []byte
	i int
	// ns holds the namespace declarations in scope, innermost last.
	ns []frDecl
	// attrs is the attribute scratch of the last start tag read: each
	// handler reads its tag's attributes before reading its content.
	attrs []frAttr
	// depth is the nesting of extension elements being read.
	depth int
	// defaultNS admits default namespace declarations (xmlns="…"):
	// Atom documents have one; fastRSS declines them.
	defaultNS bool
}

type frDecl struct{ prefix, uri string }

type frAttr struct {
	prefix, local, value string
}

// frTag is a start tag just read.
type frTag struct {
	prefix, local string
	qname         []byte // as written, for the end tag
	empty         bool   // <x/>
	nsMark        int    // len(ns) before its declarations
}

// frValidBody reports a document of valid UTF-8 without the characters
// XML forbids (C0 controls other than tab, LF, CR; U+FFFE, U+FFFF), which
// gofeed would filter or refuse.
func frValidBody(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		// Bytes below 0x20 or equal to 0xEF (U+FFFE and U+FFFF begin
		// with it) flag the word for the byte-wise check.
		x := binary.LittleEndian.Uint64(b[i:])
		e := x ^ (0xef * ones)
		if (x-0x20*ones)&^x&highs == 0 && (e-ones)&^e&highs == 0 {
			continue
		}
		if !frValidBytes(b, i, i+8) {
			return false
		}
	}
	return frValidBytes(b, i, len(b)) && utf8.Valid(b)
}

// frValidBytes checks b[from:to] byte by byte (see frValidBody).
func frValidBytes(b []byte, from, to int) bool {
	for i := from; i < to; i++ {
		c := b[i]
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
		if c == 0xef && i+2 < len(b) && b[i+1] == 0xbf && (b[i+2] == 0xbe || b[i+2] == 0xbf) {
			return false
		}
	}
	return true
}

func frSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *frParser) skipSpace() {
	for p.i < len(p.b) && frSpace(p.b[p.i]) {
		p.i++
	}
}

func (p *frParser) at(s string) bool { return bytes.HasPrefix(p.b[p.i:], []byte(s)) }

// comment skips a comment at the cursor the way encoding/xml reads one
// (the first "--" must be followed by '>').
func (p *frParser) comment() bool {
	rest := p.b[p.i+4:]
	k := bytes.Index(rest, []byte("--"))
	if k < 0 || k+2 >= len(rest) || rest[k+2] != '>' {
		return false
	}
	p.i += 4 + k + 3
	return true
}

// frDeclRe matches the XML declarations fastRSS accepts: encoding/xml
// refuses other versions and converts other encodings.
var frDeclRe = regexp.MustCompile(`^<\?xml[ \t\r\n]+version[ \t\r\n]*=[ \t\r\n]*("1\.0"|'1\.0')([ \t\r\n]+encoding[ \t\r\n]*=[ \t\r\n]*("(?i:utf-8)"|'(?i:utf-8)'))?([ \t\r\n]+standalone[ \t\r\n]*=[ \t\r\n]*("(?:yes|no)"|'(?:yes|no)'))?[ \t\r\n]*\?>`)

// prolog skips what precedes the root element.
func (p *frParser) prolog() bool {
	for {
		p.skipSpace()
		switch {
		case p.i >= len(p.b):
			return false
		case p.at("<?xml") && (p.i+5 < len(p.b) && (frSpace(p.b[p.i+5]) || p.b[p.i+5] == '?')):
			m := frDeclRe.Find(p.b[p.i:min(len(p.b), p.i+256)])
			if m == nil {
				return false
			}
			p.i += len(m)
		case p.at("<?"):
			// Another processing instruction (xml-stylesheet): its
			// target must be a name followed by a space.
			j := p.i + 2
			n := frName(p.b[j:])
			if n == 0 || j+n >= len(p.b) || !frSpace(p.b[j+n]) || bytes.IndexByte(p.b[j:j+n], ':') >= 0 {
				return false
			}
			if strings.EqualFold(string(p.b[j:j+n]), "xml") {
				return false
			}
			k := bytes.Index(p.b[j+n:], []byte("?>"))
			if k < 0 {
				return false
			}
			p.i = j + n + k + 2
		case p.at("<!--"):
			if !p.comment() {
				return false
			}
		case p.b[p.i] == '<':
			return true
		default:
			return false
		}
	}
}

// frName returns the length of the name at the start of b: ASCII letters,
// digits, '_', '.', '-', ':', beginning with a letter or '_'.
func frName(b []byte) int {
	n := 0
	for n < len(b) {
		c := b[n]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' ||
			n > 0 && ('0' <= c && c <= '9' || c == '.' || c == '-' || c == ':') {
			n++
			continue
		}
		break
	}
	if n < len(b) && b[n] >= utf8.RuneSelf {
		return 0 // a non-ASCII name: not in the subset
	}
	return n
}

// splitName splits a qualified name into prefix and local name; ok is
// false for names encoding/xml reads differently (two colons, an empty
// side).
func splitName(q []byte) (prefix, local string, ok bool) {
	k := bytes.IndexByte(q, ':')
	if k < 0 {
		return "", frIntern(q), true
	}
	if k == 0 || k == len(q)-1 || bytes.IndexByte(q[k+1:], ':') >= 0 {
		return "", "", false
	}
	return frIntern(q[:k]), frIntern(q[k+1:]), true
}

// lookup returns the namespace bound to prefix.
func (p *frParser) lookup(prefix string) (string, bool) {
	for i := len(p.ns) - 1; i >= 0; i-- {
		if p.ns[i].prefix == prefix {
			return p.ns[i].uri, true
		}
	}
	return "", false
}

// space is the namespace of a tag as encoding/xml resolves it (the
// default namespace or "" for an unprefixed name).
func (p *frParser) space(t *frTag) string {
	uri, _ := p.lookup(t.prefix)
	return uri
}

// startTag reads the start tag at the cursor (at '<').
func (p *frParser) startTag() (frTag, bool) {
	var t frTag
	j := p.i + 1
	n := frName(p.b[j:])
	if n == 0 {
		return t, false
	}
	t.qname = p.b[j : j+n]
	var ok bool
	if t.prefix, t.local, ok = splitName(t.qname); !ok {
		return t, false
	}
	j += n
	t.nsMark = len(p.ns)
	p.attrs = p.attrs[:0]
	for {
		k := j
		for j < len(p.b) && frSpace(p.b[j]) {
			j++
		}
		if j >= len(p.b) {
			return t, false
		}
		if p.b[j] == '>' {
			j++
			break
		}
		if p.b[j] == '/' {
			if j+1 >= len(p.b) || p.b[j+1] != '>' {
				return t, false
			}
			t.empty = true
			j += 2
			break
		}
		if k == j {
			return t, false // attributes must be separated by spaces
		}
		n := frName(p.b[j:])
		if n == 0 {
			return t, false
		}
		var a frAttr
		if a.prefix, a.local, ok = splitName(p.b[j : j+n]); !ok {
			return t, false
		}
		j += n
		for j < len(p.b) && frSpace(p.b[j]) {
			j++
		}
		if j >= len(p.b) || p.b[j] != '=' {
			return t, false
		}
		j++
		for j < len(p.b) && frSpace(p.b[j]) {
			j++
		}
		if j >= len(p.b) || p.b[j] != '"' && p.b[j] != '\'' {
			return t, false
		}
		q := p.b[j]
		e := bytes.IndexByte(p.b[j+1:], q)
		if e < 0 {
			return t, false
		}
		raw := p.b[j+1 : j+1+e]
		j += e + 2
		if bytes.IndexByte(raw, '<') >= 0 {
			return t, false
		}
		v := frIntern(raw)
		if bytes.IndexAny(raw, "&\r") >= 0 {
			d, ok := frUnescape(nil, raw)
			if !ok {
				return t, false
			}
			v = string(d)
		}
		a.value = v
		for _, b := range p.attrs {
			if b.prefix == a.prefix && b.local == a.local {
				return t, false // a repeated attribute
			}
		}
		switch {
		case a.prefix == "" && a.local == "xmlns":
			if !p.defaultNS || a.value == "" || strings.TrimSpace(a.value) != a.value {
				return t, false // a default namespace
			}
			p.ns = append(p.ns, frDecl{"", a.value})
		case a.prefix == "xmlns":
			if a.local == "xml" || a.local == "xmlns" || a.value == "" || strings.TrimSpace(a.value) != a.value {
				return t, false
			}
			p.ns = append(p.ns, frDecl{a.local, a.value})
		case a.prefix == "xml":
			if a.local != "lang" && a.local != "space" {
				return t, false // xml:base and the like
			}
		}
		p.attrs = append(p.attrs, a)
	}
	if t.prefix == "" && t.local == "xmlns" {
		return t, false // encoding/xml gives it no namespace
	}
	if t.prefix != "" {
		if t.prefix == "xml" || t.prefix == "xmlns" {
			return t, false
		}
		if _, ok := p.lookup(t.prefix); !ok {
			return t, false // an undeclared prefix
		}
	}
	p.i = j
	return t, true
}

// endTag reads the end tag of t at the cursor (at "</").
func (p *frParser) endTag(t *frTag) bool {
	j := p.i + 2
	if !bytes.HasPrefix(p.b[j:], t.qname) {
		return false
	}
	j += len(t.qname)
	for j < len(p.b) && frSpace(p.b[j]) {
		j++
	}
	if j >= len(p.b) || p.b[j] != '>' {
		return false
	}
	p.i = j + 1
	p.ns = p.ns[:t.nsMark]
	return true
}

// attr is xpp's Attribute: the named attribute of the last start tag,
// an unprefixed one preferred.
func (p *frParser) attr(name string) string {
	var fallback string
	found := false
	for _, a := range p.attrs {
		if a.local == name {
			if a.prefix == "" {
				return a.value
			}
			if !found {
				fallback, found = a.value, true
			}
		}
	}
	return fallback
}

// frURIAttrs are the attributes gofeed's tag reader resolves against
// xml:base, as URLs, on every child of the elements it walks.
func frURIAttr(local string) bool {
	switch strings.ToLower(local) {
	case "href", "scheme", "src", "uri":
		return true
	}
	return false
}

// resolveAttrs is gofeed's resolveAttrs without an xml:base: URL
// attributes go through url.Parse and back.
func (p *frParser) resolveAttrs() {
	for k := range p.attrs {
		if frURIAttr(p.attrs[k].local) {
			if u, err := url.Parse(strings.TrimLeft(p.attrs[k].value, " ")); err == nil && u != nil {
				p.attrs[k].value = u.String()
			}
		}
	}
}

// charData skips character data, CDATA sections and comments between
// elements (gofeed ignores them); it stops at the next '<' of a tag.
func (p *frParser) charData() bool {
	for p.i < len(p.b) {
		switch {
		case p.b[p.i] != '<':
			k := bytes.IndexByte(p.b[p.i:], '<')
			if k < 0 {
				return false
			}
			if !frCheckText(p.b[p.i : p.i+k]) {
				return false
			}
			p.i += k
		case p.at("<!--"):
			if !p.comment() {
				return false
			}
		case p.at("<![CDATA["):
			k := bytes.Index(p.b[p.i+9:], []byte("]]>"))
			if k < 0 {
				return false
			}
			p.i += 9 + k + 3
		default:
			return true
		}
	}
	return false
}

// children calls fn for each child element of parent (gofeed's
// ForEachChild, name lowercased by the caller) and reads parent's end
// tag. fn must consume the child.
func (p *frParser) children(parent *frTag, fn func(t *frTag) bool) bool {
	if parent.empty {
		return true
	}
	for {
		if !p.charData() {
			return false
		}
		if p.at("</") {
			return p.endTag(parent)
		}
		if p.at("<?") || p.at("<!") {
			return false
		}
		t, ok := p.startTag()
		if !ok {
			return false
		}
		p.resolveAttrs()
		if !fn(&t) {
			return false
		}
		p.ns = p.ns[:t.nsMark] // an empty element's declarations
	}
}

// rawText returns the raw content of a text element (gofeed reads its
// inner XML) and reads its end tag; only text and CDATA sections.
func (p *frParser) rawText(t *frTag) ([]byte, bool) {
	if t.empty {
		return nil, true
	}
	start := p.i
	for p.i < len(p.b) {
		k := bytes.IndexByte(p.b[p.i:], '<')
		if k < 0 {
			return nil, false
		}
		if !frCheckText(p.b[p.i : p.i+k]) {
			return nil, false
		}
		p.i += k
		switch {
		case p.at("<![CDATA["):
			k := bytes.Index(p.b[p.i+9:], []byte("]]>"))
			if k < 0 {
				return nil, false
			}
			p.i += 9 + k + 3
		case p.at("</"):
			end := p.i
			if !p.endTag(t) {
				return nil, false
			}
			return p.b[start:end], true
		default:
			return nil, false // a child element, comment or instruction
		}
	}
	return nil, false
}

// text is gofeed's shared.ParseText.
func (p *frParser) text(t *frTag) (string, bool) {
	raw, ok := p.rawText(t)
	if !ok {
		return "", false
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", true
	}
	if bytes.Contains(raw, []byte(cdataStart)) {
		return stripCDATA(string(raw)), true
	}
	if bytes.IndexByte(raw, '&') < 0 {
		return string(raw), true
	}
	return decodeEntities(string(raw)), true
}

// skip consumes an element gofeed skips.
func (p *frParser) skip(t *frTag) bool {
	_, ok := p.extElem(t)
	return ok
}

// extElem is gofeed's parseExtensionElement.
func (p *frParser) extElem(t *frTag) (ext.Extension, bool) {
	e := ext.Extension{Name: t.local, Children: map[string][]ext.Extension{}, Attrs: map[string]string{}}
	for _, a := range p.attrs {
		e.Attrs[a.local] = a.value
	}
	if t.empty {
		return e, true
	}
	if p.depth++; p.depth > MaxDepth {
		return e, false
	}
	defer func() { p.depth-- }()
	var val []byte
	for p.i < len(p.b) {
		if p.b[p.i] != '<' {
			k := bytes.IndexByte(p.b[p.i:], '<')
			if k < 0 || bytes.Contains(p.b[p.i:p.i+k], []byte("]]>")) {
				return e, false
			}
			var ok bool
			if val, ok = frUnescape(val, p.b[p.i:p.i+k]); !ok {
				return e, false
			}
			p.i += k
			continue
		}
		switch {
		case p.at("</"):
			if !p.endTag(t) {
				return e, false
			}
			e.Value = strings.TrimSpace(string(val))
			return e, true
		case p.at("<!--"):
			if !p.comment() {
				return e, false
			}
		case p.at("<![CDATA["):
			k := bytes.Index(p.b[p.i+9:], []byte("]]>"))
			if k < 0 {
				return e, false
			}
			val = frNewlines(val, p.b[p.i+9:p.i+9+k])
			p.i += 9 + k + 3
		case p.at("<?") || p.at("<!"):
			return e, false
		default:
			c, ok := p.startTag()
			if !ok {
				return e, false
			}
			child, ok := p.extElem(&c)
			if !ok {
				return e, false
			}
			p.ns = p.ns[:c.nsMark]
			e.Children[child.Name] = append(e.Children[child.Name], child)
		}
	}
	return e, false
}

// extension is gofeed's shared.ParseExtension.
func (p *frParser) extension(exts *ext.Extensions, t *frTag) bool {
	prefix := p.prefixFor(p.space(t))
	e, ok := p.extElem(t)
	if !ok {
		return false
	}
	if *exts == nil {
		*exts = ext.Extensions{}
	}
	m := (*exts)[prefix]
	if m == nil {
		m = map[string][]ext.Extension{}
		(*exts)[prefix] = m
	}
	m[t.local] = append(m[t.local], e)
	return true
}

// prefixFor is gofeed's shared.PrefixForNamespace.
func (p *frParser) prefixFor(space string) string {
	if prefix, ok := frCanonical[space]; ok {
		return prefix
	}
	// xpp's PrefixForURI: the most recently declared prefix bound to the
	// namespace and not shadowed.
	for i := len(p.ns) - 1; i >= 0; i-- {
		if p.ns[i].uri != space {
			continue
		}
		if cur, ok := p.lookup(p.ns[i].prefix); ok && cur == space {
			if p.ns[i].prefix == "" {
				break // gofeed then keys by the namespace itself
			}
			return p.ns[i].prefix
		}
	}
	return space
}

// native reports an element of RSS's own vocabulary (gofeed's
// nativeNamespaces; the root is unprefixed, so adds none).
func (p *frParser) native(t *frTag) bool {
	switch p.space(t) {
	case "", "rss", "rdf", rdfNS, rss10NS, rss09NS, rss09AltNS:
		return true
	}
	return false
}

const (
	rdfNS      = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
	rss10NS    = "http://purl.org/rss/1.0/"
	rss09NS    = "http://channel.netscape.com/rdf/simple/0.9/"
	rss09AltNS = "http://my.netscape.com/rdf/simple/0.9/"
)

// document is gofeed's parseRoot for an <rss> root.
func (p *frParser) document() (*rss.Feed, bool) {
	if !p.prolog() {
		return nil, false
	}
	root, ok := p.startTag()
	if !ok || root.prefix != "" || !strings.EqualFold(root.local, "rss") {
		return nil, false
	}
	version := p.attr("version")
	var channel *rss.Feed
	var textinput *rss.TextInput
	var image *rss.Image
	var items []*rss.Item
	ok = p.children(&root, func(t *frTag) bool {
		if !p.native(t) {
			return p.skip(t)
		}
		var ok bool
		switch strings.ToLower(t.local) {
		case "channel":
			channel, ok = p.channel(t)
		case "item":
			var it *rss.Item
			if it, ok = p.item(t); ok {
				items = append(items, it)
			}
		case "textinput":
			textinput, ok = p.textInput(t)
		case "image":
			image, ok = p.image(t)
		default:
			ok = p.skip(t)
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	if channel == nil {
		channel = &rss.Feed{Items: []*rss.Item{}}
	}
	channel.Items = append(channel.Items, items...)
	if textinput != nil {
		channel.TextInput = textinput
	}
	if image != nil {
		channel.Image = image
	}
	channel.Version = version
	return channel, true
}

// channel is gofeed's parseChannel.
func (p *frParser) channel(t *frTag) (*rss.Feed, bool) {
	f := &rss.Feed{Items: []*rss.Item{}}
	var exts ext.Extensions
	var categories []*rss.Category
	var links []string
	ok := p.children(t, func(c *frTag) bool {
		if !p.native(c) {
			return p.extension(&exts, c)
		}
		var ok bool
		switch strings.ToLower(c.local) {
		case "title":
			f.Title, ok = p.text(c)
		case "description":
			f.Description, ok = p.text(c)
		case "link":
			if f.Link, ok = p.link(c); ok {
				links = append(links, f.Link)
			}
		case "language":
			f.Language, ok = p.text(c)
		case "copyright":
			f.Copyright, ok = p.text(c)
		case "managingeditor":
			f.ManagingEditor, ok = p.text(c)
		case "webmaster":
			f.WebMaster, ok = p.text(c)
		case "pubdate":
			if f.PubDate, ok = p.text(c); ok {
				f.PubDateParsed = frDate(f.PubDate)
			}
		case "lastbuilddate":
			if f.LastBuildDate, ok = p.text(c); ok {
				f.LastBuildDateParsed = frDate(f.LastBuildDate)
			}
		case "generator":
			f.Generator, ok = p.text(c)
		case "docs":
			f.Docs, ok = p.text(c)
		case "ttl":
			f.TTL, ok = p.text(c)
		case "rating":
			f.Rating, ok = p.text(c)
		case "skiphours":
			f.SkipHours, ok = p.list(c, "hour")
		case "skipdays":
			f.SkipDays, ok = p.list(c, "day")
		case "item":
			var it *rss.Item
			if it, ok = p.item(c); ok {
				f.Items = append(f.Items, it)
			}
		case "cloud":
			f.Cloud = &rss.Cloud{
				Domain:            p.attr("domain"),
				Port:              p.attr("port"),
				Path:              p.attr("path"),
				RegisterProcedure: p.attr("registerProcedure"),
				Protocol:          p.attr("protocol"),
			}
			ok = p.skip(c)
		case "category":
			var cat *rss.Category
			if cat, ok = p.category(c); ok {
				categories = append(categories, cat)
			}
		case "image":
			f.Image, ok = p.image(c)
		case "textinput":
			f.TextInput, ok = p.textInput(c)
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
	if len(links) > 0 {
		f.Links = links
	}
	if len(exts) > 0 {
		f.Extensions = exts
		if itunes, ok := exts["itunes"]; ok {
			f.ITunesExt = ext.NewITunesFeedExtension(itunes)
		}
		if dc, ok := exts["dc"]; ok {
			f.DublinCoreExt = ext.NewDublinCoreExtension(dc)
		}
	}
	return f, true
}

// item is gofeed's parseItem.
func (p *frParser) item(t *frTag) (*rss.Item, bool) {
	it := &rss.Item{}
	var exts ext.Extensions
	var categories []*rss.Category
	var enclosures []*rss.Enclosure
	var links []string
	ok := p.children(t, func(c *frTag) bool {
		name := strings.ToLower(c.local)
		var ok bool
		if name == "encoded" && p.prefixFor(p.space(c)) == "content" {
			it.Content, ok = p.text(c)
			return ok
		}
		if !p.native(c) {
			return p.extension(&exts, c)
		}
		switch name {
		case "title":
			it.Title, ok = p.text(c)
		case "description":
			it.Description, ok = p.text(c)
		case "link":
			if it.Link, ok = p.link(c); ok {
				links = append(links, it.Link)
			}
		case "author":
			it.Author, ok = p.text(c)
		case "comments":
			it.Comments, ok = p.text(c)
		case "pubdate":
			if it.PubDate, ok = p.text(c); ok {
				// gofeed keeps an earlier pubDate's time when a later
				// one does not parse (the channel's does not).
				if d := frDate(it.PubDate); d != nil {
					it.PubDateParsed = d
				}
			}
		case "source":
			src := &rss.Source{URL: p.attr("url")}
			if src.Title, ok = p.text(c); ok {
				it.Source = src
			}
		case "enclosure":
			enc := &rss.Enclosure{URL: p.attr("url"), Length: p.attr("length"), Type: p.attr("type")}
			if ok = p.skip(c); ok {
				it.Enclosure = enc
				enclosures = append(enclosures, enc)
			}
		case "guid":
			perma := p.attr("isPermaLink")
			if perma == "" {
				perma = p.attr("isPermalink")
			}
			if perma == "" {
				perma = "true"
			}
			g := &rss.GUID{IsPermalink: perma}
			if g.Value, ok = p.text(c); ok {
				it.GUID = g
			}
		case "category":
			var cat *rss.Category
			if cat, ok = p.category(c); ok {
				categories = append(categories, cat)
			}
		default:
			// "encoded" outside the content namespace included.
			var v string
			if v, ok = p.text(c); ok {
				if it.Custom == nil {
					it.Custom = make(map[string]string)
				}
				it.Custom[c.local] = v
			}
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	if len(enclosures) > 0 {
		it.Enclosures = enclosures
	}
	if len(categories) > 0 {
		it.Categories = categories
	}
	if len(links) > 0 {
		it.Links = links
	}
	if len(exts) > 0 {
		it.Extensions = exts
		if itunes, ok := exts["itunes"]; ok {
			it.ITunesExt = ext.NewITunesItemExtension(itunes)
		}
		if dc, ok := exts["dc"]; ok {
			it.DublinCoreExt = ext.NewDublinCoreExtension(dc)
		}
	}
	return it, true
}

// link is gofeed's parseLink without an xml:base.
func (p *frParser) link(t *frTag) (string, bool) {
	href := p.attr("href")
	s, ok := p.text(t)
	if s == "" && href != "" {
		s = href
	}
	return s, ok
}

func (p *frParser) category(t *frTag) (*rss.Category, bool) {
	cat := &rss.Category{Domain: p.attr("domain")}
	var ok bool
	cat.Value, ok = p.text(t)
	return cat, ok
}

// list is gofeed's parseSkipHours and parseSkipDays.
func (p *frParser) list(t *frTag, child string) ([]string, bool) {
	out := []string{}
	ok := p.children(t, func(c *frTag) bool {
		if strings.ToLower(c.local) != child {
			return p.skip(c)
		}
		s, ok := p.text(c)
		out = append(out, s)
		return ok
	})
	return out, ok
}

func (p *frParser) image(t *frTag) (*rss.Image, bool) {
	img := &rss.Image{}
	ok := p.textFields(t, map[string]*string{"url": &img.URL, "title": &img.Title, "link": &img.Link,
		"width": &img.Width, "height": &img.Height, "description": &img.Description})
	return img, ok
}

func (p *frParser) textInput(t *frTag) (*rss.TextInput, bool) {
	ti := &rss.TextInput{}
	ok := p.textFields(t, map[string]*string{"title": &ti.Title, "description": &ti.Description,
		"name": &ti.Name, "link": &ti.Link})
	return ti, ok
}

// textFields reads each child of t whose lower-cased name keys fields
// into that field as text (a later one of the same name wins, as in
// gofeed), and skips the others.
func (p *frParser) textFields(t *frTag, fields map[string]*string) bool {
	return p.children(t, func(c *frTag) bool {
		dst, found := fields[strings.ToLower(c.local)]
		if !found {
			return p.skip(c)
		}
		var ok bool
		*dst, ok = p.text(c)
		return ok
	})
}

// frInRange is encoding/xml's isInCharacterRange.
func frInRange(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

func frNameByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '_' || c == ':' || c == '.' || c == '-' || c >= utf8.RuneSelf
}

func frDigit(c byte, base int) bool {
	return '0' <= c && c <= '9' || base == 16 && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')
}

// frEntity returns the XML entities encoding/xml knows without a DTD.
func frEntity(name []byte) (byte, bool) {
	switch string(name) {
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "amp":
		return '&', true
	case "apos":
		return '\'', true
	case "quot":
		return '"', true
	}
	return 0, false
}

// frRef reads the character reference or entity at raw[0] == '&' the way
// encoding/xml's non-strict text reader does: n bytes are consumed; r is
// the character (ok) or, when !ok, the n bytes stay literal. bad reports a
// reference to a character XML forbids (encoding/xml fails).
func frRef(raw []byte) (r rune, n int, ok, bad bool) {
	j := 1
	if j < len(raw) && raw[j] == '#' {
		j++
		base := 10
		if j < len(raw) && raw[j] == 'x' {
			base = 16
			j++
		}
		start := j
		for j < len(raw) && frDigit(raw[j], base) {
			j++
		}
		if j >= len(raw) || raw[j] != ';' {
			return 0, j, false, false
		}
		v, err := strconv.ParseUint(string(raw[start:j]), base, 64)
		if err != nil || v > unicode.MaxRune {
			return 0, j + 1, false, false
		}
		r = rune(v)
		if !utf8.ValidRune(r) {
			r = utf8.RuneError // string(rune(v)) of a surrogate
		}
		return r, j + 1, true, !frInRange(r)
	}
	for j < len(raw) && frNameByte(raw[j]) {
		j++
	}
	if j >= len(raw) || raw[j] != ';' {
		return 0, j, false, false
	}
	if c, ok := frEntity(raw[1:j]); ok {
		return rune(c), j + 1, true, false
	}
	return 0, j + 1, false, false
}

// frCheckText reports whether encoding/xml reads raw character data
// (between tags) without an error.
func frCheckText(raw []byte) bool {
	if bytes.Contains(raw, []byte("]]>")) {
		return false
	}
	for {
		k := bytes.Index(raw, []byte("&#"))
		if k < 0 {
			return true
		}
		raw = raw[k:]
		_, n, _, bad := frRef(raw)
		if bad {
			return false
		}
		raw = raw[n:]
	}
}

// frUnescape appends raw character data decoded as encoding/xml decodes
// it (entities, character references, newlines) to dst.
func frUnescape(dst, raw []byte) ([]byte, bool) {
	for len(raw) > 0 {
		k := bytes.IndexAny(raw, "&\r")
		if k < 0 {
			return append(dst, raw...), true
		}
		dst = append(dst, raw[:k]...)
		raw = raw[k:]
		if raw[0] == '\r' {
			dst = append(dst, '\n')
			raw = raw[1:]
			if len(raw) > 0 && raw[0] == '\n' {
				raw = raw[1:]
			}
			continue
		}
		r, n, ok, bad := frRef(raw)
		switch {
		case bad:
			return nil, false
		case ok:
			dst = utf8.AppendRune(dst, r)
		default:
			dst = append(dst, raw[:n]...)
		}
		raw = raw[n:]
	}
	return dst, true
}

// frNewlines appends a CDATA section's content with encoding/xml's
// newline normalisation.
func frNewlines(dst, raw []byte) []byte {
	for len(raw) > 0 {
		k := bytes.IndexByte(raw, '\r')
		if k < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:k]...)
		dst = append(dst, '\n')
		raw = raw[k+1:]
		if len(raw) > 0 && raw[0] == '\n' {
			raw = raw[1:]
		}
	}
	return dst
}

// frDate is gofeed's date parsing for pubDate and lastBuildDate
// (shared.ParseDate, in UTC). The layouts gofeed tries first are tried
// here in the same order, so a success is gofeed's result; RFC 1123 dates
// in GMT or UTC, which no earlier layout of gofeed's parses (TestFrDate),
// are read directly; anything else goes through gofeed's own parser via
// its translator (a feed whose only field is a dc:date).
func frDate(s string) *time.Time {
	d := strings.TrimSpace(s)
	if d == "" {
		return nil
	}
	layouts := []string{time.RFC822Z, time.RFC3339, time.RubyDate, time.RFC1123Z}
	if len(d) > 3 && d[3] == ',' {
		// "Mon, …": the first three cannot parse it (a day of the month,
		// a year, a weekday and a space come first).
		layouts = layouts[3:]
	}
	for _, layout := range layouts {
		if t, err := time.Parse(layout, d); err == nil {
			t = t.UTC()
			return &t
		}
	}
	if frRFC1123UTC(d) {
		if t, err := time.Parse(time.RFC1123, d); err == nil {
			t = t.UTC()
			return &t
		}
	}
	return gofeedDate(s)
}

// frRFC1123UTC reports "Mon, 02 Jan 2006 15:04:05 GMT" (or UTC) exactly.
func frRFC1123UTC(d string) bool {
	if len(d) != 29 || d[3] != ',' || d[4] != ' ' || d[7] != ' ' || d[11] != ' ' || d[16] != ' ' ||
		d[19] != ':' || d[22] != ':' || d[25] != ' ' || d[26:] != "GMT" && d[26:] != "UTC" {
		return false
	}
	if !strings.Contains("Mon Tue Wed Thu Fri Sat Sun", d[:3]) || strings.Contains(d[:3], " ") ||
		!strings.Contains("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", d[8:11]) || strings.Contains(d[8:11], " ") {
		return false
	}
	for _, k := range []int{5, 6, 12, 13, 14, 15, 17, 18, 20, 21, 23, 24} {
		if d[k] < '0' || d[k] > '9' {
			return false
		}
	}
	return true
}

// gofeedDate parses s with gofeed's own date parser (internal to gofeed):
// its RSS translator parses a channel's dc:date when there is no
// lastBuildDate.
func gofeedDate(s string) *time.Time {
	f, err := (&gofeed.DefaultRSSTranslator{DisableContentImageScan: true}).Translate(
		&rss.Feed{DublinCoreExt: &ext.DublinCoreExtension{Date: []string{s}}})
	if err != nil || f.UpdatedParsed == nil {
		return nil
	}
	t := f.UpdatedParsed.UTC()
	return &t
}
