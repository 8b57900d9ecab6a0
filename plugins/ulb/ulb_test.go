package ulb_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/plugins/internal/sourcetest"
	"github.com/slogfeed/slogfeed/plugins/sourcekit"
	"github.com/slogfeed/slogfeed/plugins/ulb"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/parser"
)

const excerpt = "library1-R1-motes-4-10-20.txt"

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var start = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestPrepare(t *testing.T) {
	out, err := ulb.Source{}.Prepare(json.RawMessage(`{"mote": 20}`), start.Add(1500*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	var c ulb.Config
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatal(err)
	}
	if c.Mote != "20" || c.Quantity != "temperature" || c.Speed != 1 || c.Loop == nil || !*c.Loop ||
		c.Backlog != ulb.DefaultBacklog || c.Sensor != "mote-20" || !c.Start.Equal(start.Add(time.Millisecond)) {
		t.Errorf("normalised config %s", out)
	}
	// A start given is kept.
	out, err = ulb.Source{}.Prepare(json.RawMessage(`{"mote": "4", "start": "2024-01-01T00:00:00Z"}`), start)
	if err != nil || !strings.Contains(string(out), `"start":"2024-01-01T00:00:00Z"`) {
		t.Errorf("Prepare = %s, %v", out, err)
	}
	for _, tc := range []struct{ cfg, want string }{
		{``, "at least the mote"},
		{`{}`, "mote is required"},
		{`{"mote": 1.5}`, "whole number"},
		{`{"mote": 1, "quantity": "pressure"}`, `quantity "pressure" is not one of humidity, internal_temperature, par, temperature, tsr, voltage`},
		{`{"mote": 1, "speed": -2}`, "speed"},
		{`{"mote": 1, "speed": 1e9}`, "speed"},
		{`{"mote": 1, "backlog": 5000}`, "backlog"},
		{`{"mote": 1, "start": "0001-01-01T00:00:01Z"}`, "start"},
		{`{"mote": 1, "moat": 2}`, "moat"},
	} {
		t.Run(tc.cfg, func(t *testing.T) {
			out, err := ulb.Source{}.Prepare(json.RawMessage(tc.cfg), start)
			if !errors.Is(err, sourcekit.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prepare(%s) = %s, %v; want ErrConfig mentioning %q", tc.cfg, out, err, tc.want)
			}
		})
	}
}

// synthetic is a small trace: mote 1 at offsets 0, 60 s, (120 s: a bad
// value), 180 s; mote 2 once. Its span is 180 s, mote 1's mean interval
// 90 s, so a loop lasts 270 s.
const synthetic = `# a comment
1000000000000 1 1 20 3 50 21,5 1 1
1000000000500 2 1 20 3 50 19 1 1
1000000060000 1 2 20 3 50 21,6 1 1

1000000120000 1 3 20 3 50 bad 1 1
1000000180000 1 4 20 3 50 21,8 1 1
`

func TestReplay(t *testing.T) {
	sec := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	cfg := func(extra string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"mote": 1, "speed": 2, "start": %q%s}`, start.Format(time.RFC3339), extra))
	}
	for _, tc := range []struct {
		name  string
		cfg   json.RawMessage
		now   time.Time
		want  []time.Time // published, newest first
		value float64     // of the newest
	}{
		{"before the start", cfg(""), sec(-5), nil, 0},
		{"at the start", cfg(""), sec(0), []time.Time{sec(0)}, 21.5},
		{"first loop", cfg(""), sec(100), []time.Time{sec(90), sec(30), sec(0)}, 21.8},
		{"second loop", cfg(""), sec(170), []time.Time{sec(165), sec(135), sec(90), sec(30), sec(0)}, 21.6},
		{"backlog", cfg(`, "backlog": 2`), sec(170), []time.Time{sec(165), sec(135)}, 21.6},
		{"no loop", cfg(`, "loop": false`), sec(1000), []time.Time{sec(90), sec(30), sec(0)}, 21.8},
		{"far later", cfg(`, "backlog": 3`), sec(270*1000 + 40), []time.Time{sec(270*1000 + 30), sec(270 * 1000), sec(270*1000 - 45)}, 21.6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ulb.Source{}.Parse([]byte(synthetic), "text/plain", tc.cfg, parser.Options{Now: tc.now})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != len(tc.want) {
				t.Fatalf("%d items, want %d", len(p.Items), len(tc.want))
			}
			for i, w := range tc.want {
				if it := p.Items[i]; !it.Published.Equal(w) || !it.Reading.Time.Equal(w) || it.Reading.Sensor != "mote-1" || it.Reading.Unit != "C" {
					t.Errorf("item %d published %v (%+v), want %v", i, it.Published, it.Reading, w)
				}
			}
			if len(tc.want) > 0 && p.Items[0].Reading.Value != tc.value {
				t.Errorf("newest value %v, want %v", p.Items[0].Reading.Value, tc.value)
			}
			if want := `1 of 5 lines skipped: line 6: field temperature: "bad" is not a number`; p.Skipped == nil || p.Skipped.Error() != want {
				t.Errorf("Skipped = %v, want %s", p.Skipped, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cfg := json.RawMessage(`{"mote": 99, "start": "2025-06-01T12:00:00Z"}`)
	for _, tc := range []struct {
		name, body string
		is         error
		want       string
	}{
		{"unknown mote", synthetic, nil, `mote "99" has no readings of temperature in the trace (motes: 1, 2)`},
		{"garbage", "hello world\nthis is not\n", sourcekit.ErrNoGoodRecords, `not a ULB trace: no usable record: all 2 lines skipped: line 1: field time: "hello" is not a Unix time in milliseconds`},
		{"empty", "\n# nothing\n", parser.ErrMalformed, "the trace is empty"},
		{"long line", "1000000000000 " + strings.Repeat("9", ulb.MaxLineLen), parser.ErrMalformed, "longer than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ulb.Source{}.Parse([]byte(tc.body), "text/plain", cfg, parser.Options{Now: start})
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, %v; want an error mentioning %q", p, err, tc.want)
			}
		})
	}
	if _, err := (ulb.Source{}).Parse([]byte(synthetic), "", json.RawMessage(`{"mote": 1}`), parser.Options{Now: start}); !errors.Is(err, sourcekit.ErrConfig) {
		t.Errorf("a configuration without start: %v", err)
	}
}

// TestExcerpt replays the real trace excerpt: readings an hour into the
// replay are the mote's, spaced as in the trace.
func TestExcerpt(t *testing.T) {
	body := fixture(t, excerpt)
	for _, q := range []string{"temperature", "humidity", "voltage", "internal_temperature", "par", "tsr"} {
		t.Run(q, func(t *testing.T) {
			cfg := json.RawMessage(fmt.Sprintf(`{"mote": 10, "quantity": %q, "start": "2025-06-01T12:00:00Z"}`, q))
			p, err := ulb.Source{}.Parse(body, "text/plain", cfg, parser.Options{Now: start.Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != ulb.DefaultBacklog || p.Skipped != nil || p.Truncated {
				t.Fatalf("%d items, skipped %v", len(p.Items), p.Skipped)
			}
			for i := 1; i < len(p.Items); i++ {
				gap := p.Items[i-1].Published.Sub(p.Items[i].Published)
				if gap < 30*time.Second || gap > 10*time.Minute {
					t.Errorf("gap %v between replayed readings %d and %d", gap, i-1, i)
				}
			}
			if unit := ulb.Quantities[q].Unit; p.Items[0].Reading.Unit != unit || p.Items[0].Reading.Sensor != "mote-10" {
				t.Errorf("reading %+v", p.Items[0].Reading)
			}
		})
	}
}

// TestEndToEnd replays the excerpt through the live aggregator: items
// are stored at their replay times, every fetch is unconditional (the
// file never changes, the replay does), and the SSRF guard still applies.
func TestEndToEnd(t *testing.T) {
	body := fixture(t, excerpt)
	var conditional atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
			conditional.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"trace-1"`)
		w.Header().Set("Last-Modified", "Mon, 13 Nov 2006 17:14:01 GMT")
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	env := sourcetest.New(t, sourcetest.Loopback)
	began := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	f := env.Subscribe(t, srv.URL+"/trace.txt", "ulb", `{"mote": 20, "start": "`+began+`"}`)
	for range 2 {
		f = env.Fetch(t, f.ID)
	}
	items := env.Items(t, f.ID)
	// Each fetch returns the newest DefaultBacklog readings due by then:
	// the second adds one when a reading came due between the two.
	if f.LastError != "" || f.Warning != "" || len(items) < ulb.DefaultBacklog || len(items) > ulb.DefaultBacklog+1 || conditional.Load() != 0 {
		t.Fatalf("error %q, warning %q, %d items (want %d, or one more), %d conditional requests", f.LastError, f.Warning, len(items), ulb.DefaultBacklog, conditional.Load())
	}
	for _, it := range items {
		if it.Published.After(it.Fetched) || it.Reading == nil || it.Reading.Sensor != "mote-20" {
			t.Errorf("item %+v", it)
		}
	}
	t.Run("ssrf", func(t *testing.T) {
		guarded := sourcetest.New(t, nil)
		if err := guarded.Refused(t, srv.URL+"/trace.txt", "ulb", `{"mote": 20}`); !errors.Is(err, fetcher.ErrBlocked) {
			t.Errorf("subscribe: %v, want the SSRF guard's refusal", err)
		}
	})
}
