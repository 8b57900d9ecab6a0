package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/internal/testlog"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// failingAgg is an Aggregator whose Subscribe fails with err.
type failingAgg struct{ err error }

func (a failingAgg) Subscribe(storage.Feed) (storage.Feed, error) { return storage.Feed{}, a.err }
func (a failingAgg) Unsubscribe(uint64) error                     { return nil }
func (a failingAgg) State(uint64) (schedule.State, bool)          { return schedule.State{}, false }
func (a failingAgg) NextFetch(uint64) (time.Time, bool)           { return time.Time{}, false }

// diskFull stands for a failure of the store while writing the feed.
const diskFull = "write /var/lib/slogfeed/slogfeed.db: no space left on device"

// subscribeErrors is what a subscription may fail with, and what the
// API makes of it: the status of POST /api/v1/feeds and the reason of a
// bulk subscription.
var subscribeErrors = []struct {
	name   string
	source string // the request's source type, if any
	err    error
	status int
	reason string
}{
	{"store failure", "", errors.New(diskFull), http.StatusInternalServerError, web.ReasonError},
	{"wrapped store failure", "", fmt.Errorf("create feed: %w", errors.New(diskFull)), http.StatusInternalServerError, web.ReasonError},
	{"scheduler failure", "", fmt.Errorf("feed 3: %w", schedule.ErrFeedBusy), http.StatusInternalServerError, web.ReasonError},
	{"another source's words", "csv", fmt.Errorf("source json: %s", diskFull), http.StatusInternalServerError, web.ReasonError},
	{"already subscribed", "", fmt.Errorf("feed: %w", storage.ErrFeedExists), http.StatusConflict, web.ReasonDuplicate},
	{"bad URL", "", fmt.Errorf("%w: %q", aggregator.ErrBadURL, "x"), http.StatusBadRequest, web.ReasonBadURL},
	{"invalid URL", "", fmt.Errorf("x: %w", fetcher.ErrInvalidURL), http.StatusBadRequest, web.ReasonBadURL},
	{"scheme", "", fmt.Errorf("x: %w", fetcher.ErrScheme), http.StatusBadRequest, web.ReasonBadURL},
	{"blocked", "", fmt.Errorf("x: %w", fetcher.ErrBlocked), http.StatusBadRequest, web.ReasonSSRF},
	{"unknown policy", "", fmt.Errorf("%w %q", schedule.ErrUnknownPolicy, "sometimes"), http.StatusBadRequest, web.ReasonPolicy},
	{"bad cron policy", "", fmt.Errorf("%w: %q", schedule.ErrCronSpec, "TZ=UTC"), http.StatusBadRequest, web.ReasonPolicy},
	{"bad settings", "", fmt.Errorf("%w: retention must not be negative", aggregator.ErrBadSettings), http.StatusBadRequest, web.ReasonInvalid},
	{"unknown source", "", fmt.Errorf("%w %q", aggregator.ErrUnknownSource, "nope"), http.StatusBadRequest, web.ReasonInvalid},
	{"source configuration", "csv", fmt.Errorf("source csv: columns.time and columns.value are required: %w", aggregator.ErrBadSettings), http.StatusBadRequest, web.ReasonInvalid},
	{"invalid record", "", fmt.Errorf("%w: title is 9000 bytes", storage.ErrInvalid), http.StatusBadRequest, web.ReasonInvalid},
	{"sleep plan", "", fmt.Errorf("feed 3: %w: skip hour above 23", schedule.ErrSleepPlan), http.StatusBadRequest, web.ReasonInvalid},
	{"weight classes", "", fmt.Errorf("feed 3: %w (16)", schedule.ErrWeightClasses), http.StatusBadRequest, web.ReasonInvalid},
}

func newFailingAPI(t *testing.T, err error) (http.Handler, *testlog.Buffer) {
	t.Helper()
	st, oerr := storage.Open(filepath.Join(t.TempDir(), "subscribe.db"), storage.Options{NoSync: true})
	if oerr != nil {
		t.Fatal(oerr)
	}
	t.Cleanup(func() { st.Close() })
	logs := &testlog.Buffer{}
	h := web.New(web.Options{Store: st, Aggregator: failingAgg{err}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return h, logs
}

func subscribeBody(source string) string {
	if source == "" {
		return `{"url": "https://feeds.example.org/a.rss"}`
	}
	return fmt.Sprintf(`{"url": "https://feeds.example.org/a.rss", "source": {"type": %q}}`, source)
}

// goPackagePrefix matches a message that begins with the name of one of
// slogfeed's packages.
var goPackagePrefix = regexp.MustCompile(`^(aggregator|schedule|fetcher|storage|feedlist): `)

// A subscription that fails on the server's side is a logged 500 that
// shows nothing of the cause; one the client can correct is a 400 that
// says what is wrong.
func TestSubscribeErrorStatus(t *testing.T) {
	for _, tc := range subscribeErrors {
		t.Run(tc.name, func(t *testing.T) {
			h, logs := newFailingAPI(t, tc.err)
			req := httptest.NewRequest("POST", "/api/v1/feeds", strings.NewReader(subscribeBody(tc.source)))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			var v struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
				t.Fatalf("%v: %s", err, rec.Body)
			}
			switch tc.status {
			case http.StatusInternalServerError:
				if v.Error != "internal error" {
					t.Errorf("error %q, want \"internal error\"", v.Error)
				}
				if !strings.Contains(logs.String(), tc.err.Error()) {
					t.Errorf("the cause was not logged: %q", logs.String())
				}
			case http.StatusBadRequest:
				// What is wrong, as the error says it, without the name
				// of the package that made it.
				if !strings.HasSuffix(tc.err.Error(), v.Error) || v.Error == "" || goPackagePrefix.MatchString(v.Error) {
					t.Errorf("error %q, want %q without its package's name", v.Error, tc.err)
				}
			}
		})
	}
}

// In a bulk subscription, a feed the server failed to subscribe has the
// reason "error" and a bare "internal error", not "invalid" and the cause.
func TestBulkSubscribeErrorReason(t *testing.T) {
	for _, tc := range subscribeErrors {
		t.Run(tc.name, func(t *testing.T) {
			h, logs := newFailingAPI(t, tc.err)
			body := `{"feeds": [` + subscribeBody(tc.source) + `]}`
			req := httptest.NewRequest("POST", "/api/v1/feeds/bulk", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var out web.BulkResponse
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil || len(out.Results) != 1 {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			res := out.Results[0]
			if res.Reason != tc.reason || res.ID != 0 || out.Refused != 1 {
				t.Errorf("result %+v (refused %d), want reason %q", res, out.Refused, tc.reason)
			}
			if tc.reason == web.ReasonError {
				if res.Error != "internal error" {
					t.Errorf("error %q, want \"internal error\"", res.Error)
				}
				if !strings.Contains(logs.String(), tc.err.Error()) {
					t.Errorf("the cause was not logged: %q", logs.String())
				}
			}
		})
	}
}

// countingAgg subscribes every feed and counts them.
type countingAgg struct {
	failingAgg
	n *atomic.Int64
}

func (a countingAgg) Subscribe(f storage.Feed) (storage.Feed, error) {
	f.ID = uint64(a.n.Add(1))
	return f, nil
}

// A bulk request whose client is gone subscribes nothing more: the feeds
// not yet subscribed are answered "request cancelled".
func TestBulkStopsWhenCancelled(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "bulk.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var n atomic.Int64
	h := web.New(web.Options{Store: st, Aggregator: countingAgg{n: &n}, Logger: slog.New(slog.DiscardHandler)})
	var b strings.Builder
	b.WriteString(`{"feeds": [`)
	for i := range 500 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"url": "https://feeds.example.org/%d.rss"}`, i)
	}
	b.WriteString(`]}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest("POST", "/api/v1/feeds/bulk", strings.NewReader(b.String())).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out web.BulkResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%d: %s", rec.Code, rec.Body)
	}
	if n.Load() != 0 || out.Added != 0 || out.Refused != 500 || out.Results[0].Reason != web.ReasonCancelled {
		t.Errorf("%d subscribed, answer added %d refused %d (%+v)", n.Load(), out.Added, out.Refused, out.Results[0])
	}
}
