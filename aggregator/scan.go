package aggregator

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// scanPlain is scanXML's fast path: a byte scanner for the plain XML most
// feeds are (an XML declaration, elements with quoted attributes, text,
// comments and CDATA sections, ASCII names). It gives scanXML's result
// for a document the tokenizer would read without an error and that
// stays within the limits (MaxDepth, MaxNodes, maxItems, no HTML, a
// closed root), and ok false for anything else: a doctype or other
// declaration, a name outside ASCII, an unquoted or missing attribute
// value, a character XML does not allow, a limit reached, a syntax error,
// a document cut short. scanXML then tokenises the document itself, so
// every such case gets the tokenizer's own verdict. When ok, res.longest
// is longestTag(body): the tags it reads are the ones longestTag measures.
func scanPlain(body []byte, maxItems int) (res scanResult, ok bool) {
	if !plainChars(body) {
		return scanResult{}, false
	}
	var stack [][]byte // the open elements' local names
	items, nodes := 0, 0
	itemStart, itemDepth := 0, -1
	n := len(body)
	for i := 0; i < n; {
		// Text up to the next tag.
		j := bytes.IndexByte(body[i:], '<')
		if j < 0 {
			return scanResult{}, false // the root is never closed
		}
		if text := body[i : i+j]; bytes.IndexByte(text, ']') >= 0 && bytes.Contains(text, []byte("]]>")) {
			return scanResult{}, false
		}
		i += j
		start := i
		if i+1 >= n {
			return scanResult{}, false
		}
		switch c := body[i+1]; {
		case c == '!':
			rest := body[i:]
			switch {
			case bytes.HasPrefix(rest, []byte("<!--")):
				k := bytes.Index(rest[4:], []byte("--"))
				if k < 0 || 4+k+2 >= len(rest) || rest[4+k+2] != '>' {
					return scanResult{}, false // "--" inside, or no end
				}
				i += 4 + k + 3
			case bytes.HasPrefix(rest, []byte("<![CDATA[")):
				if len(stack) == 0 {
					return scanResult{}, false
				}
				k := bytes.Index(rest[9:], []byte("]]>"))
				if k < 0 {
					return scanResult{}, false
				}
				i += 9 + k + 3
			default:
				return scanResult{}, false // a doctype or another declaration
			}
			continue
		case c == '?':
			k := bytes.Index(body[i+2:], []byte("?>"))
			if k < 0 {
				return scanResult{}, false
			}
			pi := body[i+2 : i+2+k]
			m, _ := plainName(pi)
			if m == 0 {
				return scanResult{}, false
			}
			if string(pi[:m]) == "xml" && !plainXMLDecl(pi[m:]) {
				return scanResult{}, false
			}
			i += 2 + k + 2
			continue
		case c == '/':
			m, _ := plainName(body[i+2:])
			if m == 0 || len(stack) == 0 {
				return scanResult{}, false
			}
			k := i + 2 + m
			for k < n && isXMLSpace(body[k]) {
				k++
			}
			if k >= n || body[k] != '>' {
				return scanResult{}, false
			}
			i = k + 1
			res.longest = max(res.longest, i-start)
			stack = stack[:len(stack)-1]
			if len(stack) == itemDepth {
				res.items = append(res.items, span{itemStart, i})
				itemDepth = -1
			}
			if len(stack) == 0 {
				// The root is closed: the parser stops here. What
				// follows is measured all the same.
				res.longest = max(res.longest, longestTag(body[i:]))
				return res, true
			}
			continue
		}
		// A start tag.
		m, lo := plainName(body[i+1:])
		if m == 0 {
			return scanResult{}, false
		}
		local := body[i+1+lo : i+1+m]
		k := i + 1 + m
		attrs := 0
		empty := false
	attrLoop:
		for {
			for k < n && isXMLSpace(body[k]) {
				k++
			}
			if k >= n {
				return scanResult{}, false
			}
			switch body[k] {
			case '>':
				k++
				break attrLoop
			case '/':
				if k+1 >= n || body[k+1] != '>' {
					return scanResult{}, false
				}
				k += 2
				empty = true
				break attrLoop
			}
			am, _ := plainName(body[k:])
			if am == 0 {
				return scanResult{}, false
			}
			k += am
			for k < n && isXMLSpace(body[k]) {
				k++
			}
			if k >= n || body[k] != '=' {
				return scanResult{}, false // a value-less attribute
			}
			k++
			for k < n && isXMLSpace(body[k]) {
				k++
			}
			if k >= n || body[k] != '"' && body[k] != '\'' {
				return scanResult{}, false // an unquoted value
			}
			q := bytes.IndexByte(body[k+1:], body[k])
			if q < 0 {
				return scanResult{}, false
			}
			val := body[k+1 : k+1+q]
			if bytes.IndexByte(val, '<') >= 0 || bytes.IndexByte(val, ']') >= 0 && bytes.Contains(val, []byte("]]>")) {
				return scanResult{}, false
			}
			k += 1 + q + 1
			attrs++
		}
		if len(stack) == 0 {
			res.root = strings.ToLower(string(local))
			if res.root == "html" {
				return scanResult{}, false
			}
		}
		if isItemName(local, stack) {
			items++
			if items > maxItems {
				return scanResult{}, false
			}
			itemStart, itemDepth = start, len(stack)
		}
		if nodes += 1 + attrs; nodes > MaxNodes {
			return scanResult{}, false
		}
		stack = append(stack, local)
		if len(stack) > MaxDepth {
			return scanResult{}, false
		}
		i = k
		res.longest = max(res.longest, i-start)
		if empty {
			stack = stack[:len(stack)-1]
			if len(stack) == itemDepth {
				res.items = append(res.items, span{itemStart, i})
				itemDepth = -1
			}
			if len(stack) == 0 {
				res.longest = max(res.longest, longestTag(body[i:]))
				return res, true
			}
		}
	}
	return scanResult{}, false
}

// plainChars reports whether b is valid UTF-8 holding only characters XML
// allows (no C0 control but tab, line feed and carriage return, no U+FFFE
// or U+FFFF; valid UTF-8 holds no surrogates).
func plainChars(b []byte) bool {
	if plainText(b) {
		return true
	}
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return utf8.Valid(b) && !bytes.Contains(b, []byte("\xef\xbf\xbe")) && !bytes.Contains(b, []byte("\xef\xbf\xbf"))
}

// plainName reads an ASCII XML name at the start of b, as the tokenizer
// reads one (it ends at the first byte that cannot be in a name), and
// returns its length m, 0 for no name, one the tokenizer would refuse
// (two colons) or one going on outside ASCII, and where its local part
// begins: after the colon of prefix:local, else 0.
func plainName(b []byte) (m, lo int) {
	if len(b) == 0 {
		return 0, 0
	}
	if c := b[0]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '_' || c == ':') {
		return 0, 0
	}
	colon := -1
	for m = 0; m < len(b) && isNameByteASCII(b[m]); m++ {
		if b[m] == ':' {
			if colon >= 0 {
				return 0, 0 // the tokenizer refuses a second colon
			}
			colon = m
		}
	}
	if m < len(b) && b[m] >= utf8.RuneSelf {
		return 0, 0 // a name going on outside ASCII
	}
	if colon > 0 && colon < m-1 {
		return m, colon + 1
	}
	return m, 0 // no prefix (a colon first or last is part of the name)
}

func isNameByteASCII(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '_' || c == ':' || c == '.' || c == '-'
}

func isXMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// plainXMLDecl reports whether the body of an <?xml …?> declaration
// declares version 1.0 or none (the tokenizer refuses other versions). It
// reads the version as the tokenizer does: the first version= followed
// by a quote, up to the same quote.
func plainXMLDecl(decl []byte) bool {
	s := string(decl)
	const param = "version="
	for i := 0; i < len(s); {
		k := strings.Index(s[i:], param)
		if k < 0 || i+k+len(param) >= len(s) {
			return true
		}
		i += k + len(param)
		if q := s[i]; q == '"' || q == '\'' {
			j := strings.IndexByte(s[i+1:], q)
			return j < 0 || s[i+1:i+1+j] == "1.0"
		}
		i++
	}
	return true
}

// isItemName is isItemElement on local names: an RSS item (rss>channel>
// item, rss>item, rdf:RDF>item) or an Atom entry (feed>entry).
func isItemName(local []byte, stack [][]byte) bool {
	if !bytes.EqualFold(local, []byte("item")) && !bytes.EqualFold(local, []byte("entry")) {
		return false
	}
	switch len(stack) {
	case 1:
		return true
	case 2:
		return bytes.EqualFold(stack[1], []byte("channel"))
	}
	return false
}
