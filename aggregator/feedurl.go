package aggregator

import (
	"net/url"
	"strings"
)

// canonicalURL returns the form of feed URL u that a subscription stores,
// so that two spellings of one address are one feed (RFC 3986 §6.2.2 and
// §6.2.3): the fragment dropped (a server never sees it), the host in
// lower case, the scheme's default port left out, the dot segments of the
// path resolved ("/a/./b/../c" is "/a/c"), percent-encoded unreserved
// characters decoded ("%6C" is "l"), the hex digits of the other
// percent-encodings in upper case, and an empty query ("…rss?") dropped.
// Everything else (the path's case, an encoded "/", the order of query
// parameters) can name another document and is kept.
func canonicalURL(u *url.URL) *url.URL {
	c := *u
	c.Fragment, c.RawFragment = "", ""
	c.Host = strings.ToLower(c.Host)
	if port := c.Port(); port == "80" && c.Scheme == "http" || port == "443" && c.Scheme == "https" {
		c.Host = strings.TrimSuffix(c.Host, ":"+port)
	}
	// Resolving an empty reference against the URL removes its dot
	// segments and keeps the rest (RFC 3986 §5.2).
	r := c.ResolveReference(&url.URL{})
	r.Fragment, r.RawFragment = "", ""
	if p := normalEscapes(r.EscapedPath()); p != r.EscapedPath() {
		if path, err := url.PathUnescape(p); err == nil {
			r.Path, r.RawPath = path, p
		}
	}
	r.RawQuery = normalEscapes(r.RawQuery)
	if r.RawQuery == "" {
		r.ForceQuery = false
	}
	return r
}

// normalEscapes decodes the percent-encodings of unreserved characters
// in s (letters, digits, "-", ".", "_", "~") and writes the hex digits
// of the others in upper case; a "%" not followed by two hex digits is
// left as it is.
func normalEscapes(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			b.WriteByte(s[i])
			continue
		}
		c := unhex(s[i+1])<<4 | unhex(s[i+2])
		if unreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(s[i+1 : i+3]))
		}
		i += 2
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
