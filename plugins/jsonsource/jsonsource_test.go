package jsonsource_test

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

	"github.com/slogfeed/slogfeed/plugins/internal/sourcetest"
	"github.com/slogfeed/slogfeed/plugins/jsonsource"
	"github.com/slogfeed/slogfeed/plugins/sourcekit"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/storage"
)

// goodConfig reads testdata/good.json.
const goodConfig = `{"items": "data.readings", "time": "ts", "value": "temp", "unit": "unit", "sensor": "sensor"}`

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func prepare(t testing.TB, cfg string) json.RawMessage {
	t.Helper()
	out, err := jsonsource.Source{}.Prepare(json.RawMessage(cfg), now)
	if err != nil {
		t.Fatalf("Prepare(%s): %v", cfg, err)
	}
	return out
}

func TestPrepare(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		want      string // in the error; empty: accepted
	}{
		{"good", goodConfig, ""},
		{"literal unit", `{"time": "t", "value": "v", "unit": "'C'"}`, ""},
		{"functions", `{"items": "sort_by(readings, &t)", "time": "t", "value": "to_number(v)"}`, ""},
		{"empty", ``, "at least time and value"},
		{"no value", `{"time": "t"}`, "value: an expression is required"},
		{"unknown setting", `{"time": "t", "value": "v", "valeu": "x"}`, "valeu"},
		{"syntax", `{"time": "t[", "value": "v"}`, "time:"},
		{"too long", `{"time": "` + strings.Repeat("a.", 200) + `a", "value": "v"}`, "more than 256"},
		{"forbidden function", `{"time": "t", "value": "pad_left(v, ` + "`1000000000`" + `, 'x')"}`, "pad_left"},
		{"root in a reading", `{"time": "t", "value": "$.v"}`, "root reference"},
		{"bad time format", `{"time": "t", "value": "v", "time_format": "soon"}`, "time_format"},
		{"not an object", `[1, 2]`, "invalid source configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := jsonsource.Source{}.Prepare(json.RawMessage(tc.cfg), now)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Prepare: %v", err)
				}
				var c jsonsource.Config
				if err := json.Unmarshal(out, &c); err != nil || c.Items == "" || c.TimeFormat != "auto" {
					t.Fatalf("normalised config %s (%v) lacks its defaults", out, err)
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
	opt := parser.Options{Now: now}
	t.Run("good", func(t *testing.T) {
		p, err := jsonsource.Source{}.Parse(fixture(t, "good.json"), "application/json", prepare(t, goodConfig), opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 3 || p.Skipped != nil {
			t.Fatalf("%d items, skipped %v; want 3, none", len(p.Items), p.Skipped)
		}
		// Newest first: 10:01 UTC north (21,5 read with its decimal comma),
		// 10:00 north, then 08:02 UTC east.
		want := []struct {
			title string
			at    time.Time
			value float64
		}{
			{"21.5 C at field-north", time.Date(2025, 6, 1, 10, 1, 0, 0, time.UTC), 21.5},
			{"21.3 C at field-north", time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC), 21.3},
			{"19.75 C at field-east", time.Date(2025, 6, 1, 8, 2, 0, 0, time.UTC), 19.75},
		}
		for i, w := range want {
			it := p.Items[i]
			if it.Title != w.title || !it.Published.Equal(w.at) || it.Reading.Value != w.value || !it.Reading.Time.Equal(w.at) {
				t.Errorf("item %d = %q at %v (%+v), want %q at %v", i, it.Title, it.Published, it.Reading, w.title, w.at)
			}
		}
	})
	t.Run("ids, unix_ms, document array", func(t *testing.T) {
		cfg := prepare(t, `{"time": "when", "value": "v", "sensor": "sensor", "id": "id", "unit": "'m'", "time_format": "unix_ms"}`)
		p, err := jsonsource.Source{}.Parse(fixture(t, "unix-ms-array.json"), "application/json", cfg, opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 2 || p.Items[0].ID != "r-2" || p.Items[0].Title != "1.25 m at 7" ||
			!p.Items[0].Published.Equal(time.UnixMilli(1748772060000)) {
			t.Fatalf("items %+v", p.Items)
		}
	})
	t.Run("wrong types", func(t *testing.T) {
		p, err := jsonsource.Source{}.Parse(fixture(t, "wrong-types.json"), "application/json",
			prepare(t, `{"items": "data.readings", "time": "ts", "value": "temp", "sensor": "sensor"}`), opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 2 {
			t.Errorf("%d items, want the 2 good ones", len(p.Items))
		}
		var se *sourcekit.SkipError
		if !errors.As(p.Skipped, &se) || se.Skipped != 5 || se.Records != 7 {
			t.Fatalf("Skipped = %v", p.Skipped)
		}
		for _, want := range []string{`5 of 7 records skipped`, `record 2: field value: "abc" is not a number`, `record 3: field value: missing`, `record 4: field time: "yesterday" is not an RFC 3339 time`} {
			if !strings.Contains(p.Skipped.Error(), want) {
				t.Errorf("Skipped %q lacks %q", p.Skipped, want)
			}
		}
	})
	bad := []struct {
		name, body, cfg string
		is              error
		want            string
	}{
		{"malformed", string(fixture(t, "malformed.json")), goodConfig, parser.ErrMalformed, "JSON"},
		{"empty", "  \n", goodConfig, parser.ErrMalformed, "empty"},
		{"html", "<!doctype html><p>hi", goodConfig, parser.ErrMalformed, "not JSON"},
		{"too deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), goodConfig, parser.ErrMalformed, "deeper than 64"},
		{"too many values", "[" + strings.Repeat("0,", jsonsource.MaxNodes) + "0]", goodConfig, parser.ErrMalformed, "more than 500000 values"},
		{"items not an array", `{"data": {"readings": {"a": 1}}}`, goodConfig, nil, "selects an object, not an array"},
		{"items missing", `{"other": []}`, goodConfig, nil, "selects nothing (null)"},
		{"all bad", string(fixture(t, "all-bad.json")), goodConfig, sourcekit.ErrNoGoodRecords, `all 2 records skipped: record 1: field value: "n/a" is not a number`},
		{"bad config", `[]`, `{"time": "t"}`, sourcekit.ErrConfig, "value"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			p, err := jsonsource.Source{}.Parse([]byte(tc.body), "application/json", json.RawMessage(tc.cfg), opt)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, %v; want an error (%v) mentioning %q", p, err, tc.is, tc.want)
			}
		})
	}
}

// TestEndToEnd runs the adapter in the live aggregator against httptest
// servers: items and warnings land on the right feed, a malformed
// document becomes that feed's error, a bad configuration is a 400.
func TestEndToEnd(t *testing.T) {
	mux := http.NewServeMux()
	for _, name := range []string{"good.json", "wrong-types.json", "malformed.json"} {
		body := fixture(t, name)
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	env := sourcetest.New(t, sourcetest.Loopback)

	good := env.Subscribe(t, srv.URL+"/good.json", "json", goodConfig)
	wrong := env.Subscribe(t, srv.URL+"/wrong-types.json", "json", `{"items": "data.readings", "time": "ts", "value": "temp", "sensor": "sensor"}`)
	broken := env.Subscribe(t, srv.URL+"/malformed.json", "json", goodConfig)

	t.Run("good", func(t *testing.T) {
		f := env.Fetch(t, good.ID)
		items := env.Items(t, good.ID)
		if f.LastError != "" || f.Warning != "" || len(items) != 3 || items[0].Reading == nil || items[0].Reading.Sensor != "field-north" {
			t.Fatalf("feed error %q, warning %q, %d items", f.LastError, f.Warning, len(items))
		}
		var c jsonsource.Config
		if err := json.Unmarshal(f.Source.Config, &c); err != nil || c.TimeFormat != "auto" {
			t.Errorf("stored config %s is not the normalised one", f.Source.Config)
		}
		// A second fetch stores nothing twice.
		env.Fetch(t, good.ID)
		if n := len(env.Items(t, good.ID)); n != 3 {
			t.Errorf("%d items after a second fetch, want 3", n)
		}
	})
	t.Run("wrong types", func(t *testing.T) {
		f := env.Fetch(t, wrong.ID)
		if f.LastError != "" || !strings.HasPrefix(f.Warning, "5 of 7 records skipped: record 2: field value: \"abc\" is not a number") {
			t.Fatalf("error %q, warning %q", f.LastError, f.Warning)
		}
		if n := len(env.Items(t, wrong.ID)); n != 2 {
			t.Errorf("%d items stored, want 2", n)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		f := env.Fetch(t, broken.ID)
		if !strings.Contains(f.LastError, "JSON syntax error") || f.ErrorCount != 1 {
			t.Fatalf("error %q (%d)", f.LastError, f.ErrorCount)
		}
	})
	t.Run("api refuses a bad configuration", func(t *testing.T) {
		for _, body := range []string{
			`{"url": "` + srv.URL + `/x.json", "source": {"type": "json", "config": {"time": "ts"}}}`,
			`{"url": "` + srv.URL + `/y.json", "source": {"type": "json", "config": {"time": "ts", "value": "join(',', v)"}}}`,
			`{"url": "` + srv.URL + `/z.json", "source": {"type": "no-such-adapter"}}`,
		} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/api/v1/feeds", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			env.API.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "source") {
				t.Errorf("POST %s: %d %s; want 400 naming the source", body, rec.Code, rec.Body)
			}
		}
	})
	t.Run("api shows the source", func(t *testing.T) {
		rec := httptest.NewRecorder()
		env.API.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/feeds", nil))
		var page struct {
			Feeds []struct {
				ID      uint64              `json:"id"`
				Source  *storage.SourceSpec `json:"source"`
				Warning string              `json:"warning"`
			} `json:"feeds"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		shown := 0
		for _, f := range page.Feeds {
			if f.Source == nil || f.Source.Type != "json" {
				t.Errorf("feed %d shows source %+v", f.ID, f.Source)
			}
			if f.ID == wrong.ID && strings.HasPrefix(f.Warning, "5 of 7 records skipped") {
				shown++
			}
		}
		if shown != 1 {
			t.Errorf("the warning is not shown: %s", rec.Body)
		}
	})
}

// TestSSRFGuard: without an allow-list the loopback server is refused
// when subscribing, before any request.
func TestSSRFGuard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the guard let a request to loopback through")
	}))
	defer srv.Close()
	env := sourcetest.New(t, nil)
	if err := env.Refused(t, srv.URL+"/good.json", "json", goodConfig); !errors.Is(err, fetcher.ErrBlocked) {
		t.Fatalf("subscribe: %v, want the SSRF guard's refusal", err)
	}
}
