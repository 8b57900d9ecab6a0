package aggregator

import (
	"strings"

	nethtml "golang.org/x/net/html"
)

// The fast path of SanitizeHTML. Sensor feeds carry tiny fragments such as
// `value <b>6.6</b> C`; running bluemonday (an HTML tokenizer) and then the
// link rewriter (a second one) over each costs more than the rest of an
// item's normalisation. bluemonday works token by token, without building
// a tree: an allowed start, end or self-closing tag without attributes is
// written back as the tokenizer renders it (name lower-cased, no white
// space, "<br/>" for "<br />"), and text is written back with its
// entities decoded and re-escaped. sanitizeFast does the same for
// fragments made only of text and such tags, and declines everything else
// (attributes, other elements, comments, doctypes, processing
// instructions, "</>" and tags cut off by the end of the input), which the
// full path then handles. Its result must equal the full path's exactly:
// sanitizeFull is that path, and TestSanitizeFastDifferential and
// FuzzSanitizeFast compare the two.

// fastTags are the elements bluemonday's UGC policy keeps unchanged when
// they carry no attribute (TestFastTagsKeptByPolicy checks each). None of
// them switches the tokenizer into raw text (script, style, textarea,
// title, …), and none has a URL attribute for rewriteLinks to change (a
// and img are left to the full path).
var fastTags = func() map[string]bool {
	m := make(map[string]bool)
	for _, name := range []string{
		"abbr", "acronym", "article", "aside", "b", "bdi", "blockquote", "br",
		"caption", "cite", "code", "col", "colgroup", "dd", "del", "details",
		"dfn", "div", "dl", "dt", "em", "figcaption", "figure",
		"h1", "h2", "h3", "h4", "h5", "h6", "hgroup", "hr", "i", "ins", "li",
		"mark", "ol", "p", "pre", "q", "rp", "rt", "ruby", "s", "samp",
		"section", "small", "span", "strike", "strong", "sub", "summary",
		"sup", "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr",
		"tt", "u", "ul", "var", "wbr",
	} {
		m[name] = true
	}
	return m
}()

// maxFastTag is the length of the longest name in fastTags.
const maxFastTag = len("blockquote")

// sanitizeFast returns what the full path (sanitizeFull) makes of s, which
// cleanText has already cleaned and which is not blank, when s is text,
// entities and fastTags without attributes; ok is false when it declines.
// When the result is s itself (trimmed), nothing is allocated.
func sanitizeFast(s string) (out string, ok bool) {
	w := fastWriter{s: s}
	text := 0 // start of the pending text
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			break
		}
		i += j
		if i+1 == len(s) || !startsTag(s[i+1]) {
			i++ // not a tag: the '<' is text, as the tokenizer reads it
			continue
		}
		w.text(text, i)
		end, ok := w.tag(i)
		if !ok {
			return "", false
		}
		i, text = end, end
	}
	w.text(text, len(s))
	return strings.TrimSpace(w.String()), true
}

// startsTag reports whether c, after a '<', makes the tokenizer read a tag,
// a comment, a doctype or a processing instruction instead of text.
func startsTag(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '/' || c == '!' || c == '?'
}

// fastWriter builds sanitizeFast's result: while every part so far has come
// out as it went in, the result is a prefix of s and buf is nil.
type fastWriter struct {
	s   string
	buf []byte // nil until a part differs from its input
}

// put records that s[i:j] comes out as out.
func (w *fastWriter) put(i, j int, out string) {
	if w.buf == nil {
		if out == w.s[i:j] {
			return
		}
		w.buf = make([]byte, 0, len(w.s)+len(out)-(j-i)+16)
		w.buf = append(w.buf, w.s[:i]...)
	}
	w.buf = append(w.buf, out...)
}

// String is the result.
func (w *fastWriter) String() string {
	if w.buf == nil {
		return w.s
	}
	return string(w.buf)
}

// text writes the text s[i:j] as bluemonday does: the tokenizer turns
// "\r\n" and "\r" into "\n" and decodes entities; the text is then
// escaped again.
func (w *fastWriter) text(i, j int) {
	t := w.s[i:j]
	if escapedAlready(t) {
		w.put(i, j, t)
		return
	}
	if strings.IndexByte(t, '\r') >= 0 {
		t = strings.ReplaceAll(t, "\r\n", "\n")
		t = strings.ReplaceAll(t, "\r", "\n")
	}
	w.put(i, j, nethtml.EscapeString(nethtml.UnescapeString(t)))
}

// escapedAlready reports whether text t comes out of the tokenizer and
// EscapeString as it is: it has no character EscapeString escapes but the
// '&' of the references EscapeString writes (&amp; &lt; &gt; &#39; &#34;).
func escapedAlready(t string) bool {
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '\'', '"', '<', '>', '\r':
			return false
		case '&':
			r := t[i:]
			switch {
			case strings.HasPrefix(r, "&amp;"), strings.HasPrefix(r, "&#39;"), strings.HasPrefix(r, "&#34;"):
				i += 4
			case strings.HasPrefix(r, "&lt;"), strings.HasPrefix(r, "&gt;"):
				i += 3
			default:
				return false
			}
		}
	}
	return true
}

// tag writes the tag starting at s[i] ('<' followed by a letter, '/', '!'
// or '?') and returns the index after it; ok is false when it is not a
// start, end or self-closing tag of fastTags without attributes.
func (w *fastWriter) tag(i int) (end int, ok bool) {
	s := w.s
	j := i + 1
	closing := s[j] == '/'
	if closing {
		j++
	}
	if j == len(s) || !isASCIILetter(s[j]) {
		return 0, false // comment, doctype, "</>", "</ …": left to the full path
	}
	var name [maxFastTag]byte
	n := 0
	for ; j < len(s) && isASCIIAlnum(s[j]); j++ {
		if n == maxFastTag {
			return 0, false
		}
		name[n] = lowerASCII(s[j])
		n++
	}
	if !fastTags[string(name[:n])] {
		return 0, false
	}
	for j < len(s) && isTagSpace(s[j]) {
		j++
	}
	selfClosing := false
	if !closing && j < len(s) && s[j] == '/' {
		selfClosing = true
		j++
	}
	if j == len(s) || s[j] != '>' {
		return 0, false // an attribute, a stray character or the end of s
	}
	j++
	raw := s[i:j]
	// The tokenizer's rendering: "<name>", "</name>" or "<name/>".
	// raw is that already when it has no white space (it would be longer)
	// and its name is in lower case.
	off := 1 + btoi(closing)
	if len(raw) == n+2+btoi(closing || selfClosing) && raw[off:off+n] == string(name[:n]) {
		w.put(i, j, raw)
		return j, true
	}
	var b strings.Builder
	b.Grow(n + 3)
	b.WriteByte('<')
	if closing {
		b.WriteByte('/')
	}
	b.Write(name[:n])
	if selfClosing {
		b.WriteByte('/')
	}
	b.WriteByte('>')
	w.put(i, j, b.String())
	return j, true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isASCIIAlnum(c byte) bool { return isASCIILetter(c) || '0' <= c && c <= '9' }

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// isTagSpace reports the white space the tokenizer skips inside a tag.
func isTagSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f'
}
