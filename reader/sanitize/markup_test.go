package sanitize

import (
	"encoding/xml"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/sanitize/sanitizetest"
)

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Ordinary text keeps its meaning and its bytes.
		{"temperature < 5 & rising", "temperature < 5 & rising"},
		{"a<b", "a<b"},
		{"1 <2", "1 <2"},
		{"i </3 u", "i </3 u"},
		{"Fish &amp; Chips", "Fish &amp; Chips"}, // plain text: the entity is text
		{"a &lt b", "a &lt b"},
		{"&lt;3 you", "&lt;3 you"},
		{"it's online=yes", "it's online=yes"},
		{`the "on" switch`, `the "on" switch`},
		{"  folded \t white\nspace ", "folded white space"},
		// Tags go, with the content of scripts and styles.
		{"<script>alert(1)</script> <img src=x onerror=alert(2)>", ""},
		{"ok <b>bold</b> text", "ok bold text"},
		{"<ScRiPt>x</sCrIpT>after", "after"},
		{"<style>*{}</style>shown", "shown"},
		{"x <y and y > z", "x z"}, // as an HTML reader reads it
		{"<<b>img src=x onerror=alert(1)>", ""},
		{"reading <img src=x onerror=alert(1)//", "reading"},
		{"reading <script", "reading"},
		{"reading <b/", "reading"},
		{"if x<y then z", "if x"}, // "<y then z" is a tag once the reader's '>' comes
		{"a<b & c", "a"},
		{"<![CDATA[<img src=x onerror=alert(1)>]]>", "]]>"},
		// Markup under entities: the text is read where the markup shows.
		{"&lt;script&gt;alert(1)&lt;/script&gt; ok", "ok"},
		{"&amp;lt;b&amp;gt;triple&amp;lt;/b&amp;gt; Fish &amp;amp; Chips", "triple Fish & Chips"},
		{"&#60;img src=x onerror=alert(1)&#62;x", "x"},
		{"&#X3C;IMG SRC=x OnError=alert(1)&#x3e;x", "x"},
		{"&LT;ScRiPt&GT;x&LT;/sCrIpT&GT;y", "y"},
		{"&#38;#60;b&#38;#62;bold", "bold"},
		// Event handlers after a quote lose their name.
		{`x" onmouseover="alert(1)`, `x" "alert(1)`},
		{`x &quot; onfocus=&quot;alert(1)`, `x " "alert(1)`},
		{`x'onerror='alert(1)`, `x''alert(1)`},
		{`it's "a" b ONCLICK = c`, `it's "a" b c`},
		// Escaped more than any reader decodes: loses '<', '&' and quotes.
		{strings.Repeat("&amp;", 1) + strings.Repeat("amp;", 20) + "lt;b&gt;", strings.Repeat("amp;", 21) + "lt;bgt;"},
	} {
		if got := Text(c.in, 0); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestHasMarkup(t *testing.T) {
	for _, v := range sanitizetest.Values() {
		if got := HasMarkup(v.Text); got != v.Hostile {
			t.Errorf("%s: HasMarkup(%q) = %v", v.Name, v.Text, got)
		}
	}
}

// TestTextCases reads every value of sanitizetest in every encoding as a
// feed parser would (XML), makes it plain text as the parser does
// (PlainText), and as an output does with what is stored (Text): no
// result holds markup by sanitizetest.Check, ordinary text keeps its
// meaning, and Text keeps the result as it is.
func TestTextCases(t *testing.T) {
	for _, c := range sanitizetest.Cases() {
		t.Run(c.Name(), func(t *testing.T) {
			var el struct {
				Text string `xml:",chardata"`
			}
			if err := xml.Unmarshal([]byte("<title>"+c.XML+"</title>"), &el); err != nil {
				t.Fatal(err)
			}
			got := PlainText(el.Text, 0)
			if err := sanitizetest.Check(got); err != nil {
				t.Errorf("PlainText(%q): %v", el.Text, err)
			}
			if !c.Hostile && c.Same && got != c.Text {
				t.Errorf("PlainText(%q) = %q, want %q", el.Text, got, c.Text)
			}
			if again := Text(got, 0); again != got {
				t.Errorf("Text(%q) = %q: not kept", got, again)
			}
			// What an older store may hold: the XML text, unchecked.
			if err := sanitizetest.Check(Text(el.Text, 0)); err != nil {
				t.Errorf("Text(%q): %v", el.Text, err)
			}
		})
	}
}

func TestTextTruncated(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"ééééé", 3, "ééé"},
		{"abc def", 4, "abc"},
		{"a <b c>d</b> e", 3, "a d"},
	} {
		if got := Text(c.in, c.max); got != c.want {
			t.Errorf("Text(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func FuzzText(f *testing.F) {
	for _, c := range sanitizetest.Cases() {
		f.Add(c.XML)
	}
	for _, s := range []string{
		"<a b=\"<img src=x onerror=alert(1)>\">", "&lt;!--&gt;&lt;img src=x onerror=alert(1)&gt;",
		"<!DOCTYPE <img src=x onerror=alert(1)>>", "<plaintext><b>x", "<svg><![CDATA[<img onerror=x>]]>",
		"x\" y=z onclick=w", "`onclick=x", "&amp;" + strings.Repeat("amp;", 30) + "lt;b&gt;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, out := range []string{Text(in, 0), PlainText(in, 0)} {
			if !utf8.ValidString(out) {
				t.Fatalf("%q: invalid UTF-8 %q", in, out)
			}
			if err := sanitizetest.Check(out); err != nil {
				t.Fatalf("%q: %v", in, err)
			}
			if HasMarkup(out) {
				t.Fatalf("%q: %q holds markup", in, out)
			}
			if again := Text(out, 0); again != out {
				t.Fatalf("%q: Text(%q) = %q", in, out, again)
			}
		}
		if out := Text(in, 20); utf8.RuneCountInString(out) > 20 || HasMarkup(out) {
			t.Fatalf("Text(%q, 20) = %q", in, out)
		}
	})
}
