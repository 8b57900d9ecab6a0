package sanitize

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// shortcutCases are fragments on which HTML's shortcuts (plain text, no
// link to rewrite) and the full path must agree: text, tags the policy
// keeps, tags it drops, links and the malformed.
var shortcutCases = []struct{ name, in string }{
	{"bench fragment", "value <b>6.6</b> C"},
	{"plain text", "21.5 C"},
	{"nested", "<p>a <b>b <i>c</i></b> <em>d</em></p>"},
	{"misnested", "<b><i>x</b></i>"},
	{"unbalanced open", "<p>a<b>b"},
	{"unbalanced close", "a</b></p>b"},
	{"end tag of void element", "a</br>b"},
	{"headings and digits", "<h1>T</h1><h6>t</h6>"},
	{"lists and tables", "<ul><li>a</li></ul><table><tr><td>1</td></tr></table>"},
	{"every phrase tag", "<abbr>a</abbr><cite>c</cite><code>x</code><sub>2</sub><sup>3</sup><mark>m</mark><small>s</small><tt>t</tt><u>u</u><var>v</var><samp>s</samp><dfn>d</dfn><s>s</s><strike>s</strike><q>q</q><time>t</time>"},
	{"blockquote without cite", "<blockquote>q</blockquote>"},
	{"uppercase tags", "<B>x</B><Em>y</eM><BR>"},
	{"self-closing", "a<br/>b<br />c<br\n/>d<hr/>"},
	{"self-closing non-void", "<b/>x<p/>"},
	{"space before >", "<b >x</b >"},
	{"tab and newline in tag", "<b\t\n>x</b\r\n>"},
	{"entities", "a &amp; b &lt;c&gt; &quot;d&quot; &#39;e&#39;"},
	{"named entities decoded", "&copy; &nbsp; &eacute; &hellip;"},
	{"numeric entities", "&#169; &#xA9; &#x1F600; &#0; &#128; &#13; &#xD800;"},
	{"entities without semicolon", "&amp &lt &copy x&notit; &notin;"},
	{"unknown entity", "&bogus; &; &#; &#x;"},
	{"entity before a tag", "a &amp<b>b</b>"},
	{"quotes", `say "hi" it's`},
	{"stray angle brackets", "1 < 2 > 0 <3 << <= < b"},
	{"stray < at end", "a <b>b</b> <"},
	{"stray ampersand", "fish & chips &"},
	{"carriage returns", "a\r\nb\rc<b>\r</b>\r\n"},
	{"leading and trailing space", "  \n <p> x </p> \t"},
	{"bidi kept", "\u202eevil<b>x</b>"},
	{"non-ASCII text", "température <b>21,5 °C</b> ✓"},
	{"tags only", "<br>"},
	{"empty elements", "<b></b><p></p>"},

	{"attribute", `<p class="x">t</p>`},
	{"attribute without value", "<p hidden>t</p>"},
	{"attribute on end tag", "<b>x</b x=y>"},
	{"unknown tag", "<blink>x</blink>"},
	{"custom element", "<my-tag>x</my-tag>"},
	{"tag with non-ASCII name", "<bé>x</bé>"},
	{"tag longer than any kept", "<blockquotes>x</blockquotes>"},
	{"script", "<b>x</b><script>alert(1)</script>"},
	{"style", "<style>b{}</style><b>x</b>"},
	{"textarea is raw text", "<textarea><b>x</b></textarea>"},
	{"title is raw text", "<title>a &amp; <b></title>"},
	{"plaintext", "<plaintext><b>x"},
	{"comment", "a<!-- c -->b"},
	{"doctype", "<!DOCTYPE html><p>x</p>"},
	{"processing instruction", "<?xml version=\"1.0\"?><p>x</p>"},
	{"cdata", "<![CDATA[<b>x</b>]]>"},
	{"empty end tag", "a</>b"},
	{"end tag not a name", "a</ b>c"},
	{"cut-off start tag", "a<b"},
	{"cut-off end tag", "a</b"},
	{"cut-off after <b ", "a<b "},
	{"cut-off </", "a</"},
	{"slash then space", "<b / >x"},
	{"double slash", "<b//>x"},
	{"self-closing end tag", "</b/>"},
	{"link", `<a href="https://x.org/">x</a>`},
	{"relative link", `<a href="/x">x</a>`},
	{"bare a", "<a>x</a>"},
	{"image", `<img src="x.png">`},
	{"bare img", "<img>"},
	{"area", "<area>"},
	{"q with cite", `<q cite="../c">q</q>`},
	{"event handler", `<b onclick="x()">x</b>`},
	{"iframe", `<iframe src="https://evil.org/"></iframe>`},
	{"svg", "<svg><b>x</b></svg>"},
	{"bdo needs dir", "<bdo>x</bdo>"},
	{"details with open", "<details open>x</details>"},
	{"quoted > in attribute", `<b title="a>b">x</b>`},
}

func TestShortcutCases(t *testing.T) {
	base, _ := url.Parse("https://example.org/posts/1")
	for _, c := range shortcutCases {
		t.Run(c.name, func(t *testing.T) {
			checkShortcuts(t, c.in, base)
			checkShortcuts(t, c.in, nil)
		})
	}
}

func TestClean(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"tab\tand\nlines\r", "tab and lines "},
		{"nul\x00esc\x1b", "nulesc"},
		{"\u202eevil", "evil"},
		{"a\xffb", "a\uFFFDb"},
		{"<b>kept</b> &amp;", "<b>kept</b> &amp;"},
	} {
		if got := Clean(c.in); got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestCleanASCII: cleanText's ASCII shortcut gives what the rune-by-rune
// cleaning gives.
func TestCleanASCII(t *testing.T) {
	for _, s := range []string{
		"", "plain", "tab\there", "line\nbreak", "cr\rhere", "nul\x00", "esc\x1b[31m",
		"del\x7f", "\x1f", " ~", "é", "\u0085", "\xff",
	} {
		t.Run(s, func(t *testing.T) {
			for _, keep := range []bool{true, false} {
				if got, want := cleanText(s, keep), cleanRunes(s, keep); got != want {
					t.Errorf("cleanText(%q, %v) = %q, rune by rune %q", s, keep, got, want)
				}
			}
		})
	}
}

func TestFolded(t *testing.T) {
	for _, s := range []string{
		"", " ", "a", "reading 42", "a b c", " a", "a ", "a  b", "a\tb", "a\nb",
		"a\u00a0b", "a\u2003b", "a\u0085b", "\u3000", "é è", "a \u00a0b", "\xffa b",
	} {
		t.Run(s, func(t *testing.T) {
			want := strings.Join(strings.Fields(s), " ") == s
			if got := folded(s); got != want {
				t.Errorf("folded(%q) = %v, want %v", s, got, want)
			}
		})
	}
}

// BenchmarkHTML compares HTML with the full path on fragments of sensor
// feeds.
func BenchmarkHTML(b *testing.B) {
	base, _ := url.Parse("https://example.org/posts/1")
	for _, in := range []string{"21.5 C", "value <b>6.6</b> C", "<p>T &amp; RH<br/>21.5 &deg;C</p>"} {
		b.Run("HTML/"+in, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				HTML(in, base)
			}
		})
		b.Run("full/"+in, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sanitizeFull(in, base)
			}
		})
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer value", 8, "a longer…"},
		{"héllo", 2, "h…"}, // "é" is two bytes: not cut in half
		{"héllo", 3, "hé…"},
		{"bad\xffbyte", 20, "bad\uFFFDbyte"},
		{"", 0, ""},
		{"x", 0, "…"},
	}
	for _, tt := range tests {
		got := Clip(tt.s, tt.n)
		if got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q: not valid UTF-8", tt.s, tt.n, got)
		}
	}
}
