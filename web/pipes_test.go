package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/runner"
)

// fakePipes records the calls the API makes and answers them with err,
// when set, or with canned values.
type fakePipes struct {
	mu    sync.Mutex
	calls []string         // "Create", "Update 7", "Preview 0", …
	defs  []transform.Pipe // the definitions passed, in call order
	err   error
	saved transform.Pipe // pipe 7's definition
	// hold, when set, keeps previews and runs waiting until it is
	// closed; entered hears of each one that waits.
	hold, entered chan struct{}
}

// wait holds a preview or run while f.hold is open.
func (f *fakePipes) wait(ctx context.Context) {
	if f.hold == nil {
		return
	}
	select {
	case f.entered <- struct{}{}:
	case <-f.hold: // released already: nobody listens
		return
	}
	select {
	case <-f.hold:
	case <-ctx.Done():
	}
}

const fakeID = 7

func (f *fakePipes) record(call string, def *transform.Pipe) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if def != nil {
		f.defs = append(f.defs, *def)
	}
	return f.err
}

func (f *fakePipes) info(id uint64, def transform.Pipe) runner.Info {
	return runner.Info{
		ID: id, Slug: def.Output.Slug, FeedID: 3, Name: def.Name, Pipe: def,
		Inputs:  []runner.Input{{Node: "a", Ref: "sensor/lab-1", Kind: storage.KindSensor, FeedID: 1}},
		Feeds:   map[string]string{"rss": "/feeds/" + def.Output.Slug + ".rss"},
		Created: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
	}
}

func (f *fakePipes) Create(ctx context.Context, p transform.Pipe) (runner.Info, error) {
	if err := f.record("Create", &p); err != nil {
		return runner.Info{}, err
	}
	return f.info(fakeID, p), nil
}

func (f *fakePipes) Update(ctx context.Context, id uint64, p transform.Pipe) (runner.Info, error) {
	if err := f.record(fmt.Sprint("Update ", id), &p); err != nil {
		return runner.Info{}, err
	}
	return f.info(id, p), nil
}

func (f *fakePipes) Delete(id uint64) error { return f.record(fmt.Sprint("Delete ", id), nil) }

func (f *fakePipes) Get(id uint64) (runner.Info, error) {
	if err := f.record(fmt.Sprint("Get ", id), nil); err != nil {
		return runner.Info{}, err
	}
	return f.info(id, f.saved), nil
}

func (f *fakePipes) IDs() []uint64 {
	_ = f.record("IDs", nil)
	return []uint64{fakeID}
}

func (f *fakePipes) PipeOfFeed(feedID uint64) (uint64, bool) {
	_ = f.record(fmt.Sprint("PipeOfFeed ", feedID), nil)
	return 0, false
}

func (f *fakePipes) Preview(ctx context.Context, p transform.Pipe, id uint64) (*transform.Preview, error) {
	if err := f.record(fmt.Sprint("Preview ", id), &p); err != nil {
		return nil, err
	}
	f.wait(ctx)
	return &transform.Preview{
		Nodes:  []transform.NodeOutput{{Node: "a", Op: "source", Count: 1, Items: []transform.Item{{ID: "r1"}}}},
		Output: []transform.Item{{ID: "r1"}},
	}, nil
}

func (f *fakePipes) ReleaseFeed(id uint64, remove func() error) error { return remove() }

func (f *fakePipes) RunNow(ctx context.Context, id uint64) (runner.RunResult, error) {
	if err := f.record(fmt.Sprint("RunNow ", id), nil); err != nil {
		return runner.RunResult{}, err
	}
	f.wait(ctx)
	return runner.RunResult{At: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), In: 2, Out: 1, Added: 1}, nil
}

func (f *fakePipes) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Definitions used as bodies.
const (
	savedPipe = `{"name":"Saved","nodes":[{"id":"a","op":"source","config":{"feed":"sensor/lab-1"}}],"edges":[],"output":{"slug":"hot-mean"}}`
	bodyPipe  = `{"name":"From the body","nodes":[{"id":"a","op":"source","config":{"feed":"sensor/lab-2"}},{"id":"hot","op":"filter","config":{"rules":[{"field":"value","op":"gt","value":25}]}}],"edges":[{"from":"a","to":"hot"}],"output":{"slug":"hot","retention":{"max_items":10}},"trigger":{"on":"update"}}`
)

type pipeEnv struct {
	fake *fakePipes
	h    http.Handler
	logs *bytes.Buffer
}

func newPipeEnv(t *testing.T, token string) *pipeEnv {
	t.Helper()
	var saved transform.Pipe
	if err := json.Unmarshal([]byte(savedPipe), &saved); err != nil {
		t.Fatal(err)
	}
	e := &pipeEnv{fake: &fakePipes{saved: saved}, logs: &bytes.Buffer{}}
	e.h = New(Options{
		Pipes:  e.fake,
		Token:  token,
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	})
	return e
}

// do serves one request synchronously and returns the status, the decoded
// JSON body (nil when empty) and the response.
func (e *pipeEnv) do(t *testing.T, method, path, body string, header map[string]string) (int, map[string]any, *httptest.ResponseRecorder) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	var v map[string]any
	if raw := rec.Body.Bytes(); len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s %s: reply %d is not a JSON object: %q", method, path, rec.Code, raw)
		}
	}
	return rec.Code, v, rec
}

func TestPipeRoutes(t *testing.T) {
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		calls  []string
		def    string // the name of the definition passed on, if any
		check  func(t *testing.T, v map[string]any, rec *httptest.ResponseRecorder)
	}{
		{"create", "POST", "/api/v1/pipes", bodyPipe, http.StatusCreated, []string{"Create"}, "From the body",
			func(t *testing.T, v map[string]any, rec *httptest.ResponseRecorder) {
				if v["id"] != float64(fakeID) || v["slug"] != "hot" {
					t.Errorf("created = %v", v)
				}
				if loc := rec.Header().Get("Location"); loc != "/api/v1/pipes/7" {
					t.Errorf("Location = %q", loc)
				}
			}},
		{"list", "GET", "/api/v1/pipes", "", http.StatusOK, []string{"IDs", "Get 7"}, "",
			func(t *testing.T, v map[string]any, _ *httptest.ResponseRecorder) {
				list, _ := v["pipes"].([]any)
				if len(list) != 1 || list[0].(map[string]any)["slug"] != "hot-mean" || v["total"] != float64(1) || v["next_cursor"] != nil {
					t.Errorf("pipes = %v", v)
				}
			}},
		{"get", "GET", "/api/v1/pipes/7", "", http.StatusOK, []string{"Get 7"}, "",
			func(t *testing.T, v map[string]any, _ *httptest.ResponseRecorder) {
				if v["id"] != float64(7) || v["feeds"] == nil || v["inputs"] == nil {
					t.Errorf("pipe = %v", v)
				}
			}},
		{"update", "PUT", "/api/v1/pipes/12", bodyPipe, http.StatusOK, []string{"Update 12"}, "From the body",
			func(t *testing.T, v map[string]any, _ *httptest.ResponseRecorder) {
				if v["id"] != float64(12) || v["name"] != "From the body" {
					t.Errorf("updated = %v", v)
				}
			}},
		{"delete", "DELETE", "/api/v1/pipes/7", "", http.StatusNoContent, []string{"Delete 7"}, "",
			func(t *testing.T, v map[string]any, rec *httptest.ResponseRecorder) {
				if rec.Body.Len() != 0 {
					t.Errorf("204 with a body: %q", rec.Body)
				}
			}},
		// The runner previews the saved definition itself, as stored.
		{"preview the saved definition", "POST", "/api/v1/pipes/7/preview", "", http.StatusOK, []string{"Preview 7"}, "",
			checkPreview},
		{"preview the saved definition, blank body", "POST", "/api/v1/pipes/7/preview", " \n", http.StatusOK, []string{"Preview 7"}, "",
			checkPreview},
		{"preview a new definition with the saved state", "POST", "/api/v1/pipes/7/preview", bodyPipe, http.StatusOK, []string{"Preview 7"}, "From the body",
			checkPreview},
		{"preview an unsaved definition", "POST", "/api/v1/pipes/preview", bodyPipe, http.StatusOK, []string{"Preview 0"}, "From the body",
			checkPreview},
		{"run", "POST", "/api/v1/pipes/7/run", "", http.StatusOK, []string{"RunNow 7"}, "",
			func(t *testing.T, v map[string]any, _ *httptest.ResponseRecorder) {
				if v["in"] != float64(2) || v["added"] != float64(1) || v["at"] != "2026-11-21T12:00:00Z" {
					t.Errorf("run result = %v", v)
				}
			}},
		{"operators", "GET", "/api/v1/operators", "", http.StatusOK, nil, "",
			func(t *testing.T, v map[string]any, _ *httptest.ResponseRecorder) {
				if _, ok := v["operators"].([]any); !ok {
					t.Errorf("operators = %v", v["operators"])
				}
				fields, _ := v["fields"].([]any)
				if len(fields) != len(transform.Fields) || fields[0].(map[string]any)["name"] != transform.Fields[0].Name {
					t.Errorf("fields = %v", v["fields"])
				}
				if got := fmt.Sprint(v["triggers"]); got != "[update mdpt cron manual]" {
					t.Errorf("triggers = %s", got)
				}
				if got := fmt.Sprint(v["formats"]); got != "[rss atom json]" {
					t.Errorf("formats = %s", got)
				}
			}},
		{"index lists the pipe routes", "GET", "/", "", http.StatusOK, nil, "",
			func(t *testing.T, v map[string]any, _ *httptest.ResponseRecorder) {
				api := fmt.Sprint(v["api"])
				if !strings.Contains(api, "/api/v1/pipes") || !strings.Contains(api, "/api/v1/operators") {
					t.Errorf("index = %v", v)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPipeEnv(t, "")
			status, v, rec := e.do(t, tt.method, tt.path, tt.body, nil)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %v", status, tt.status, v)
			}
			if got := e.fake.Calls(); !slices.Equal(got, tt.calls) {
				t.Errorf("calls %v, want %v", got, tt.calls)
			}
			if tt.def != "" {
				if len(e.fake.defs) != 1 || e.fake.defs[0].Name != tt.def {
					t.Errorf("definitions passed: %+v, want one named %q", e.fake.defs, tt.def)
				}
			}
			if ct := rec.Header().Get("Content-Type"); status != http.StatusNoContent && !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			tt.check(t, v, rec)
		})
	}
}

func checkPreview(t *testing.T, v map[string]any, _ *httptest.ResponseRecorder) {
	nodes, _ := v["nodes"].([]any)
	out, _ := v["output"].([]any)
	if len(nodes) != 1 || len(out) != 1 {
		t.Errorf("preview = %v", v)
	}
	// An item without an update time shows none, not the zero time.
	if _, ok := out[0].(map[string]any)["updated"]; ok {
		t.Errorf("preview output item has \"updated\": %v", out[0])
	}
}

// The body decoded is the definition sent, field for field.
func TestPipeBodyDecoded(t *testing.T) {
	e := newPipeEnv(t, "")
	if status, v, _ := e.do(t, "POST", "/api/v1/pipes", bodyPipe, nil); status != http.StatusCreated {
		t.Fatalf("status %d: %v", status, v)
	}
	var want transform.Pipe
	if err := json.Unmarshal([]byte(bodyPipe), &want); err != nil {
		t.Fatal(err)
	}
	got := e.fake.defs[0]
	if got.Name != want.Name || len(got.Nodes) != 2 || got.Nodes[1].ID != "hot" || string(got.Nodes[1].Config) != string(want.Nodes[1].Config) ||
		len(got.Edges) != 1 || got.Output.Retention.MaxItems != 10 || got.Trigger.On != "update" {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}

func TestPipeBadBodies(t *testing.T) {
	big := `{"name":"` + strings.Repeat("x", maxPipeBody) + `"}`
	bodies := []struct {
		name        string
		body        string
		contentType string
		status      int
		says        string
	}{
		{"malformed JSON", `{"nodes": [`, "", http.StatusBadRequest, "invalid JSON"},
		{"not JSON at all", `nodes=a`, "", http.StatusBadRequest, "invalid JSON"},
		{"unknown field", `{"nodes": [], "outptu": {"slug": "x"}}`, "", http.StatusBadRequest, "outptu"},
		{"unknown field of a node", `{"nodes": [{"id": "a", "op": "source", "cfg": {}}]}`, "", http.StatusBadRequest, "cfg"},
		{"wrong type", `{"nodes": {"id": "a"}}`, "", http.StatusBadRequest, "invalid JSON"},
		{"an array", `[{"nodes": []}]`, "", http.StatusBadRequest, "JSON object"},
		{"null", `null`, "", http.StatusBadRequest, "JSON object"},
		{"two values", `{"nodes": []} {"nodes": []}`, "", http.StatusBadRequest, "after"},
		{"trailing brace", `{"nodes": []}}`, "", http.StatusBadRequest, "after"},
		{"too large", big, "", http.StatusRequestEntityTooLarge, "larger than"},
		{"wrong content type", bodyPipe, "text/plain", http.StatusUnsupportedMediaType, "application/json"},
		{"form", bodyPipe, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, "application/json"},
	}
	routes := []struct{ method, path string }{
		{"POST", "/api/v1/pipes"},
		{"PUT", "/api/v1/pipes/7"},
		{"POST", "/api/v1/pipes/preview"},
		{"POST", "/api/v1/pipes/7/preview"},
	}
	for _, rt := range routes {
		for _, b := range bodies {
			t.Run(rt.method+" "+rt.path+" "+b.name, func(t *testing.T) {
				e := newPipeEnv(t, "")
				var header map[string]string
				if b.contentType != "" {
					header = map[string]string{"Content-Type": b.contentType}
				}
				status, v, _ := e.do(t, rt.method, rt.path, b.body, header)
				if status != b.status {
					t.Errorf("status %d, want %d: %v", status, b.status, v)
				}
				if msg, _ := v["error"].(string); !strings.Contains(msg, b.says) || len(msg) > 1000 {
					t.Errorf("error %.200q does not say %q", msg, b.says)
				}
				if calls := e.fake.Calls(); len(calls) != 0 {
					t.Errorf("the runner was called: %v", calls)
				}
			})
		}
	}
	for _, rt := range routes[:3] {
		t.Run(rt.method+" "+rt.path+" empty body", func(t *testing.T) {
			e := newPipeEnv(t, "")
			if status, v, _ := e.do(t, rt.method, rt.path, "", nil); status != http.StatusBadRequest {
				t.Errorf("status %d, want 400: %v", status, v)
			}
			if calls := e.fake.Calls(); len(calls) != 0 {
				t.Errorf("the runner was called: %v", calls)
			}
		})
	}
}

func TestPipeBadIDs(t *testing.T) {
	for _, id := range []string{"abc", "0", "-1", "1.5", "18446744073709551616", "%20"} {
		for _, rt := range []struct{ method, path, body string }{
			{"GET", "/api/v1/pipes/" + id, ""},
			{"PUT", "/api/v1/pipes/" + id, bodyPipe},
			{"DELETE", "/api/v1/pipes/" + id, ""},
			{"POST", "/api/v1/pipes/" + id + "/preview", ""},
			{"POST", "/api/v1/pipes/" + id + "/run", ""},
		} {
			t.Run(rt.method+" "+rt.path, func(t *testing.T) {
				e := newPipeEnv(t, "")
				status, v, _ := e.do(t, rt.method, rt.path, rt.body, nil)
				if status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(v["error"]), "pipe id") {
					t.Errorf("status %d, %v; want 400 about the pipe id", status, v)
				}
				if calls := e.fake.Calls(); len(calls) != 0 {
					t.Errorf("the runner was called: %v", calls)
				}
			})
		}
	}
}

func TestPipeErrorMapping(t *testing.T) {
	filterErr := transform.Errors{
		&transform.NodeError{Node: "hot", Op: "filter", Err: transform.Fieldf("rules[0].value", "want a number, got JSON string")},
		&transform.NodeError{Node: "b", Op: "union", Err: errors.New("no incoming edge")},
		transform.Fieldf("output.slug", "%q is not a slug", "Hot Mean"),
	}
	limitErr := &transform.NodeError{Node: "re", Op: "regex", Err: transform.Fieldf("pattern", "longer than %d bytes: %w", 1000, transform.ErrLimit)}
	inputErr := &transform.NodeError{Node: "a", Op: "source", Err: &transform.FieldError{Field: "feed", Err: fmt.Errorf("%w: sensor/nope", runner.ErrInputNotFound)}}

	type detail struct{ node, op, field string }
	tests := []struct {
		name    string
		err     error
		status  int
		says    string
		details []detail // nil: no details member
		logged  bool
	}{
		{"invalid definition", filterErr, http.StatusBadRequest, "3 problems",
			[]detail{{"hot", "filter", "rules[0].value"}, {"b", "union", ""}, {"", "", "output.slug"}}, false},
		{"over a limit", fmt.Errorf("compiling: %w", limitErr), http.StatusBadRequest, "longer than 1000 bytes",
			[]detail{{"re", "regex", "pattern"}}, false},
		{"plain invalid", fmt.Errorf("%w: no nodes", transform.ErrInvalid), http.StatusBadRequest, "no nodes", []detail{}, false},
		{"input not found in a node", inputErr, http.StatusBadRequest, "sensor/nope", []detail{{"a", "source", "feed"}}, false},
		{"input not found", fmt.Errorf("%w: feed/12", runner.ErrInputNotFound), http.StatusBadRequest, "feed/12", []detail{}, false},
		{"no such pipe", fmt.Errorf("%w: 7", runner.ErrNotFound), http.StatusNotFound, "pipe not found", nil, false},
		{"slug taken", fmt.Errorf("%w: \"hot\"", runner.ErrSlugTaken), http.StatusConflict, `"hot"`, nil, false},
		{"time limit", &transform.NodeError{Node: "w", Op: "regex_replace", Err: fmt.Errorf("%w (2s)", transform.ErrTimeLimit)}, http.StatusUnprocessableEntity, "time limit",
			[]detail{{"w", "regex_replace", ""}}, false},
		{"cost limit", fmt.Errorf("node \"x\": %w", transform.ErrCostLimit), http.StatusUnprocessableEntity, "cost limit", []detail{}, false},
		{"cost estimate over the limit", &transform.NodeError{Node: "w", Op: "where", Err: &transform.FieldError{Field: "expr", Err: fmt.Errorf("%w: %w: the expression costs at least 133883 units, at most 100000", transform.ErrLimit, transform.ErrCostLimit)}},
			http.StatusBadRequest, "costs at least 133883 units", []detail{{"w", "where", "expr"}}, false},
		{"output the store refuses", fmt.Errorf("runner: storing the output of pipe 7: %w: %w", runner.ErrOutputRefused, fmt.Errorf("item 3: %w: title is 5000 bytes, more than 4096", storage.ErrInvalid)),
			http.StatusUnprocessableEntity, "the pipe's output cannot be stored", []detail{}, false},
		{"a source the store refuses", &transform.NodeError{Node: "src", Op: "source", Err: &transform.FieldError{Field: "feed", Err: fmt.Errorf("subscribing to https://example.org/…: %w: url is 6020 bytes, more than 4096", storage.ErrInvalid)}},
			http.StatusBadRequest, "subscribing to", []detail{{"src", "source", "feed"}}, false},
		{"byte budget", &transform.NodeError{Node: "u9", Op: "union", Err: fmt.Errorf("%w: 9 bytes, at most 8 (max_run_bytes)", transform.ErrByteLimit)}, http.StatusUnprocessableEntity, "max_run_bytes",
			[]detail{{"u9", "union", ""}}, false},
		{"deadline", fmt.Errorf("running: %w", context.DeadlineExceeded), http.StatusUnprocessableEntity, "deadline", []detail{}, false},
		{"an operator failed", &transform.NodeError{Node: "c", Op: "compute", Err: errors.New("item 3: set.title: division by zero")}, http.StatusUnprocessableEntity, "division by zero",
			[]detail{{"c", "compute", ""}}, false},
		{"an operator panicked", &transform.NodeError{Node: "c", Op: "compute", Err: &transform.PanicError{Value: "disk on fire"}}, http.StatusInternalServerError, "internal error", nil, true},
		{"runner stopping", runner.ErrClosed, http.StatusServiceUnavailable, "stopping", nil, false},
		{"anything else", errors.New("bolt: disk on fire at /var/lib/slogfeed"), http.StatusInternalServerError, "internal error", nil, true},
	}
	routes := []struct{ method, path, body string }{
		{"POST", "/api/v1/pipes", bodyPipe},
		{"PUT", "/api/v1/pipes/7", bodyPipe},
		{"GET", "/api/v1/pipes/7", ""},
		{"DELETE", "/api/v1/pipes/7", ""},
		{"POST", "/api/v1/pipes/preview", bodyPipe},
		{"POST", "/api/v1/pipes/7/preview", bodyPipe},
		{"POST", "/api/v1/pipes/7/preview", ""},
		{"POST", "/api/v1/pipes/7/run", ""},
		{"GET", "/api/v1/pipes", ""},
	}
	for _, tt := range tests {
		for _, rt := range routes {
			t.Run(tt.name+"/"+rt.method+" "+rt.path, func(t *testing.T) {
				e := newPipeEnv(t, "")
				e.fake.err = tt.err
				status, v, _ := e.do(t, rt.method, rt.path, rt.body, nil)
				if rt.method == "GET" && rt.path == "/api/v1/pipes" && errors.Is(tt.err, runner.ErrNotFound) {
					// The list leaves out a pipe deleted since it read the ids.
					if list, _ := v["pipes"].([]any); status != http.StatusOK || list == nil || len(list) != 0 {
						t.Fatalf("a list whose pipe went: %d %v, want 200 without it", status, v)
					}
					return
				}
				if status != tt.status {
					t.Fatalf("status %d, want %d: %v", status, tt.status, v)
				}
				msg, _ := v["error"].(string)
				if !strings.Contains(msg, tt.says) {
					t.Errorf("error %q does not say %q", msg, tt.says)
				}
				if tt.logged && strings.Contains(msg, "disk on fire") {
					t.Errorf("internal error leaked: %q", msg)
				}
				if logged := strings.Contains(e.logs.String(), "disk on fire"); logged != tt.logged {
					t.Errorf("logged %v, want %v: %s", logged, tt.logged, e.logs)
				}
				raw, hasDetails := v["details"]
				if (tt.details != nil) != hasDetails {
					t.Fatalf("details %v, want %v", raw, tt.details)
				}
				list, _ := raw.([]any)
				if len(list) != len(tt.details) {
					t.Fatalf("details %v, want %v", raw, tt.details)
				}
				for i, want := range tt.details {
					d := list[i].(map[string]any)
					str := func(k string) string { s, _ := d[k].(string); return s }
					if str("node") != want.node || str("op") != want.op || str("field") != want.field || str("error") == "" {
						t.Errorf("details[%d] = %v, want node %q op %q field %q", i, d, want.node, want.op, want.field)
					}
				}
			})
		}
	}
}

func TestPipeToken(t *testing.T) {
	const token = "s3cret"
	routes := []struct {
		method, path, body string
		write              bool
	}{
		{"POST", "/api/v1/pipes", bodyPipe, true},
		{"PUT", "/api/v1/pipes/7", bodyPipe, true},
		{"DELETE", "/api/v1/pipes/7", "", true},
		{"POST", "/api/v1/pipes/preview", bodyPipe, true},
		{"POST", "/api/v1/pipes/7/preview", "", true},
		{"POST", "/api/v1/pipes/7/run", "", true},
		{"GET", "/api/v1/pipes", "", false},
		{"GET", "/api/v1/pipes/7", "", false},
		{"GET", "/api/v1/operators", "", false},
	}
	auth := []struct {
		name   string
		header map[string]string
		ok     bool
	}{
		{"no token", nil, false},
		{"wrong token", map[string]string{"Authorization": "Bearer nope"}, false},
		{"token without scheme", map[string]string{"Authorization": token}, false},
		{"token", map[string]string{"Authorization": "Bearer " + token}, true},
	}
	for _, rt := range routes {
		for _, a := range auth {
			t.Run(rt.method+" "+rt.path+" "+a.name, func(t *testing.T) {
				e := newPipeEnv(t, token)
				status, v, _ := e.do(t, rt.method, rt.path, rt.body, a.header)
				refused := status == http.StatusUnauthorized
				if want := rt.write && !a.ok; refused != want {
					t.Fatalf("status %d (%v), want refused %v", status, v, want)
				}
				if calls := e.fake.Calls(); refused && len(calls) != 0 {
					t.Errorf("refused request reached the runner: %v", calls)
				} else if !refused && status >= 400 {
					t.Errorf("status %d: %v", status, v)
				}
			})
		}
	}
}

func TestPipesDisabled(t *testing.T) {
	h := New(Options{})
	for _, path := range []string{"/api/v1/pipes", "/api/v1/pipes/7", "/api/v1/operators"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s without Pipes: %d", path, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if strings.Contains(rec.Body.String(), "/api/v1/pipes") {
		t.Errorf("index lists disabled routes: %s", rec.Body)
	}
}

// Previews and requested runs share Options.MaxPreviews slots: past them
// a request is answered 429 with Retry-After at once, and a slot freed
// serves the next one.
func TestPreviewSlots(t *testing.T) {
	e := newPipeEnv(t, "")
	e.fake.hold, e.fake.entered = make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	statuses := make(chan int, DefaultMaxPreviews)
	for i := range DefaultMaxPreviews {
		path := "/api/v1/pipes/preview"
		if i%2 == 1 {
			path = "/api/v1/pipes/7/run"
		}
		body := bodyPipe
		if path != "/api/v1/pipes/preview" {
			body = ""
		}
		wg.Go(func() {
			status, _, _ := e.do(t, "POST", path, body, nil)
			statuses <- status
		})
		<-e.fake.entered
	}
	// Every slot is taken: the next ones are turned away without waiting.
	for _, rt := range []struct{ path, body string }{
		{"/api/v1/pipes/preview", bodyPipe},
		{"/api/v1/pipes/7/preview", ""},
		{"/api/v1/pipes/7/run", ""},
	} {
		status, v, rec := e.do(t, "POST", rt.path, rt.body, nil)
		if status != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
			t.Errorf("POST %s with every slot taken: %d %v, Retry-After %q", rt.path, status, v, rec.Header().Get("Retry-After"))
		}
	}
	// Other routes do not queue behind previews.
	if status, _, _ := e.do(t, "GET", "/api/v1/pipes/7", "", nil); status != http.StatusOK {
		t.Errorf("GET a pipe while previews run: %d", status)
	}
	close(e.fake.hold)
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusOK {
			t.Errorf("an admitted request answered %d", s)
		}
	}
	if status, _, _ := e.do(t, "POST", "/api/v1/pipes/preview", bodyPipe, nil); status != http.StatusOK {
		t.Errorf("after the slots are free: %d", status)
	}
}
