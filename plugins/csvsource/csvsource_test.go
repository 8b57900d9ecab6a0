package csvsource_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/plugins/csvsource"
	"github.com/slogfeed/slogfeed/plugins/internal/sourcetest"
	"github.com/slogfeed/slogfeed/plugins/sourcekit"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/parser"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const goodConfig = `{"columns": {"time": "time", "value": "value", "unit": "unit", "sensor": "sensor"}}`

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPrepare(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		want      string // in the error; empty: accepted
	}{
		{"good", goodConfig, ""},
		{"positions", `{"header": false, "columns": {"time": 0, "value": 1}}`, ""},
		{"empty", ``, "columns.time and columns.value"},
		{"no value", `{"columns": {"time": "t"}}`, "columns.time and columns.value are required"},
		{"name without header", `{"header": false, "columns": {"time": 0, "value": "v"}}`, "columns.value names a column but header is false"},
		{"bad delimiter", `{"delimiter": "::", "columns": {"time": 0, "value": 1}}`, "delimiter"},
		{"negative position", `{"columns": {"time": -1, "value": 1}}`, "position from 0"},
		{"bad decimal_comma", `{"decimal_comma": "yes", "columns": {"time": 0, "value": 1}}`, "decimal_comma"},
		{"bad time format", `{"time_format": "later", "columns": {"time": 0, "value": 1}}`, "time_format"},
		{"unknown setting", `{"colums": {}}`, "colums"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := csvsource.Source{}.Prepare(json.RawMessage(tc.cfg), now)
			if tc.want == "" {
				var c csvsource.Config
				if err != nil || json.Unmarshal(out, &c) != nil || c.Header == nil || c.DecimalComma != csvsource.DecimalAuto || c.TimeFormat != "auto" {
					t.Fatalf("Prepare = %s, %v; want a normalised config", out, err)
				}
				return
			}
			if !errors.Is(err, sourcekit.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prepare(%s) = %s, %v; want ErrConfig mentioning %q", tc.cfg, out, err, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	type item struct {
		title string
		at    time.Time
	}
	at := func(h, m int) time.Time { return time.Date(2025, 6, 1, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name, file, ctype, cfg string
		want                   []item // newest first
		skipped                string // prefix of Parsed.Skipped
	}{
		{"good", "good.csv", "text/csv", goodConfig,
			[]item{{"19.75 C at field, east", at(10, 2)}, {"21.5 C at field-north", at(10, 1)}, {"21.3 C at field-north", at(10, 0)}}, ""},
		{"semicolon, decimal comma, layout", "semicolon-decimal-comma.csv", "text/csv",
			`{"decimal_comma": true, "time_format": "02.01.2006 15:04", "unit": "C", "columns": {"time": "Zeit", "value": "temperatur", "sensor": "Station"}}`,
			[]item{{"-0.5 C at sued", at(10, 2)}, {"1021.5 C at nord", at(10, 1)}, {"21.3 C at nord", at(10, 0)}}, ""},
		{"tsv by content type", "tab.tsv", "text/tab-separated-values", `{"unit": "m", "columns": {"time": "time", "value": "value", "sensor": "sensor"}}`,
			[]item{{"1.25 m at buoy", time.Unix(1748772060, 0)}, {"1.5 m at buoy", time.Unix(1748772000, 0)}}, ""},
		{"tsv detected", "tab.tsv", "text/plain", `{"columns": {"time": "time", "value": "value"}}`,
			[]item{{"1.25", time.Unix(1748772060, 0)}, {"1.5", time.Unix(1748772000, 0)}}, ""},
		{"bom", "bom.csv", "text/csv", `{"columns": {"time": "time", "value": "value"}}`,
			[]item{{"3", at(10, 0)}}, ""},
		{"no header, positions", "no-header.csv", "text/csv", `{"header": false, "columns": {"time": 0, "value": 1, "unit": 2}}`,
			[]item{{"8 m", at(10, 10)}, {"7 m", at(10, 0)}}, ""},
		{"wrong types", "wrong-types.csv", "text/csv", `{"columns": {"time": "time", "value": "value", "sensor": "sensor"}}`,
			[]item{{"22.5 at a", at(10, 6)}, {"21.3 at a", at(10, 0)}},
			`5 of 7 rows skipped: row 2: field value: "abc" is not a number; row 3: field value: empty; row 4: field time: "yesterday" is not an RFC 3339 time; …`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := csvsource.Source{}.Parse(fixture(t, tc.file), tc.ctype, json.RawMessage(tc.cfg), parser.Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != len(tc.want) {
				t.Fatalf("%d items, want %d (skipped: %v)", len(p.Items), len(tc.want), p.Skipped)
			}
			for i, w := range tc.want {
				if it := p.Items[i]; it.Title != w.title || !it.Published.Equal(w.at) {
					t.Errorf("item %d = %q at %v, want %q at %v", i, it.Title, it.Published, w.title, w.at)
				}
			}
			switch {
			case tc.skipped == "" && p.Skipped != nil:
				t.Errorf("skipped: %v", p.Skipped)
			case tc.skipped != "" && (p.Skipped == nil || p.Skipped.Error() != tc.skipped):
				t.Errorf("skipped:\n%v\nwant\n%s", p.Skipped, tc.skipped)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	huge := "time,value,sensor\n2025-06-01T10:00:00Z,1," + strings.Repeat("x", 100_000) + "\n2025-06-01T10:01:00Z,2,ok\n"
	for _, tc := range []struct {
		name, body, cfg string
		is              error
		want            string
	}{
		{"missing column", string(fixture(t, "missing-column.csv")), goodConfig, parser.ErrMalformed, `columns.time: no column "time" in the header (it has "when", "reading")`},
		{"empty", "\n", goodConfig, parser.ErrMalformed, "empty"},
		{"html", "<html><body>login</body></html>", goodConfig, parser.ErrMalformed, "not CSV"},
		{"binary", "\xff\xfe\x00t\x00i", goodConfig, parser.ErrMalformed, "not UTF-8"},
		{"all bad", "time,value\nnow,1\nlater,2\n", `{"columns": {"time": "time", "value": "value"}}`, sourcekit.ErrNoGoodRecords, `all 2 rows skipped: row 1: field time: "now" is not an RFC 3339 time`},
		{"bad config", "a,b\n", `{"columns": {}}`, sourcekit.ErrConfig, "required"},
		{"header unterminated", "\"time,value\n1,2\n", goodConfig, parser.ErrMalformed, "header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := csvsource.Source{}.Parse([]byte(tc.body), "text/csv", json.RawMessage(tc.cfg), parser.Options{Now: now})
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, %v; want %v mentioning %q", p, err, tc.is, tc.want)
			}
		})
	}
	t.Run("huge field", func(t *testing.T) {
		p, err := csvsource.Source{}.Parse([]byte(huge), "text/csv", json.RawMessage(`{"columns": {"time": "time", "value": "value", "sensor": "sensor"}}`), parser.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 1 || p.Skipped == nil || !strings.Contains(p.Skipped.Error(), "row 1: field sensor: 100000 bytes, more than 4096") {
			t.Fatalf("%d items, skipped %v", len(p.Items), p.Skipped)
		}
	})
	t.Run("max items", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("time,value\n")
		for i := range 50 {
			b.WriteString(now.Add(-time.Duration(i)*time.Minute).Format(time.RFC3339) + ",1\n")
		}
		p, err := csvsource.Source{}.Parse([]byte(b.String()), "text/csv", json.RawMessage(`{"columns": {"time": 0, "value": 1}}`), parser.Options{Now: now, MaxItems: 10})
		if err != nil || len(p.Items) != 10 || !p.Truncated || !p.Items[0].Published.Equal(now) {
			t.Fatalf("Parse = %d items, truncated %v, %v; want the newest 10", len(p.Items), p.Truncated, err)
		}
	})
}

// TestEndToEnd runs the adapter in the live aggregator against an
// httptest server.
func TestEndToEnd(t *testing.T) {
	mux := http.NewServeMux()
	for _, name := range []string{"good.csv", "wrong-types.csv", "missing-column.csv", "tab.tsv"} {
		body := fixture(t, name)
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			ct := "text/csv"
			if strings.HasSuffix(name, ".tsv") {
				ct = "text/tab-separated-values"
			}
			w.Header().Set("Content-Type", ct)
			_, _ = w.Write(body)
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	env := sourcetest.New(t, sourcetest.Loopback)
	for _, tc := range []struct {
		file, cfg      string
		items          int
		warning, error string // prefixes; empty: none
	}{
		{"good.csv", goodConfig, 3, "", ""},
		{"tab.tsv", `{"columns": {"time": "time", "value": "value", "sensor": "sensor"}}`, 2, "", ""},
		{"wrong-types.csv", `{"columns": {"time": "time", "value": "value"}}`, 2, `5 of 7 rows skipped: row 2: field value: "abc" is not a number`, ""},
		{"missing-column.csv", goodConfig, 0, "", `malformed feed: columns.time: no column "time"`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f := env.Subscribe(t, srv.URL+"/"+tc.file, "csv", tc.cfg)
			f = env.Fetch(t, f.ID)
			items := env.Items(t, f.ID)
			if len(items) != tc.items || !strings.HasPrefix(f.Warning, tc.warning) || (tc.warning == "") != (f.Warning == "") ||
				!strings.HasPrefix(f.LastError, tc.error) || (tc.error == "") != (f.LastError == "") {
				t.Fatalf("%d items, warning %q, error %q", len(items), f.Warning, f.LastError)
			}
			for _, it := range items {
				if it.Reading == nil || it.Fetched.IsZero() {
					t.Errorf("item %+v has no reading or fetch time", it)
				}
			}
		})
	}
	t.Run("api refuses a bad configuration", func(t *testing.T) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/api/v1/feeds", strings.NewReader(`{"url": "`+srv.URL+`/good2.csv", "source": {"type": "csv", "config": {"header": false, "columns": {"time": "t", "value": 1}}}}`))
		req.Header.Set("Content-Type", "application/json")
		env.API.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "columns.time names a column but header is false") {
			t.Errorf("POST: %d %s", rec.Code, rec.Body)
		}
	})
}

// TestSSRFGuard: without an allow-list a loopback source is refused when
// subscribing, before any request.
func TestSSRFGuard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the guard let a request to loopback through")
	}))
	defer srv.Close()
	env := sourcetest.New(t, nil)
	if err := env.Refused(t, srv.URL+"/good.csv", "csv", goodConfig); !errors.Is(err, fetcher.ErrBlocked) {
		t.Fatalf("subscribe: %v, want the SSRF guard's refusal", err)
	}
}
