package opml

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// settingsFeeds are feeds with every setting an export keeps.
func settingsFeeds() []storage.Feed {
	return []storage.Feed{
		{
			URL: "http://127.0.0.1:9000/traces/ulb.csv", Title: "ULB trace replay", Category: []string{"Traces"},
			Policy: "fixed-5s", Weight: 2.5, IgnoreCache: true,
			Source:    &storage.SourceSpec{Type: "ulb", Config: json.RawMessage(`{"speed":60,"sensor":"ulb-3"}`)},
			Retention: storage.Retention{MaxItems: 500, MaxAge: 720 * time.Hour},
			Reduce:    json.RawMessage(`{"levels":[{"filters":["LATEST"]}]}`),
			Sleep: schedule.SleepPlan{
				Daily:   []schedule.DailyWindow{{From: 22 * time.Hour, To: 6 * time.Hour}},
				Windows: []schedule.Window{{Start: time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 27, 0, 0, 0, 0, time.UTC)}},
			},
		},
		{
			URL: "https://wx.example.org/roof.rss", Title: "Roof", Site: "https://wx.example.org/",
			Policy:  "dpt-l",
			Extract: &storage.ExtractRule{Field: "title", Regex: `(-?\d+(?:[.,]\d+)?)\s*°C & more`, Unit: "C"},
		},
		{URL: "https://plain.example.org/feed.xml", Title: "No settings"},
	}
}

// An export followed by an import keeps every feed's settings: policy,
// weight, cache handling, source adapter and its configuration, extract
// rule, retention, reduction and sleep windows.
func TestSettingsRoundTrip(t *testing.T) {
	feeds := settingsFeeds()
	var out []Outline
	for _, f := range feeds {
		out = append(out, OutlineOf(f))
	}
	var buf bytes.Buffer
	if err := Write(&buf, "slogfeed subscriptions", out, time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	doc := buf.String()
	for _, want := range []string{`xmlns:slogfeed="` + Namespace + `"`, `slogfeed:policy="fixed-5s"`, `slogfeed:source="ulb"`} {
		if !strings.Contains(doc, want) {
			t.Errorf("export lacks %s:\n%s", want, doc)
		}
	}
	in, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	byURL := map[string]storage.Feed{}
	for _, o := range in {
		byURL[o.URL] = o.Feed("auto")
	}
	for _, f := range feeds {
		got, ok := byURL[f.URL]
		if !ok {
			t.Errorf("%s not imported", f.URL)
			continue
		}
		want := f
		if want.Policy == "" {
			want.Policy = "auto" // the importer's default for outlines without one
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", f.URL, got, want)
		}
	}
}

// The settings written for the fixture feeds (go test -update rewrites
// the golden file).
func TestSettingsGolden(t *testing.T) {
	var out []Outline
	for _, f := range settingsFeeds() {
		out = append(out, OutlineOf(f))
	}
	var buf bytes.Buffer
	if err := Write(&buf, "slogfeed subscriptions", out, time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "settings.golden.opml")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("Write output differs from %s:\n%s", golden, buf.Bytes())
	}
}

// Settings that cannot be used are ignored, and the subscription still
// imports; other readers' attributes never become settings.
func TestSettingsHostile(t *testing.T) {
	doc := `<opml version="2.0" xmlns:s="` + Namespace + `" xmlns:miniflux="https://miniflux.app/opml"><body>
<outline xmlUrl="https://a.example/f" s:weight="NaN" s:retentionItems="-3" s:retentionAge="forever"
  s:sourceConfig="{not json" s:extractField="title" s:sleep="25:00-06:00"
  s:policy="` + strings.Repeat("x", MaxSettingText+1) + `" miniflux:policy="fixed-1s"/>
<outline xmlUrl="https://b.example/f" s:weight="+Inf" s:sourceConfig="{}" s:ignoreCache="yes"/>
</body></opml>`
	got, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d outlines, want 2", len(got))
	}
	for _, o := range got {
		if !o.Settings.IsZero() {
			t.Errorf("%s: settings %+v, want none", o.URL, o.Settings)
		}
	}
}

// Miniflux and FreshRSS exports carry no slogfeed settings and import as
// before (their own namespaced attributes are ignored).
func TestSettingsOfOtherReaders(t *testing.T) {
	for _, file := range []string{"miniflux.opml", "freshrss.opml"} {
		got, err := Parse(openFixture(t, file))
		if err != nil || len(got) == 0 {
			t.Fatalf("%s: %d outlines, %v", file, len(got), err)
		}
		for _, o := range got {
			if !o.Settings.IsZero() {
				t.Errorf("%s: %s has settings %+v", file, o.URL, o.Settings)
			}
		}
	}
}

// Each setting Parse leaves out is listed on its outline with the reason;
// the outline imports with the rest.
func TestSettingsIgnored(t *testing.T) {
	tests := []struct {
		attrs string
		want  []string // the ignored attributes, in order
		kept  Settings
	}{
		{`slogfeed:policy="fixed-5s" slogfeed:retentionItems="500"`, nil, Settings{Policy: "fixed-5s", Retention: storage.Retention{MaxItems: 500}}},
		{`slogfeed:sleep="25:00-99" slogfeed:retentionItems="abc" slogfeed:reduce="{bad" slogfeed:policy="auto"`,
			[]string{"sleep", "retentionItems", "reduce"}, Settings{Policy: "auto"}},
		{`slogfeed:weight="NaN" slogfeed:ignoreCache="maybe" slogfeed:retentionAge="-1h" slogfeed:colour="red"`,
			[]string{"weight", "ignoreCache", "retentionAge", "colour"}, Settings{}},
		{`slogfeed:sourceConfig="{}" slogfeed:extractUnit="C"`, []string{"sourceConfig", "extractField"}, Settings{}},
		// A policy this slogfeed cannot run: the feed is kept, with the default.
		{`slogfeed:policy="bogus" slogfeed:weight="2"`, []string{"policy"}, Settings{Weight: 2}},
		{`slogfeed:policy="fixed-0s"`, []string{"policy"}, Settings{}},
		{`slogfeed:policy="cron:@every 1ms"`, []string{"policy"}, Settings{}},
		// Long values are quoted cut, half-given settings' too.
		{`slogfeed:sourceConfig="{&quot;k&quot;: &quot;` + strings.Repeat("v", 5000) + `&quot;}" slogfeed:extractField="` + strings.Repeat("f", 300) + `"`, []string{"extractField", "sourceConfig"}, Settings{}},
		{`slogfeed:reduce="` + strings.Repeat("r", 5000) + `"`, []string{"reduce"}, Settings{}},
	}
	for _, tt := range tests {
		doc := `<opml xmlns:slogfeed="` + Namespace + `"><body><outline xmlUrl="https://a.example/f" ` + tt.attrs + `/></body></opml>`
		out, err := Parse(strings.NewReader(doc))
		if err != nil || len(out) != 1 {
			t.Fatalf("%s: %v %v", tt.attrs, out, err)
		}
		var got []string
		for _, ig := range out[0].Ignored {
			got = append(got, ig.Attr)
			if ig.Reason == "" || !strings.HasPrefix(ig.String(), "slogfeed:"+ig.Attr+"=") {
				t.Errorf("%s: %q says no reason", tt.attrs, ig)
			}
			if len(ig.Value) > MaxIgnoredValue+len("…") {
				t.Errorf("%s: ignored %s quotes %d bytes of its value, want at most %d", tt.attrs, ig.Attr, len(ig.Value), MaxIgnoredValue)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: ignored %q, want %q", tt.attrs, got, tt.want)
		}
		if !reflect.DeepEqual(out[0].Settings, tt.kept) {
			t.Errorf("%s: settings %+v, want %+v", tt.attrs, out[0].Settings, tt.kept)
		}
	}
}
