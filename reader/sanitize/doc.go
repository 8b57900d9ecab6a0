// Package sanitize makes text from feeds safe to store and show.
//
// Everything a feed says is hostile until this package has seen it:
//
//   - HTML (an item's summary or content) goes through bluemonday's
//     user-generated-content policy, then its links are resolved against
//     the item's base URL and limited to http, https and mailto, with
//     rel="nofollow noopener" on every link.
//   - PlainText turns a title, author or unit into text: tags removed,
//     entities decoded, control and bidirectional-override characters
//     removed, white space folded, length bounded.
//   - HasMarkup decides, for every plain-text field in every output, what
//     markup in plain text is: what would read as an HTML tag or an event
//     handler, as the text stands or after any number of entity
//     decodings. Text removes it from text that is already plain (what
//     the store holds, what a pipe writes) and is what RSS, Atom, JSON
//     Feed, the API and the web UI apply to titles, authors, plain-text
//     summaries and categories; PlainText's results hold none. Ordinary
//     text with '<' and '&' ("temperature < 5 & rising") holds none.
//   - Clean makes an identifier or a quoted message valid UTF-8 on one
//     line without touching its markup.
//   - RedactURL masks the credentials of a URL wherever slogfeed shows one.
//
// It is a leaf: it imports no other slogfeed package, so that the parser,
// the web UI, the pipe runner and the plugins can all depend on it.
package sanitize
