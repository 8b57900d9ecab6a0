package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// apiServer is a slogfeed API over a fresh store, for the client commands.
func apiServer(t *testing.T) (*httptest.Server, *storage.Store) {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.New(web.Options{Store: st, Aggregator: svc}))
	t.Cleanup(srv.Close)
	return srv, st
}

// `export` then `import` into another slogfeed keeps each feed's
// settings: policy, weight, cache handling, extract rule, retention and
// sleep windows (the issue: fixed-5s came back as auto).
func TestExportImportKeepsSettings(t *testing.T) {
	from, fromStore := apiServer(t)
	to, toStore := apiServer(t)
	feeds := []storage.Feed{
		{
			URL: "https://sensors.example.org/lab.rss", Title: "Lab", Category: []string{"Sensors"},
			Policy: "fixed-5s", Weight: 3, IgnoreCache: true,
			Retention: storage.Retention{MaxItems: 200, MaxAge: 48 * time.Hour},
			Extract:   &storage.ExtractRule{Field: "title", Regex: `(\d+(?:\.\d+)?) C`, Unit: "C"},
			Sleep:     schedule.SleepPlan{Daily: []schedule.DailyWindow{{From: 22 * time.Hour, To: 6 * time.Hour}}},
		},
		{URL: "https://news.example.org/feed.xml", Title: "News", Policy: "dpt-l"},
	}
	for i := range feeds {
		f := feeds[i]
		f.Kind = storage.KindRemote
		if err := fromStore.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	out := runCLI(ctx, []string{"export", "--server", from.URL}, quiet, nil)
	if out.code != 0 {
		t.Fatalf("export: %d %s", out.code, out.stderr)
	}
	if !strings.Contains(out.stdout, `slogfeed:policy="fixed-5s"`) {
		t.Errorf("export lacks the policy:\n%s", out.stdout)
	}
	file := filepath.Join(t.TempDir(), "subs.opml")
	if err := os.WriteFile(file, []byte(out.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	in := runCLI(ctx, []string{"import", "--server", to.URL, "--policy", "auto", file}, quiet, nil)
	if in.code != 0 {
		t.Fatalf("import: %d %s %s", in.code, in.stdout, in.stderr)
	}
	for _, want := range feeds {
		got, err := toStore.FeedByURL(want.URL)
		if err != nil {
			t.Fatalf("%s not imported: %v", want.URL, err)
		}
		if got.Policy != want.Policy || got.Weight != want.Weight || got.IgnoreCache != want.IgnoreCache ||
			got.Retention != want.Retention || !reflect.DeepEqual(got.Extract, want.Extract) ||
			!reflect.DeepEqual(got.Sleep.Daily, want.Sleep.Daily) || !reflect.DeepEqual(got.Category, want.Category) {
			t.Errorf("%s imported as %+v, want the settings of %+v", want.URL, got, want)
		}
	}
}

// `import` sums up what it did: feeds subscribed, already subscribed,
// refused by the server, and whether the file had outlines it left out
// (listed on stderr; the exit status is then 1).
func TestImportSummary(t *testing.T) {
	srv, st := apiServer(t)
	if err := st.CreateFeed(&storage.Feed{Kind: storage.KindRemote, URL: "https://example.org/dup.rss", Policy: "auto"}); err != nil {
		t.Fatal(err)
	}
	const doc = `<?xml version="1.0"?>
<opml version="2.0"><head><title>t</title></head><body>
  <outline text="new" xmlUrl="https://example.org/new.rss"/>
  <outline text="dup" xmlUrl="https://example.org/dup.rss"/>
  <outline text="loopback" xmlUrl="http://127.0.0.1:1/x.rss"/>
  <outline text="ftp" xmlUrl="ftp://example.org/x"/>
</body></opml>`
	file := filepath.Join(t.TempDir(), "subs.opml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runCLI(context.Background(), []string{"import", "--server", srv.URL, file}, quiet, nil)
	if want := "imported 1 feed, 1 already subscribed, 1 refused; outlines left out of the file, listed below\n"; out.stdout != want {
		t.Errorf("stdout %q, want %q", out.stdout, want)
	}
	if out.code != 1 || !strings.Contains(out.stderr, "ftp://example.org/x") || !strings.Contains(out.stderr, "http://127.0.0.1:1/x.rss") {
		t.Errorf("exit %d, stderr %q: want 1 and both the skipped and the refused outline", out.code, out.stderr)
	}
}

// `import` names every slogfeed setting it leaves out (outline,
// attribute, why) and counts outlines repeating a feed URL of the file as
// duplicates, importing the rest.
func TestImportWarnings(t *testing.T) {
	tests := []struct {
		name, body string
		stdout     string
		warnings   []string // on stderr, each on a line of its own
		imported   []string
	}{
		{
			name:   "bad settings",
			body:   `<outline text="Lab" xmlUrl="https://example.org/lab.rss" slogfeed:sleep="25:00-99" slogfeed:retentionItems="abc" slogfeed:reduce="{bad" slogfeed:policy="fixed-5s"/>`,
			stdout: "imported 1 feed, 0 already subscribed, 0 refused; 3 settings ignored, listed above\n",
			warnings: []string{
				`https://example.org/lab.rss ("Lab"): slogfeed:sleep="25:00-99": `,
				`https://example.org/lab.rss ("Lab"): slogfeed:retentionItems="abc": not a positive whole number ignored`,
				`https://example.org/lab.rss ("Lab"): slogfeed:reduce="{bad": not JSON`,
			},
			imported: []string{"https://example.org/lab.rss"},
		},
		{
			name: "duplicates",
			body: `<outline text="a" xmlUrl="https://example.org/a.rss"/><outline text="a again" xmlUrl="https://example.org/a.rss"/>
				<outline text="b" xmlUrl="https://example.org/b.rss"/><outline text="A" xmlUrl="HTTPS://EXAMPLE.org/a.rss"/>
				<outline text="b" xmlUrl="https://example.org/b.rss"/><outline text="c" xmlUrl="https://example.org/c.rss"/>`,
			stdout:   "imported 3 feeds, 0 already subscribed, 0 refused, 3 duplicates in the file\n",
			imported: []string{"https://example.org/a.rss", "https://example.org/b.rss", "https://example.org/c.rss"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, st := apiServer(t)
			doc := `<?xml version="1.0"?><opml version="2.0" xmlns:slogfeed="https://slogfeed.org/ns/opml/1"><head><title>t</title></head><body>` + tt.body + `</body></opml>`
			file := filepath.Join(t.TempDir(), "subs.opml")
			if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			out := runCLI(context.Background(), []string{"import", "--server", srv.URL, file}, quiet, nil)
			if out.code != 0 || out.stdout != tt.stdout {
				t.Errorf("exit %d, stdout %q; want 0, %q", out.code, out.stdout, tt.stdout)
			}
			var warnings []string
			for line := range strings.Lines(out.stderr) {
				if strings.HasPrefix(line, "import: warning: ") {
					warnings = append(warnings, line)
				}
			}
			if len(warnings) != len(tt.warnings) {
				t.Errorf("warnings %q, want %d", warnings, len(tt.warnings))
			}
			for i, w := range tt.warnings {
				if i < len(warnings) && !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q, want it to hold %q", warnings[i], w)
				}
			}
			feeds, err := st.Feeds()
			if err != nil {
				t.Fatal(err)
			}
			var urls []string
			for _, f := range feeds {
				urls = append(urls, f.URL)
			}
			slices.Sort(urls) // subscribed side by side: IDs in any order
			if !reflect.DeepEqual(urls, tt.imported) {
				t.Errorf("imported %q, want %q", urls, tt.imported)
			}
		})
	}
}
