package aggregator

// Parts of gofeed v1.4.2's internal/shared package that fastRSS must
// reproduce exactly and cannot import (an internal package): its text
// decoding (StripCDATA, DecodeEntities) and its canonical namespace
// prefixes. Copied from github.com/mmcdole/gofeed (MIT License,
// Copyright (c) 2016 mmcdole); keep in step with the gofeed version in
// go.mod (the differential tests fail when they drift).

import (
	"bytes"
	"html"
	"strings"
)

const (
	cdataStart = "<![CDATA["
	cdataEnd   = "]]>"
)

// stripCDATA is shared.StripCDATA: CDATA sections verbatim, the text
// around them entity-decoded.
func stripCDATA(str string) string {
	buf := bytes.NewBuffer([]byte{})
	curr := 0
	for curr < len(str) {
		start := indexAt(str, cdataStart, curr)
		if start == -1 {
			buf.WriteString(decodeEntities(str[curr:]))
			return buf.String()
		}
		buf.WriteString(decodeEntities(str[curr:start]))
		end := indexAt(str, cdataEnd, start+len(cdataStart))
		if end == -1 {
			buf.WriteString(decodeEntities(str[start:]))
			return buf.String()
		}
		buf.WriteString(str[start+len(cdataStart) : end])
		curr = end + len(cdataEnd)
	}
	return buf.String()
}

// maxEntityLen is shared.maxEntityLen.
const maxEntityLen = 64

// decodeEntities is shared.DecodeEntities: HTML's named and numeric
// character references that end with ';'.
func decodeEntities(str string) string {
	idx := strings.IndexByte(str, '&')
	if idx == -1 {
		return str
	}
	var buf bytes.Buffer
	data := []byte(str)
	for len(data) > 0 {
		idx := bytes.IndexByte(data, '&')
		if idx == -1 {
			buf.Write(data)
			break
		}
		buf.Write(data[:idx])
		data = data[idx:]
		// Not in gofeed: the five XML entities, which the general case
		// below decodes the same way at the cost of two HTML unescapes.
		if r, n := xmlEntityPrefix(data); n > 0 {
			buf.WriteByte(r)
			data = data[n:]
			continue
		}
		window := data
		if len(window) > maxEntityLen {
			window = window[:maxEntityLen]
		}
		end := bytes.IndexByte(window, ';')
		if end == -1 && len(window) == len(data) {
			buf.Write(data)
			break
		}
		if end == -1 || bytes.ContainsAny(data[1:end], " \t\r\n") {
			buf.WriteByte('&')
			data = data[1:]
			continue
		}
		span := string(data[:end+1])
		dec := html.UnescapeString(span)
		if dec == html.UnescapeString(span[:len(span)-1])+";" {
			buf.WriteByte('&')
			data = data[1:]
			continue
		}
		buf.WriteString(dec)
		data = data[end+1:]
	}
	return buf.String()
}

// xmlEntityPrefix returns the character of the XML entity data begins
// with and its length (0: none).
func xmlEntityPrefix(data []byte) (byte, int) {
	switch {
	case bytes.HasPrefix(data, []byte("&lt;")):
		return '<', 4
	case bytes.HasPrefix(data, []byte("&gt;")):
		return '>', 4
	case bytes.HasPrefix(data, []byte("&amp;")):
		return '&', 5
	case bytes.HasPrefix(data, []byte("&quot;")):
		return '"', 6
	case bytes.HasPrefix(data, []byte("&apos;")):
		return '\'', 6
	}
	return 0, 0
}

func indexAt(str, substr string, start int) int {
	idx := strings.Index(str[start:], substr)
	if idx > -1 {
		idx += start
	}
	return idx
}

// frCanonical is shared.canonicalNamespaces: the prefixes gofeed files
// these namespaces' extension elements under, whatever the document's.
var frCanonical = map[string]string{
	"http://www.w3.org/2005/Atom": "atom",
	"http://purl.org/atom/ns#":    "atom03",

	"http://webns.net/mvcb/":                                         "admin",
	"http://purl.org/rss/1.0/modules/aggregation/":                   "ag",
	"http://purl.org/rss/1.0/modules/annotate/":                      "annotate",
	"http://media.tangent.org/rss/1.0/":                              "audio",
	"http://backend.userland.com/blogChannelModule":                  "blogChannel",
	"http://creativecommons.org/ns#license":                          "cc",
	"http://web.resource.org/cc/":                                    "cc",
	"http://cyber.law.harvard.edu/rss/creativeCommonsRssModule.html": "creativeCommons",
	"http://backend.userland.com/creativeCommonsRssModule":           "creativeCommons",
	"http://purl.org/rss/1.0/modules/company":                        "co",
	"http://purl.org/rss/1.0/modules/content/":                       "content",
	"http://my.theinfo.org/changed/1.0/rss/":                         "cp",
	"http://purl.org/dc/elements/1.1/":                               "dc",
	"http://purl.org/dc/terms/":                                      "dcterms",
	"http://purl.org/rss/1.0/modules/email/":                         "email",
	"http://purl.org/rss/1.0/modules/event/":                         "ev",
	"http://rssnamespace.org/feedburner/ext/1.0":                     "feedburner",
	"http://freshmeat.net/rss/fm/":                                   "fm",
	"http://xmlns.com/foaf/0.1/":                                     "foaf",
	"http://www.w3.org/2003/01/geo/wgs84_pos#":                       "geo",
	"http://www.georss.org/georss":                                   "georss",
	"http://www.opengis.net/gml":                                     "gml",
	"http://postneo.com/icbm/":                                       "icbm",
	"http://purl.org/rss/1.0/modules/image/":                         "image",
	"http://www.itunes.com/DTDs/PodCast-1.0.dtd":                     "itunes",
	"http://example.com/DTDs/PodCast-1.0.dtd":                        "itunes",
	"http://purl.org/rss/1.0/modules/link/":                          "l",
	"http://search.yahoo.com/mrss":                                   "media",
	"http://search.yahoo.com/mrss/":                                  "media",
	"http://madskills.com/public/xml/rss/module/pingback/":           "pingback",
	"http://prismstandard.org/namespaces/1.2/basic/":                 "prism",
	"http://www.w3.org/1999/02/22-rdf-syntax-ns#":                    "rdf",
	"http://www.w3.org/2000/01/rdf-schema#":                          "rdfs",
	"http://purl.org/rss/1.0/modules/reference/":                     "ref",
	"http://purl.org/rss/1.0/modules/richequiv/":                     "reqv",
	"http://purl.org/rss/1.0/modules/search/":                        "search",
	"http://purl.org/rss/1.0/modules/slash/":                         "slash",
	"http://schemas.xmlsoap.org/soap/envelope/":                      "soap",
	"http://purl.org/rss/1.0/modules/servicestatus/":                 "ss",
	"http://hacks.benhammersley.com/rss/streaming/":                  "str",
	"http://purl.org/rss/1.0/modules/subscription/":                  "sub",
	"http://purl.org/rss/1.0/modules/syndication/":                   "sy",
	"http://schemas.pocketsoap.com/rss/myDescModule/":                "szf",
	"http://purl.org/rss/1.0/modules/taxonomy/":                      "taxo",
	"http://purl.org/rss/1.0/modules/threading/":                     "thr",
	"http://purl.org/rss/1.0/modules/textinput/":                     "ti",
	"http://madskills.com/public/xml/rss/module/trackback/":          "trackback",
	"http://wellformedweb.org/commentAPI/":                           "wfw",
	"http://purl.org/rss/1.0/modules/wiki/":                          "wiki",
	"http://www.w3.org/1999/xhtml":                                   "xhtml",
	"http://www.w3.org/1999/xlink":                                   "xlink",
	"http://www.w3.org/XML/1998/namespace":                           "xml",
	"http://podlove.org/simple-chapters":                             "psc",
}

// frIntern returns b as a string, without allocating for the names and
// values common in feeds.
func frIntern(b []byte) string {
	switch string(b) {
	case "rss":
		return "rss"
	case "channel":
		return "channel"
	case "item":
		return "item"
	case "title":
		return "title"
	case "link":
		return "link"
	case "description":
		return "description"
	case "guid":
		return "guid"
	case "pubDate":
		return "pubDate"
	case "category":
		return "category"
	case "author":
		return "author"
	case "enclosure":
		return "enclosure"
	case "comments":
		return "comments"
	case "source":
		return "source"
	case "isPermaLink":
		return "isPermaLink"
	case "true":
		return "true"
	case "false":
		return "false"
	case "version":
		return "version"
	case "2.0":
		return "2.0"
	case "encoded":
		return "encoded"
	case "content":
		return "content"
	case "dc":
		return "dc"
	case "creator":
		return "creator"
	case "date":
		return "date"
	case "atom":
		return "atom"
	case "href":
		return "href"
	case "rel":
		return "rel"
	case "type":
		return "type"
	case "sf":
		return "sf"
	case "s":
		return "s"
	case "reading":
		return "reading"
	case "value":
		return "value"
	case "unit":
		return "unit"
	case "sensor":
		return "sensor"
	case "time":
		return "time"
	}
	return string(b)
}
