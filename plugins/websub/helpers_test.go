package websub

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// hosts is an in-process network: requests to a host go to its handler,
// so that whole exchanges run on synctest's fake clock.
type hosts struct {
	mu sync.Mutex
	m  map[string]http.Handler
}

func (h *hosts) set(host string, hd http.Handler) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]http.Handler{}
	}
	h.m[host] = hd
}

func (h *hosts) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	hd := h.m[r.URL.Host]
	h.mu.Unlock()
	if hd == nil {
		return nil, errors.New("connection refused: " + r.URL.Host)
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		body = b
	}
	in := r.Clone(r.Context())
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	in.RequestURI = r.URL.RequestURI()
	in.Host = r.URL.Host
	in.RemoteAddr = "192.0.2.1:1234"
	rec := httptest.NewRecorder()
	hd.ServeHTTP(rec, in)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

func (h *hosts) client() *http.Client { return &http.Client{Transport: h} }

func openStore(t testing.TB, path string) *storage.Store {
	t.Helper()
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// publisher is a slogfeed with a sensor store and the hub.
type publisher struct {
	st      *storage.Store
	svc     *Service
	sensors http.Handler
	mux     *http.ServeMux
	cancel  context.CancelFunc
	done    chan struct{}
	mute    atomic.Bool // readings are not distributed (a hub that misses them)
}

// newPublisher starts a hub at base (e.g. "http://a.test") on the store
// at path, reachable through net.
func newPublisher(t *testing.T, net *hosts, base, path string) *publisher {
	t.Helper()
	p := &publisher{st: openStore(t, path), done: make(chan struct{})}
	p.sensors = web.SensorHandler(p.st, web.SensorOptions{
		BaseURL: base, HubURL: base + HubPath,
		OnNewItems: func(f storage.Feed, items []storage.Item) {
			if !p.mute.Load() {
				p.svc.Notify(f, items)
			}
		},
	})
	docs := http.NewServeMux()
	docs.Handle("GET /sensors/", p.sensors)
	svc, err := New(Options{Store: p.st, BaseURL: base, Client: net.client(), Documents: docs})
	if err != nil {
		t.Fatal(err)
	}
	p.svc = svc
	p.mux = http.NewServeMux()
	p.mux.Handle("/sensors/", p.sensors)
	p.mux.Handle("/api/v1/sensors/", p.sensors)
	for _, rt := range svc.Routes() {
		p.mux.Handle(rt.Pattern, rt.Handler)
	}
	net.set(hostOf(base), p.mux)
	var ctx context.Context
	ctx, p.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(p.done)
		_ = svc.Run(ctx)
	}()
	return p
}

// stop ends the hub and closes its store.
func (p *publisher) stop() {
	p.cancel()
	<-p.done
	p.st.Close()
}

// post stores a reading of sensor with value v.
func (p *publisher) post(t *testing.T, sensor string, v string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/sensors/"+sensor+"/readings", strings.NewReader(`{"value": `+v+`}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	p.mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("posting a reading: %d %s", rec.Code, rec.Body)
	}
}

// subscriber is a slogfeed with the aggregator and the subscriber.
type subscriber struct {
	st     *storage.Store
	agg    *aggregator.Service
	svc    *Service
	mux    *http.ServeMux
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	new map[uint64][]storage.Item // OnNewItems, by feed
}

// newSubscriber starts an aggregator with the subscriber at base.
func newSubscriberNode(t *testing.T, net *hosts, base, path string) *subscriber {
	t.Helper()
	s := &subscriber{st: openStore(t, path), done: make(chan struct{}), new: map[uint64][]storage.Item{}}
	agg, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:   s.st,
		Fetcher: fetcher.New(fetcher.Options{Transport: net}),
		OnNewItems: func(f storage.Feed, items []storage.Item) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.new[f.ID] = append(s.new[f.ID], items...)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := agg.Load(); err != nil {
		t.Fatal(err)
	}
	s.agg = agg
	svc, err := New(Options{Store: s.st, BaseURL: base, Client: net.client(), Aggregator: agg})
	if err != nil {
		t.Fatal(err)
	}
	s.svc = svc
	s.mux = http.NewServeMux()
	for _, rt := range svc.Routes() {
		s.mux.Handle(rt.Pattern, rt.Handler)
	}
	net.set(hostOf(base), s.mux)
	var ctx context.Context
	ctx, s.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		wg.Go(func() { _ = agg.Run(ctx) })
		wg.Go(func() { _ = svc.Run(ctx) })
		wg.Wait()
	}()
	return s
}

func (s *subscriber) stop() {
	s.cancel()
	<-s.done
	s.st.Close()
}

func (s *subscriber) items(t *testing.T, feed uint64) []storage.Item {
	t.Helper()
	items, err := s.st.Items(feed, storage.ItemQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	return u.Host
}

// callback is a fake subscriber's endpoint: it answers verifications as
// told by the path's last element ("echo", "wrong", "404") and records
// the distributions it gets, answering them with status.
type callback struct {
	mu       sync.Mutex
	verifies []url.Values
	pushes   []*http.Request
	bodies   [][]byte
	times    []time.Time
	status   int           // answer to pushes (0: 204)
	block    chan struct{} // when set, pushes wait for it
	failures int           // the first failures pushes answer 500
}

func (c *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mode := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		c.mu.Lock()
		c.verifies = append(c.verifies, q)
		c.mu.Unlock()
		switch mode {
		case "echo":
			_, _ = io.WriteString(w, q.Get("hub.challenge"))
		case "wrong":
			_, _ = io.WriteString(w, "not the challenge")
		default:
			http.NotFound(w, r)
		}
		return
	}
	c.mu.Lock()
	block := c.block
	c.mu.Unlock()
	if block != nil {
		<-block
	}
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pushes = append(c.pushes, r)
	c.bodies = append(c.bodies, body)
	c.times = append(c.times, time.Now())
	switch {
	case c.failures > 0:
		c.failures--
		w.WriteHeader(http.StatusInternalServerError)
	case c.status != 0:
		w.WriteHeader(c.status)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (c *callback) counts() (verifies, pushes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.verifies), len(c.pushes)
}

// subscribe sends a subscription request to the hub's handler and returns
// the status.
func subscribe(h http.Handler, form url.Values) int {
	req := httptest.NewRequest(http.MethodPost, HubPath, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func form(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// hmacHex is the hex HMAC of body under key with the named hash.
func hmacHex(name, key string, body []byte) string {
	h := map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha384": sha512.New384, "sha512": sha512.New}[name]
	m := hmac.New(h, []byte(key))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func testDB(t *testing.T) string { return filepath.Join(t.TempDir(), "slogfeed.db") }
