package websub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/storage"
)

// findReading reports whether items hold a reading of value v.
func findReading(items []storage.Item, v float64) bool {
	for _, it := range items {
		if it.Reading != nil && it.Reading.Value == v {
			return true
		}
	}
	return false
}

// subOf returns the subscriber's record of feed id (a copy).
func subOf(t *testing.T, s *subscriber, id uint64) subRecord {
	t.Helper()
	s.svc.sub.mu.Lock()
	defer s.svc.sub.mu.Unlock()
	r := s.svc.sub.recs[id]
	if r == nil {
		t.Fatalf("no subscription for feed %d", id)
	}
	return *r
}

// TestRoundTrip: B subscribes to A's sensor feed by polling it, finds the
// hub, subscribes, and gets every reading pushed at once; its polling
// becomes a fallback check that finds what a push missed and
// resubscribes; both sides restart without losing the subscription;
// unsubscribing the feed ends it at the hub.
func TestRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := &hosts{}
		dbA, dbB := testDB(t), testDB(t)
		a := newPublisher(t, net, "http://a.test", dbA)
		b := newSubscriberNode(t, net, "http://b.test", dbB)
		defer func() { a.stop(); b.stop() }()
		a.post(t, "room-1", "1")
		f, err := b.agg.Subscribe(storage.Feed{URL: topicRSS})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		// Discovery and subscription.
		r := subOf(t, b, f.ID)
		if r.State != StateActive || r.Hub != "http://a.test/websub/hub" || r.Topic != topicRSS || !r.Expires.Equal(time.Now().Add(DefaultLease)) {
			t.Fatalf("subscription %+v: want active at A's hub for %s, lease %v", r, topicRSS, DefaultLease)
		}
		if !b.agg.Pushed(f.ID).Equal(r.Expires) {
			t.Fatalf("aggregator: pushed until %v, want %v", b.agg.Pushed(f.ID), r.Expires)
		}
		if st := a.svc.hub.Status(); st.Subscriptions != 1 || st.Topics[0].Topic != topicRSS {
			t.Fatalf("hub %+v", st)
		}
		if !findReading(b.items(t, f.ID), 1) {
			t.Fatal("the first poll did not store the first reading")
		}

		// Pushes: each reading is stored at once, OnNewItems told, the
		// observation recorded.
		for i := 2; i <= 6; i++ {
			time.Sleep(10 * time.Second)
			a.post(t, "room-1", fmt.Sprint(i))
			synctest.Wait()
			if !findReading(b.items(t, f.ID), float64(i)) {
				t.Fatalf("reading %d not pushed", i)
			}
		}
		feed, err := b.st.Feed(f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if feed.Polls != 1 || feed.Items != 6 {
			t.Fatalf("feed after pushes: %d polls %d items, want 1 poll and 6 items", feed.Polls, feed.Items)
		}
		b.mu.Lock()
		heard := len(b.new[f.ID])
		b.mu.Unlock()
		if heard != 6 {
			t.Fatalf("OnNewItems heard of %d items, want 6", heard)
		}
		obs, err := b.st.Observations(f.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if last := obs[len(obs)-1]; !last.Hit || len(last.LatencyS) != 1 || last.LatencyS[0] > 1 {
			t.Fatalf("push observation %+v: want a hit with its latency", last)
		}
		if c := b.svc.sub.Status().Counters; c.Pushes != 5 || c.Items != 5 || c.Missed != 0 {
			t.Fatalf("subscriber counters %+v", c)
		}

		// A missed push: the fallback poll finds it, counts it and
		// resubscribes.
		a.mute.Store(true)
		a.post(t, "room-1", "7")
		a.mute.Store(false)
		time.Sleep(aggregator.PushFallbackMax + time.Minute)
		if !findReading(b.items(t, f.ID), 7) {
			t.Fatal("the fallback poll did not find the missed reading")
		}
		if c := b.svc.sub.Status().Counters; c.Missed != 1 {
			t.Fatalf("missed %d, want 1", c.Missed)
		}
		if c := a.svc.hub.Status().Counters; c.Verified != 2 {
			t.Fatalf("hub verified %d intents, want 2 (the resubscription)", c.Verified)
		}
		// Fallback polls are PushFallbackMin apart at least.
		if feed, _ := b.st.Feed(f.ID); feed.Polls > 1+int64(time.Hour/aggregator.PushFallbackMin)+1 {
			t.Fatalf("%d polls in an hour of a pushed feed", feed.Polls)
		}

		// B restarts while A publishes: A retries, B takes the push with
		// the subscription it stored.
		b.stop()
		net.set("b.test", nil)
		a.post(t, "room-1", "8")
		synctest.Wait()
		b = newSubscriberNode(t, net, "http://b.test", dbB)
		time.Sleep(10 * time.Second)
		if !findReading(b.items(t, f.ID), 8) {
			t.Fatal("the reading posted while B was down was not delivered")
		}
		if r := subOf(t, b, f.ID); r.State != StateActive || !b.agg.Pushed(f.ID).Equal(r.Expires) {
			t.Fatalf("after B's restart: %+v, pushed until %v", r, b.agg.Pushed(f.ID))
		}
		if c := a.svc.hub.Status().Counters; c.Verified != 2 {
			t.Fatalf("hub verified %d intents: B subscribed again after its restart", c.Verified)
		}

		// A restarts: its hub still knows B.
		a.stop()
		a = newPublisher(t, net, "http://a.test", dbA)
		a.post(t, "room-1", "9")
		synctest.Wait()
		if !findReading(b.items(t, f.ID), 9) {
			t.Fatal("no push after A's restart")
		}
		if c := a.svc.hub.Status().Counters; c.Verified != 0 {
			t.Fatalf("the restarted hub verified %d intents: B subscribed again", c.Verified)
		}

		// Unsubscribing the feed ends the subscription at the hub.
		if err := b.agg.Unsubscribe(f.ID); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := a.svc.hub.Status().Subscriptions; n != 0 {
			t.Fatalf("the hub keeps %d subscriptions after B unsubscribed", n)
		}
		if n := len(b.svc.sub.Status().Subscriptions); n != 0 {
			t.Fatalf("B keeps %d subscriptions", n)
		}
	})
}

// TestRenewal: the subscriber renews at RenewAt of the lease, so the hub
// never lets it expire.
func TestRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := &hosts{}
		a := newPublisher(t, net, "http://a.test", testDB(t))
		b := newSubscriberNode(t, net, "http://b.test", testDB(t))
		defer func() { a.stop(); b.stop() }()
		a.post(t, "room-1", "1")
		f, err := b.agg.Subscribe(storage.Feed{URL: topicRSS})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		first := subOf(t, b, f.ID).Expires
		time.Sleep(time.Duration(float64(DefaultLease)*RenewAt) + time.Minute)
		r := subOf(t, b, f.ID)
		if r.State != StateActive || !r.Expires.After(first) {
			t.Fatalf("after %v: %+v, want renewed past %v", time.Duration(float64(DefaultLease)*RenewAt), r, first)
		}
		if st := a.svc.hub.Status(); st.Subscriptions != 1 || !st.Topics[0].NextExpiry.After(first) {
			t.Fatalf("hub %+v: the lease was not extended", st)
		}
		a.post(t, "room-1", "2")
		synctest.Wait()
		if !findReading(b.items(t, f.ID), 2) {
			t.Fatal("no push after the renewal")
		}
	})
}

// TestSubscribeFailures: a hub that refuses is retried with backoff and
// the feed keeps its normal polling; a hub that never verifies times out.
func TestSubscribeFailures(t *testing.T) {
	tests := []struct {
		name    string
		hub     http.HandlerFunc
		wait    time.Duration // until the first failure is known
		wantErr string
	}{
		{"refused", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no thanks", http.StatusForbidden) }, time.Second, "403"},
		{"never verifies", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) }, VerifyWait + time.Second, "in time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := &hosts{}
				var mu sync.Mutex
				requests := 0
				pub := http.NewServeMux()
				pub.HandleFunc("GET /f.rss", func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/rss+xml")
					_, _ = w.Write([]byte(`<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>t</title>` +
						`<atom:link rel="hub" href="http://pub.test/hub"/><atom:link rel="self" href="http://pub.test/f.rss"/>` +
						`<item><guid>a</guid><title>a</title></item></channel></rss>`))
				})
				pub.HandleFunc("POST /hub", func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					requests++
					mu.Unlock()
					tt.hub(w, r)
				})
				net.set("pub.test", pub)
				b := newSubscriberNode(t, net, "http://b.test", testDB(t))
				defer b.stop()
				f, err := b.agg.Subscribe(storage.Feed{URL: "http://pub.test/f.rss", Policy: "fixed-1m"})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(tt.wait)
				r := subOf(t, b, f.ID)
				if r.State != StateFailed || r.Failures != 1 || !strings.Contains(r.LastError, tt.wantErr) {
					t.Fatalf("subscription %+v: want failed once with %q", r, tt.wantErr)
				}
				if !b.agg.Pushed(f.ID).IsZero() {
					t.Fatal("a failed subscription marked the feed pushed")
				}
				time.Sleep(time.Hour)
				mu.Lock()
				n := requests
				mu.Unlock()
				// Retries after 1, 2, 4, 8, 16 min (plus the verification
				// wait of those that are accepted).
				if n < 3 || n > 6 {
					t.Fatalf("%d requests in an hour, want a few with backoff", n)
				}
				if feed, _ := b.st.Feed(f.ID); feed.Polls < 50 {
					t.Fatalf("%d polls in an hour: the feed lost its normal polling", feed.Polls)
				}
			})
		})
	}
}

// fakeAgg records what the subscriber asks of the aggregator.
type fakeAgg struct {
	mu       sync.Mutex
	err      error
	ingested [][]byte
	headers  []http.Header
	pushed   map[uint64]time.Time
}

func (f *fakeAgg) Ingest(_ context.Context, id uint64, body []byte, header http.Header, _ time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	f.ingested = append(f.ingested, body)
	f.headers = append(f.headers, header)
	return 1, nil
}

func (f *fakeAgg) SetPushed(id uint64, until time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pushed == nil {
		f.pushed = map[uint64]time.Time{}
	}
	f.pushed[id] = until
	return true
}

func (f *fakeAgg) Watch(aggregator.Watcher) {}

// TestCallbacks: what the callback confirms, accepts, ignores and refuses.
func TestCallbacks(t *testing.T) {
	const (
		token  = "0123456789abcdef0123456789abcdef"
		secret = "s3cret"
		topic  = "http://pub.test/f.rss"
	)
	body := `<rss version="2.0"><channel><title>t</title><item><guid>a</guid></item></channel></rss>`
	cbPath := CallbackPrefix + "5/" + token
	verify := func(kv ...string) string { return cbPath + "?" + form(kv...).Encode() }
	tests := []struct {
		name      string
		state     string
		method    string
		target    string
		body      string
		sig       string // X-Hub-Signature
		ingestErr error
		status    int
		wantBody  string
		wantState string
		ingested  int
		pushed    bool // SetPushed called with a future time
	}{
		{name: "confirm", state: StatePending, method: "GET", target: verify("hub.mode", "subscribe", "hub.topic", topic, "hub.challenge", "ch4ll", "hub.lease_seconds", "3600"),
			status: 200, wantBody: "ch4ll", wantState: StateActive, pushed: true},
		{name: "renewal", state: StateActive, method: "GET", target: verify("hub.mode", "subscribe", "hub.topic", topic, "hub.challenge", "c2", "hub.lease_seconds", "3600"),
			status: 200, wantBody: "c2", wantState: StateActive, pushed: true},
		{name: "wrong token", state: StatePending, method: "GET", target: strings.Replace(verify("hub.mode", "subscribe", "hub.topic", topic, "hub.challenge", "c", "hub.lease_seconds", "3600"), token, strings.Repeat("f", 32), 1),
			status: 404, wantState: StatePending},
		{name: "unknown feed", state: StatePending, method: "GET", target: strings.Replace(verify("hub.mode", "subscribe", "hub.topic", topic, "hub.challenge", "c", "hub.lease_seconds", "3600"), "/5/", "/6/", 1),
			status: 404, wantState: StatePending},
		{name: "wrong topic", state: StatePending, method: "GET", target: verify("hub.mode", "subscribe", "hub.topic", "http://evil.test/f.rss", "hub.challenge", "c", "hub.lease_seconds", "3600"),
			status: 404, wantState: StatePending},
		{name: "no lease", state: StatePending, method: "GET", target: verify("hub.mode", "subscribe", "hub.topic", topic, "hub.challenge", "c"),
			status: 404, wantState: StatePending},
		{name: "no challenge", state: StatePending, method: "GET", target: verify("hub.mode", "subscribe", "hub.topic", topic, "hub.lease_seconds", "3600"),
			status: 404, wantState: StatePending},
		{name: "huge challenge", state: StatePending, method: "GET", target: verify("hub.mode", "subscribe", "hub.topic", topic, "hub.challenge", strings.Repeat("c", maxChallenge+1), "hub.lease_seconds", "3600"),
			status: 404, wantState: StatePending},
		{name: "unsubscribe we did not ask", state: StateActive, method: "GET", target: verify("hub.mode", "unsubscribe", "hub.topic", topic, "hub.challenge", "c"),
			status: 404, wantState: StateActive},
		{name: "unknown mode", state: StateActive, method: "GET", target: verify("hub.mode", "publish", "hub.topic", topic, "hub.challenge", "c"),
			status: 404, wantState: StateActive},
		{name: "denied", state: StatePending, method: "GET", target: verify("hub.mode", "denied", "hub.topic", topic, "hub.reason", "full"),
			status: 200, wantState: StateFailed},
		{name: "push", state: StateActive, method: "POST", target: cbPath, body: body, sig: Sign(secret, []byte(body)),
			status: 204, wantState: StateActive, ingested: 1},
		{name: "push sha512", state: StateActive, method: "POST", target: cbPath, body: body, sig: "sha512=" + hmacHex("sha512", secret, []byte(body)),
			status: 204, wantState: StateActive, ingested: 1},
		{name: "push unsigned", state: StateActive, method: "POST", target: cbPath, body: body,
			status: 202, wantState: StateActive},
		{name: "push forged", state: StateActive, method: "POST", target: cbPath, body: body, sig: Sign("guess", []byte(body)),
			status: 202, wantState: StateActive},
		{name: "push to an old callback", state: StateActive, method: "POST", target: strings.Replace(cbPath, token, strings.Repeat("0", 32), 1), body: body, sig: Sign(secret, []byte(body)),
			status: 410, wantState: StateActive},
		{name: "push while unsubscribing", state: StateLeaving, method: "POST", target: cbPath, body: body, sig: Sign(secret, []byte(body)),
			status: 410, wantState: StateLeaving},
		{name: "push too large", state: StateActive, method: "POST", target: cbPath, body: strings.Repeat(" ", maxPushBody+1),
			status: 413, wantState: StateActive},
		{name: "push not a feed", state: StateActive, method: "POST", target: cbPath, body: body, sig: Sign(secret, []byte(body)), ingestErr: fmt.Errorf("x: %w", parser.ErrNotFeed),
			status: 400, wantState: StateActive},
		{name: "push for a deleted feed", state: StateActive, method: "POST", target: cbPath, body: body, sig: Sign(secret, []byte(body)), ingestErr: storage.ErrFeedNotFound,
			status: 410, wantState: StateActive},
		{name: "push failing in the store", state: StateActive, method: "POST", target: cbPath, body: body, sig: Sign(secret, []byte(body)), ingestErr: errors.New("disk full"),
			status: 500, wantState: StateActive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t, testDB(t))
			defer st.Close()
			agg := &fakeAgg{err: tt.ingestErr}
			svc, err := New(Options{Store: st, BaseURL: "http://b.test", Aggregator: agg})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			svc.sub.recs[5] = &subRecord{Feed: 5, Hub: "http://pub.test/hub", Topic: topic, Token: token, Secret: secret,
				Callback: "http://b.test" + cbPath, State: tt.state, Requested: now.Add(-time.Second), Verified: now.Add(-time.Hour),
				Lease: 7200, Expires: now.Add(time.Hour)}
			mux := http.NewServeMux()
			for _, rt := range svc.Routes() {
				mux.Handle(rt.Pattern, rt.Handler)
			}
			req := httptest.NewRequest(tt.method, tt.target, strings.NewReader(tt.body))
			if tt.sig != "" {
				req.Header.Set(SignatureHeader, tt.sig)
			}
			req.Header.Set("Content-Type", "application/rss+xml")
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d %q, want %d", rec.Code, rec.Body, tt.status)
			}
			if tt.wantBody != "" && rec.Body.String() != tt.wantBody {
				t.Fatalf("body %q, want %q", rec.Body, tt.wantBody)
			}
			if got := svc.sub.recs[5].State; got != tt.wantState {
				t.Fatalf("state %s, want %s", got, tt.wantState)
			}
			agg.mu.Lock()
			defer agg.mu.Unlock()
			if len(agg.ingested) != tt.ingested {
				t.Fatalf("%d documents ingested, want %d", len(agg.ingested), tt.ingested)
			}
			if tt.ingested > 0 && (string(agg.ingested[0]) != body || agg.headers[0].Get("Content-Type") != "application/rss+xml") {
				t.Fatalf("ingested %q with %v", agg.ingested[0], agg.headers[0])
			}
			until, called := agg.pushed[5]
			if tt.pushed != (called && until.After(now)) {
				t.Fatalf("SetPushed: called %v until %v, want a future time: %v", called, until, tt.pushed)
			}
			if tt.pushed {
				if r := svc.sub.recs[5]; r.Lease != 3600 || !r.Expires.Equal(until) {
					t.Fatalf("granted lease not recorded: %+v", r)
				}
				raw, err := st.PluginGet(Name, subKey(5))
				if err != nil || !strings.Contains(string(raw), `"state":"active"`) {
					t.Fatalf("stored record %s (%v)", raw, err)
				}
			}
			c := svc.sub.Status().Counters
			if strings.HasPrefix(tt.name, "push unsigned") || strings.HasPrefix(tt.name, "push forged") {
				if c.BadSignatures != 1 {
					t.Fatalf("bad signatures %d, want 1", c.BadSignatures)
				}
			}
		})
	}
}

// TestNewOptions: the service refuses a setup it cannot work with.
func TestNewOptions(t *testing.T) {
	st := openStore(t, testDB(t))
	defer st.Close()
	tests := []struct {
		name string
		opt  Options
		ok   bool
	}{
		{"no store", Options{BaseURL: "http://a.test"}, false},
		{"relative base", Options{Store: st, BaseURL: "/x"}, false},
		{"ftp base", Options{Store: st, BaseURL: "ftp://a.test"}, false},
		{"hub and subscriber", Options{Store: st, BaseURL: "http://a.test/", Documents: http.NewServeMux(), Aggregator: &fakeAgg{}}, true},
		{"neither", Options{Store: st, BaseURL: "http://a.test"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := New(tt.opt)
			if (err == nil) != tt.ok {
				t.Fatalf("New: %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				return
			}
			routes := map[string]bool{}
			for _, rt := range svc.Routes() {
				routes[rt.Pattern] = rt.Public
			}
			if tt.opt.Documents != nil && (!routes["POST "+HubPath] || svc.Hub().URL() != "http://a.test"+HubPath) {
				t.Fatalf("hub routes %v", routes)
			}
			if tt.opt.Aggregator != nil && !routes["POST "+CallbackPrefix+"{feed}/{token}"] {
				t.Fatalf("callback routes %v", routes)
			}
			if _, ok := routes["GET "+StatusPath]; !ok {
				t.Fatalf("no status route: %v", routes)
			}
			rec := httptest.NewRecorder()
			svc.serveStatus(rec, httptest.NewRequest(http.MethodGet, StatusPath, nil))
			if rec.Code != 200 || strings.Contains(rec.Body.String(), "token") || strings.Contains(rec.Body.String(), "secret") {
				t.Fatalf("status page %d %s", rec.Code, rec.Body)
			}
		})
	}
}
