package websub

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

const topicRSS = "http://a.test/sensors/room-1.rss"

// TestHubRequests: what the hub accepts (202) and refuses, with the
// status and the parameter named.
func TestHubRequests(t *testing.T) {
	net := &hosts{}
	cb := &callback{}
	net.set("sub.test", cb)
	p := newPublisher(t, net, "http://a.test", testDB(t))
	defer p.stop()
	p.post(t, "room-1", "21.5")

	ok := func(kv ...string) []string {
		base := []string{"hub.mode", "subscribe", "hub.topic", topicRSS, "hub.callback", "http://sub.test/cb/echo"}
		return append(base, kv...)
	}
	tests := []struct {
		name   string
		form   []string
		ctype  string
		body   string // instead of form
		status int
		want   string // in the answer
	}{
		{"subscribe", ok("hub.secret", "s3cret", "hub.lease_seconds", "3600"), "", "", http.StatusAccepted, ""},
		{"another format", ok("hub.topic", "http://a.test/sensors/room-1.json"), "", "", http.StatusAccepted, ""},
		{"topic by path", ok("hub.topic", "http://localhost:8080/sensors/room-1.atom"), "", "", http.StatusAccepted, ""},
		{"secret of 199 bytes", ok("hub.secret", strings.Repeat("s", 199)), "", "", http.StatusAccepted, ""},
		{"unsubscribe", ok("hub.mode", "unsubscribe"), "", "", http.StatusAccepted, ""},
		{"publish mode", ok("hub.mode", "publish"), "", "", http.StatusBadRequest, "hub.mode"},
		{"no mode", []string{"hub.topic", topicRSS, "hub.callback", "http://sub.test/cb/echo"}, "", "", http.StatusBadRequest, "hub.mode"},
		{"foreign topic", ok("hub.topic", "http://a.test/api/v1/feeds"), "", "", http.StatusBadRequest, "hub.topic"},
		{"topic with query", ok("hub.topic", topicRSS+"?limit=5"), "", "", http.StatusBadRequest, "hub.topic"},
		{"unknown sensor", ok("hub.topic", "http://a.test/sensors/nope.rss"), "", "", http.StatusBadRequest, "hub.topic"},
		{"topic not a URL", ok("hub.topic", "room-1"), "", "", http.StatusBadRequest, "hub.topic"},
		{"relative callback", ok("hub.callback", "/cb/echo"), "", "", http.StatusBadRequest, "hub.callback"},
		{"ftp callback", ok("hub.callback", "ftp://sub.test/cb"), "", "", http.StatusBadRequest, "hub.callback"},
		{"callback with user", ok("hub.callback", "http://u:p@sub.test/cb/echo"), "", "", http.StatusBadRequest, "hub.callback"},
		{"long callback", ok("hub.callback", "http://sub.test/"+strings.Repeat("x", MaxURL)), "", "", http.StatusBadRequest, "hub.callback"},
		{"secret of 200 bytes", ok("hub.secret", strings.Repeat("s", 200)), "", "", http.StatusBadRequest, "hub.secret"},
		{"lease not a number", ok("hub.lease_seconds", "soon"), "", "", http.StatusBadRequest, "hub.lease_seconds"},
		{"negative lease", ok("hub.lease_seconds", "-5"), "", "", http.StatusBadRequest, "hub.lease_seconds"},
		{"json body", nil, "application/json", `{"hub.mode":"subscribe"}`, http.StatusUnsupportedMediaType, "form-urlencoded"},
		{"huge body", nil, "application/x-www-form-urlencoded", "hub.mode=" + strings.Repeat("x", maxForm+1), http.StatusRequestEntityTooLarge, "larger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, ctype := form(tt.form...).Encode(), "application/x-www-form-urlencoded"
			if tt.form == nil {
				body, ctype = tt.body, tt.ctype
			}
			req := httptest.NewRequest(http.MethodPost, HubPath, strings.NewReader(body))
			req.Header.Set("Content-Type", ctype)
			rec := httptest.NewRecorder()
			p.mux.ServeHTTP(rec, req)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("status %d %q, want %d mentioning %q", rec.Code, rec.Body, tt.status, tt.want)
			}
			p.svc.hub.wg.Wait() // its verification, before the next request
		})
	}
	st := p.svc.hub.Status()
	// rss (renewed by the 199-byte secret, then unsubscribed), json, atom.
	if st.Subscriptions != 2 || st.Pending != 0 || st.Counters.Verified != 5 {
		t.Fatalf("hub status %+v: want 2 subscriptions after 5 verified intents", st)
	}
}

// TestHubLease: lease_seconds is bounded by MinLease and MaxLease.
func TestHubLease(t *testing.T) {
	h := &Hub{url: "http://a.test" + HubPath}
	tests := []struct {
		lease string
		want  time.Duration
	}{
		{"", DefaultLease},
		{"1", MinLease},
		{"3600", time.Hour},
		{"99999999999999999", MaxLease},
	}
	for _, tt := range tests {
		t.Run("lease="+tt.lease, func(t *testing.T) {
			req, err := h.parseRequest(form("hub.mode", "subscribe", "hub.topic", topicRSS, "hub.callback", "http://sub.test/cb", "hub.lease_seconds", tt.lease))
			if err != nil {
				t.Fatal(err)
			}
			if req.lease != tt.want {
				t.Fatalf("lease %v, want %v", req.lease, tt.want)
			}
		})
	}
}

// TestHubVerification: a subscription is kept only when the callback
// echoes the challenge; the verification carries the spec's parameters and
// keeps the callback's own query.
func TestHubVerification(t *testing.T) {
	tests := []struct {
		name     string
		callback string
		kept     bool
	}{
		{"echo", "http://sub.test/cb/echo?id=7", true},
		{"wrong challenge", "http://sub.test/cb/wrong", false},
		{"not found", "http://sub.test/cb/404", false},
		{"unreachable", "http://down.test/cb/echo", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := &hosts{}
				cb := &callback{}
				net.set("sub.test", cb)
				p := newPublisher(t, net, "http://a.test", testDB(t))
				defer p.stop()
				p.post(t, "room-1", "21.5")
				if code := subscribe(p.mux, form("hub.mode", "subscribe", "hub.topic", topicRSS, "hub.callback", tt.callback, "hub.lease_seconds", "3600", "hub.secret", "k")); code != http.StatusAccepted {
					t.Fatalf("subscribe: %d", code)
				}
				synctest.Wait()
				st := p.svc.hub.Status()
				if kept := st.Subscriptions == 1; kept != tt.kept {
					t.Fatalf("subscription kept: %v, want %v (%+v)", kept, tt.kept, st)
				}
				_, err := p.st.PluginGet(Name, hubKey("/sensors/room-1.rss", tt.callback))
				if stored := err == nil; stored != tt.kept {
					t.Fatalf("subscription stored: %v, want %v (%v)", stored, tt.kept, err)
				}
				if tt.callback == "http://down.test/cb/echo" {
					return
				}
				cb.mu.Lock()
				defer cb.mu.Unlock()
				if len(cb.verifies) != 1 {
					t.Fatalf("%d verifications, want 1", len(cb.verifies))
				}
				q := cb.verifies[0]
				if q.Get("hub.mode") != "subscribe" || q.Get("hub.topic") != topicRSS || len(q.Get("hub.challenge")) < 16 || q.Get("hub.lease_seconds") != "3600" {
					t.Fatalf("verification query %v", q)
				}
				if tt.kept && q.Get("id") != "7" {
					t.Fatalf("the callback's own query was lost: %v", q)
				}
			})
		})
	}
}

// TestHubDistribution: a new reading sends the topic's document, as a poll
// gets it, to each subscriber, with the topic's type, the hub and self
// links, the phase hint and, for subscribers with a secret, the signature.
func TestHubDistribution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := &hosts{}
		signed, plain := &callback{}, &callback{}
		net.set("signed.test", signed)
		net.set("plain.test", plain)
		p := newPublisher(t, net, "http://a.test", testDB(t))
		defer p.stop()
		p.post(t, "room-1", "21.5")
		subscribe(p.mux, form("hub.mode", "subscribe", "hub.topic", topicRSS, "hub.callback", "http://signed.test/cb/echo", "hub.secret", "k3y"))
		subscribe(p.mux, form("hub.mode", "subscribe", "hub.topic", "http://a.test/sensors/room-1.json", "hub.callback", "http://plain.test/cb/echo"))
		synctest.Wait()
		if n := p.svc.hub.Status().Subscriptions; n != 2 {
			t.Fatalf("%d subscriptions, want 2", n)
		}
		time.Sleep(3 * time.Second)
		p.post(t, "room-1", "22.5")
		p.post(t, "other", "1") // no subscriber
		synctest.Wait()

		get := func(path string) []byte {
			rec := httptest.NewRecorder()
			p.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			return rec.Body.Bytes()
		}
		tests := []struct {
			cb     *callback
			topic  string
			ctype  string
			secret string
		}{
			{signed, topicRSS, "application/rss+xml; charset=utf-8", "k3y"},
			{plain, "http://a.test/sensors/room-1.json", "application/feed+json; charset=utf-8", ""},
		}
		for _, tt := range tests {
			tt.cb.mu.Lock()
			if len(tt.cb.pushes) != 1 {
				t.Fatalf("%s: %d pushes, want 1", tt.topic, len(tt.cb.pushes))
			}
			r, body := tt.cb.pushes[0], tt.cb.bodies[0]
			tt.cb.mu.Unlock()
			if want := get(strings.TrimPrefix(tt.topic, "http://a.test")); !bytes.Equal(body, want) {
				t.Fatalf("%s: pushed\n%s\nwant what a poll gets:\n%s", tt.topic, body, want)
			}
			if !bytes.Contains(body, []byte("22.5")) {
				t.Fatalf("%s: the new reading is not in the push", tt.topic)
			}
			if r.Header.Get("Content-Type") != tt.ctype {
				t.Fatalf("%s: Content-Type %q", tt.topic, r.Header.Get("Content-Type"))
			}
			links := strings.Join(r.Header.Values("Link"), ", ")
			if !strings.Contains(links, `<http://a.test/websub/hub>; rel="hub"`) || !strings.Contains(links, "<"+tt.topic+`>; rel="self"`) {
				t.Fatalf("%s: Link %q", tt.topic, links)
			}
			if ph, err := strconv.ParseFloat(r.Header.Get(feedext.HeaderPhase), 64); err != nil || ph < 0 || ph > 1 {
				t.Fatalf("%s: phase %q, want the new reading's age (0 on a fake clock)", tt.topic, r.Header.Get(feedext.HeaderPhase))
			}
			sig := r.Header.Get(SignatureHeader)
			if tt.secret == "" {
				if sig != "" {
					t.Fatalf("%s: signed without a secret: %q", tt.topic, sig)
				}
				continue
			}
			if err := Verify(tt.secret, body, sig); err != nil || !strings.HasPrefix(sig, "sha256=") {
				t.Fatalf("%s: signature %q: %v", tt.topic, sig, err)
			}
			if err := Verify("other", body, sig); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("%s: the signature verifies with another secret: %v", tt.topic, err)
			}
		}
		if c := p.svc.hub.Status().Counters; c.Delivered != 2 || c.Failed != 0 {
			t.Fatalf("counters %+v", c)
		}
	})
}

// TestHubCoalescesAndRetries: one delivery at a time per subscription, the
// newest document winning; failures are retried after 1 s, 2 s, …; a
// subscriber answering 410 Gone is dropped.
func TestHubCoalescesAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := &hosts{}
		cb := &callback{block: make(chan struct{})}
		net.set("sub.test", cb)
		p := newPublisher(t, net, "http://a.test", testDB(t))
		defer p.stop()
		p.post(t, "room-1", "1")
		cbURL := "http://sub.test/cb/echo"
		subscribe(p.mux, form("hub.mode", "subscribe", "hub.topic", topicRSS, "hub.callback", cbURL))
		synctest.Wait()

		// Coalescing: the first delivery hangs while five readings come.
		p.post(t, "room-1", "2")
		synctest.Wait()
		for v := 3; v <= 7; v++ {
			p.post(t, "room-1", strconv.Itoa(v))
		}
		synctest.Wait()
		cb.mu.Lock()
		close(cb.block)
		cb.block = nil
		cb.mu.Unlock()
		synctest.Wait()
		cb.mu.Lock()
		if len(cb.bodies) != 2 || !bytes.Contains(cb.bodies[1], []byte(`value="7"`)) {
			t.Fatalf("%d deliveries (want 2: the one in flight, then the newest)", len(cb.bodies))
		}
		cb.failures = 3
		cb.mu.Unlock()

		// Retries with backoff.
		start := time.Now()
		p.post(t, "room-1", "8")
		time.Sleep(time.Minute)
		cb.mu.Lock()
		if len(cb.times) != 6 {
			t.Fatalf("%d deliveries, want 2 + 4 attempts", len(cb.times))
		}
		for i, want := range []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second} {
			if got := cb.times[2+i].Sub(start); got != want {
				t.Fatalf("attempt %d at %v, want %v", i+1, got, want)
			}
		}
		cb.status = http.StatusGone
		cb.mu.Unlock()
		if c := p.svc.hub.Status().Counters; c.Failed != 3 || c.Delivered != 3 {
			t.Fatalf("counters %+v", c)
		}

		// 410 Gone ends the subscription.
		p.post(t, "room-1", "9")
		synctest.Wait()
		if st := p.svc.hub.Status(); st.Subscriptions != 0 || st.Counters.Terminated != 1 {
			t.Fatalf("after 410: %+v", st)
		}
		if _, err := p.st.PluginGet(Name, hubKey("/sensors/room-1.rss", cbURL)); !errors.Is(err, storage.ErrPluginKeyNotFound) {
			t.Fatalf("the ended subscription is still stored: %v", err)
		}
	})
}

// TestHubAbandons: a document that fails MaxAttempts times is given up;
// the next change is delivered again.
func TestHubAbandons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := &hosts{}
		cb := &callback{failures: MaxAttempts}
		net.set("sub.test", cb)
		p := newPublisher(t, net, "http://a.test", testDB(t))
		defer p.stop()
		p.post(t, "room-1", "1")
		subscribe(p.mux, form("hub.mode", "subscribe", "hub.topic", topicRSS, "hub.callback", "http://sub.test/cb/echo"))
		synctest.Wait()
		p.post(t, "room-1", "2")
		time.Sleep(time.Hour)
		if c := p.svc.hub.Status().Counters; c.Failed != MaxAttempts || c.Abandoned != 1 || c.Delivered != 0 {
			t.Fatalf("counters %+v", c)
		}
		p.post(t, "room-1", "3")
		synctest.Wait()
		if c := p.svc.hub.Status().Counters; c.Delivered != 1 {
			t.Fatalf("the next change was not delivered: %+v", c)
		}
	})
}

// TestHubLifecycle: leases expire, unsubscription removes, and
// subscriptions survive a restart of the hub.
func TestHubLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := &hosts{}
		cb := &callback{}
		net.set("sub.test", cb)
		db := testDB(t)
		p := newPublisher(t, net, "http://a.test", db)
		p.post(t, "room-1", "1")
		for _, c := range []string{"short", "long", "leaving"} {
			lease := "86400"
			if c == "short" {
				lease = "600"
			}
			subscribe(p.mux, form("hub.mode", "subscribe", "hub.topic", topicRSS, "hub.callback", "http://sub.test/"+c+"/echo", "hub.lease_seconds", lease))
		}
		synctest.Wait()
		subscribe(p.mux, form("hub.mode", "unsubscribe", "hub.topic", topicRSS, "hub.callback", "http://sub.test/leaving/echo"))
		synctest.Wait()
		if n := p.svc.hub.Status().Subscriptions; n != 2 {
			t.Fatalf("%d subscriptions after an unsubscription, want 2", n)
		}
		time.Sleep(11 * time.Minute)
		if st := p.svc.hub.Status(); st.Subscriptions != 1 || st.Counters.Expired != 1 {
			t.Fatalf("after the short lease: %+v", st)
		}

		p.stop()
		p = newPublisher(t, net, "http://a.test", db)
		defer p.stop()
		st := p.svc.hub.Status()
		if st.Subscriptions != 1 || len(st.Topics) != 1 || st.Topics[0].Topic != topicRSS {
			t.Fatalf("after a restart: %+v", st)
		}
		_, before := cb.counts()
		p.post(t, "room-1", "2")
		synctest.Wait()
		if _, after := cb.counts(); after != before+1 {
			t.Fatalf("%d deliveries after the restart, want 1", after-before)
		}
		cb.mu.Lock()
		last := cb.pushes[len(cb.pushes)-1].URL.Path
		cb.mu.Unlock()
		if last != "/long/echo" {
			t.Fatalf("delivered to %s, want /long/echo", last)
		}
		// The long lease ends a day after it began, restart or not.
		time.Sleep(24 * time.Hour)
		if n := p.svc.hub.Status().Subscriptions; n != 0 {
			t.Fatalf("%d subscriptions after every lease ended", n)
		}
	})
}

// TestHubSSRF: verification goes through the fetcher's guard: a loopback
// callback is refused unless allow-listed.
func TestHubSSRF(t *testing.T) {
	srv := httptest.NewServer(&callback{})
	defer srv.Close()
	tests := []struct {
		name  string
		allow []netip.Prefix
		kept  int
	}{
		{"guarded", nil, 0},
		{"allowed", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t, testDB(t))
			defer st.Close()
			sensors := http.NewServeMux()
			sensors.HandleFunc("GET /sensors/room-1.rss", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/rss+xml")
				_, _ = w.Write([]byte(`<rss version="2.0"><channel><title>t</title></channel></rss>`))
			})
			client := fetcher.New(fetcher.Options{Allow: tt.allow}).Client()
			svc, err := New(Options{Store: st, BaseURL: "http://a.test", Client: client, Documents: sensors})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			for _, rt := range svc.Routes() {
				mux.Handle(rt.Pattern, rt.Handler)
			}
			if code := subscribe(mux, form("hub.mode", "subscribe", "hub.topic", topicRSS, "hub.callback", srv.URL+"/cb/echo")); code != http.StatusAccepted {
				t.Fatalf("subscribe: %d", code)
			}
			svc.hub.wg.Wait()
			if n := svc.hub.Status().Subscriptions; n != tt.kept {
				t.Fatalf("%d subscriptions, want %d", n, tt.kept)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = svc.Run(ctx)
		})
	}
}

// TestSignature: Sign and Verify agree; Verify names what is wrong.
func TestSignature(t *testing.T) {
	body := []byte("<rss/>")
	good := Sign("k", body)
	tests := []struct {
		name, header string
		want         error
	}{
		{"sha256", good, nil},
		{"sha1", "sha1=" + hmacHex("sha1", "k", body), nil},
		{"sha384", "sha384=" + hmacHex("sha384", "k", body), nil},
		{"sha512", "SHA512=" + hmacHex("sha512", "k", body), nil},
		{"missing", "", ErrNoSignature},
		{"md5", "md5=00", ErrSignatureMethod},
		{"no method", strings.TrimPrefix(good, "sha256="), ErrSignatureMethod},
		{"not hex", "sha256=zz", ErrSignatureMethod},
		{"too long", "sha256=" + strings.Repeat("0", 200), ErrSignatureMethod},
		{"wrong", "sha256=" + strings.Repeat("0", 64), ErrBadSignature},
		{"other body", Sign("k", []byte("<rss></rss>")), ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Verify("k", body, tt.header); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify(%q) = %v, want %v", tt.header, err, tt.want)
			}
		})
	}
}

// FuzzVerify: no header value makes Verify panic or accept a wrong body.
func FuzzVerify(f *testing.F) {
	f.Add("sha256=00", []byte("x"))
	f.Add(Sign("k", []byte("x")), []byte("x"))
	f.Add("sha1=", []byte{})
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		if Verify("k", body, header) == nil && Verify("another key", body, header) == nil {
			t.Fatalf("Verify accepted %q under two keys", header)
		}
	})
}

// TestSelfDescribing: the sensor and pipe feeds advertise the hub, in
// the document and in the Link header, only when it is on.
func TestSelfDescribing(t *testing.T) {
	st := openStore(t, testDB(t))
	defer st.Close()
	pipe := storage.Feed{Kind: storage.KindPipe, Slug: "copy", Policy: "auto"}
	if err := st.CreateFeed(&pipe); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddItems(pipe.ID, []storage.Item{{ID: "x", Title: "x", Published: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	handlers := func(hub string) http.Handler {
		mux := http.NewServeMux()
		s := web.SensorHandler(st, web.SensorOptions{BaseURL: "http://a.test", HubURL: hub})
		mux.Handle("/sensors/", s)
		mux.Handle("/api/v1/sensors/", s)
		mux.Handle("/feeds/", web.PipeFeedHandler(st, web.PipeFeedOptions{BaseURL: "http://a.test", HubURL: hub}))
		return mux
	}
	on, off := handlers("http://a.test"+HubPath), handlers("")
	req := httptest.NewRequest(http.MethodPost, "/api/v1/sensors/room-1/readings", strings.NewReader(`{"value": 1}`))
	req.Header.Set("Content-Type", "application/json")
	on.ServeHTTP(httptest.NewRecorder(), req)
	tests := []struct {
		path, inBody string
	}{
		{"/sensors/room-1.rss", `<atom:link href="http://a.test/websub/hub" rel="hub">`},
		{"/sensors/room-1.atom", `<link href="http://a.test/websub/hub" rel="hub">`},
		{"/sensors/room-1.json", `"url": "http://a.test/websub/hub"`},
		{"/feeds/copy.rss", `<atom:link href="http://a.test/websub/hub" rel="hub">`},
		{"/feeds/copy.json", `"type": "WebSub"`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			for _, hubOn := range []bool{true, false} {
				h := off
				if hubOn {
					h = on
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
				if rec.Code != http.StatusOK {
					t.Fatalf("GET %s: %d", tt.path, rec.Code)
				}
				links := strings.Join(rec.Header().Values("Link"), ", ")
				wantLinks := `<http://a.test/websub/hub>; rel="hub", <http://a.test` + tt.path + `>; rel="self"`
				body := rec.Body.String()
				if hubOn && (links != wantLinks || !strings.Contains(body, tt.inBody)) {
					t.Fatalf("hub on: Link %q (want %q), body has %q: %v", links, wantLinks, tt.inBody, strings.Contains(body, tt.inBody))
				}
				if !hubOn && (links != "" || strings.Contains(body, "websub")) {
					t.Fatalf("hub off: Link %q, body mentions websub: %v", links, strings.Contains(body, "websub"))
				}
				// What the subscriber side discovers in it.
				p, err := parser.Parse(rec.Body.Bytes(), rec.Header().Get("Content-Type"), parser.Options{BaseURL: "http://a.test" + tt.path})
				if err != nil {
					t.Fatal(err)
				}
				if hubOn && (len(p.Hubs) != 1 || p.Hubs[0] != "http://a.test"+HubPath || p.Self != "http://a.test"+tt.path) {
					t.Fatalf("discovered hubs %q self %q", p.Hubs, p.Self)
				}
				if !hubOn && len(p.Hubs) != 0 {
					t.Fatalf("hub off, yet hubs %q discovered", p.Hubs)
				}
			}
		})
	}
}

// FuzzHubRequest: no request body makes the hub panic or answer outside
// its documented statuses.
func FuzzHubRequest(f *testing.F) {
	f.Add("hub.mode=subscribe&hub.topic=http%3A%2F%2Fa.test%2Fsensors%2Fx.rss&hub.callback=http%3A%2F%2Fb.test%2Fcb")
	f.Add("hub.mode=unsubscribe&hub.topic=http://a.test/feeds/y.json&hub.callback=https://b.test/&hub.lease_seconds=1e9")
	f.Add("%zz&&==")
	st := openStore(f, filepath.Join(f.TempDir(), "fuzz.db"))
	defer st.Close()
	docs := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<rss/>")) })
	svc, err := New(Options{Store: st, BaseURL: "http://a.test", Client: (&hosts{}).client(), Documents: docs})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, HubPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		svc.hub.serveHub(rec, req)
		switch rec.Code {
		case http.StatusAccepted, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		svc.hub.wg.Wait()
	})
}
