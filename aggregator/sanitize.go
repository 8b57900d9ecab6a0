package aggregator

import (
	"html"
	"net/url"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/microcosm-cc/bluemonday"
	nethtml "golang.org/x/net/html"
)

// Text limits of normalised items.
const (
	MaxTitleRunes    = 1000
	maxAuthorRunes   = 200
	maxCategoryRunes = 200
	maxCategories    = 64
	maxEnclosures    = 32
	maxTypeRunes     = 200
	maxURLBytes      = 4096
)

// ugcPolicy is bluemonday's policy for user-generated content: no script,
// style, event handlers, forms or frames; URLs limited to http, https and
// mailto; no data: images. Policies are safe for concurrent use.
var ugcPolicy = sync.OnceValue(func() *bluemonday.Policy {
	p := bluemonday.UGCPolicy()
	p.RequireNoFollowOnLinks(true)
	return p
})

// strictPolicy keeps text only.
var strictPolicy = sync.OnceValue(bluemonday.StrictPolicy)

// SanitizeHTML makes feed HTML (an item's summary or content) safe to show:
// bluemonday's user-generated-content policy removes scripts, styles,
// event-handler attributes and javascript: or data: URLs; then relative
// links and image sources are resolved against base (dropped when base is
// nil, since they would point into slogfeed), only http, https (and mailto
// for links) URLs are kept, and every link gets rel="nofollow noopener".
// The result is valid UTF-8 without control characters.
func SanitizeHTML(s string, base *url.URL) string {
	s, out, done := sanitizeQuick(s)
	if done {
		return out
	}
	return sanitizePolicy(s, base)
}

// sanitizeQuick cleans s (cleanText) and, when one of SanitizeHTML's
// shortcuts applies, returns its result (done); otherwise the result is
// sanitizePolicy(clean, base). No shortcut needs the base URL.
func sanitizeQuick(s string) (clean, out string, done bool) {
	s = cleanText(s, true)
	if strings.TrimSpace(s) == "" {
		return s, "", true
	}
	if !strings.ContainsAny(s, "<>&\"'\r") {
		// Plain text: the policy would give it back unchanged (it
		// escapes only these characters, and the HTML tokenizer turns
		// \r into \n), so spare the parse.
		return s, strings.TrimSpace(s), true
	}
	if out, ok := sanitizeFast(s); ok {
		// Text and attribute-free tags the policy keeps: no parse (see
		// sanitize_fast.go).
		return s, out, true
	}
	return s, "", false
}

// sanitizePolicy is SanitizeHTML's full path on s, which cleanText has
// cleaned: the policy, then the link rewriter.
func sanitizePolicy(s string, base *url.URL) string {
	return strings.TrimSpace(rewriteLinks(ugcPolicy().Sanitize(s), base))
}

// sanitizeFull is SanitizeHTML without its shortcuts: the policy and the
// link rewriter on every input. Each shortcut must give its result.
func sanitizeFull(s string, base *url.URL) string {
	s = cleanText(s, true)
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return strings.TrimSpace(rewriteTokens(ugcPolicy().Sanitize(s), base))
}

// rewriteLinks resolves and filters the URL attributes of sanitised HTML
// and sets rel on links. Its input is bluemonday's output, so it only has
// to look at the few elements the policy lets through.
func rewriteLinks(s string, base *url.URL) string {
	if !strings.Contains(s, "<") || !mayHaveURLAttr(s) {
		return s // no element to change: the tokens' bytes are s
	}
	return rewriteTokens(s, base)
}

// rewriteTokens is rewriteLinks on every token.
func rewriteTokens(s string, base *url.URL) string {
	var b strings.Builder
	b.Grow(len(s) + 64)
	z := nethtml.NewTokenizer(strings.NewReader(s))
	for {
		tt := z.Next()
		switch tt {
		case nethtml.ErrorToken:
			return b.String()
		case nethtml.StartTagToken, nethtml.SelfClosingTagToken:
			tok := z.Token()
			if !hasURLAttr(tok) {
				b.Write(z.Raw())
				continue
			}
			isLink := tok.Data == "a" || tok.Data == "area"
			attrs := tok.Attr[:0]
			for _, a := range tok.Attr {
				switch a.Key {
				case "href", "src", "cite":
					v, ok := resolveURL(base, a.Val, isLink && a.Key == "href")
					if !ok {
						continue
					}
					a.Val = v
				case "rel":
					continue
				}
				attrs = append(attrs, a)
			}
			if isLink {
				attrs = append(attrs, nethtml.Attribute{Key: "rel", Val: "nofollow noopener"})
			}
			tok.Attr = attrs
			b.WriteString(tok.String())
		default:
			b.Write(z.Raw())
		}
	}
}

// mayHaveURLAttr reports whether sanitised HTML s may hold an element
// hasURLAttr picks (the policy's output has lower-case names).
func mayHaveURLAttr(s string) bool {
	return strings.Contains(s, "<a") || strings.Contains(s, "href") ||
		strings.Contains(s, "src") || strings.Contains(s, "cite")
}

func hasURLAttr(tok nethtml.Token) bool {
	if tok.Data == "a" || tok.Data == "area" {
		return true
	}
	for _, a := range tok.Attr {
		if a.Key == "href" || a.Key == "src" || a.Key == "cite" {
			return true
		}
	}
	return false
}

// resolveURL resolves ref against base and keeps it only when the result is
// an absolute http or https URL (or mailto:, when mailto is set).
func resolveURL(base *url.URL, ref string, mailto bool) (string, bool) {
	ref = strings.TrimSpace(ref)
	if ref == "" || len(ref) > maxURLBytes {
		return "", false
	}
	u, err := url.Parse(ref)
	if err != nil {
		return "", false
	}
	if !u.IsAbs() {
		if base == nil || !base.IsAbs() {
			return "", false
		}
		u = base.ResolveReference(u)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		if u.Host == "" {
			return "", false
		}
	case "mailto":
		if !mailto {
			return "", false
		}
	default:
		return "", false
	}
	return u.String(), true
}

// PlainText turns s (text that may hold HTML markup and entities, such as
// an item's title) into plain text: tags removed with their script and
// style content, entities decoded, control and bidirectional-override
// characters removed, white space folded, at most maxRunes runes (no limit
// when maxRunes ≤ 0). The result is valid UTF-8.
func PlainText(s string, maxRunes int) string {
	s = cleanText(s, false)
	if strings.ContainsAny(s, "<&") {
		s = html.UnescapeString(strictPolicy().Sanitize(s))
		s = cleanText(s, false)
	}
	if !folded(s) {
		s = strings.Join(strings.Fields(s), " ")
	}
	if maxRunes > 0 && utf8.RuneCountInString(s) > maxRunes {
		n := 0
		for i := range s {
			if n == maxRunes {
				s = strings.TrimSpace(s[:i])
				break
			}
			n++
		}
	}
	return s
}

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
