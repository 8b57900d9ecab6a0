package websub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
)

// hubKeyPrefix starts the hub's records in the plugin data.
const hubKeyPrefix = "hub/"

// topicRe is what a topic's path may be, below the public URL's path: one
// of slogfeed's sensor or pipe feed documents.
var topicRe = regexp.MustCompile(`^/(sensors|feeds)/([A-Za-z0-9._~-]{1,128})\.(rss|atom|json)$`)

// topicFormats are the document formats of every feed, by extension.
var topicFormats = []string{"rss", "atom", "json"}

// forwarded are the headers of a rendered document that a distribution
// carries, as a poll would get them (the phase is recomputed on sending).
var forwarded = []string{"Content-Type", "ETag", "Last-Modified", "Cache-Control", feedext.HeaderDesync, feedext.HeaderNext, feedext.HeaderMore}

// errGone: the subscriber answered 410 Gone; the subscription ends.
var errGone = errors.New("websub: the callback answered 410 Gone")

// Hub is slogfeed's WebSub hub for its own sensor and pipe feeds.
type Hub struct {
	st     Store
	log    *slog.Logger
	url    string // the hub's URL
	prefix string // the public URL's path ("" at the root)
	now    func() time.Time
	client *http.Client
	docs   http.Handler
	sem    chan struct{} // deliveries in flight

	// ctx ends when Run ends: it cancels verifications and deliveries.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // an expiry changed

	// persist serialises the writes of records with their map updates;
	// mu guards the maps (Notify takes only mu).
	persist sync.Mutex
	mu      sync.Mutex
	closed  bool
	subs    map[string]*hubSub // by key
	topics  map[string]*topic  // by topic path ("/sensors/x.rss")
	pending int
	stats   HubCounters
}

// HubCounters count the hub's work since it started.
type HubCounters struct {
	Verified   int64 `json:"verified"`   // intents confirmed
	Refused    int64 `json:"refused"`    // verifications that failed
	Delivered  int64 `json:"delivered"`  // documents delivered
	Failed     int64 `json:"failed"`     // delivery attempts that failed
	Abandoned  int64 `json:"abandoned"`  // documents given up after MaxAttempts
	Expired    int64 `json:"expired"`    // subscriptions whose lease ended
	Terminated int64 `json:"terminated"` // subscriptions ended by a 410 Gone
}

// topic is one document's subscribers and its distribution state.
type topic struct {
	subs    map[string]*hubSub
	dirty   bool // changed since the last rendering
	running bool // a distribution goroutine runs
}

// hubSub is one subscription with its delivery state.
type hubSub struct {
	key     string
	rec     hubRecord
	latest  *document // waiting to be delivered (the newest wins)
	running bool      // a delivery goroutine runs
	removed bool
}

// hubRecord is a subscription as stored.
type hubRecord struct {
	Topic    string    `json:"topic"` // as the subscriber gave it
	Path     string    `json:"path"`  // the document's path, e.g. /sensors/x.rss
	Callback string    `json:"callback"`
	Secret   string    `json:"secret,omitempty"`
	Lease    int64     `json:"lease_seconds"`
	Expires  time.Time `json:"expires"`
	Created  time.Time `json:"created"`
}

// document is a rendered topic.
type document struct {
	body     []byte
	header   http.Header
	rendered time.Time
	phase    time.Duration
	hasPhase bool
}

// request is a checked subscription request.
type request struct {
	mode, topic, path, callback, secret string
	lease                               time.Duration
}

func (r request) key() string { return hubKey(r.path, r.callback) }

// hubKey is the record key of the subscription of callback to path.
func hubKey(path, callback string) string {
	sum := sha256.Sum256([]byte(path + "\x00" + callback))
	return hubKeyPrefix + hex.EncodeToString(sum[:20])
}

func newHub(opt Options) (*Hub, error) {
	u, _ := url.Parse(opt.BaseURL)
	h := &Hub{
		st: opt.Store, log: opt.Logger.With("websub", "hub"),
		url: opt.BaseURL + HubPath, prefix: strings.TrimRight(u.Path, "/"),
		now: opt.Now, client: opt.Client, docs: opt.Documents,
		sem:  make(chan struct{}, maxDeliveries),
		wake: make(chan struct{}, 1),
		subs: map[string]*hubSub{}, topics: map[string]*topic{},
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if err := h.load(); err != nil {
		return nil, err
	}
	return h, nil
}

// URL is the hub's URL, for the documents' rel="hub" links.
func (h *Hub) URL() string { return h.url }

// load reads the stored subscriptions, dropping expired and unreadable
// ones.
func (h *Hub) load() error {
	now := h.now()
	var drop []string
	err := h.st.PluginList(Name, func(key string, value []byte) error {
		if !strings.HasPrefix(key, hubKeyPrefix) {
			return nil
		}
		var rec hubRecord
		if err := json.Unmarshal(value, &rec); err != nil || !topicRe.MatchString(rec.Path) || hubKey(rec.Path, rec.Callback) != key {
			h.log.Warn("dropping an unreadable subscription", "key", key, "err", err)
			drop = append(drop, key)
			return nil
		}
		if !now.Before(rec.Expires) {
			drop = append(drop, key)
			return nil
		}
		h.insertLocked(key, rec)
		return nil
	})
	if err != nil {
		return fmt.Errorf("websub: load hub subscriptions: %w", err)
	}
	for _, k := range drop {
		if err := h.st.PluginDelete(Name, k); err != nil {
			return fmt.Errorf("websub: %w", err)
		}
	}
	if n := len(h.subs); n > 0 {
		h.log.Info("hub subscriptions loaded", "subscriptions", n, "expired", len(drop))
	}
	return nil
}

// insertLocked adds or updates a subscription in the maps (h.mu held, or
// no concurrency yet).
func (h *Hub) insertLocked(key string, rec hubRecord) {
	if s := h.subs[key]; s != nil {
		s.rec = rec
		return
	}
	s := &hubSub{key: key, rec: rec}
	h.subs[key] = s
	t := h.topics[rec.Path]
	if t == nil {
		t = &topic{subs: map[string]*hubSub{}}
		h.topics[rec.Path] = t
	}
	t.subs[key] = s
}

// serveHub is POST /websub/hub: a subscription or unsubscription request.
// It answers 202 Accepted and verifies the intent in the background; 400
// names the bad parameter, 503 means the hub is full for now.
func (h *Hub) serveHub(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		httpError(w, http.StatusUnsupportedMediaType, "websub: the request must be application/x-www-form-urlencoded")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("websub: request body larger than %d bytes", maxForm))
			return
		}
		httpError(w, http.StatusBadRequest, "websub: unreadable form: "+sanitize.Clip(err.Error(), 200))
		return
	}
	req, err := h.parseRequest(r.PostForm)
	if err == nil && req.mode == "subscribe" {
		if _, rerr := h.render(r.Context(), req.path); rerr != nil {
			err = fmt.Errorf("%w: %s", ErrTopic, sanitize.Clip(rerr.Error(), 200))
		}
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := h.admit(req); err != nil {
		w.Header().Set("Retry-After", "60")
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	go h.verify(req)
	w.WriteHeader(http.StatusAccepted)
}

// parseRequest checks a subscription request's parameters.
func (h *Hub) parseRequest(form url.Values) (request, error) {
	req := request{
		mode:     form.Get("hub.mode"),
		topic:    strings.TrimSpace(form.Get("hub.topic")),
		callback: strings.TrimSpace(form.Get("hub.callback")),
		secret:   form.Get("hub.secret"),
		lease:    DefaultLease,
	}
	if req.mode != "subscribe" && req.mode != "unsubscribe" {
		return req, ErrMode
	}
	path, err := h.topicPath(req.topic)
	if err != nil {
		return req, err
	}
	req.path = path
	if _, ok := checkURL(req.callback); !ok {
		return req, ErrCallback
	}
	if len(req.secret) > MaxSecret {
		return req, ErrSecret
	}
	if v := strings.TrimSpace(form.Get("hub.lease_seconds")); v != "" && req.mode == "subscribe" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return req, ErrLease
		}
		req.lease = min(max(time.Duration(min(n, int64(MaxLease/time.Second)))*time.Second, MinLease), MaxLease)
	}
	return req, nil
}

// topicPath returns the document path of a topic URL, or ErrTopic.
func (h *Hub) topicPath(topic string) (string, error) {
	u, ok := checkURL(topic)
	if !ok || u.RawQuery != "" || u.ForceQuery {
		return "", fmt.Errorf("%w: want %s/sensors/{sensor}.rss or %s/feeds/{slug}.rss (.atom, .json), without a query", ErrTopic, h.base(), h.base())
	}
	rest, ok := strings.CutPrefix(u.Path, h.prefix)
	if !ok || !topicRe.MatchString(rest) {
		return "", fmt.Errorf("%w: want %s/sensors/{sensor}.rss or %s/feeds/{slug}.rss (.atom, .json)", ErrTopic, h.base(), h.base())
	}
	return rest, nil
}

func (h *Hub) base() string { return strings.TrimSuffix(h.url, HubPath) }

// admit counts a verification in, or refuses it when the hub is full.
func (h *Hub) admit(req request) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("%w: shutting down", ErrFull)
	}
	if h.pending >= MaxPending {
		return fmt.Errorf("%w: %d verifications in progress", ErrFull, h.pending)
	}
	if req.mode == "subscribe" && h.subs[req.key()] == nil {
		if err := h.roomLocked(req.path); err != nil {
			return err
		}
	}
	h.pending++
	h.wg.Add(1)
	return nil
}

// roomLocked reports ErrFull when no subscription to path can be added.
func (h *Hub) roomLocked(path string) error {
	if len(h.subs) >= MaxSubscriptions {
		return fmt.Errorf("%w: %d subscriptions", ErrFull, len(h.subs))
	}
	if t := h.topics[path]; t != nil && len(t.subs) >= MaxPerTopic {
		return fmt.Errorf("%w: %d subscriptions to this topic", ErrFull, len(t.subs))
	}
	return nil
}

// verify confirms the intent of an admitted request with its callback and
// applies it.
func (h *Hub) verify(req request) {
	defer h.wg.Done()
	defer func() {
		h.mu.Lock()
		h.pending--
		h.mu.Unlock()
	}()
	log := h.log.With("mode", req.mode, "topic", req.path, "callback", redact(req.callback))
	if err := h.challenge(req); err != nil {
		h.count(func(c *HubCounters) { c.Refused++ })
		log.Info("intent not verified", "err", err)
		return
	}
	h.count(func(c *HubCounters) { c.Verified++ })
	switch req.mode {
	case "subscribe":
		if err := h.activate(req); err != nil {
			log.Warn("subscription not kept", "err", err)
			return
		}
		log.Info("subscribed", "lease", req.lease)
	case "unsubscribe":
		if err := h.remove(req.key()); err != nil {
			log.Warn("unsubscription not stored", "err", err)
			return
		}
		log.Info("unsubscribed")
	}
}

// challenge sends the verification GET and checks that the callback
// echoes the challenge with a 2xx.
func (h *Hub) challenge(req request) error {
	ch := randomHex(16)
	u, err := url.Parse(req.callback)
	if err != nil {
		return err
	}
	q := url.Values{}
	q.Set("hub.mode", req.mode)
	q.Set("hub.topic", req.topic)
	q.Set("hub.challenge", ch)
	if req.mode == "subscribe" {
		q.Set("hub.lease_seconds", strconv.FormatInt(int64(req.lease/time.Second), 10))
	}
	if u.RawQuery != "" {
		u.RawQuery += "&" + q.Encode() // the callback's own query is kept as it is
	} else {
		u.RawQuery = q.Encode()
	}
	ctx, cancel := context.WithTimeout(h.ctx, requestTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	hr.Header.Set("User-Agent", "slogfeed-websub-hub")
	resp, err := h.client.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxChallengeReply))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the callback answered %d", resp.StatusCode)
	}
	if string(body) != ch {
		return errors.New("the callback did not echo hub.challenge")
	}
	return nil
}

// activate stores a verified subscription (or renews it).
func (h *Hub) activate(req request) error {
	now := h.now()
	rec := hubRecord{
		Topic: req.topic, Path: req.path, Callback: req.callback, Secret: req.secret,
		Lease: int64(req.lease / time.Second), Expires: now.Add(req.lease), Created: now,
	}
	key := req.key()
	h.persist.Lock()
	defer h.persist.Unlock()
	h.mu.Lock()
	if old := h.subs[key]; old != nil {
		rec.Created = old.rec.Created
	} else if err := h.roomLocked(req.path); err != nil {
		h.mu.Unlock()
		return err
	}
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return errors.New("shutting down")
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := h.st.PluginPut(Name, key, raw); err != nil {
		return err
	}
	h.mu.Lock()
	h.insertLocked(key, rec)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return nil
}

// remove ends a subscription.
func (h *Hub) remove(key string) error {
	h.persist.Lock()
	defer h.persist.Unlock()
	if err := h.st.PluginDelete(Name, key); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[key]
	if s == nil {
		return nil
	}
	s.removed = true
	delete(h.subs, key)
	if t := h.topics[s.rec.Path]; t != nil {
		delete(t.subs, key)
		if len(t.subs) == 0 && !t.running {
			delete(h.topics, s.rec.Path)
		}
	}
	return nil
}

// Notify distributes the new state of feed f when it is a sensor or pipe
// feed with subscribers. It never blocks: rendering and delivering happen
// on goroutines of their own, and a burst of changes is coalesced (one
// delivery in flight per subscription; the newest document wins).
func (h *Hub) Notify(f storage.Feed) {
	var dir string
	switch f.Kind {
	case storage.KindSensor:
		dir = "/sensors/"
	case storage.KindPipe:
		dir = "/feeds/"
	default:
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	for _, ext := range topicFormats {
		path := dir + f.Slug + "." + ext
		t := h.topics[path]
		if t == nil || len(t.subs) == 0 {
			continue
		}
		t.dirty = true
		if !t.running {
			t.running = true
			h.wg.Add(1)
			go h.distribute(path, t)
		}
	}
}

// distribute renders topic path while it keeps changing and hands each
// rendering to its subscriptions.
func (h *Hub) distribute(path string, t *topic) {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		if !t.dirty || h.closed {
			t.running = false
			if len(t.subs) == 0 && h.topics[path] == t {
				delete(h.topics, path)
			}
			h.mu.Unlock()
			return
		}
		t.dirty = false
		h.mu.Unlock()
		doc, err := h.render(h.ctx, path)
		if err != nil {
			if h.ctx.Err() == nil {
				h.log.Warn("cannot render topic", "topic", path, "err", err)
			}
			continue
		}
		now := h.now()
		h.mu.Lock()
		for _, s := range t.subs {
			if !now.Before(s.rec.Expires) || s.removed || h.closed {
				continue // the sweeper drops it
			}
			s.latest = doc
			if !s.running {
				s.running = true
				h.wg.Add(1)
				go h.deliverLoop(s)
			}
		}
		h.mu.Unlock()
	}
}

// deliverLoop delivers s's newest document until none is waiting,
// retrying failures with backoff.
func (h *Hub) deliverLoop(s *hubSub) {
	defer h.wg.Done()
	attempt := 0
	for {
		h.mu.Lock()
		doc := s.latest
		if doc == nil || s.removed || h.closed {
			s.running = false
			h.mu.Unlock()
			return
		}
		s.latest = nil
		rec := s.rec
		h.mu.Unlock()
		err := h.deliver(rec, doc)
		log := h.log.With("topic", rec.Path, "callback", redact(rec.Callback))
		switch {
		case err == nil:
			attempt = 0
			h.count(func(c *HubCounters) { c.Delivered++ })
			continue
		case errors.Is(err, errGone):
			h.count(func(c *HubCounters) { c.Terminated++ })
			log.Info("subscriber gone: subscription ended")
			if err := h.remove(s.key); err != nil {
				log.Warn("cannot remove subscription", "err", err)
			}
			continue
		case h.ctx.Err() != nil:
			continue
		}
		attempt++
		h.count(func(c *HubCounters) { c.Failed++ })
		if attempt >= MaxAttempts {
			h.count(func(c *HubCounters) { c.Abandoned++ })
			log.Warn("delivery abandoned", "attempts", attempt, "err", err)
			attempt = 0
			continue
		}
		h.mu.Lock()
		if s.latest == nil {
			s.latest = doc // retried unless newer content came meanwhile
		}
		h.mu.Unlock()
		wait := backoff(attempt, RetryBase, RetryMax)
		log.Debug("delivery failed", "attempt", attempt, "retry_in", wait, "err", err)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-h.ctx.Done():
			timer.Stop()
		}
	}
}

// deliver POSTs doc to rec's callback.
func (h *Hub) deliver(rec hubRecord, doc *document) error {
	select {
	case h.sem <- struct{}{}:
	case <-h.ctx.Done():
		return h.ctx.Err()
	}
	defer func() { <-h.sem }()
	ctx, cancel := context.WithTimeout(h.ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.Callback, bytes.NewReader(doc.body))
	if err != nil {
		return err
	}
	for k, vs := range doc.header {
		req.Header[k] = slices.Clone(vs)
	}
	if doc.hasPhase {
		// The phase is the age of the newest item when the subscriber
		// receives the document: its age at rendering plus the time since.
		age := doc.phase + max(h.now().Sub(doc.rendered), 0)
		req.Header.Set(feedext.HeaderPhase, strconv.FormatFloat(age.Seconds(), 'f', 3, 64))
	}
	req.Header.Add("Link", "<"+h.url+`>; rel="hub"`)
	req.Header.Add("Link", "<"+rec.Topic+`>; rel="self"`)
	req.Header.Set("User-Agent", "slogfeed-websub-hub")
	if rec.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(rec.Secret, doc.body))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReplyBody))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusGone:
		return errGone
	case resp.StatusCode/100 == 2:
		return nil
	}
	return fmt.Errorf("the callback answered %d", resp.StatusCode)
}

// render gets the topic's document from the feed handlers in process:
// what a poll gets.
func (h *Hub) render(ctx context.Context, path string) (*document, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	bw := &bufferWriter{header: http.Header{}}
	h.docs.ServeHTTP(bw, req)
	if bw.status == 0 {
		bw.status = http.StatusOK
	}
	if bw.status != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d", path, bw.status)
	}
	if bw.overflow {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxDocument)
	}
	doc := &document{body: bw.buf.Bytes(), header: http.Header{}, rendered: h.now()}
	for _, k := range forwarded {
		if v := bw.header.Values(k); len(v) > 0 {
			doc.header[http.CanonicalHeaderKey(k)] = slices.Clone(v)
		}
	}
	if v := bw.header.Get(feedext.HeaderPhase); v != "" {
		if sec, err := strconv.ParseFloat(v, 64); err == nil && sec >= 0 && sec < 1e9 {
			doc.phase, doc.hasPhase = time.Duration(sec*float64(time.Second)), true
		}
	}
	return doc, nil
}

// bufferWriter is the http.ResponseWriter of an in-process rendering.
type bufferWriter struct {
	header   http.Header
	status   int
	buf      bytes.Buffer
	overflow bool
}

func (b *bufferWriter) Header() http.Header { return b.header }

func (b *bufferWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	if b.buf.Len()+len(p) > maxDocument {
		b.overflow = true
		return 0, errors.New("document too large")
	}
	return b.buf.Write(p)
}

// run expires subscriptions until ctx ends, then stops every delivery.
func (h *Hub) run(ctx context.Context) {
	for {
		next := h.sweep()
		wait := time.Hour
		if !next.IsZero() {
			wait = min(max(next.Sub(h.now()), time.Second), time.Hour)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			h.mu.Lock()
			h.closed = true
			h.mu.Unlock()
			h.cancel()
			h.wg.Wait()
			return
		case <-timer.C:
		case <-h.wake:
			timer.Stop()
		}
	}
}

// sweep drops the expired subscriptions and returns the next expiry.
func (h *Hub) sweep() time.Time {
	now := h.now()
	var expired []string
	var next time.Time
	h.mu.Lock()
	for k, s := range h.subs {
		switch {
		case !now.Before(s.rec.Expires):
			expired = append(expired, k)
		case next.IsZero() || s.rec.Expires.Before(next):
			next = s.rec.Expires
		}
	}
	h.mu.Unlock()
	for _, k := range expired {
		if err := h.remove(k); err != nil {
			h.log.Warn("cannot drop an expired subscription", "err", err)
			continue
		}
		h.count(func(c *HubCounters) { c.Expired++ })
	}
	if len(expired) > 0 {
		h.log.Info("expired subscriptions dropped", "count", len(expired))
	}
	return next
}

func (h *Hub) count(fn func(*HubCounters)) {
	h.mu.Lock()
	fn(&h.stats)
	h.mu.Unlock()
}

// HubStatus describes the hub.
type HubStatus struct {
	URL           string        `json:"url"`
	Subscriptions int           `json:"subscriptions"`
	Pending       int           `json:"pending_verifications"`
	Topics        []TopicStatus `json:"topics"`
	Counters      HubCounters   `json:"counters"`
}

// TopicStatus is one topic's subscriptions.
type TopicStatus struct {
	Topic         string    `json:"topic"`
	Subscriptions int       `json:"subscriptions"`
	NextExpiry    time.Time `json:"next_expiry"`
}

// maxStatusTopics bounds the topics Status lists.
const maxStatusTopics = 1000

// Status returns the hub's state.
func (h *Hub) Status() HubStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := HubStatus{URL: h.url, Subscriptions: len(h.subs), Pending: h.pending, Counters: h.stats, Topics: []TopicStatus{}}
	for p, t := range h.topics {
		if len(t.subs) == 0 {
			continue
		}
		ts := TopicStatus{Topic: h.base() + p, Subscriptions: len(t.subs)}
		for _, s := range t.subs {
			if ts.NextExpiry.IsZero() || s.rec.Expires.Before(ts.NextExpiry) {
				ts.NextExpiry = s.rec.Expires
			}
		}
		st.Topics = append(st.Topics, ts)
	}
	slices.SortFunc(st.Topics, func(a, b TopicStatus) int { return strings.Compare(a.Topic, b.Topic) })
	if len(st.Topics) > maxStatusTopics {
		st.Topics = st.Topics[:maxStatusTopics]
	}
	return st
}

// redact shows a callback without its path and query (which carry the
// subscriber's secrets).
func redact(callback string) string {
	u, err := url.Parse(callback)
	if err != nil {
		return "?"
	}
	return u.Scheme + "://" + u.Host + "/…"
}
