package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const secret = "a-long-enough-secret-for-tests"

// clock is a fake clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// receiver is a webhook receiver answering with the statuses it is given
// (the last one repeats) and recording what it got.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	header   http.Header // sent with every answer
	got      []*http.Request
	bodies   [][]byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	rc := &receiver{statuses: statuses, header: http.Header{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, r)
		rc.bodies = append(rc.bodies, body)
		status := rc.statuses[0]
		if len(rc.statuses) > 1 {
			rc.statuses = rc.statuses[1:]
		}
		for k, v := range rc.header {
			w.Header()[k] = v
		}
		rc.mu.Unlock()
		w.WriteHeader(status)
		if status >= 300 {
			fmt.Fprint(w, "boom\n\x1b[31mred")
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// loopback is a delivery client whose SSRF guard allows the test
// receivers.
func loopback() *http.Client {
	return fetcher.New(fetcher.Options{Allow: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
	}}).Client()
}

type env struct {
	st    *storage.Store
	clock *clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "w.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{st: st, clock: &clock{now: t0}}
}

// service builds a service on e's store, with no jitter (each wait is
// half its span) unless opt says otherwise.
func (e *env) service(t *testing.T, opt Options) *Service {
	t.Helper()
	opt.Store, opt.Now = e.st, e.clock.Now
	if opt.Client == nil {
		opt.Client = loopback()
	}
	if opt.Jitter == nil {
		opt.Jitter = func() float64 { return 0 }
	}
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	outFeed = storage.Feed{ID: 7, Kind: storage.KindPipe, Slug: "out", Title: "Output"}
	labFeed = storage.Feed{ID: 3, Kind: storage.KindSensor, Slug: "lab-1"}
)

func items(prefix string, n int) []storage.Item {
	out := make([]storage.Item, n)
	for i := range out {
		out[i] = storage.Item{FeedID: 7, ID: fmt.Sprintf("%s%d", prefix, i), Title: fmt.Sprint(i), Published: t0,
			Reading: &storage.Reading{Value: float64(i), Unit: "C", Time: t0}}
	}
	return out
}

func mustCreate(t *testing.T, s *Service, feed, url string) Hook {
	t.Helper()
	h, err := s.Create(feed, url, secret)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func hookOf(t *testing.T, s *Service, id string) Hook {
	t.Helper()
	h, err := s.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A matching feed's new items are POSTed once, signed; other feeds'
// items are not.
func TestDelivery(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, 200)
	s := e.service(t, Options{})
	h := mustCreate(t, s, "pipe/out", rc.URL+"/hook?x=1")
	s.Notify(outFeed, items("a", 3))
	s.Notify(labFeed, items("b", 2))
	s.Notify(storage.Feed{ID: 8, Kind: storage.KindSensor, Slug: "out"}, items("c", 1)) // same slug, other kind
	if _, worked := s.step(context.Background()); !worked {
		t.Fatal("nothing attempted")
	}
	if rc.count() != 1 {
		t.Fatalf("%d requests, want 1", rc.count())
	}
	req, body := rc.got[0], rc.bodies[0]
	for k, want := range map[string]string{"Content-Type": "application/json", "Slogfeed-Event": "items", "User-Agent": fetcher.DefaultUserAgent()} {
		if got := req.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if req.URL.RawQuery != "x=1" || req.Method != http.MethodPost || req.Header.Get("Slogfeed-Delivery") == "" {
		t.Errorf("request %s %s, delivery %q", req.Method, req.URL, req.Header.Get("Slogfeed-Delivery"))
	}
	if sig := req.Header.Get("Slogfeed-Signature"); !hmac.Equal([]byte(sig), []byte(Sign(secret, body))) || !strings.HasPrefix(sig, "sha256=") {
		t.Errorf("signature %q does not verify", sig)
	}
	var doc struct {
		Feed  feedInfo       `json:"feed"`
		Items []storage.Item `json:"items"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Feed.Ref != "pipe/out" || doc.Feed.ID != 7 || doc.Feed.Title != "Output" || len(doc.Items) != 3 || doc.Items[2].ID != "a2" || doc.Items[2].Reading.Value != 2 {
		t.Errorf("body %s", body)
	}
	got := hookOf(t, s, h.ID)
	if got.Delivered != 1 || got.Pending != 0 || got.LastStatus != 200 || got.LastError != "" || !got.LastDelivered.Equal(t0) {
		t.Errorf("status %+v", got.Status)
	}
	// Nothing is left to do.
	if next, worked := s.step(context.Background()); worked || !next.IsZero() {
		t.Errorf("second step: %v %v", next, worked)
	}
}

// A failed attempt is retried after the backoff, with the same delivery
// id, until it succeeds; Retry-After postpones it.
func TestRetry(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, 500, 503, 200)
	rc.header.Set("Retry-After", "120")
	s := e.service(t, Options{})
	h := mustCreate(t, s, "sensor/lab-1", rc.URL)
	s.Notify(labFeed, items("r", 1))
	ctx := context.Background()

	s.step(ctx)
	got := hookOf(t, s, h.ID)
	if got.LastStatus != 500 || got.Attempts != 1 || got.Pending != 1 ||
		!strings.Contains(got.LastError, "attempt 1 of 8 failed: HTTP 500: boom [31mred") {
		t.Fatalf("after a 500: %+v", got.Status)
	}
	// Retry-After (120 s) outweighs the backoff (5 s without jitter).
	if want := t0.Add(120 * time.Second); !got.NextAttempt.Equal(want) {
		t.Errorf("next attempt %v, want %v", got.NextAttempt, want)
	}
	// Not yet due.
	e.clock.set(t0.Add(119 * time.Second))
	if next, worked := s.step(ctx); worked || !next.Equal(t0.Add(120*time.Second)) {
		t.Fatalf("early step: %v %v", next, worked)
	}
	e.clock.set(t0.Add(120 * time.Second))
	s.step(ctx)
	if got := hookOf(t, s, h.ID); got.LastStatus != 503 || got.Attempts != 2 {
		t.Fatalf("after a 503: %+v", got.Status)
	}
	rc.header.Del("Retry-After")
	e.clock.set(t0.Add(10 * time.Minute))
	s.step(ctx)
	got = hookOf(t, s, h.ID)
	if got.Delivered != 1 || got.Pending != 0 || got.LastError != "" || got.Attempts != 3 {
		t.Fatalf("after the success: %+v", got.Status)
	}
	ids := map[string]bool{}
	for _, r := range rc.got {
		ids[r.Header.Get("Slogfeed-Delivery")] = true
	}
	if rc.count() != 3 || len(ids) != 1 {
		t.Errorf("%d requests with %d delivery ids, want 3 with 1", rc.count(), len(ids))
	}
}

// After MaxAttempts failures the delivery is given up; the error stays
// visible in the API, which never shows the secret.
func TestGiveUp(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, 500)
	s := e.service(t, Options{})
	h := mustCreate(t, s, "pipe/out", rc.URL)
	s.Notify(outFeed, items("a", 1))
	ctx := context.Background()
	for i := range MaxAttempts {
		s.step(ctx)
		next := hookOf(t, s, h.ID).NextAttempt
		if i < MaxAttempts-1 {
			// Without jitter each wait is half its span: 5 s, 10 s, … ≤ 30 min.
			want := retryDelay(i+1, 0, 0)
			if got := next.Sub(e.clock.Now()); got != want {
				t.Errorf("attempt %d: wait %v, want %v", i+1, got, want)
			}
		}
		e.clock.set(next)
	}
	got := hookOf(t, s, h.ID)
	if rc.count() != MaxAttempts || got.Pending != 0 || got.Failed != 1 || got.Attempts != MaxAttempts || got.LastStatus != 500 ||
		!strings.Contains(got.LastError, "given up after 8 attempts: HTTP 500") {
		t.Fatalf("%d requests, status %+v", rc.count(), got.Status)
	}
	srv := httptest.NewServer(web.New(web.Options{Store: e.st, Routes: s.Routes(), Token: "tok"}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/webhooks")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`"last_status": 500`, `"attempts": 8`, `"failed": 1`, "given up after 8 attempts"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /api/v1/webhooks lacks %s: %s", want, body)
		}
	}
	if strings.Contains(string(body), secret) {
		t.Errorf("the secret is shown: %s", body)
	}
}

// Pending deliveries survive a restart: a new service on the same store
// delivers them.
func TestRestart(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, 500, 200)
	a := e.service(t, Options{})
	h := mustCreate(t, a, "pipe/out", rc.URL)
	a.Notify(outFeed, items("x", 2))
	a.step(context.Background())     // fails once
	a.Notify(outFeed, items("y", 1)) // never attempted

	b := e.service(t, Options{})
	got := hookOf(t, b, h.ID)
	if got.Pending != 2 || got.Attempts != 1 || got.LastStatus != 500 {
		t.Fatalf("after the restart: %+v", got.Status)
	}
	e.clock.set(t0.Add(time.Hour))
	for _, worked := b.step(context.Background()); worked; _, worked = b.step(context.Background()) {
	}
	got = hookOf(t, b, h.ID)
	if got.Pending != 0 || got.Delivered != 2 || rc.count() != 3 {
		t.Fatalf("after delivering: %d requests, %+v", rc.count(), got.Status)
	}
	// In order: the retried delivery first, with its id kept.
	if rc.got[0].Header.Get("Slogfeed-Delivery") != rc.got[1].Header.Get("Slogfeed-Delivery") || !bytes.Contains(rc.bodies[2], []byte(`"y0"`)) {
		t.Errorf("deliveries out of order")
	}
	// Nothing is left in the store.
	c := e.service(t, Options{})
	if got := hookOf(t, c, h.ID); got.Pending != 0 || got.Delivered != 2 {
		t.Errorf("third start: %+v", got.Status)
	}
}

// The SSRF guard refuses private addresses unless allowed: the delivery
// is given up at once with the guard's error.
func TestBlockedAddress(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, 200)
	s := e.service(t, Options{Client: fetcher.New(fetcher.Options{}).Client()})
	h := mustCreate(t, s, "pipe/out", rc.URL)
	s.Notify(outFeed, items("a", 1))
	s.step(context.Background())
	got := hookOf(t, s, h.ID)
	if rc.count() != 0 || got.Failed != 1 || got.Pending != 0 || got.Attempts != 1 ||
		!strings.Contains(got.LastError, "given up after 1 attempt: ") || !strings.Contains(got.LastError, "address not allowed") || !strings.Contains(got.LastError, "allow-list") {
		t.Fatalf("%d requests, status %+v", rc.count(), got.Status)
	}
}

// Answers that retrying cannot help, and redirects.
func TestAnswers(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		failed   int64
		pending  int
		errorSay string
	}{
		{"gone", http.StatusGone, 1, 0, "the receiver says the hook is gone"},
		{"redirect", http.StatusFound, 0, 1, "redirects are not followed"},
		{"accepted", http.StatusAccepted, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			rc := newReceiver(t, tt.status)
			rc.header.Set("Location", "http://example.org/")
			s := e.service(t, Options{})
			h := mustCreate(t, s, "pipe/out", rc.URL)
			s.Notify(outFeed, items("a", 1))
			s.step(context.Background())
			got := hookOf(t, s, h.ID)
			if got.Failed != tt.failed || got.Pending != tt.pending || !strings.Contains(got.LastError, tt.errorSay) || rc.count() != 1 {
				t.Errorf("%d requests, status %+v", rc.count(), got.Status)
			}
		})
	}
}

// A full queue drops its oldest deliveries, and says so.
func TestQueueFull(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, 200)
	s := e.service(t, Options{MaxPending: 3})
	h := mustCreate(t, s, "pipe/out", rc.URL)
	for i := range 5 {
		s.Notify(outFeed, items(fmt.Sprint("n", i, "-"), 1))
	}
	got := hookOf(t, s, h.ID)
	if got.Pending != 3 || got.Dropped != 2 || !strings.Contains(got.LastError, "queue full (3 pending): dropped the oldest") {
		t.Fatalf("status %+v", got.Status)
	}
	// The drops are stored: a restart finds the same queue and counts.
	if got := hookOf(t, e.service(t, Options{MaxPending: 3}), h.ID); got.Pending != 3 || got.Dropped != 2 || got.LastError != hookOf(t, s, h.ID).LastError {
		t.Fatalf("after a restart: %+v", got.Status)
	}
	for _, worked := s.step(context.Background()); worked; _, worked = s.step(context.Background()) {
	}
	for i, want := range []string{"n2-0", "n3-0", "n4-0"} {
		if !bytes.Contains(rc.bodies[i], []byte(`"id":"`+want+`"`)) {
			t.Errorf("delivery %d: %s, want item %s", i, rc.bodies[i], want)
		}
	}
}

// A full queue never drops the delivery being attempted, and drops as
// many as a Notify brings beyond the bound.
func TestQueueFullDrops(t *testing.T) {
	tests := []struct {
		name  string
		busy  bool
		items int // of the second Notify, one delivery each MaxDeliveryItems
		want  string
	}{
		{"idle head", false, 1, "z0 b0"},
		{"busy head", true, 1, "a0 b0"},
		{"idle head, two more", false, MaxDeliveryItems + 1, "b0 b100"},
		{"busy head, two more", true, MaxDeliveryItems + 1, "a0 b100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.service(t, Options{MaxPending: 2})
			h := mustCreate(t, s, "pipe/out", "http://receiver.test/")
			s.Notify(outFeed, items("a", 1))
			s.Notify(outFeed, items("z", 1)) // the queue is full
			s.mu.Lock()
			s.hooks[h.ID].busy = tt.busy
			s.mu.Unlock()
			s.Notify(outFeed, items("b", tt.items))
			var got []string
			s.mu.Lock()
			for _, d := range s.hooks[h.ID].queue {
				var doc struct{ Items []storage.Item }
				if err := json.Unmarshal(d.Body, &doc); err != nil {
					t.Fatal(err)
				}
				got = append(got, doc.Items[0].ID)
			}
			s.mu.Unlock()
			if strings.Join(got, " ") != tt.want {
				t.Errorf("queue %q, want %s", got, tt.want)
			}
			st := hookOf(t, s, h.ID)
			if wantDropped := int64(1 + tt.items/MaxDeliveryItems); st.Dropped != wantDropped {
				t.Errorf("%d dropped, want %d", st.Dropped, wantDropped)
			}
		})
	}
}

// Many new items make several deliveries.
func TestSplit(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, 200)
	s := e.service(t, Options{})
	h := mustCreate(t, s, "pipe/out", rc.URL)
	s.Notify(outFeed, items("i", 2*MaxDeliveryItems+50))
	if got := hookOf(t, s, h.ID); got.Pending != 3 {
		t.Fatalf("%d deliveries, want 3", got.Pending)
	}
	big := items("big", 3)
	for i := range big {
		big[i].Content = strings.Repeat("x", MaxDeliveryBytes/2)
	}
	s.Notify(outFeed, big)
	if got := hookOf(t, s, h.ID); got.Pending != 6 {
		t.Fatalf("%d deliveries, want 6 (one per large item)", got.Pending)
	}
	for _, worked := s.step(context.Background()); worked; _, worked = s.step(context.Background()) {
	}
	var n []int
	for _, b := range rc.bodies {
		var doc struct{ Items []json.RawMessage }
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		n = append(n, len(doc.Items))
	}
	if !slices.Equal(n, []int{100, 100, 50, 1, 1, 1}) {
		t.Errorf("items per delivery %v", n)
	}
}

// Deleting a hook deletes its pending deliveries.
func TestDelete(t *testing.T) {
	e := newEnv(t)
	s := e.service(t, Options{})
	h := mustCreate(t, s, "pipe/out", "http://receiver.test/")
	s.Notify(outFeed, items("a", 1))
	if err := s.Delete(h.ID); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := e.st.PluginList(Name, func(string, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("%d records left, %v", n, err)
	}
	if err := s.Delete(h.ID); err == nil {
		t.Error("deleted twice")
	}
}

// Run delivers as soon as items arrive, and stops with its context.
func TestRun(t *testing.T) {
	e := newEnv(t)
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Slogfeed-Delivery")
	}))
	defer srv.Close()
	s, err := New(Options{Store: e.st, Client: loopback()})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "feed/7", srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	s.Notify(outFeed, items("a", 1))
	select {
	case id := <-got:
		if id == "" {
			t.Error("no delivery id")
		}
	case <-time.After(time.Minute):
		t.Fatal("no delivery")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestAPI(t *testing.T) {
	e := newEnv(t)
	s := e.service(t, Options{})
	srv := httptest.NewServer(web.New(web.Options{Store: e.st, Routes: s.Routes(), Token: "tok"}))
	defer srv.Close()
	do := func(method, path, body, token string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	hook := func(feed, url, sec string) string {
		b, _ := json.Marshal(map[string]string{"feed": feed, "url": url, "secret": sec})
		return string(b)
	}
	tests := []struct {
		name, body string
		status     int
		says       string
	}{
		{"created", hook("pipe/out", "https://example.org/in", secret), 201, `"feed": "pipe/out"`},
		{"sensor", hook("sensor/lab-1", "http://example.org/in", secret), 201, `"pending": 0`},
		{"feed by URL", hook("https://example.org/feed.xml", "https://example.org/in", secret), 400, "name the feed as feed/ID"},
		{"bad feed", hook("lab-1", "https://example.org/in", secret), 400, "not a feed reference"},
		{"bad pipe slug", hook("pipe/Not A Slug", "https://example.org/in", secret), 400, "not a pipe slug"},
		{"ftp", hook("pipe/out", "ftp://example.org/in", secret), 400, "want an http or https URL"},
		{"relative", hook("pipe/out", "/in", secret), 400, "want an http or https URL"},
		{"credentials", hook("pipe/out", "https://user:pw@example.org/in", secret), 400, "no credentials"},
		{"long URL", hook("pipe/out", "https://example.org/"+strings.Repeat("a", MaxURLBytes), secret), 400, "at most 2048"},
		{"short secret", hook("pipe/out", "https://example.org/in", "short"), 400, "secret: 5 bytes"},
		{"unknown field", `{"feed":"pipe/out","url":"https://example.org/in","secret":"` + secret + `","events":["x"]}`, 400, "unknown field"},
		{"not JSON", `feed=pipe/out`, 400, "want {"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := do("POST", "/api/v1/webhooks", tt.body, "tok")
			if status != tt.status || !strings.Contains(body, tt.says) {
				t.Fatalf("%d %s, want %d saying %q", status, body, tt.status, tt.says)
			}
			if strings.Contains(body, secret) {
				t.Errorf("the secret is shown: %s", body)
			}
		})
	}
	// The same hook again would deliver every item twice; another secret
	// (a receiver changing its secret) makes another hook.
	if status, body := do("POST", "/api/v1/webhooks", hook("pipe/out", "https://example.org/in", secret), "tok"); status != http.StatusConflict || !strings.Contains(body, "already") {
		t.Errorf("the same hook again: %d %s, want 409", status, body)
	}
	other := strings.Repeat("s", MinSecretBytes)
	if status, body := do("POST", "/api/v1/webhooks", hook("pipe/out", "https://example.org/in", other), "tok"); status != http.StatusCreated {
		t.Errorf("the same hook with another secret: %d %s, want 201", status, body)
	}
	if status, _ := do("POST", "/api/v1/webhooks", hook("pipe/out", "https://example.org/in", secret), ""); status != http.StatusUnauthorized {
		t.Errorf("POST without the token: %d", status)
	}
	list := s.Hooks()
	if len(list) != 3 {
		t.Fatalf("%d hooks", len(list))
	}
	if status, body := do("GET", "/api/v1/webhooks/"+list[0].ID, "", ""); status != 200 || !strings.Contains(body, list[0].URL) {
		t.Errorf("GET one: %d %s", status, body)
	}
	if status, _ := do("DELETE", "/api/v1/webhooks/"+list[0].ID, "", ""); status != http.StatusUnauthorized {
		t.Errorf("DELETE without the token: %d", status)
	}
	if status, _ := do("DELETE", "/api/v1/webhooks/"+list[0].ID, "", "tok"); status != http.StatusNoContent {
		t.Errorf("DELETE: %d", status)
	}
	for _, path := range []string{"/api/v1/webhooks/" + list[0].ID, "/api/v1/webhooks/nothing"} {
		if status, _ := do("GET", path, "", ""); status != http.StatusNotFound {
			t.Errorf("GET %s: %d", path, status)
		}
	}
	if status, _ := do("DELETE", "/api/v1/webhooks/"+list[0].ID, "", "tok"); status != http.StatusNotFound {
		t.Errorf("DELETE again: %d", status)
	}
}

func TestRetryDelay(t *testing.T) {
	tests := []struct {
		attempt    int
		retryAfter time.Duration
		jitter     float64
		want       time.Duration
	}{
		{1, 0, 0, 5 * time.Second},
		{1, 0, 0.999999999, 10 * time.Second},
		{2, 0, 0.5, 15 * time.Second},
		{8, 0, 1, 21*time.Minute + 20*time.Second},
		{10, 0, 1, time.Hour},
		{50, 0, 0, 30 * time.Minute},
		{1, 2 * time.Minute, 0, 2 * time.Minute},
		{1, 48 * time.Hour, 0, time.Hour},
	}
	for _, tt := range tests {
		if got := retryDelay(tt.attempt, tt.retryAfter, tt.jitter); got.Round(time.Millisecond) != tt.want {
			t.Errorf("retryDelay(%d, %v, %v) = %v, want %v", tt.attempt, tt.retryAfter, tt.jitter, got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"120", 2 * time.Minute},
		{"-5", 0},
		{"99999999999", MaxBackoff},
		{t0.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{t0.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.v, t0); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

// Whatever a hook's URL and feed are, checking them does not panic and
// what is accepted is an absolute http(s) URL.
func FuzzCreate(f *testing.F) {
	f.Add("pipe/out", "https://example.org/in")
	f.Add("feed/12", "http://[::1]:80/x?y#z")
	f.Add("sensor/a", "http://u@h/")
	st, err := storage.Open(filepath.Join(f.TempDir(), "f.db"), storage.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	s, err := New(Options{Store: st})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, feed, u string) {
		h, err := s.Create(feed, u, secret)
		if err != nil {
			return
		}
		if !strings.HasPrefix(h.URL, "http://") && !strings.HasPrefix(h.URL, "https://") {
			t.Fatalf("accepted %q", h.URL)
		}
		if err := s.Delete(h.ID); err != nil {
			t.Fatal(err)
		}
	})
}
