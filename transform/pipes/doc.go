// Package pipes holds slogfeed's Yahoo-Pipes-style operators: the
// general-purpose modules that combine, filter, order and rewrite the
// items flowing through a pipe. Importing the package registers them in
// the transform catalogue (family "pipes"); the "source" and "loop"
// nodes belong to package transform itself.
//
// Like the modules of Yahoo Pipes working on a feed's current items, each
// operator sees only the items of one run of the pipe (the new items of
// its inputs), never the whole history of a feed; only "unique" with
// "remember" carries anything from one run to the next. Operators keep
// the order of their items unless ordering is what they do, never change
// their input items (a changed item is a copy), and report every bad
// configuration value as a *transform.FieldError naming the JSON field,
// such as "rules[1].value". Unknown configuration fields are errors.
//
// Items are read and written through the item fields of package
// transform: title, summary, content, link, author, id, guid, categories
// (alias category), enclosure, published, updated, fetched (read-only),
// feed (read-only), and the reading's value, unit, sensor, time, lat and
// lon. A field "lacks a value" when it is empty: an empty string, a zero
// time, no categories, no reading.
//
// # Combining inputs
//
// union (any number of inputs) emits the items of its first input, then
// those of the second, and so on, each input's items in their order. It
// has no configuration.
//
//	{"id": "all", "op": "union"}
//
// merge (any number of inputs) interleaves the items of all inputs into
// one list ordered by a field: "by" (default "published"), ascending
// unless "desc" is true. The order is stable: items with equal values
// keep their input order (first input first). Items lacking the field
// come last.
//
//	{"id": "timeline", "op": "merge", "config": {"by": "published", "desc": false}}
//
// # Choosing items
//
// filter keeps the items that match its rules ("mode": "permit", the
// default) or drops them ("mode": "block"). An item matches when all of
// the rules hold ("match": "all", the default) or when at least one does
// ("match": "any"). There are 1 to 64 rules, each {"field", "op",
// "value"}:
//
//   - eq, ne, lt, le, gt, ge compare the field with the value. For a
//     number field the value is a number (or a string that reads as one);
//     for a time field it is a time: RFC 3339 ("2025-03-01T12:00:00Z"),
//     Unix seconds, "now", or a signed duration relative to the run's time
//     ("-1h" is an hour before the run, "now-90s" and "+30m" work too).
//     A string field compares as text (case-sensitive) with a string, and
//     numerically with a number: then a value that does not read as a
//     number satisfies no comparison but ne.
//   - contains and not_contains test for a substring, ignoring case. For
//     categories they test the elements: "temperature" is contained in
//     ["Temperature", "Lab"], "temp" is not.
//   - matches and not_matches test an RE2 regular expression (write
//     "(?i)" for case-insensitive matching); for categories, any element.
//   - exists and missing test whether the field has a value; they take
//     no value.
//   - in and not_in test membership in an array of at most 256 numbers,
//     strings or times, compared as eq does.
//
// For categories, the comparisons hold when some element satisfies them
// (and ne when no element equals the value). An item lacking the field
// fails every rule except missing, not_contains, not_matches and not_in,
// which it passes.
//
//	{"id": "hot", "op": "filter", "config": {"mode": "permit", "match": "all", "rules": [
//	    {"field": "value", "op": "gt", "value": 25},
//	    {"field": "published", "op": "gt", "value": "-1h"},
//	    {"field": "categories", "op": "not_in", "value": ["test", "calibration"]}]}}
//
// unique keeps the first item of each distinct value of a field ("field",
// default "title") and drops the later ones. Values are compared exactly
// (case-sensitive; numbers and times by value; categories as the whole
// list). Items lacking the field are all kept. With "remember": N (1 to
// 100000) the node also drops items whose value is among the last N
// distinct values it saw in earlier runs, as Pipes' unique did over a
// feed that kept its old items: a value seen again becomes the most
// recent, and the oldest is forgotten beyond N. The memory is the node's
// state, kept between runs (values longer than 64 bytes are kept as a
// 128-bit hash); a preview neither uses up nor changes it.
//
//	{"id": "new-titles", "op": "unique", "config": {"field": "title", "remember": 1000}}
//
// truncate keeps the first "count" items (0 to 100000), tail the last
// "count" items. count is required.
//
//	{"id": "top10", "op": "truncate", "config": {"count": 10}}
//	{"id": "last5", "op": "tail", "config": {"count": 5}}
//
// # Ordering and counting
//
// sort orders the items by 1 to 8 keys, each {"field", "desc"}: the first
// key decides, the next ones break ties, and items that tie on every key
// keep their order. Numbers compare numerically, times chronologically,
// text as bytes (case-sensitive). Items lacking a key's field come after
// the others for that key, descending or not.
//
//	{"id": "hottest", "op": "sort", "config": {"by": [{"field": "value", "desc": true}, {"field": "published"}]}}
//
// reverse reverses the order of the items. It has no configuration.
//
//	{"id": "oldest-first", "op": "reverse"}
//
// count emits one item standing for its input: its reading's value is the
// number of input items, its title "count: N", its publish time (and the
// reading's time) the time of the run, and its id is derived from the
// node and the ids of the counted items, so that a rerun on the same
// items makes the same item. An empty input gives no item. It has no
// configuration.
//
//	{"id": "how-many", "op": "count"}
//
// # Rewriting fields
//
// rename applies 1 to 32 "mappings" in order, each {"from", "to",
// "copy"}: the value of field from is written into field to, converted to
// to's type (a number from a title such as "21.5", text from a number,
// categories joined with ", "), and from is cleared unless "copy" is
// true. The target must be writable, and so must the source of a move
// (the id and the read-only fields can only be copied). An item lacking
// the source field, or whose value does not fit the target (a title that
// is not a number moved into value), is left as it is by that mapping.
// Clearing value removes the item's whole reading.
//
//	{"id": "swap", "op": "rename", "config": {"mappings": [
//	    {"from": "title", "to": "summary", "copy": true},
//	    {"from": "sensor", "to": "author"}]}}
//
// set assigns a constant to a writable field of every item: "value" is a
// string, a number, a time (RFC 3339, Unix seconds, "now" or relative
// such as "-1h", resolved at each run), an array of strings for
// categories, or null to clear the field. The value is checked against
// the field's type when the pipe is saved. A reading field set on an item
// without a reading gives it one. The id cannot be set (every item would
// become the same item).
//
//	{"id": "celsius", "op": "set", "config": {"field": "unit", "value": "C"}}
//
// regex_replace replaces, in a writable string field, the first match of
// an RE2 "pattern" (or every match, with "all": true) with "replace",
// where $1 or ${1} inserts a group by number, $name or ${name} a named
// group, and $$ a dollar sign, as in Go's regexp.Expand ("$1x" names a
// group "1x": write "${1}x"). The result is cut at the pipe's text limit
// (Limits.MaxText, 64 KiB by default) on a UTF-8 boundary. The pattern
// is matched within the first Limits.MaxRegexInput bytes of the field
// (16 KiB by default), and the rest of the field is kept as it is; the
// run's deadline is looked at before every item. Items lacking the field
// or without a match are left as they are, and so is an id the
// replacement would empty.
//
//	{"id": "degrees", "op": "regex_replace", "config": {"field": "title", "pattern": "(\\d+)C", "replace": "$1 °C", "all": true}}
//
// template writes a writable string field ("field", default "title") from
// a template of the item's own fields. The template syntax is small:
//
//   - {name} inserts the value of item field name as text: numbers as
//     short as they round-trip, times in RFC 3339 (UTC), categories
//     joined with ", ", nothing when the item lacks the field;
//   - {name|format} formats a number field with a printf verb
//     %[flags][width][.precision]verb, where flags are among "-+ #0",
//     width and precision have at most two digits, and verb is f, e, g, d
//     or x (d and x print the nearest integer); or formats a time field,
//     in UTC, with a Go layout ("15:04", "2006-01-02") or one of the
//     named formats of date_format (rfc3339, rfc1123, date, datetime,
//     unix, kitchen); an empty format is no format;
//   - {{ and }} are a literal { and }; a lone } is an error;
//   - everything else is literal text ("%" included).
//
// A template has at most 4096 bytes and 64 placeholders; placeholders
// naming unknown fields, formats on text fields and verbs outside the
// pattern above are configuration errors. The result is cut at the text
// limit (Limits.MaxText) on a UTF-8 boundary. An id the template would
// leave empty is kept.
//
// A template keeps the fields' kinds of text apart. Into summary or
// content, which hold HTML, text values (title, author, a unit…) are
// inserted escaped, so that "a<b" stays text there; into title, author,
// unit or sensor, which are plain text, summary and content are inserted
// as their plain text, and the result holds no markup (sanitize.Text:
// what would read as an HTML tag or an event handler is removed), as in
// every plain-text field slogfeed publishes.
//
//	{"id": "label", "op": "template", "config": {"field": "title", "template": "{sensor}: {value|%.1f} {unit} at {time|15:04}"}}
//
// date_format formats a time field ("field", default "published") into a
// writable string field ("to", required). "format" is a Go layout
// ("2006-01-02 15:04", at most 64 bytes, showing some part of the time)
// or a named format: rfc3339 (the default), rfc1123, date (2006-01-02),
// datetime (2006-01-02 15:04:05), unix (Unix seconds) or kitchen (3:04PM).
// "tz" is an IANA time zone name such as "Europe/Brussels" (default UTC;
// the machine's "Local" zone is refused so that a pipe formats the same
// everywhere). Items lacking the field are left as they are.
//
//	{"id": "local-time", "op": "date_format", "config": {"field": "published", "format": "2006-01-02 15:04", "tz": "Europe/Brussels", "to": "title"}}
//
// # Splitting items
//
// split makes one item per part of a field:
//
//   - {"field": "categories"}: one part per category;
//   - {"field": "summary", "separator": ";"}: a string field cut at each
//     occurrence of the separator;
//   - {"field": "summary", "pattern": "\\d+"}: one part per match of an
//     RE2 pattern (a pattern that matches the empty string is refused).
//
// Parts are trimmed of surrounding white space and empty parts dropped;
// an item has at most 1000 parts (the rest are dropped). Each part is
// written into field "to" (default: the split field itself, so that a
// category becomes the item's single category) of a copy of the item,
// converted to that field's type; a part that does not fit it (a word
// for value) is skipped. The copy of part i (counted from 0 among the
// non-empty parts) has the id of the item followed by "#i", and so has
// its guid when it has one, so that reruns make the same items. Items
// with no parts (lacking the field) pass unchanged. A node that would
// emit more than the pipe's item limit fails with transform.ErrLimit.
//
//	{"id": "per-reading", "op": "split", "config": {"field": "summary", "pattern": "\\d+(\\.\\d+)?", "to": "value"}}
package pipes
