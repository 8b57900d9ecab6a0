package aggregator

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mmcdole/gofeed"
)

// fastCases are fragments for the fast path's differential test. fast says
// whether sanitizeFast must take the fragment (true) or decline it (false):
// either way SanitizeHTML must give the full path's result, and a fragment
// it takes must come out of sanitizeFast as out of the full path.
var fastCases = []struct {
	name, in string
	fast     bool
}{
	{"bench fragment", "value <b>6.6</b> C", true},
	{"plain text", "21.5 C", true},
	{"nested", "<p>a <b>b <i>c</i></b> <em>d</em></p>", true},
	{"misnested", "<b><i>x</b></i>", true},
	{"unbalanced open", "<p>a<b>b", true},
	{"unbalanced close", "a</b></p>b", true},
	{"end tag of void element", "a</br>b", true},
	{"headings and digits", "<h1>T</h1><h6>t</h6>", true},
	{"lists and tables", "<ul><li>a</li></ul><table><tr><td>1</td></tr></table>", true},
	{"every phrase tag", "<abbr>a</abbr><cite>c</cite><code>x</code><sub>2</sub><sup>3</sup><mark>m</mark><small>s</small><tt>t</tt><u>u</u><var>v</var><samp>s</samp><dfn>d</dfn><s>s</s><strike>s</strike><q>q</q><time>t</time>", true},
	{"blockquote without cite", "<blockquote>q</blockquote>", true},
	{"uppercase tags", "<B>x</B><Em>y</eM><BR>", true},
	{"self-closing", "a<br/>b<br />c<br\n/>d<hr/>", true},
	{"self-closing non-void", "<b/>x<p/>", true},
	{"space before >", "<b >x</b >", true},
	{"tab and newline in tag", "<b\t\n>x</b\r\n>", true},
	{"entities", "a &amp; b &lt;c&gt; &quot;d&quot; &#39;e&#39;", true},
	{"named entities decoded", "&copy; &nbsp; &eacute; &hellip;", true},
	{"numeric entities", "&#169; &#xA9; &#x1F600; &#0; &#128; &#13; &#xD800;", true},
	{"entities without semicolon", "&amp &lt &copy x&notit; &notin;", true},
	{"unknown entity", "&bogus; &; &#; &#x;", true},
	{"entity before a tag", "a &amp<b>b</b>", true},
	{"quotes", `say "hi" it's`, true},
	{"stray angle brackets", "1 < 2 > 0 <3 << <= < b", true},
	{"stray < at end", "a <b>b</b> <", true},
	{"stray ampersand", "fish & chips &", true},
	{"carriage returns", "a\r\nb\rc<b>\r</b>\r\n", true},
	{"leading and trailing space", "  \n <p> x </p> \t", true},
	{"bidi kept", "\u202eevil<b>x</b>", true},
	{"non-ASCII text", "température <b>21,5 °C</b> ✓", true},
	{"tags only", "<br>", true},
	{"empty elements", "<b></b><p></p>", true},

	{"attribute", `<p class="x">t</p>`, false},
	{"attribute without value", "<p hidden>t</p>", false},
	{"attribute on end tag", "<b>x</b x=y>", false},
	{"unknown tag", "<blink>x</blink>", false},
	{"custom element", "<my-tag>x</my-tag>", false},
	{"tag with non-ASCII name", "<bé>x</bé>", false},
	{"tag longer than any kept", "<blockquotes>x</blockquotes>", false},
	{"script", "<b>x</b><script>alert(1)</script>", false},
	{"style", "<style>b{}</style><b>x</b>", false},
	{"textarea is raw text", "<textarea><b>x</b></textarea>", false},
	{"title is raw text", "<title>a &amp; <b></title>", false},
	{"plaintext", "<plaintext><b>x", false},
	{"comment", "a<!-- c -->b", false},
	{"doctype", "<!DOCTYPE html><p>x</p>", false},
	{"processing instruction", "<?xml version=\"1.0\"?><p>x</p>", false},
	{"cdata", "<![CDATA[<b>x</b>]]>", false},
	{"empty end tag", "a</>b", false},
	{"end tag not a name", "a</ b>c", false},
	{"cut-off start tag", "a<b", false},
	{"cut-off end tag", "a</b", false},
	{"cut-off after <b ", "a<b ", false},
	{"cut-off </", "a</", false},
	{"slash then space", "<b / >x", false},
	{"double slash", "<b//>x", false},
	{"self-closing end tag", "</b/>", false},
	{"link", `<a href="https://x.org/">x</a>`, false},
	{"relative link", `<a href="/x">x</a>`, false},
	{"bare a", "<a>x</a>", false},
	{"image", `<img src="x.png">`, false},
	{"bare img", "<img>", false},
	{"area", "<area>", false},
	{"q with cite", `<q cite="../c">q</q>`, false},
	{"event handler", `<b onclick="x()">x</b>`, false},
	{"iframe", `<iframe src="https://evil.org/"></iframe>`, false},
	{"svg", "<svg><b>x</b></svg>", false},
	{"bdo needs dir", "<bdo>x</bdo>", false},
	{"details with open", "<details open>x</details>", false},
	{"quoted > in attribute", `<b title="a>b">x</b>`, false},
}

// checkFast fails when sanitizeFast takes in and gives another result than
// the full path, or when SanitizeHTML differs from the full path; it
// reports whether sanitizeFast took in.
func checkFast(t *testing.T, in string, base *url.URL) (took bool) {
	t.Helper()
	want := sanitizeFull(in, base)
	if got := SanitizeHTML(in, base); got != want {
		t.Fatalf("SanitizeHTML(%q) = %q, the full path gives %q", in, got, want)
	}
	c := cleanText(in, true)
	if strings.TrimSpace(c) == "" {
		return false // SanitizeHTML returns "" before any path
	}
	got, ok := sanitizeFast(c)
	if ok && got != want {
		t.Fatalf("sanitizeFast(%q) = %q, the full path gives %q", in, got, want)
	}
	return ok
}

func TestSanitizeFastDifferential(t *testing.T) {
	base, _ := url.Parse("https://example.org/posts/1")
	for _, c := range fastCases {
		t.Run(c.name, func(t *testing.T) {
			for _, b := range []*url.URL{base, nil} {
				if took := checkFast(t, c.in, b); took != c.fast {
					t.Errorf("sanitizeFast took %q: %v, want %v", c.in, took, c.fast)
				}
			}
		})
	}
}

// TestSanitizeFastFixtures runs the differential check on every fixture
// document as a whole and on the summary and content of each item of the
// ones gofeed reads.
func TestSanitizeFastFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	fields := 0
	for _, file := range files {
		if strings.HasSuffix(file, ".golden.json") {
			continue
		}
		t.Run(filepath.ToSlash(file), func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			// The whole document is a fragment too.
			checkFast(t, string(body), nil)
			// Repaired as Parse does (charset, then the control
			// characters XML forbids), so that gofeed reads it.
			body, _ = toUTF8(body, "")
			body = bytes.Map(func(r rune) rune {
				if r < ' ' && r != '\t' && r != '\n' && r != '\r' {
					return -1
				}
				return r
			}, body)
			feed, err := gofeed.NewParser().Parse(bytes.NewReader(body))
			if err != nil {
				t.Logf("only the whole document checked, gofeed does not read it: %v", err)
				return
			}
			var base *url.URL
			if u, err := url.Parse(feed.Link); err == nil && u.IsAbs() {
				base = u
			}
			for _, it := range feed.Items {
				for _, s := range []string{it.Description, it.Content} {
					if strings.TrimSpace(s) != "" {
						checkFast(t, s, base)
						fields++
					}
				}
			}
		})
	}
	if fields == 0 {
		t.Fatal("no summary or content in the fixtures")
	}
}

// TestFastTagsKeptByPolicy: each of fastTags comes out of the policy as
// the fast path writes it, start, end and self-closing, and none is an
// element whose URL attribute the link rewriter changes.
func TestFastTagsKeptByPolicy(t *testing.T) {
	for name := range fastTags {
		t.Run(name, func(t *testing.T) {
			if len(name) > maxFastTag {
				t.Errorf("%q is longer than maxFastTag (%d)", name, maxFastTag)
			}
			in := "x<" + name + ">t</" + name + "><" + name + "/>y"
			if got := ugcPolicy().Sanitize(in); got != in {
				t.Errorf("policy: %q gives %q", in, got)
			}
			upper := strings.ToUpper(in)
			if got, ok := sanitizeFast(upper); !ok || got != strings.ToUpper("x")+"<"+name+">"+"T</"+name+"><"+name+"/>Y" {
				t.Errorf("sanitizeFast(%q) = %q, %v", upper, got, ok)
			}
			if name == "a" || name == "area" || name == "img" {
				t.Errorf("%q has a URL attribute to rewrite", name)
			}
		})
	}
}

// TestSanitizeFastNoAlloc: a fragment the policy gives back unchanged
// costs no allocation.
func TestSanitizeFastNoAlloc(t *testing.T) {
	for _, in := range []string{"value <b>6.6</b> C", "<p>a<br/>b &amp; c</p>"} {
		t.Run(in, func(t *testing.T) {
			var out string
			var ok bool
			if n := testing.AllocsPerRun(100, func() { out, ok = sanitizeFast(in) }); n != 0 {
				t.Errorf("sanitizeFast(%q): %v allocations", in, n)
			}
			if !ok || out != in {
				t.Errorf("sanitizeFast(%q) = %q, %v", in, out, ok)
			}
		})
	}
}

// fastPieces are what FuzzSanitizeFast assembles fragments from, so that
// most of its inputs are ones the fast path may take.
var fastPieces = []string{
	"<b>", "</b>", "<B>", "</B >", "<br/>", "<br />", "<p>", "</p>", "<h2>",
	"<blockquote>", "</blockquote>", "<i\n>", "<hr/>", "<wbr>", "<a>", "<img>",
	"<a href=\"/x\">", "<q cite=x>", "<textarea>", "<title>", "<script>",
	"<!--", "-->", "<!x>", "<?x?>", "</>", "</ b>", "<b/ >", "<b//>", "</b/>",
	"<", ">", "/", "&", ";", "&amp;", "&lt", "&#", "&#x", "1", "a", "x", "é",
	"&copy;", "&#13;", " ", "\r", "\n", "\r\n", "\t", `"`, "'", "=", "src",
	"<abbr>", "<aside>", "<p class=x>", "<bé>", "<b", "</b",
}

func FuzzSanitizeFast(f *testing.F) {
	for _, c := range fastCases {
		f.Add(c.in)
	}
	f.Add("\x00\x01\x02\x03\x04\x05\x06\x07")
	f.Add("\x29\x2a\x2b\x2c\x30\x31\x00\x18\x1b")
	base, _ := url.Parse("https://example.org/posts/1")
	f.Fuzz(func(t *testing.T, in string) {
		checkFast(t, in, base)
		checkFast(t, in, nil)
		// The same bytes read as a sequence of pieces.
		var b strings.Builder
		for i := 0; i < len(in); i++ {
			b.WriteString(fastPieces[int(in[i])%len(fastPieces)])
		}
		checkFast(t, b.String(), base)
		for _, keep := range []bool{true, false} {
			if got, want := cleanText(in, keep), cleanRunes(in, keep); got != want {
				t.Fatalf("cleanText(%q, %v) = %q, rune by rune %q", in, keep, got, want)
			}
		}
		if got, want := folded(in), strings.Join(strings.Fields(in), " ") == in; got != want {
			t.Fatalf("folded(%q) = %v, want %v", in, got, want)
		}
	})
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

// BenchmarkSanitizeHTML compares SanitizeHTML with the full path on
// fragments of sensor feeds.
func BenchmarkSanitizeHTML(b *testing.B) {
	base, _ := url.Parse("https://example.org/posts/1")
	for _, in := range []string{"value <b>6.6</b> C", "<p>T &amp; RH<br/>21.5 &deg;C</p>"} {
		b.Run("SanitizeHTML/"+in, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				SanitizeHTML(in, base)
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
