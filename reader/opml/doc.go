// Package opml imports and exports slogfeed subscription lists as OPML.
//
// Parse reads an OPML 1.0 or 2.0 document, as written by feed readers such
// as Miniflux and FreshRSS, and returns one Outline per subscription. An
// outline element with an xmlUrl attribute is a subscription; one without is
// a folder, whose title becomes part of the Category of every subscription
// inside it. The OPML 2.0 category attribute ("/a/b,c") adds to that path.
// Attributes in slogfeed's Namespace restore a subscription's settings
// (policy, weight, source adapter and its configuration, extract rule,
// retention, reduction, sleep windows; see Settings); attributes in other
// namespaces (Miniflux's miniflux:*, FreshRSS's frss:*) and elements
// other than outline are ignored.
//
// The document is hostile input. Parse reads at most MaxSize bytes, accepts
// outlines nested at most MaxDepth deep and at most MaxOutlines outline
// elements; it uses encoding/xml in strict mode, so only the five predefined
// entities and character references are expanded: a DTD is never read, and a
// reference to any entity it declares (billion laughs, external entities) is
// a syntax error. Documents in other charsets are decoded through
// golang.org/x/net/html/charset.
//
// Errors come in two kinds. A document that cannot be read at all (malformed
// XML, an unknown charset, a limit exceeded, a root that is not <opml>)
// yields no outlines and an error matching one of ErrMalformed, ErrCharset,
// ErrTooLarge, ErrTooDeep, ErrTooManyOutlines or ErrNotOPML. A subscription
// that cannot be imported (a URL that is not http or https) is left out, the
// rest of the document is still imported, and the returned error matches
// ErrSkipped and lists the skipped outlines (see Skipped). A setting of
// Namespace that cannot be used is left out and listed in the outline's
// Ignored; a later outline with the same feed URL is dropped and counted
// in the first one's Duplicates.
//
// Write produces an OPML 2.0 document that Parse reads back to the same
// outlines: subscriptions are grouped into nested folders by Category, and
// sorted by category path, then title, then URL, so that the same
// subscriptions always give the same bytes. Each subscription's Settings
// are written as attributes of Namespace, declared on the root when any
// subscription has settings.
package opml
