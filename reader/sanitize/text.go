package sanitize

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PlainText turns s (text that may hold HTML markup and entities, such as
// an item's title) into plain text: tags removed with their script and
// style content, entities decoded once, control and bidirectional-override
// characters removed, white space folded, at most maxRunes runes (no limit
// when maxRunes ≤ 0). Markup that shows only after more decodings (text
// escaped twice or more) is removed as Text removes it, so the result
// holds no markup (HasMarkup) and Text gives it back unchanged. The result
// is valid UTF-8.
func PlainText(s string, maxRunes int) string {
	s = cleanText(s, false)
	switch {
	case markupAt(s, 0):
		s = html.UnescapeString(strictPolicy().Sanitize(s))
	case strings.IndexByte(s, '&') >= 0:
		// Escaped text: what is left of "<" is no tag ("a<b", "i </3").
		s = html.UnescapeString(s)
	}
	return Text(s, maxRunes)
}

// Clean makes s valid UTF-8 on one line: control characters are removed
// (tab, newline and carriage return become spaces), as are the
// non-characters U+FFFE and U+FFFF and the bidirectional overrides that can
// disguise a name. Markup and entities are left as they are: it is for
// identifiers (a GUID) and for messages quoted from elsewhere.
func Clean(s string) string { return cleanText(s, false) }

// folded reports whether s has its white space folded already, that is
// whether strings.Join(strings.Fields(s), " ") is s: no white space at
// either end, and none between words but single spaces.
func folded(s string) bool {
	prevSpace := true
	for _, r := range s {
		space := unicode.IsSpace(r)
		if space && (r != ' ' || prevSpace) {
			return false
		}
		prevSpace = space
	}
	return !prevSpace || s == ""
}

// cleanText makes s valid UTF-8 and removes control characters (keeping
// tab, newline and carriage return when keepSpace is set, else turning
// them into spaces), the non-characters U+FFFE and U+FFFF and, in plain
// text, the bidirectional overrides that can disguise a title.
func cleanText(s string, keepSpace bool) string {
	if cleanASCII(s, keepSpace) {
		return s
	}
	return cleanRunes(s, keepSpace)
}

// cleanRunes is cleanText rune by rune.
func cleanRunes(s string, keepSpace bool) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	dirty := false
	for _, r := range s {
		if unwanted(r) || (!keepSpace && (r == '\t' || r == '\n' || r == '\r')) {
			dirty = true
			break
		}
	}
	if !dirty {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			if keepSpace {
				return r
			}
			return ' '
		case unwanted(r):
			if keepSpace && isBidiControl(r) {
				return r // HTML keeps them (bluemonday and the browser handle them)
			}
			return -1
		}
		return r
	}, s)
}

// cleanASCII reports whether s is ASCII without a character cleanText
// would change: the common case, decided without decoding runes.
func cleanASCII(s string, keepSpace bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x7f || c < ' ' && !(keepSpace && (c == '\t' || c == '\n' || c == '\r')) {
			return false
		}
	}
	return true
}

// unwanted reports runes cleanText removes.
func unwanted(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.IsControl(r) || r == 0xFFFE || r == 0xFFFF || isBidiControl(r)
}

func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// Truncate returns s as valid UTF-8 of at most n runes, marking a cut with
// "…" (which makes the result n+1 runes long).
func Truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// Clip returns s as valid UTF-8 (invalid bytes replaced by U+FFFD) of at
// most n bytes, marking a cut with "…": a value quoted in a message, where
// the bound is on bytes.
func Clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Excerpt is a message quoted from elsewhere (a parser's error, a server's
// words) made fit to show on one line: Clean, white space folded, at most
// n runes (see Truncate).
func Excerpt(s string, n int) string {
	return Truncate(strings.Join(strings.Fields(Clean(s)), " "), n)
}
