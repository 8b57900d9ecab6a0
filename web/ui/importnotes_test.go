package ui

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// flashPara is the flash message of a page, as the layout renders it.
var flashPara = regexp.MustCompile(`<p class="flash flash-(ok|error)" role="(?:alert|status)">([^<]*)</p>`)

// An import's result says what the parser reported of each outline: the
// settings it ignored, one note each naming the outline (its redacted URL
// and its title), bounded as the failures are, and the outlines that
// repeated a feed URL of the file, counted in the summary.
func TestImportOPMLNotes(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	const ns = `xmlns:slogfeed="https://slogfeed.org/ns/opml/1"`
	doc := func(outlines ...string) []byte {
		return []byte(`<opml version="2.0" ` + ns + `><body>` + strings.Join(outlines, "") + `</body></opml>`)
	}
	var many []string
	for i := range maxImportErrors + 2 {
		many = append(many, fmt.Sprintf(`<outline type="rss" text="M%d" xmlUrl="https://many.example.org/%d.rss" slogfeed:weight="heavy"/>`, i, i))
	}
	tests := []struct {
		name string
		file []byte
		kind string // of the flash: "ok" or "error"
		want string // the whole message, unless prefix
		// prefix, if set, is what the message starts with; suffix what
		// it ends with.
		prefix, suffix string
		absent         []string // not in the message
	}{
		{
			name: "ignored setting",
			file: doc(`<outline type="rss" text="North &lt;mast&gt;" xmlUrl="https://notes.example.org/north.rss" slogfeed:retentionItems="abc"/>`),
			kind: "ok",
			want: `Imported 1 feed; 0 already subscribed; 0 failed; 1 setting ignored. https://notes.example.org/north.rss ("North <mast>"): slogfeed:retentionItems="abc": not a positive whole number ignored.`,
		},
		{
			name: "untitled outline with credentials",
			file: doc(`<outline type="rss" xmlUrl="https://reader:hunter2@notes.example.org/private.rss" slogfeed:weight="-1" slogfeed:ignoreCache="maybe"/>`),
			kind: "ok",
			want: `Imported 1 feed; 0 already subscribed; 0 failed; 2 settings ignored. ` +
				`https://reader:xxxxx@notes.example.org/private.rss (untitled): slogfeed:weight="-1": not a positive number ignored; ` +
				`https://reader:xxxxx@notes.example.org/private.rss (untitled): slogfeed:ignoreCache="maybe": not true or false ignored.`,
		},
		{
			name: "repeated feed URLs",
			file: doc(
				`<outline type="rss" text="A" xmlUrl="https://dups.example.org/a.rss"/>`,
				`<outline type="rss" text="B" xmlUrl="https://dups.example.org/b.rss"/>`,
				`<outline type="rss" text="A again" xmlUrl="https://dups.example.org/a.rss"/>`,
				`<outline text="Folder"><outline type="rss" text="A once more" xmlUrl="https://dups.example.org/a.rss"/></outline>`,
				`<outline type="rss" text="B again" xmlUrl="https://dups.example.org/b.rss"/>`,
			),
			kind: "ok",
			want: `Imported 2 feeds; 0 already subscribed; 0 failed; 3 repeated in the file.`,
		},
		{
			name: "failure before ignored setting",
			file: doc(
				`<outline type="rss" text="Kept" xmlUrl="https://mixed.example.org/kept.rss" slogfeed:retentionAge="forever"/>`,
				`<outline type="rss" text="Refused" xmlUrl="https://mixed.example.org/refused.rss" slogfeed:reduce="{&quot;zzz&quot;: 1}"/>`,
				`<outline type="rss" text="Kept twice" xmlUrl="https://mixed.example.org/kept.rss"/>`,
			),
			kind:   "error",
			prefix: `Imported 1 feed; 0 already subscribed; 1 failed; 1 repeated in the file; 1 setting ignored. https://mixed.example.org/refused.rss: reduce`,
			suffix: `; https://mixed.example.org/kept.rss ("Kept"): slogfeed:retentionAge="forever": not a positive duration such as 720h ignored.`,
		},
		{
			// A source configuration without a source is valid JSON the
			// parser drops whole: the note quotes the start of it.
			name: "long title and value cut",
			file: doc(`<outline type="rss" text="` + strings.Repeat("t", 70) + `" xmlUrl="https://long.example.org/feed.rss" slogfeed:sourceConfig="{&quot;k&quot;: &quot;` + strings.Repeat("v", 200) + `&quot;}"/>`),
			kind: "ok",
			want: `Imported 1 feed; 0 already subscribed; 0 failed; 1 setting ignored. https://long.example.org/feed.rss ("` + strings.Repeat("t", 60) + `…"): ` +
				`slogfeed:sourceConfig="{\"k\":\"` + strings.Repeat("v", 74) + `…": no slogfeed:source names the adapter ignored.`,
			absent: []string{strings.Repeat("t", 61), strings.Repeat("v", 75)},
		},
		{
			name:   "more ignored settings than listed",
			file:   doc(many...),
			kind:   "ok",
			prefix: fmt.Sprintf(`Imported %d feeds; 0 already subscribed; 0 failed; %d settings ignored. https://many.example.org/0.rss ("M0"): slogfeed:weight="heavy": not a positive number ignored; `, maxImportErrors+2, maxImportErrors+2),
			suffix: fmt.Sprintf(`https://many.example.org/%d.rss ("M%[1]d"): slogfeed:weight="heavy": not a positive number ignored; and 2 more.`, maxImportErrors-1),
			absent: []string{fmt.Sprintf(`("M%d")`, maxImportErrors)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.client(t)
			r := c.upload(t, "/ui/feeds/import", map[string]string{"csrf_token": c.csrf(t)}, "opml", "notes.opml", tt.file)
			if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/feeds" {
				t.Fatalf("%d %q: %.300s", r.status, r.header.Get("Location"), r.body)
			}
			page := c.get(t, "/ui/feeds")
			checkPage(t, page)
			m := flashPara.FindStringSubmatch(page.body)
			if m == nil {
				t.Fatalf("no flash message: %.3000s", page.body)
			}
			kind, msg := m[1], html.UnescapeString(m[2])
			if kind != tt.kind {
				t.Errorf("flash %s, want %s", kind, tt.kind)
			}
			switch {
			case tt.want != "" && msg != tt.want:
				t.Errorf("message\n%s\nwant\n%s", msg, tt.want)
			case !strings.HasPrefix(msg, tt.prefix):
				t.Errorf("message\n%s\ndoes not start with\n%s", msg, tt.prefix)
			case !strings.HasSuffix(msg, tt.suffix):
				t.Errorf("message\n%s\ndoes not end with\n%s", msg, tt.suffix)
			}
			if n := strings.Count(msg, "): slogfeed:"); n > maxImportErrors {
				t.Errorf("%d ignored settings listed, want at most %d", n, maxImportErrors)
			}
			for _, s := range tt.absent {
				if strings.Contains(msg, s) {
					t.Errorf("message shows %q", s)
				}
			}
			// The outline's text reaches the page escaped; a feed URL's
			// credentials do not reach it.
			if strings.Contains(page.body, "<mast>") {
				t.Error("a title's markup reached the page unescaped")
			}
			if strings.Contains(page.body, "hunter2") {
				t.Error("the page shows a feed URL's password")
			}
		})
	}
}
