package sanitize

import (
	"strings"
	"testing"
)

// hostileLong are plain-text values of 64 KiB built to make the markup
// search work hard: nested tags, deep escaping, nested comments, many
// event handlers.
var hostileLong = map[string]string{
	"nested tags":      strings.Repeat("<", 1<<15) + strings.Repeat("b>", 1<<14),
	"deep escaping":    "&" + strings.Repeat("amp;", 1<<14) + "lt;b&gt;",
	"comments":         strings.Repeat("<!<", 1<<15/3) + strings.Repeat(">", 1<<15),
	"handlers":         `"` + strings.Repeat(" onx=", 1<<16/5),
	"open tags":        strings.Repeat("<b c ", 1<<16/5),
	"entities":         strings.Repeat("&lt;b&gt;x", 1<<16/10),
	"escaped comments": strings.Repeat("<!&amp;amp;amp;amp;amp;amp;amp;amp;amp;amp;amp;amp;amp;lt;<!&amp;amp;lt;", 1<<16/90),
	"plain":            strings.Repeat("temperature < 5 & rising ", 1<<16/25),
}

// BenchmarkTextHostile: Text on hostileLong, to compare with plain text
// of the same size.
func BenchmarkTextHostile(b *testing.B) {
	for name, s := range hostileLong {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				Text(s, 0)
			}
		})
	}
}

func TestTextHostileLong(t *testing.T) {
	for name, s := range hostileLong {
		if out := Text(s, 0); HasMarkup(out) {
			t.Errorf("%s: %.80q holds markup", name, out)
		}
	}
}
