package sanitize

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	nethtml "golang.org/x/net/html"
)

func TestHTML(t *testing.T) {
	base, _ := url.Parse("https://example.org/posts/1")
	for _, c := range []struct {
		name, in, want string
	}{
		{"script removed with its content", `<p>hi<script>alert(1)</script></p>`, `<p>hi</p>`},
		{"style removed", `<style>body{display:none}</style><p>x</p>`, `<p>x</p>`},
		{"event handlers removed", `<p onclick="x()" onmouseover='y()'>t</p>`, `<p>t</p>`},
		{"style attribute removed", `<span style="position:fixed">t</span>`, `<span>t</span>`},
		{"javascript link dropped", `<a href="javascript:alert(1)">x</a>`, `x`},
		{"javascript link, encoded", `<a href="&#106;avascript:alert(1)">x</a>`, `x`},
		{"vbscript link dropped", `<a href="vbscript:msgbox(1)">x</a>`, `x`},
		{"data image dropped", `<img src="data:image/png;base64,AAAA" alt="a">`, `<img alt="a">`},
		{"link gets rel", `<a href="https://x.org/">x</a>`, `<a href="https://x.org/" rel="nofollow noopener">x</a>`},
		{"publisher rel replaced", `<a href="https://x.org/" rel="opener">x</a>`, `<a href="https://x.org/" rel="nofollow noopener">x</a>`},
		{"relative link resolved", `<a href="../about">x</a>`, `<a href="https://example.org/about" rel="nofollow noopener">x</a>`},
		{"relative image resolved", `<img src="/i.png">`, `<img src="https://example.org/i.png">`},
		{"mailto kept", `<a href="mailto:a@b.org">m</a>`, `<a href="mailto:a@b.org" rel="nofollow noopener">m</a>`},
		{"iframe removed", `<iframe src="https://evil.org/"></iframe><p>x</p>`, `<p>x</p>`},
		{"form removed", `<form action="/steal"><input name="p"></form>ok`, `ok`},
		{"svg script removed", `<svg><script>alert(1)</script></svg>ok`, `ok`},
		{"meta refresh removed", `<meta http-equiv="refresh" content="0;url=https://evil.org">ok`, `ok`},
		{"entities kept", `<p>a &amp; b &lt;c&gt;</p>`, `<p>a &amp; b &lt;c&gt;</p>`},
		{"control characters", "<p>a\x00b\x07c\u202ed</p>", "<p>abc\u202ed</p>"},
		{"invalid UTF-8", "<p>a\xffb</p>", "<p>a\uFFFDb</p>"},
		{"empty", "  ", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := HTML(c.in, base); got != c.want {
				t.Errorf("HTML(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	// Without a base, relative URLs would point into slogfeed: dropped.
	if got := HTML(`<a href="/x">x</a><img src="i.png">`, nil); got != `<a rel="nofollow noopener">x</a><img>` {
		t.Errorf("no base: %q", got)
	}
}

func TestPlainText(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"  plain  title\n\tnext ", 0, "plain title next"},
		{"<b>bold</b> &amp; <i>italic</i>", 0, "bold & italic"},
		{"a<script>alert(1)</script>b", 0, "ab"},
		{"Fish &amp; Chips", 0, "Fish & Chips"},
		{"Fish &amp;amp; Chips", 0, "Fish &amp; Chips"}, // one level of escaping

		{"1 < 2 and 3 > 2", 0, "1 < 2 and 3 > 2"},
		{"x\x00y\x1bz\u202e!", 0, "xyz!"},
		{"a\xff\xfeb", 0, "a\uFFFDb"},
		{"ééééé", 3, "ééé"},
		{"abc def", 4, "abc"},
	} {
		if got := PlainText(c.in, c.max); got != c.want {
			t.Errorf("PlainText(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

// checkSafeHTML fails when s is not valid UTF-8 or holds a script, style,
// frame, event handler or a URL with another scheme than http(s)/mailto.
func checkSafeHTML(t *testing.T, in, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("invalid UTF-8 from %q: %q", in, s)
	}
	z := nethtml.NewTokenizer(strings.NewReader(s))
	for {
		tt := z.Next()
		if tt == nethtml.ErrorToken {
			return
		}
		if tt != nethtml.StartTagToken && tt != nethtml.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "script", "style", "iframe", "object", "embed", "form", "input", "meta", "link", "base", "svg", "math":
			t.Fatalf("<%s> survived in %q (from %q)", tok.Data, s, in)
		}
		for _, a := range tok.Attr {
			if strings.HasPrefix(a.Key, "on") || a.Key == "style" || a.Key == "srcdoc" || a.Key == "formaction" {
				t.Fatalf("attribute %s survived in %q (from %q)", a.Key, s, in)
			}
			if a.Key == "href" || a.Key == "src" || a.Key == "cite" {
				u, err := url.Parse(a.Val)
				if err != nil || !(u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "mailto") {
					t.Fatalf("%s=%q survived in %q (from %q)", a.Key, a.Val, s, in)
				}
			}
		}
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{
		`<p onclick="x()">hi<script>alert(1)</script></p>`,
		`<a href="javascript:alert(1)">x</a><a href=" JaVaScRiPt:alert(1)">y</a>`,
		`<img src="data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=" onerror=alert(1)>`,
		`<a href="//evil.org/x">protocol-relative</a><a href="../../x">rel</a>`,
		`<svg><animate onbegin=alert(1) attributeName=x dur=1s>`,
		`<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>`,
		`<noscript><p title="</noscript><img src=x onerror=alert(1)>">`,
		"<p>\x00\u202e\xff</p>",
	} {
		f.Add(s)
	}
	base, _ := url.Parse("https://example.org/posts/1")
	f.Fuzz(func(t *testing.T, in string) {
		checkSafeHTML(t, in, HTML(in, base))
		checkSafeHTML(t, in, HTML(in, nil))
		checkShortcuts(t, in, base)
		out := PlainText(in, 50)
		if !utf8.ValidString(out) || utf8.RuneCountInString(out) > 50 {
			t.Fatalf("PlainText(%q) = %q", in, out)
		}
	})
}

// checkShortcuts fails when HTML's shortcuts (plain text, no link to
// rewrite) give anything but the full path's result.
func checkShortcuts(t *testing.T, in string, base *url.URL) {
	t.Helper()
	want := sanitizeFull(in, base)
	if got := HTML(in, base); got != want {
		t.Fatalf("HTML(%q) = %q, the full path gives %q", in, got, want)
	}
}

// TestSanitizeShortcuts: plain text and HTML without links come out of
// HTML as the policy and the link rewriter would make them.
func TestSanitizeShortcuts(t *testing.T) {
	base, _ := url.Parse("https://example.org/posts/1")
	for _, in := range []string{
		"21.5 C", "  spaced\ttext\n", "line\r\nbreaks\rhere", "quotes \" and ' and & and > and <",
		"value <b>21.5</b> C", "<p>para</p><abbr title=x>a</abbr>", `<a href="/x">rel</a>`,
		`<img src="x.png">`, `<q cite="../c">q</q>`, "text mentioning src and href", "\u202e\x00bidi",
		"", "   ",
	} {
		t.Run(in, func(t *testing.T) { checkShortcuts(t, in, base) })
	}
}
