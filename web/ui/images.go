package ui

import (
	"html"
	"strings"

	nethtml "golang.org/x/net/html"
)

// imagesAsLinks rewrites sanitised item HTML for the UI's pages, whose
// Content-Security-Policy loads images from this server only: each <img>
// becomes a link to its image, named by its alt text (else "image"), so
// that a page shows no broken image and tells no publisher who reads it.
// An image inside a link becomes its alt text, since links do not nest.
// s must be the output of sanitize.HTML: well-formed, with absolute http
// and https sources only.
func imagesAsLinks(s string) string {
	if !strings.Contains(s, "<img") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	z := nethtml.NewTokenizer(strings.NewReader(s))
	inLink := 0
	for {
		tt := z.Next()
		switch tt {
		case nethtml.ErrorToken:
			return b.String()
		case nethtml.StartTagToken, nethtml.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "a":
				if tt == nethtml.StartTagToken {
					inLink++
				}
			case "img":
				var src, alt string
				for hasAttr {
					var k, v []byte
					k, v, hasAttr = z.TagAttr()
					switch string(k) {
					case "src":
						src = string(v)
					case "alt":
						alt = strings.TrimSpace(string(v))
					}
				}
				if alt == "" {
					alt = "image"
				}
				switch {
				case inLink > 0:
					b.WriteString(html.EscapeString(alt))
				case strings.HasPrefix(src, "https://") || strings.HasPrefix(src, "http://"):
					b.WriteString(`<a href="` + html.EscapeString(src) + `" rel="nofollow noopener noreferrer" class="item-image">` + html.EscapeString(alt) + `</a>`)
				}
				continue
			}
			b.Write(z.Raw())
		case nethtml.EndTagToken:
			if name, _ := z.TagName(); string(name) == "a" && inLink > 0 {
				inLink--
			}
			b.Write(z.Raw())
		default:
			b.Write(z.Raw())
		}
	}
}
