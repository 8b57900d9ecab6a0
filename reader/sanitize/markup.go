package sanitize

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf8"

	nethtml "golang.org/x/net/html"
)

// Bounds of the markup search: how many entity decodings of a text are
// looked at, how many times markup is removed before a text is given up
// on, how deep a comment inside a comment is read.
const (
	maxDecodings    = 16
	maxStripRounds  = 16
	maxCommentDepth = 1
)

// HasMarkup reports whether s, a plain-text field (a title, an author, a
// plain-text summary, a category, a unit), holds markup that a reader
// rendering the field as HTML would act on, either as it stands or after
// any number of entity decodings (s decoded once, twice, …: double and
// triple escaping, named and numeric entities in any case). Markup is
//
//   - an HTML tag, start or end, as golang.org/x/net/html's tokenizer reads
//     it ("<b>", "</p>", "<ScRiPt>", "<img src=x onerror=…>");
//   - a tag left open at the end of the text that has something after its
//     name ("x <img src=x onerror=alert(1)//") or opens an element that
//     changes how the rest of a page reads ("x <script"): the reader's
//     own markup would close it;
//   - a comment, CDATA section or declaration that holds either of those
//     ("<![CDATA[<img …>]]>");
//   - an event-handler attribute after a quote ("x\" onmouseover=\"…"),
//     which would take effect if the text were put in a quoted attribute.
//
// Ordinary text with '<', '>' and '&' ("temperature < 5 & rising", "a<b",
// "1 <2", "i </3 u") holds none: a '<' followed by a space, a digit or
// nothing starts no tag, and a name left open without an attribute does
// nothing.
func HasMarkup(s string) bool {
	_, found := markupLevel(s)
	return found
}

// Text makes s, text that is already plain (a stored title, author or
// category, or a plain-text field written by a pipe), safe to publish in a
// plain-text field: it gives s back as it is, apart from the cleaning and
// folding PlainText does, unless s holds markup (see HasMarkup). Then the
// markup is removed: tags with the content of script and style elements,
// comments that hold tags, event-handler attribute names. When the markup
// shows only after k entity decodings, the text was escaped k times more
// than it meant, so it is decoded k times and the markup removed there.
// Text that still holds markup after that (markup hidden under more than
// 16 levels of escaping, or rebuilt by every removal) loses its '<', '&'
// and quote characters. The result has at most maxRunes runes (no limit
// when maxRunes ≤ 0) and Text gives it back unchanged.
func Text(s string, maxRunes int) string {
	s = cleanText(s, false)
	if mayHoldMarkup(s) {
		s = unmark(s)
	}
	s = fold(s)
	if t := truncate(s, maxRunes); t != s {
		s = t
		if mayHoldMarkup(s) {
			s = strings.TrimSpace(unmark(s))
		}
	}
	return s
}

// mayHoldMarkup reports whether s has a character markup needs: '<' for
// a tag, '&' for an entity that may decode to one, a quote for an event
// handler.
func mayHoldMarkup(s string) bool { return strings.ContainsAny(s, "<&\"'`") }

// unmark removes the markup of s (see Text).
func unmark(s string) string {
	for range maxStripRounds {
		level, found := markupLevel(s)
		if !found {
			return s
		}
		if level > maxDecodings {
			return withoutMarkupChars(s)
		}
		for range level {
			s = html.UnescapeString(s)
		}
		// Decoding may bring back characters cleanText removes.
		s = cleanText(strip(s), false)
	}
	if HasMarkup(s) {
		return withoutMarkupChars(s)
	}
	return s
}

// markupLevel returns how many entity decodings of s it takes for markup
// to show (0: s itself holds markup), and whether it shows at all. A level
// above maxDecodings means s was still changing after that many decodings:
// hostile in itself.
func markupLevel(s string) (int, bool) { return markupLevelAt(s, 0) }

// markupLevelAt is markupLevel for text depth comments deep.
func markupLevelAt(s string, depth int) (int, bool) {
	if !mayHoldMarkup(s) {
		return 0, false
	}
	for level := 0; ; level++ {
		if markupAt(s, depth) {
			return level, true
		}
		if !strings.Contains(s, "&") {
			return 0, false
		}
		next := html.UnescapeString(s)
		if next == s {
			return 0, false
		}
		if level == maxDecodings {
			return level + 1, true
		}
		s = next
	}
}

// markupAt reports whether s, read as HTML without decoding it, holds a
// tag, an open tag with an attribute at its end, a comment that holds
// either (read to depth comments deep) or an event handler after a quote.
func markupAt(s string, depth int) bool {
	if mayOpenTag(s) {
		z := nethtml.NewTokenizer(strings.NewReader(s))
		for {
			switch z.Next() {
			case nethtml.ErrorToken:
				if openTag(z.Raw()) {
					return true
				}
				return handlerAt(s)
			case nethtml.TextToken:
			case nethtml.CommentToken, nethtml.DoctypeToken:
				if commentHoldsMarkup(z.Text(), depth) {
					return true
				}
			default: // a start, end or self-closing tag
				return true
			}
		}
	}
	return handlerAt(s)
}

// mayOpenTag reports whether s has a '<' that may start a tag, comment
// or declaration for the tokenizer: one followed by a letter, '/', '!' or
// '?'.
func mayOpenTag(s string) bool {
	for i := strings.IndexByte(s, '<'); i >= 0 && i < len(s)-1; {
		if c := s[i+1]; asciiLetter(c) || c == '/' || c == '!' || c == '?' {
			return true
		}
		j := strings.IndexByte(s[i+1:], '<')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// commentHoldsMarkup reports whether the data of a comment (or CDATA
// section, or declaration) would hold markup, after any number of
// decodings, once its delimiters were removed. A comment inside a
// comment's data counts as markup when it may hold any.
func commentHoldsMarkup(data []byte, depth int) bool {
	if !mayHoldMarkup(string(data)) {
		return false
	}
	if depth >= maxCommentDepth {
		return true
	}
	_, found := markupLevelAt(string(data), depth+1)
	return found
}

// openTag reports whether raw, what the tokenizer left unread at the end
// of a text, is a tag left open that the reader's own markup could turn
// into an element that matters: one with something after its name (an
// attribute, a '/', white space: "<img src=x", "<b/", "</b c"), or one
// that changes how what follows is read ("<script", "<svg"). A bare name
// ("a<b", "x</p") does nothing: what follows it only lengthens the name.
func openTag(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '<' {
		return false
	}
	rest := raw[1:]
	if rest[0] == '/' {
		rest = rest[1:]
	}
	if len(rest) == 0 || !asciiLetter(rest[0]) {
		return false
	}
	end := 0
	for end < len(rest) && !htmlSpace(rest[end]) && rest[end] != '/' && rest[end] != '>' {
		end++
	}
	return end < len(rest) || openingTags[strings.ToLower(string(rest))]
}

// openingTags are the elements whose start tag changes how the rest of a
// page is read: raw text and foreign content, scripts, frames, forms and
// the document's own metadata.
var openingTags = map[string]bool{
	"script": true, "style": true, "textarea": true, "title": true, "xmp": true,
	"iframe": true, "noembed": true, "noframes": true, "noscript": true,
	"plaintext": true, "svg": true, "math": true, "template": true,
	"object": true, "embed": true, "applet": true, "frame": true, "frameset": true,
	"base": true, "meta": true, "link": true, "form": true,
}

// handlerAt reports whether s holds an event handler after a quote (see
// withoutHandlers).
func handlerAt(s string) bool {
	_, found := scanHandlers(s, true)
	return found
}

// withoutHandlers is s without the name and '=' of every event handler
// after a quote. An event handler is "on" and at least one letter, in any
// case, then an '=' ("onerror=", "OnClick ="). It counts right after any
// quote, or after a slash or white space anywhere after a double quote, a
// backtick or a single quote that is not an apostrophe between two
// letters, since there it would start an attribute if the text were put
// in a quoted attribute value: `x" onerror="…` holds one, "it's
// online=yes" none.
func withoutHandlers(s string) string {
	out, _ := scanHandlers(s, false)
	return out
}

// scanHandlers is withoutHandlers in one pass; with first it stops at the
// first handler and reports it. A handler that the removal of another
// brings next to a separator is removed too.
func scanHandlers(s string, first bool) (string, bool) {
	if !strings.ContainsAny(s, "\"'`") {
		return s, false
	}
	var out []byte
	closer := false // a quote that may close an attribute value was seen
	last := byte(0) // the last byte kept
	for i := 0; i < len(s); {
		if attrSeparator(last) && (closer || isQuote(last)) {
			if end := handlerEnd(s, i); end > 0 {
				if first {
					return s, true
				}
				if out == nil {
					out = append(make([]byte, 0, len(s)), s[:i]...)
				}
				i = end
				continue
			}
		}
		c := s[i]
		if !closer && isQuote(c) && !apostrophe(s, i) {
			closer = true
		}
		if out != nil {
			out = append(out, c)
		}
		last = c
		i++
	}
	if out == nil {
		return s, false
	}
	return string(out), true
}

// handlerEnd returns the end of the event handler's name and '=' that
// starts s[i:], or -1.
func handlerEnd(s string, i int) int {
	if len(s)-i < 4 || s[i]|0x20 != 'o' || s[i+1]|0x20 != 'n' || !asciiLetter(s[i+2]) {
		return -1
	}
	j := i + 3
	for j < len(s) && asciiLetter(s[j]) {
		j++
	}
	for j < len(s) && htmlSpace(s[j]) {
		j++
	}
	if j < len(s) && s[j] == '=' {
		return j + 1
	}
	return -1
}

func isQuote(c byte) bool { return c == '"' || c == '\'' || c == '`' }

// apostrophe reports whether s[i] is a single quote between two letters.
func apostrophe(s string, i int) bool {
	if s[i] != '\'' || i == 0 || i == len(s)-1 {
		return false
	}
	before, _ := utf8.DecodeLastRuneInString(s[:i])
	after, _ := utf8.DecodeRuneInString(s[i+1:])
	return unicode.IsLetter(before) && unicode.IsLetter(after)
}

// attrSeparator reports bytes after which an attribute name may start.
func attrSeparator(c byte) bool {
	return isQuote(c) || c == '/' || htmlSpace(c)
}

func htmlSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

func asciiLetter(c byte) bool {
	c |= 0x20
	return c >= 'a' && c <= 'z'
}

// dropContent are the elements whose text a plain-text field loses with
// them: scripts and styles, and what a browser shows instead of them.
var dropContent = map[string]bool{
	"script": true, "style": true, "iframe": true, "noembed": true,
	"noframes": true, "noscript": true, "xmp": true, "plaintext": true,
}

// strip removes from s, read as HTML without decoding its text, every tag
// (with the content of dropContent elements), every comment that holds
// markup, an open tag with an attribute at its end and every event-handler
// attribute name after a quote. The text between stays byte for byte.
func strip(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	z := nethtml.NewTokenizer(strings.NewReader(s))
	skip := ""
loop:
	for {
		tt := z.Next()
		switch tt {
		case nethtml.ErrorToken:
			if raw := z.Raw(); skip == "" && !openTag(raw) {
				b.Write(raw)
			}
			break loop
		case nethtml.TextToken:
			if skip == "" {
				b.Write(z.Raw())
			}
		case nethtml.CommentToken, nethtml.DoctypeToken:
			if skip == "" && !commentHoldsMarkup(z.Text(), 0) {
				b.Write(z.Raw())
			}
		case nethtml.StartTagToken, nethtml.SelfClosingTagToken:
			if name, _ := z.TagName(); dropContent[string(name)] {
				skip = string(name)
			}
		case nethtml.EndTagToken:
			if name, _ := z.TagName(); string(name) == skip {
				skip = ""
			}
		}
	}
	return withoutHandlers(b.String())
}

// withoutMarkupChars is s without the characters markup needs: the last
// resort for text that keeps holding markup.
func withoutMarkupChars(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '<', '&', '"', '\'', '`':
			return -1
		}
		return r
	}, s)
}

// fold folds the white space of s: no space at either end, single
// spaces between words.
func fold(s string) string {
	if folded(s) {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// truncate returns s cut to at most maxRunes runes, without space at its
// end (s itself when maxRunes ≤ 0).
func truncate(s string, maxRunes int) string {
	if maxRunes <= 0 || len(s) <= maxRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == maxRunes {
			return strings.TrimSpace(s[:i])
		}
		n++
	}
	return s
}
