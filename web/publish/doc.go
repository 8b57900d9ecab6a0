// Package publish writes slogfeed's own feeds (the sensor store and
// republished pipe outputs) as RSS 2.0, Atom 1.0 and JSON Feed 1.1, and
// serves them with the headers that help subscribers poll at the right
// moment.
//
// # Documents
//
// RSS, Atom and JSON render one Feed. They build their documents through
// github.com/gorilla/feeds and correct what it leaves wrong or out:
//
//   - Stable identifiers: an item's id is storage.Item.ID, written as
//     <guid isPermaLink="false"> in RSS, as the JSON Feed "id", and in Atom
//     as an IRI built from the feed's id and the item's id (EntryID), never
//     a random UUID.
//   - Dates: the feed's updated date is the newest entry's date or
//     Feed.Updated, whichever is later; an entry's is its Updated date, else
//     its Published date. Atom's required <updated> is therefore always set.
//   - Characters that XML 1.0 forbids (most C0 controls, U+FFFE, U+FFFF,
//     lone surrogates, invalid UTF-8) are removed from every string, in
//     all three formats.
//   - Plain-text fields (titles, authors, categories, the feed's
//     description, a reading's unit and sensor, JSON Feed's "summary")
//     hold no markup in any format: what would read as an HTML tag or an
//     event handler, as written or after any number of entity decodings,
//     is removed (sanitize.Text), since many readers render RSS titles as
//     HTML. Ordinary text keeps its '<' and '&'. HTML fields (RSS
//     description, Atom summary and content, JSON "content_html") are
//     written as stored.
//   - Self links: <atom:link rel="self"> in RSS, <link rel="self"> in Atom,
//     "feed_url" in JSON, plus a WebSub hub link when Feed.HubURL is set.
//   - Paging (RFC 5005): when Feed.Next is set, the link to the page of
//     older items, as <atom:link rel="next"> and rel="prev-archive" in
//     RSS, <link rel="next"> and rel="prev-archive" in Atom, and
//     "next_url" in JSON; on such an older page (Feed.Current set), the
//     link back to the subscription document as rel="current" and
//     rel="first" in RSS and Atom.
//   - <ttl> in RSS from Feed.TTL (whole minutes, at least one).
//   - slogfeed's typed sensor reading (see package feedext):
//     <sf:reading value=… unit=… sensor=… time=… lat=… lon=…/> in RSS items
//     and Atom entries, and the "_slogfeed" object in JSON Feed items.
//     Items with a reading but no title or summary get readable ones
//     (ReadingTitle, ReadingSummary) for ordinary feed readers; digest
//     items (storage.Digest, made by PACK digesters) without them get
//     DigestTitle and DigestSummary.
//   - What each format requires and gorilla/feeds may omit: an Atom author
//     and content-or-alternate-link per entry, RSS channel title, link and
//     description, JSON Feed's "items" array and per-item content.
//
// # Serving
//
// Serve writes a document with a strong ETag (a hash of the body),
// Last-Modified (when the document last changed, left out while that is
// in the current second; Changes tracks it), 304 Not Modified for
// matching conditional requests, Cache-Control from the publisher's own
// prediction of its next publish, and slogfeed's hint headers
// (feedext.HeaderPhase, HeaderDesync, HeaderNext, HeaderMore). ServeDoc
// does the same for a Doc whose ETag was computed once, when a publisher
// caches its rendered documents. Load grows the desynchronisation interval
// with the request load of each feed.
package publish
