// Package parser reads RSS, RDF, Atom and JSON Feed documents into
// normalised items.
//
// Parse has one path for every document: gofeed behind the unchanged-item
// cut. An XML document is first scanned with the standard library's
// non-validating tokenizer (no DTD processing, no external entities) to
// find its root element, refuse nesting deeper than MaxDepth and more than
// MaxNodes elements, cut it after MaxItems items, and hash each complete
// item element (Parsed.ItemHashes). An end tag closes the innermost open
// element of its name and whatever was left open inside it, as gofeed's
// decoder reads it; an item is complete when its own end tag closes it,
// and its range ends there. An end tag that closes nothing open is
// dropped before gofeed reads the document (its decoder would end the
// document there); a complete item gofeed does not return is reported in
// Parsed.Skipped, and no item hash is reported. When Options.Seen
// reports a hash (the item's bytes are the ones the feed's previous poll
// stored), the element is cut from the document before gofeed reads it:
// a steady-state poll of a sensor feed parses the one or two items that
// are new. Should the document without them not parse, or not return
// every new item, the whole document is parsed.
//
// A JSON Feed is read as a stream (readJSON): the items past MaxItems,
// or past the MaxNodes budget, are read over without being decoded. Its
// items are hashed and cut by Options.Seen as an XML feed's are (each
// item is a value of its own, so the document without them always
// parses).
//
// Normalising (normalize.go) makes every item clean and bounded whatever
// its format: stable IDs, links resolved and limited to http(s), titles
// and authors as plain text, summaries and content as sanitised HTML
// (package reader/sanitize), implausible dates dropped, typed readings
// read from slogfeed's extension (package feedext) or from the feed's
// extraction rule (extract.go). Repairs counts what was replaced rather
// than refused (invalid UTF-8 bytes, bad dates).
//
// links.go reads the links a document advertises: its WebSub hubs and
// self link, and its page of older items (RFC 5005).
//
// Errors wrap ErrNotFeed (not a feed at all) or ErrMalformed (a feed that
// cannot be read); a panic inside gofeed is recovered as ErrMalformed.
//
// Imports: gofeed, schedule (sleep plans), storage (the item model),
// feedext and reader/sanitize. It must not import the fetcher, the
// polling service or anything above them.
package parser
