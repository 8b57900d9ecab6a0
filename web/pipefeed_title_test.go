package web

import (
	"strings"
	"testing"

	"github.com/mmcdole/gofeed"

	"github.com/slogfeed/slogfeed/storage"
)

// A pipe feed's title is published without markup; a title with no text
// left is the pipe's slug, in every format.
func TestPipeFeedTitle(t *testing.T) {
	tests := []struct{ title, want string }{
		{"Lab means", "Lab means"},
		{"<b>Lab</b> means", "Lab means"},
		{"", pipeSlug},
		{"   ", pipeSlug},
		{"<script>alert(1)</script>", pipeSlug},
		{"<img src=x onerror=alert(1)>", pipeSlug},
		{"<p> </p>", pipeSlug},
		{"\x01\x1b", pipeSlug},
		// Entities are read once, as in remote feeds' titles: the title
		// is what a reader shows, not its source a second time.
		{"Tags <b>bold</b> & AT&amp;T", "Tags bold & AT&T"},
		{"5 &lt; 7 &amp;&amp; 8 &gt; 2", "5 < 7 && 8 > 2"},
		{"R&D <i>lab</i>", "R&D lab"},
		{"&lt;script&gt;alert(1)&lt;/script&gt;", pipeSlug},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			fx := newPipeFixture(t)
			if _, err := fx.st.UpdateFeed(fx.feed.ID, func(f *storage.Feed) error {
				f.Title = tt.title
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			h := fx.handler(PipeFeedOptions{})
			for _, ext := range []string{"rss", "atom", "json"} {
				w := pipeGet(h, "GET", "/feeds/"+pipeSlug+"."+ext, nil)
				if w.Code != 200 {
					t.Fatalf("%s: status %d: %s", ext, w.Code, w.Body)
				}
				f, err := gofeed.NewParser().ParseString(w.Body.String())
				if err != nil {
					t.Fatalf("%s: %v", ext, err)
				}
				if strings.TrimSpace(f.Title) != tt.want {
					t.Errorf("%s: title %q, want %q", ext, f.Title, tt.want)
				}
			}
		})
	}
}
