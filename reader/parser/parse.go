package parser

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"mime"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mmcdole/gofeed"
	"github.com/mmcdole/gofeed/atom"
	gjson "github.com/mmcdole/gofeed/json"
	"github.com/mmcdole/gofeed/rss"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Parse limits.
const (
	// DefaultMaxItems is how many items Parse keeps by default.
	DefaultMaxItems = 1000
	// MaxDepth is the deepest element nesting Parse accepts in XML feeds.
	MaxDepth = 128
	// MaxNodes bounds the elements and attributes of an XML feed (before
	// the cut at MaxItems), and the values and members a JSON Feed's
	// items and other members hold. The feed parser spends about a
	// kilobyte on each XML element, so a body of small empty elements
	// would otherwise cost two hundred times its size. A feed over the
	// budget is cut before the item that crosses it (Truncated), or
	// refused when that is the first item.
	MaxNodes = 100_000
	// MaxTagBytes bounds one tag with its attributes: the XML tokenizer
	// holds all of a tag's attributes at once, at some fifty bytes each.
	MaxTagBytes = 256 << 10
	// maxErrText bounds the parser's own words quoted in an error.
	maxErrText = 200
)

// Options configures Parse.
type Options struct {
	// MaxItems is how many items are kept (default DefaultMaxItems). A
	// feed with more is cut (the first MaxItems, newest first as feeds
	// list them) and Parsed.Truncated is set: more data is waiting.
	MaxItems int
	// Extract reads a typed value from items without slogfeed's reading
	// element; nil for none.
	Extract *storage.ExtractRule
	// Now is the time of the fetch: dates more than an hour after it are
	// implausible, and it becomes each item's Fetched time. Zero skips the
	// future check.
	Now time.Time
	// BaseURL resolves relative links: the URL the feed was fetched from.
	BaseURL string
	// Seen, when set, names items of a feed that need no parsing: those
	// whose hash (see Parsed.ItemHashes) it reports. They are cut from
	// the document before it is parsed and are neither in
	// Items nor normalised (sanitised) again. The service passes the
	// hashes of the items the feed's previous fetch stored: an item whose
	// bytes did not change since needs nothing done.
	Seen func(hash uint64) bool
}

// Parsed is a parsed, normalised feed.
type Parsed struct {
	// Title is the feed's title as plain text; Site its web page.
	Title, Site string
	// Items are normalised, in the feed's order (newest first as feeds
	// list them), with stable IDs, duplicates of an ID dropped.
	Items []storage.Item
	// TTL is RSS <ttl>, capped at MaxCacheFor.
	TTL time.Duration
	// Sleep is the publisher's sleep plan from <skipHours>/<skipDays>
	// (zero when absent or invalid).
	Sleep schedule.SleepPlan
	// UpdateHint is the syndication module's sy:updatePeriod divided by
	// sy:updateFrequency (zero when absent).
	UpdateHint time.Duration
	// Truncated reports that the feed had more than MaxItems items.
	Truncated bool
	// ExtractErr reports an unusable extraction rule (wrapping
	// ErrExtractRule); the feed itself parsed, without rule readings.
	ExtractErr error
	// Skipped reports the records a source adapter left out of a document
	// it otherwise read (bad values, missing fields): how many and why,
	// e.g. "3 of 100 rows skipped: row 7: …"; for an XML feed, the
	// complete item elements the feed parser did not return ("2 of 4
	// items could not be read"; ItemHashes is then empty, so that no item
	// counts as stored). The feed keeps it as its warning.
	Skipped error
	// Hubs are the WebSub hubs the document advertises (Atom and RSS
	// atom:link rel="hub", JSON Feed "hubs" of type WebSub), absolute
	// http(s) URLs, at most MaxHubs; Self is its rel="self" link (JSON
	// Feed: feed_url), the topic to subscribe to. See push.go.
	Hubs []string
	Self string
	// Repairs are what Parse replaced rather than refused: invalid UTF-8
	// bytes of the document, and item dates that did not parse or were
	// implausible (before 1990, in the future: a year 9999).
	Repairs Repairs
	// Older is the link to the page of older items of a paged feed (RFC
	// 5005 rel="next" or rel="prev-archive"; JSON Feed next_url), an
	// absolute http(s) URL, or "". See paging.go.
	Older string
	// ItemHashes are the hashes of the complete item elements of an XML
	// feed, or the items of a JSON Feed (those Seen skipped included), in
	// document order: the raw bytes of the item with the BaseURL and
	// Extract rule it is normalised under (and the XML root's start tag,
	// or the JSON document's other members), so that a change of any
	// changes the hash.
	// Hashes hold within one process only (they are not stored).
	ItemHashes []uint64
	// Unchanged counts the items Seen skipped.
	Unchanged int
}

// Repairs counts what Parse replaced in one document.
type Repairs struct {
	// InvalidUTF8 is how many bytes were not UTF-8 (read as
	// Windows-1252 in XML, U+FFFD in JSON).
	InvalidUTF8 int
	// BadDates are the ids of the items whose publish or update date
	// was dropped (they get the fetch time).
	BadDates []string
	// UTF8Items are the ids of the items that held invalid UTF-8.
	UTF8Items []string
	// Last says what the last repair was, for the feed's warning.
	Last string
}

// Warning says what a successful parse left out (records an adapter
// skipped, an unusable extraction rule, repairs), for storage.Feed.Warning;
// "" when nothing was.
func (p *Parsed) Warning() string {
	err := errors.Join(p.Skipped, p.ExtractErr)
	if w := p.Repairs.Warning(); w != "" {
		err = errors.Join(err, errors.New(w))
	}
	if err == nil {
		return ""
	}
	return sanitize.Truncate(err.Error(), storage.MaxWarningLen/4)
}

// invalidUTF8 counts the bytes of b that are not part of valid UTF-8.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return 0
	}
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			n++
		}
		b = b[size:]
	}
	return n
}

// Parse parses an RSS, RDF, Atom or JSON Feed document and normalises its
// items. contentType (the HTTP Content-Type, may be empty) supplies the
// charset when the document declares none and improves error messages.
//
// Errors wrap ErrNotFeed (empty, HTML, other documents) or ErrMalformed
// (syntax errors, nesting deeper than MaxDepth, a failure inside the
// parser); a panic in the parser is recovered as ErrMalformed. Bad values
// inside a good feed (an implausible date, a broken link, an invalid
// reading) are dropped from that item, never an error.
//
// XML is read without DTD processing: entity declarations are never
// expanded and external entities never loaded. Charsets: the XML
// declaration's encoding, else the Content-Type charset, else UTF-8;
// invalid UTF-8 bytes are read as Windows-1252, and a document labelled
// with a legacy charset that is nevertheless valid, non-ASCII UTF-8 is read
// as UTF-8 (mislabelled).
func Parse(body []byte, contentType string, opt Options) (p *Parsed, err error) {
	if opt.MaxItems <= 0 {
		opt.MaxItems = DefaultMaxItems
	}
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%w: the feed parser failed: %s", ErrMalformed, clip(fmt.Sprint(r)))
		}
	}()
	body = fromUTF16(body)
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return nil, fmt.Errorf("%w: the response is empty", ErrNotFeed)
	case trimmed[0] == '{':
		return parseJSON(trimmed, opt)
	case trimmed[0] == '<':
		return parseXML(body, contentType, opt)
	case isHTMLType(contentType):
		return nil, errHTML
	default:
		return nil, fmt.Errorf("%w: the response%s is neither XML nor JSON", ErrNotFeed, describeType(contentType))
	}
}

var errHTML = fmt.Errorf("%w: the server sent an HTML page", ErrNotFeed)

func isHTMLType(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/html" || mt == "application/xhtml+xml"
}

func describeType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt == "" {
		return ""
	}
	return fmt.Sprintf(" (%.60s)", mt)
}

// clip bounds a message quoted from a parser and makes it printable.
func clip(s string) string { return sanitize.Excerpt(s, maxErrText) }

// parseXML parses RSS, RDF and Atom.
func parseXML(body []byte, contentType string, opt Options) (*Parsed, error) {
	orig := body
	body, bad := toUTF8(body, contentType)
	// The tokenizer holds a tag's attributes at once: measure the longest
	// tag before it reads any.
	if n := longestTag(body); n > MaxTagBytes {
		return nil, fmt.Errorf("%w: a tag of %d bytes (the limit is %d)", ErrMalformed, n, MaxTagBytes)
	}
	sc, err := scanXML(body, opt.MaxItems)
	if err != nil && sc.root == "" && isHTMLType(contentType) {
		return nil, errHTML
	}
	if err != nil {
		return nil, err
	}
	if sc.html {
		return nil, errHTML
	}
	switch sc.root {
	case "rss", "rdf", "feed":
	case "":
		return nil, fmt.Errorf("%w: the response%s has no root element", ErrNotFeed, describeType(contentType))
	default:
		return nil, fmt.Errorf("%w: the document's root element is <%s>, not RSS or Atom", ErrNotFeed, clip(sc.root))
	}
	if len(sc.strays) > 0 {
		// The feed parser's decoder takes an end tag that closes nothing
		// open for the end of every open element, the root's included,
		// and reads no item after it: drop such tags.
		body = cutSpans(body, sc.strays)
		if sc, err = scanXML(body, opt.MaxItems); err != nil {
			return nil, err
		}
	}
	truncated := false
	if sc.cut > 0 {
		body = append(body[:sc.cut:sc.cut], sc.closers...)
		truncated = true
	}
	hashes := itemHashes(body, sc.items, opt)
	t, err := parseSeen(sc.root, body, sc.items, hashes, opt.Seen)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrMalformed, clip(err.Error()))
	}
	feed, rf, af, body := t.feed, t.rss, t.atom, t.body
	n := newNormalizer(opt)
	if bad > 0 {
		n.utf8Items = xmlUTF8Items(orig, sc.items, hashes, t.seen, opt.MaxItems)
	}
	n.sfKeys = namespaceKeys(body)
	p := n.feed(feed)
	p.Truncated = p.Truncated || truncated
	p.ItemHashes, p.Unchanged = hashes, t.unchanged
	if lost := t.want - t.read(); lost > 0 {
		// Items the scan found complete that the feed parser did not
		// return: say so, and let the next poll parse them all again
		// rather than take them for stored.
		p.Skipped = errors.Join(p.Skipped, fmt.Errorf("%d of %d items could not be read", lost, t.want))
		p.ItemHashes = nil
	}
	p.Hubs, p.Self = xmlHubs(rf, af, body, opt.BaseURL)
	p.Repairs.utf8(bad, "read as Windows-1252")
	p.Older = olderLink(xmlLinks(rf, af, body), opt.BaseURL)
	if rf != nil {
		p.TTL = rssTTL(rf.TTL)
		if plan, err := schedule.ParseSkip(rf.SkipHours, rf.SkipDays); err == nil {
			p.Sleep = plan
		}
	}
	return p, nil
}

// tree is what the feed parser read of an XML document.
type tree struct {
	feed *gofeed.Feed
	rss  *rss.Feed  // nil for Atom
	atom *atom.Feed // nil for RSS and RDF
	// body is the document read: without the unchanged items, or whole.
	body []byte
	// unchanged counts the items cut from body; seen is the Seen that
	// cut them (nil when none were).
	unchanged int
	seen      func(uint64) bool
	// want counts the items of body the feed parser is expected to
	// return (see expected).
	want int
}

// read returns how many items the feed parser returned.
func (t *tree) read() int {
	switch {
	case t.rss != nil:
		return len(t.rss.Items)
	case t.atom != nil:
		return len(t.atom.Entries)
	}
	return 0
}

// expected counts the item elements the feed parser should return of a
// document without those seen reports (nil: none): the complete items
// whose names have no namespace prefix (a prefixed one may be an
// extension element to the feed parser).
func expected(items []span, hashes []uint64, seen func(uint64) bool) int {
	n := 0
	for i, sp := range items {
		if !sp.prefixed && (seen == nil || !seen(hashes[i])) {
			n++
		}
	}
	return n
}

// cutSpans returns b without the byte ranges spans (in order, disjoint).
func cutSpans(b []byte, spans []span) []byte {
	out := make([]byte, 0, len(b))
	last := 0
	for _, sp := range spans {
		out = append(out, b[last:sp.start]...)
		last = sp.end
	}
	return append(out, b[last:]...)
}

// parseSeen parses body (root element root) without the items whose
// hashes seen reports. The document without them must read as the whole
// one does: when it does not read at all, or the feed parser returns
// fewer items of it than expected, the whole document is read (and no
// item counts as unchanged).
func parseSeen(root string, body []byte, items []span, hashes []uint64, seen func(uint64) bool) (tree, error) {
	t := tree{body: body}
	if seen != nil {
		t.body, t.unchanged = dropSeen(body, items, hashes, seen)
		if t.unchanged > 0 {
			t.seen = seen
		}
	}
	var err error
	t.feed, t.rss, t.atom, err = parseTree(root, t.body)
	t.want = expected(items, hashes, t.seen)
	if t.unchanged > 0 && (err != nil || t.read() < t.want) {
		t.body, t.unchanged, t.seen = body, 0, nil
		t.feed, t.rss, t.atom, err = parseTree(root, body)
		t.want = expected(items, hashes, nil)
	}
	return t, err
}

// parseTree runs the feed parser of a document whose root element is
// root ("rss", "rdf" or "feed") and translates its result.
func parseTree(root string, body []byte) (feed *gofeed.Feed, rf *rss.Feed, af *atom.Feed, err error) {
	if root == "feed" {
		af, err = (&atom.Parser{}).Parse(bytes.NewReader(body))
		if err == nil {
			feed, err = (&gofeed.DefaultAtomTranslator{}).Translate(af)
		}
		return feed, nil, af, err
	}
	rf, err = (&rss.Parser{}).Parse(bytes.NewReader(body))
	if err == nil {
		// slogfeed keeps no item images: spare the translator its HTML
		// parse of every description in search of one.
		feed, err = (&gofeed.DefaultRSSTranslator{DisableContentImageScan: true}).Translate(rf)
	}
	return feed, rf, nil, err
}

// parseJSON parses JSON Feed (1.0 and 1.1).
func parseJSON(body []byte, opt Options) (*Parsed, error) {
	top, items, truncated, err := readJSON(body, opt.MaxItems)
	if err != nil {
		return nil, err
	}
	var version string
	_ = json.Unmarshal(top["version"], &version)
	if _, hasItems := top["items"]; !hasItems && !strings.Contains(version, "jsonfeed.org/version/") {
		return nil, fmt.Errorf("%w: a JSON document that is not a JSON Feed (no version, no items)", ErrNotFeed)
	}
	hashes := jsonItemHashes(top, items, opt)
	unchanged := 0
	if opt.Seen != nil {
		kept := make([]json.RawMessage, 0, len(items))
		for i, raw := range items {
			if opt.Seen(hashes[i]) {
				unchanged++
				continue
			}
			kept = append(kept, raw)
		}
		items = kept
	}
	if truncated || unchanged > 0 {
		// The feed parser reads the document again: give it the items
		// kept only.
		raw, err := json.Marshal(items)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrMalformed, clip(err.Error()))
		}
		top["items"] = raw
		if body, err = json.Marshal(top); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrMalformed, clip(err.Error()))
		}
	}
	jf, err := (&gjson.Parser{}).Parse(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrMalformed, clip(err.Error()))
	}
	feed, err := (&gofeed.DefaultJSONTranslator{}).Translate(jf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrMalformed, clip(err.Error()))
	}
	n := newNormalizer(opt)
	n.utf8Items = jsonUTF8Items(items)
	n.jsonItems = make([]jsonItemExtra, len(items))
	for i, raw := range items {
		_ = json.Unmarshal(raw, &n.jsonItems[i]) // a bad item loses its extras only
	}
	p := n.feed(feed)
	p.Truncated = p.Truncated || truncated
	p.ItemHashes, p.Unchanged = hashes, unchanged
	p.Hubs, p.Self = jsonHubs(top, opt.BaseURL)
	p.Repairs.utf8(invalidUTF8(body), "replaced by U+FFFD")
	p.Older = jsonOlder(top, opt.BaseURL)
	return p, nil
}

// readJSON reads the top-level object of a JSON document as a stream:
// each member's value but "items" as it is, and of the "items" array the
// first maxItems items, as long as their elements and those of the other
// members stay within MaxNodes (the items past the cap or the budget are
// read over, not kept: truncated). A feed whose first item, or whose
// members beside its items, cross the budget are refused. top["items"]
// holds an empty array when the document has items (items has them).
func readJSON(body []byte, maxItems int) (top map[string]json.RawMessage, items []json.RawMessage, truncated bool, err error) {
	malformed := func(what string, err error) error {
		return fmt.Errorf("%w: %s%s", ErrMalformed, what, clip(err.Error()))
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if _, err := d.Token(); err != nil { // '{': Parse saw it
		return nil, nil, false, malformed("", err)
	}
	top = map[string]json.RawMessage{}
	nodes := 0
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, nil, false, malformed("", err)
		}
		key, _ := tok.(string) // object keys are strings
		if key != "items" {
			var raw json.RawMessage
			if err := d.Decode(&raw); err != nil {
				return nil, nil, false, malformed("", err)
			}
			if nodes += jsonNodes(raw); nodes > MaxNodes {
				return nil, nil, false, fmt.Errorf("%w: more than %d elements", ErrMalformed, MaxNodes)
			}
			top[key] = raw
			continue
		}
		// A repeated "items" replaces the earlier one, as the last
		// value of a repeated key does when JSON is decoded.
		for _, it := range items {
			nodes -= jsonNodes(it)
		}
		items, truncated = nil, false
		top["items"] = json.RawMessage("[]")
		tok, err = d.Token()
		if err != nil {
			return nil, nil, false, malformed("items: ", err)
		}
		if tok == nil { // null: no items
			continue
		}
		if tok != json.Delim('[') {
			return nil, nil, false, fmt.Errorf("%w: items: not an array", ErrMalformed)
		}
		for d.More() {
			if truncated {
				if err := d.Decode(&skipJSON{}); err != nil {
					return nil, nil, false, malformed("items: ", err)
				}
				continue
			}
			var raw json.RawMessage
			if err := d.Decode(&raw); err != nil {
				return nil, nil, false, malformed("items: ", err)
			}
			n := jsonNodes(raw)
			if nodes+n > MaxNodes {
				if len(items) == 0 {
					return nil, nil, false, fmt.Errorf("%w: more than %d elements", ErrMalformed, MaxNodes)
				}
				truncated = true // keep the items before this one
				continue
			}
			nodes += n
			items = append(items, raw)
			truncated = len(items) == maxItems && d.More()
		}
		if _, err := d.Token(); err != nil { // ']'
			return nil, nil, false, malformed("items: ", err)
		}
	}
	if _, err := d.Token(); err != nil { // '}'
		return nil, nil, false, malformed("", err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, false, fmt.Errorf("%w: data after the top-level object", ErrMalformed)
	}
	return top, items, truncated, nil
}

// skipJSON decodes any JSON value into nothing.
type skipJSON struct{}

func (*skipJSON) UnmarshalJSON([]byte) error { return nil }

// jsonNodes counts the elements of a JSON value: its objects, arrays and
// scalars, and the members of its objects.
func jsonNodes(raw []byte) int {
	n := 1
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{', c == '[', c == ',', c == ':':
			n++
		}
	}
	return n
}

// jsonItemExtra is what gofeed does not keep of a JSON Feed item.
type jsonItemExtra struct {
	ContentHTML *string         `json:"content_html"`
	ContentText *string         `json:"content_text"`
	Slogfeed    json.RawMessage `json:"_slogfeed"`
}

// rssTTL converts RSS <ttl> minutes, capped at schedule.MaxDelay (the
// cap of every delay a server can impose). A value that is not a whole
// number of minutes is no TTL.
func rssTTL(s string) time.Duration {
	s = strings.TrimSpace(s)
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0
	}
	limit := int64(schedule.MaxDelay / time.Minute)
	if len(s) > 12 {
		return schedule.MaxDelay
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	if n >= limit {
		return schedule.MaxDelay
	}
	return time.Duration(n) * time.Minute
}

// fromUTF16 converts a document with a UTF-16 byte order mark to UTF-8.
func fromUTF16(b []byte) []byte {
	if len(b) < 2 || !(b[0] == 0xfe && b[1] == 0xff || b[0] == 0xff && b[1] == 0xfe) {
		return b
	}
	out, err := unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM).NewDecoder().Bytes(b)
	if err != nil {
		return b
	}
	return out
}

// xmlDecl matches the XML declaration and its encoding pseudo-attribute.
var (
	xmlDeclRe  = regexp.MustCompile(`^\s*<\?xml\s[^>]{0,512}?\?>`)
	encodingRe = regexp.MustCompile(`(encoding\s*=\s*)(?:"[^"]{0,64}"|'[^']{0,64}')`)
)

// toUTF8 returns body as UTF-8 with its XML declaration saying so. The
// charset is the declaration's, else contentType's, else UTF-8. Invalid
// UTF-8 bytes are read as Windows-1252; a document labelled with another
// charset that is valid UTF-8 with non-ASCII characters is taken to be
// mislabelled UTF-8.
//
// It also returns how many bytes were invalid UTF-8 and read as
// Windows-1252.
func toUTF8(body []byte, contentType string) (_ []byte, bad int) {
	var label string
	declared := false // the declaration names an encoding
	decl := xmlDecl(body)
	if m := encodingRe.FindSubmatch(decl); m != nil {
		label = strings.Trim(string(m[0][len(m[1]):]), `"'`)
		declared = true
	}
	if label == "" && containsFold(contentType, "charset") {
		if _, params, err := mime.ParseMediaType(contentType); err == nil {
			label = params["charset"]
		}
	}
	plain := plainText(body) // ASCII text: valid UTF-8, nothing to strip
	enc, name := charset.Lookup(strings.TrimSpace(label))
	switch {
	case enc == nil || name == "utf-8" || label == "":
		if !plain {
			bad = invalidUTF8(body)
			body = repairUTF8(body)
		}
	case strings.HasPrefix(name, "utf-16") && bytes.IndexByte(body, 0) < 0:
		// Declared UTF-16 but without a single zero byte: not UTF-16 (a
		// document converted from UTF-16 above still says UTF-16).
		bad = invalidUTF8(body)
		body = repairUTF8(body)
	case utf8.Valid(body) && hasNonASCII(body):
		// Mislabelled: legacy text is almost never valid UTF-8 by chance.
	default:
		plain = false
		if out, err := enc.NewDecoder().Bytes(body); err == nil {
			body = out
		} else {
			bad = invalidUTF8(body)
			body = repairUTF8(body)
		}
	}
	if declared && !strings.EqualFold(label, "utf-8") {
		// Say UTF-8 in the declaration so the parser does not convert
		// again (one that says so already, or names no encoding, is
		// left as it is).
		fixed := encodingRe.ReplaceAll(decl, []byte(`${1}"UTF-8"`))
		body = append(fixed, body[len(decl):]...)
	}
	if plain {
		return stripCharRefs(body), bad
	}
	return stripNonChars(body), bad
}

// xmlDecl returns the XML declaration body starts with (xmlDeclRe's
// match), or nil; the expression runs only when one may be there.
func xmlDecl(body []byte) []byte {
	i := 0
	for i < len(body) && isRESpace(body[i]) { // ^\s* has no bound
		i++
	}
	if !bytes.HasPrefix(body[i:], []byte("<?xml")) {
		return nil
	}
	return xmlDeclRe.Find(body)
}

// isRESpace is \s in a regular expression: space, \t, \n, \f, \r.
func isRESpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// containsFold reports whether s contains sub (ASCII), ignoring case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// plainText reports whether b is all ASCII with no C0 control character
// but tab, line feed and carriage return: text that is valid UTF-8 and
// holds no character XML forbids, so that neither needs checking byte by
// byte. It reads eight bytes at a time.
func plainText(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		if x&highs != 0 {
			return false
		}
		// With every byte below 0x80, a byte below 0x20 sets its high
		// bit here (and only then does any): look at the eight bytes.
		if (x-0x20*ones)&^x&highs != 0 && !plainASCII(b[:8]) {
			return false
		}
		b = b[8:]
	}
	return plainASCII(b)
}

// plainASCII is plainText one byte at a time.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 || c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

// repairUTF8 replaces each byte of b that is not part of valid UTF-8 by the
// Windows-1252 character it stands for.
func repairUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+len(b)/8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			out = utf8.AppendRune(out, charmap.Windows1252.DecodeByte(b[0]))
			b = b[1:]
			continue
		}
		out = append(out, b[:size]...)
		b = b[size:]
	}
	return out
}

// stripCharRefs removes the character references to characters XML
// forbids (&#0; …).
func stripCharRefs(b []byte) []byte {
	if !bytes.Contains(b, []byte("&#")) {
		return b
	}
	return charRefRe.ReplaceAllFunc(b, func(ref []byte) []byte {
		if xmlChar(ref) {
			return ref
		}
		return nil
	})
}

// stripNonChars removes what XML forbids and the XML decoder would stop
// at: C0 control characters other than tab, newline and carriage return
// (feeds carry them often enough; the feed parser drops them too) and the
// non-characters U+FFFE and U+FFFF.
func stripNonChars(b []byte) []byte {
	dirty := bytes.Contains(b, []byte("\xef\xbf\xbe")) || bytes.Contains(b, []byte("\xef\xbf\xbf"))
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			dirty = true
			break
		}
	}
	b = stripCharRefs(b)
	if !dirty {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r':
			continue
		case c == 0xef && i+2 < len(b) && b[i+1] == 0xbf && (b[i+2] == 0xbe || b[i+2] == 0xbf):
			i += 2
			continue
		}
		out = append(out, c)
	}
	return out
}

// charRefRe matches numeric character references.
var charRefRe = regexp.MustCompile(`&#(?:[xX][0-9a-fA-F]{1,8}|[0-9]{1,10});`)

// xmlChar reports whether a numeric character reference names a character
// XML allows.
func xmlChar(ref []byte) bool {
	s := string(ref[2 : len(ref)-1])
	base := 10
	if s[0] == 'x' || s[0] == 'X' {
		s, base = s[1:], 16
	}
	r, err := strconv.ParseUint(s, base, 32)
	if err != nil {
		return false
	}
	return r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// scanResult is what scanXML learnt about a document before it is parsed.
type scanResult struct {
	root    string // local name of the root element, lower case
	html    bool   // an HTML document
	cut     int    // > 0: keep body[:cut] (MaxItems items) ...
	closers []byte // ... followed by these end tags
	items   []span // the complete item elements (before any cut)
	// strays are the end tags that close no open element, before the
	// root's end.
	strays []span
}

// span is a byte range [start, end) of a document. For an item element,
// prefixed tells that its name has a namespace prefix.
type span struct {
	start, end int
	prefixed   bool
}

// hashSeed seeds Parsed.ItemHashes for the life of the process.
var hashSeed = maphash.MakeSeed()

// itemHashes hashes each item element of body with what it is normalised
// under (see Parsed.ItemHashes).
func itemHashes(body []byte, items []span, opt Options) []uint64 {
	if len(items) == 0 {
		return nil
	}
	// The root's start tag declares the namespaces that reading
	// extraction goes by: a change to it changes every item's reading.
	hash := itemHasher(opt, func(h *maphash.Hash) { h.Write(rootTag(body[:items[0].start])) })
	out := make([]uint64, len(items))
	for i, sp := range items {
		out[i] = hash(body[sp.start:sp.end])
	}
	return out
}

// jsonItemHashes hashes each item of a JSON Feed (its bytes as the
// document has them) with what it is normalised under, the document's
// other members included (see Parsed.ItemHashes).
func jsonItemHashes(top map[string]json.RawMessage, items []json.RawMessage, opt Options) []uint64 {
	if len(items) == 0 {
		return nil
	}
	hash := itemHasher(opt, func(h *maphash.Hash) {
		for _, k := range slices.Sorted(maps.Keys(top)) {
			if k != "items" {
				h.WriteString(k)
				h.WriteByte(0)
				h.Write(top[k])
				h.WriteByte(0)
			}
		}
	})
	out := make([]uint64, len(items))
	for i, raw := range items {
		out[i] = hash(raw)
	}
	return out
}

// itemHasher returns a function that hashes an item's bytes with what it
// is normalised under: opt's BaseURL and Extract rule, and what doc writes
// of the document around the items.
func itemHasher(opt Options, doc func(h *maphash.Hash)) func(item []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	h.WriteString(opt.BaseURL)
	h.WriteByte(0)
	if opt.Extract != nil {
		rule, _ := json.Marshal(opt.Extract)
		h.Write(rule)
	}
	h.WriteByte(0)
	doc(&h)
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], h.Sum64())
	return func(item []byte) uint64 {
		h.Reset() // the seed stays
		h.Write(prefix[:])
		h.Write(item)
		return h.Sum64() | 1 // never 0
	}
}

// rootTag returns the first start tag of head (a document's bytes before
// its first item), past the XML declaration, comments and doctype; nil
// when there is none.
func rootTag(head []byte) []byte {
	for i := 0; ; {
		j := bytes.IndexByte(head[i:], '<')
		if j < 0 {
			return nil
		}
		i += j
		k := bytes.IndexByte(head[i:], '>')
		if k < 0 {
			return nil
		}
		if i+1 < len(head) && (head[i+1] == '?' || head[i+1] == '!') {
			i += k + 1
			continue
		}
		return head[i : i+k+1]
	}
}

// dropSeen returns body without the item elements whose hash seen
// reports, and how many it dropped.
func dropSeen(body []byte, items []span, hashes []uint64, seen func(uint64) bool) ([]byte, int) {
	var out []byte
	last, n := 0, 0
	for i, sp := range items {
		if !seen(hashes[i]) {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(body))
		}
		out = append(out, body[last:sp.start]...)
		last = sp.end
		n++
	}
	if n == 0 {
		return body, 0
	}
	return append(out, body[last:]...), n
}

// scanXML tokenises the document once, with the same non-validating
// tokenizer the feed parser uses and no DTD processing, to find the root
// element, to refuse nesting deeper than MaxDepth (the parser recurses on
// nested extension elements) and to find where to cut a feed with more
// than maxItems items, so that a huge feed costs no more memory than a
// feed of maxItems items.
func scanXML(body []byte, maxItems int) (scanResult, error) {
	var res scanResult
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil } // already UTF-8
	var stack []xml.Name
	items, nodes := 0, 0
	var itemOff int64        // where the current item starts
	var itemStack []xml.Name // its ancestors
	itemDepth := -1          // len(stack) outside the current item; -1 outside items
	cut := func(off int64, ancestors []xml.Name) {
		res.cut = int(off)
		// Items past the cut are not in the document parsed: no hash of
		// theirs may name bytes beyond it.
		for len(res.items) > 0 && res.items[len(res.items)-1].end > res.cut {
			res.items = res.items[:len(res.items)-1]
		}
		for i := len(ancestors) - 1; i >= 0; i-- {
			res.closers = append(res.closers, "</"+qualified(ancestors[i])+">"...)
		}
	}
	for {
		off := d.InputOffset()
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			if res.root == "" {
				return res, fmt.Errorf("%w: not XML: %s", ErrNotFeed, clip(err.Error()))
			}
			return res, fmt.Errorf("%w: %s", ErrMalformed, clip(err.Error()))
		}
		switch t := tok.(type) {
		case xml.Directive:
			if len(stack) == 0 && isHTMLDoctype(t) {
				res.html = true
				return res, nil
			}
		case xml.StartElement:
			if len(stack) == 0 {
				res.root = strings.ToLower(t.Name.Local)
				if res.root == "html" {
					res.html = true
					return res, nil
				}
			}
			if isItemElement(t.Name, stack) {
				items++
				if items > maxItems {
					cut(off, stack)
					return res, nil
				}
				itemOff, itemStack = off, append(itemStack[:0], stack...)
				itemDepth = len(stack)
			}
			if nodes += 1 + len(t.Attr); nodes > MaxNodes {
				if items >= 2 {
					cut(itemOff, itemStack) // keep the items before this one
					return res, nil
				}
				return res, fmt.Errorf("%w: more than %d elements and attributes", ErrMalformed, MaxNodes)
			}
			stack = append(stack, t.Name)
			if len(stack) > MaxDepth {
				return res, fmt.Errorf("%w: elements nested deeper than %d", ErrMalformed, MaxDepth)
			}
		case xml.EndElement:
			// An end tag closes the innermost open element of its name
			// and every element opened inside it and left open (the
			// feed parser's decoder reads a document the same way);
			// one that closes nothing open is passed over.
			k := len(stack) - 1
			for k >= 0 && stack[k].Local != t.Name.Local {
				k--
			}
			if k < 0 {
				res.strays = append(res.strays, span{start: int(off), end: int(d.InputOffset())})
				continue
			}
			if itemDepth >= 0 && k <= itemDepth {
				// The item is closed. Its bytes are a complete element
				// only when its own end tag closed it: an item an
				// ancestor's end tag closed has no range (and no hash),
				// so that no range runs on past its item.
				if k == itemDepth {
					res.items = append(res.items, span{start: int(itemOff), end: int(d.InputOffset()), prefixed: stack[k].Space != ""})
				}
				itemDepth = -1
			}
			stack = stack[:k]
			if len(stack) == 0 {
				return res, nil // the root is closed: the parser stops here
			}
		}
	}
}

// longestTag returns the length of the longest start or end tag of an XML
// document, attributes included; comments, CDATA sections, processing
// instructions and declarations are skipped. It errs on the long side.
func longestTag(b []byte) int {
	longest := 0
	skip := func(i int, end string) int {
		if k := bytes.Index(b[i:], []byte(end)); k >= 0 {
			return i + k + len(end)
		}
		return len(b)
	}
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '<')
		if j < 0 {
			break
		}
		i += j
		rest := b[i:]
		switch {
		case bytes.HasPrefix(rest, []byte("<!--")):
			i = skip(i+4, "-->")
			continue
		case bytes.HasPrefix(rest, []byte("<![CDATA[")):
			i = skip(i+9, "]]>")
			continue
		case bytes.HasPrefix(rest, []byte("<?")):
			i = skip(i+2, "?>")
			continue
		case bytes.HasPrefix(rest, []byte("<!")):
			i = skip(i+2, ">")
			continue
		}
		start := i
		var quote byte
		for i++; i < len(b); i++ {
			c := b[i]
			if quote != 0 {
				if c == quote {
					quote = 0
				}
			} else if c == '"' || c == '\'' {
				quote = c
			} else if c == '>' {
				break
			}
		}
		longest = max(longest, min(i+1, len(b))-start)
		i++
	}
	return longest
}

func isHTMLDoctype(d xml.Directive) bool {
	f := strings.Fields(strings.ToLower(string(d[:min(len(d), 64)])))
	return len(f) >= 2 && f[0] == "doctype" && strings.HasPrefix(f[1], "html")
}

// isItemElement reports an RSS item (rss>channel>item, rss>item,
// rdf:RDF>item) or an Atom entry (feed>entry).
func isItemElement(n xml.Name, stack []xml.Name) bool {
	local := strings.ToLower(n.Local)
	if local != "item" && local != "entry" {
		return false
	}
	switch len(stack) {
	case 1:
		return true
	case 2:
		return strings.EqualFold(stack[1].Local, "channel")
	}
	return false
}

func qualified(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}

// maxNamespaceKeys bounds the prefixes looked at for slogfeed's namespace.
const maxNamespaceKeys = 16

// nsDeclRe finds the prefixes a document binds to slogfeed's namespace.
var nsDeclRe = regexp.MustCompile(`xmlns:([A-Za-z_][A-Za-z0-9_.\-]{0,63})\s*=\s*["']\s*` + regexp.QuoteMeta(feedext.Namespace) + `\s*["']`)

// namespaceKeys returns the extension keys under which gofeed files
// slogfeed's elements: every prefix the document binds to feedext.Namespace
// (gofeed keys extensions by the document's prefix), and the namespace URI
// itself (its key when the namespace is the default one).
func namespaceKeys(body []byte) []string {
	if !bytes.Contains(body, []byte(feedext.Namespace)) {
		return nil
	}
	keys := []string{feedext.Namespace}
	for _, m := range nsDeclRe.FindAllSubmatchIndex(body, -1) {
		k := string(body[m[2]:m[3]])
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
			if len(keys) == maxNamespaceKeys {
				break
			}
		}
	}
	return keys
}
