package sanitize

import (
	"net/url"
	"strings"
	"sync"

	"github.com/microcosm-cc/bluemonday"
	nethtml "golang.org/x/net/html"
)

// MaxURLBytes is the longest URL ResolveURL keeps.
const MaxURLBytes = 4096

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

// HTML makes feed HTML (an item's summary or content) safe to show:
// bluemonday's user-generated-content policy removes scripts, styles,
// event-handler attributes and javascript: or data: URLs; then relative
// links and image sources are resolved against base (dropped when base is
// nil, since they would point into slogfeed), only http, https (and mailto
// for links) URLs are kept, and every link gets rel="nofollow noopener".
// The result is valid UTF-8 without control characters.
func HTML(s string, base *url.URL) string {
	s = cleanText(s, true)
	if strings.TrimSpace(s) == "" {
		return ""
	}
	if !strings.ContainsAny(s, "<>&\"'\r") {
		// Plain text: the policy would give it back unchanged (it
		// escapes only these characters, and the HTML tokenizer turns
		// \r into \n), so spare the parse.
		return strings.TrimSpace(s)
	}
	return strings.TrimSpace(rewriteLinks(ugcPolicy().Sanitize(s), base))
}

// sanitizeFull is HTML without its shortcuts: the policy and the
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
					v, ok := ResolveURL(base, a.Val, isLink && a.Key == "href")
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

// ResolveURL resolves ref against base and keeps it only when the result is
// an absolute http or https URL (or mailto:, when mailto is set).
func ResolveURL(base *url.URL, ref string, mailto bool) (string, bool) {
	ref = strings.TrimSpace(ref)
	if ref == "" || len(ref) > MaxURLBytes {
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
