package webhook

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/web"
)

// Name is the service's name and its namespace in the store's plugin
// data: "hook/ID" holds a hook, "delivery/HOOK/SEQ" a pending delivery
// (SEQ, zero-padded, numbers a hook's deliveries in order).
const Name = "webhook"

// Limits and the retry policy.
const (
	// MaxHooks bounds the hooks of one slogfeed.
	MaxHooks = 1000
	// MaxPending bounds the pending deliveries of one hook (default of
	// Options.MaxPending); a new delivery drops the oldest beyond it.
	MaxPending = 100
	// MaxAttempts is how often a delivery is tried before it is given
	// up.
	MaxAttempts = 8
	// MinBackoff is the wait after a first failed attempt; it doubles
	// with each further failure up to MaxBackoff. The wait is drawn
	// between half of it and all of it (jitter), and is at least what
	// the receiver's Retry-After asks (capped at MaxBackoff).
	MinBackoff = 10 * time.Second
	MaxBackoff = time.Hour
	// MaxDeliveryItems and MaxDeliveryBytes bound one delivery; more new
	// items make several deliveries (an item larger than the byte bound
	// goes alone).
	MaxDeliveryItems = 100
	MaxDeliveryBytes = 1 << 20
	// RequestTimeout bounds one attempt.
	RequestTimeout = 30 * time.Second
	// MaxURLBytes bounds a hook's URL; a secret has MinSecretBytes to
	// MaxSecretBytes bytes.
	MaxURLBytes    = 2048
	MinSecretBytes = 16
	MaxSecretBytes = 256

	maxRequestBody = 16 << 10 // a POST /api/v1/webhooks body
	maxConcurrent  = 4        // hooks delivering at once
	snippetBytes   = 200      // of a failed answer's body, in the error
)

// Errors of the API.
var (
	// ErrInvalid means a hook's feed, URL or secret is not acceptable.
	ErrInvalid = errors.New("invalid webhook")
	// ErrNotFound means no hook has the given id.
	ErrNotFound = errors.New("webhook not found")
	// ErrTooMany means there are MaxHooks hooks already.
	ErrTooMany = errors.New("too many webhooks")
	// ErrExists means a hook of the same feed, URL and secret exists: a
	// second would deliver every item twice.
	ErrExists = errors.New("webhook exists")
)

// Hook is a subscription as the API shows it (never with its secret).
type Hook struct {
	ID string `json:"id"`
	// Feed is the feed whose new items are sent: "pipe/SLUG",
	// "sensor/NAME" or "feed/ID".
	Feed    string    `json:"feed"`
	URL     string    `json:"url"`
	Created time.Time `json:"created"`
	Status
}

// Status is how a hook's deliveries go.
type Status struct {
	// Pending is how many deliveries wait (the first may be between
	// attempts).
	Pending int `json:"pending"`
	// Delivered counts the deliveries completed, Failed those given up,
	// Dropped those dropped from a full queue.
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	Dropped   int64 `json:"dropped"`
	// LastStatus is the HTTP status of the last attempt (0: no answer),
	// LastError what went wrong with the last failed attempt or
	// delivery ("" after a success), Attempts the attempts of the
	// delivery last tried.
	LastStatus    int       `json:"last_status,omitempty"`
	LastError     string    `json:"last_error,omitempty"`
	Attempts      int       `json:"attempts,omitempty"`
	LastAttempt   time.Time `json:"last_attempt,omitzero"`
	LastDelivered time.Time `json:"last_delivered,omitzero"`
	// NextAttempt is when the first pending delivery is tried next.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// hookRecord is a hook as stored.
type hookRecord struct {
	Hook   Hook   `json:"hook"`
	Secret string `json:"secret"`
}

// delivery is one POST to make, as stored.
type delivery struct {
	ID         string    `json:"id"`
	Body       []byte    `json:"body"`
	Items      int       `json:"items"`
	Created    time.Time `json:"created"`
	Attempts   int       `json:"attempts"`
	Next       time.Time `json:"next"`
	LastStatus int       `json:"last_status,omitempty"`
	LastError  string    `json:"last_error,omitempty"`

	key string // its key in the store: "delivery/HOOK/SEQ"
	seq uint64
}

// hook is a hook with its queue, in memory.
type hook struct {
	rec   hookRecord
	ref   transform.Ref
	queue []*delivery // oldest first
	busy  bool        // its first delivery is being attempted
	seq   uint64      // the number of its next delivery (keys sort by it)
	// Notify numbers deliveries under s.mu, stores them without it and
	// queues them under it again, in number order although concurrent
	// Notify calls store theirs in any order: queued is the number of the
	// next delivery to queue, stored holds the deliveries numbered from
	// queued on that are stored (nil: whose storing failed) and wait for
	// an earlier one.
	queued uint64
	stored map[uint64]*delivery
}

// Options configure a Service.
type Options struct {
	// Store keeps the hooks and pending deliveries. Required.
	Store Store
	// Logger (default: discarded).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Client makes the deliveries (default: a client with the fetcher's
	// SSRF guard and no allow-list). Redirects are never followed.
	Client *http.Client
	// Jitter returns a number in [0, 1) that places each backoff
	// between half and all of its span (default math/rand/v2.Float64).
	Jitter func() float64
	// MaxPending bounds each hook's queue (default MaxPending).
	MaxPending int
}

// Service is the webhook sink (a plugins.Service).
type Service struct {
	opt  Options
	st   Store
	log  *slog.Logger
	wake chan struct{}

	mu    sync.Mutex
	hooks map[string]*hook
}

// New builds the service and loads the hooks and pending deliveries of
// opt.Store.
func New(opt Options) (*Service, error) {
	if opt.Store == nil {
		return nil, errors.New("webhook: a store is required")
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Client == nil {
		opt.Client = fetcher.New(fetcher.Options{}).Client()
	}
	c := *opt.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opt.Client = &c
	if opt.Jitter == nil {
		opt.Jitter = mrand.Float64
	}
	if opt.MaxPending <= 0 {
		opt.MaxPending = MaxPending
	}
	s := &Service{opt: opt, st: opt.Store, log: opt.Logger, wake: make(chan struct{}, 1), hooks: map[string]*hook{}}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

func init() {
	plugins.RegisterService(Name, func(env plugins.Env) (plugins.Service, error) {
		return New(Options{Store: env.Store, Logger: env.Logger, Now: env.Now, Client: env.Client})
	})
}

// load reads the stored hooks and their pending deliveries; deliveries of
// hooks that are gone are deleted.
func (s *Service) load() error {
	type stored struct {
		hook string
		d    *delivery
	}
	var ds []stored
	err := s.st.PluginList(Name, func(key string, value []byte) error {
		switch {
		case strings.HasPrefix(key, "hook/"):
			var rec hookRecord
			if err := json.Unmarshal(value, &rec); err != nil {
				s.log.Warn("webhook: unreadable hook, skipped", "key", key, "err", err)
				return nil
			}
			ref, err := parseFeed(rec.Hook.Feed)
			if err != nil {
				s.log.Warn("webhook: hook with a bad feed, skipped", "key", key, "err", err)
				return nil
			}
			s.hooks[rec.Hook.ID] = &hook{rec: rec, ref: ref}
		case strings.HasPrefix(key, "delivery/"):
			id, num, _ := strings.Cut(strings.TrimPrefix(key, "delivery/"), "/")
			d := &delivery{key: key}
			seq, err := strconv.ParseUint(num, 10, 64)
			if err == nil {
				err = json.Unmarshal(value, d)
			}
			if err != nil {
				s.log.Warn("webhook: unreadable delivery, dropped", "key", key, "err", err)
				d.ID = "" // deleted below
			}
			d.seq = seq
			ds = append(ds, stored{id, d})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("webhook: loading: %w", err)
	}
	var gone []storage.PluginOp
	for _, sd := range ds {
		h := s.hooks[sd.hook]
		if h == nil || sd.d.ID == "" {
			gone = append(gone, storage.PluginOp{Key: sd.d.key, Delete: true})
			continue
		}
		h.queue = append(h.queue, sd.d)
		h.seq = max(h.seq, sd.d.seq+1)
		h.queued = h.seq
	}
	if err := s.st.PluginApply(Name, gone); err != nil {
		return fmt.Errorf("webhook: loading: %w", err)
	}
	return nil
}

// parseFeed reads a hook's feed reference.
func parseFeed(s string) (transform.Ref, error) {
	ref, err := transform.ParseRef(s)
	if err != nil {
		return ref, err
	}
	if ref.Kind == "url" {
		return ref, fmt.Errorf("%q: name the feed as feed/ID (see GET /api/v1/feeds), sensor/NAME or pipe/SLUG", sanitize.Clip(s, 80))
	}
	return ref, nil
}

// matches reports whether ref names feed f.
func matches(ref transform.Ref, f storage.Feed) bool {
	switch ref.Kind {
	case "feed":
		return strconv.FormatUint(f.ID, 10) == ref.Key
	case "sensor":
		return f.Kind == storage.KindSensor && f.Slug == ref.Key
	case "pipe":
		return f.Kind == storage.KindPipe && f.Slug == ref.Key
	}
	return false
}

// newID returns n random bytes in hex.
func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Create adds a hook. Errors wrap ErrInvalid, ErrTooMany, or ErrExists
// when a hook of the same feed, URL and secret exists (one of another
// secret may: a receiver changing its secret adds the new hook, then
// deletes the old one).
func (s *Service) Create(feed, rawURL, secret string) (Hook, error) {
	ref, err := parseFeed(feed)
	if err != nil {
		return Hook{}, fmt.Errorf("%w: feed: %v", ErrInvalid, err)
	}
	u, err := checkURL(rawURL)
	if err != nil {
		return Hook{}, err
	}
	if n := len(secret); n < MinSecretBytes || n > MaxSecretBytes {
		return Hook{}, fmt.Errorf("%w: secret: %d bytes, want %d to %d (a long random string)", ErrInvalid, n, MinSecretBytes, MaxSecretBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.hooks) >= MaxHooks {
		return Hook{}, fmt.Errorf("%w: there are %d already", ErrTooMany, MaxHooks)
	}
	for id, o := range s.hooks {
		if o.ref == ref && o.rec.Hook.URL == u && subtle.ConstantTimeCompare([]byte(o.rec.Secret), []byte(secret)) == 1 {
			return Hook{}, fmt.Errorf("%w: %s sends %s to %s with this secret already", ErrExists, id, ref, u)
		}
	}
	h := &hook{ref: ref, rec: hookRecord{Secret: secret, Hook: Hook{ID: newID(8), Feed: ref.String(), URL: u, Created: s.opt.Now().UTC()}}}
	if err := s.saveHook(h); err != nil {
		return Hook{}, err
	}
	s.hooks[h.rec.Hook.ID] = h
	return h.view(), nil
}

// checkURL checks a hook's URL: absolute http or https, no credentials,
// at most MaxURLBytes.
func checkURL(raw string) (string, error) {
	if len(raw) > MaxURLBytes {
		return "", fmt.Errorf("%w: url: %d bytes, at most %d", ErrInvalid, len(raw), MaxURLBytes)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: url: %v", ErrInvalid, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%w: url: want an http or https URL, not %q", ErrInvalid, sanitize.Clip(raw, 80))
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%w: url: no host in %q", ErrInvalid, sanitize.Clip(raw, 80))
	case u.User != nil:
		return "", fmt.Errorf("%w: url: no credentials in the URL (the receiver checks the signature)", ErrInvalid)
	case u.Fragment != "":
		return "", fmt.Errorf("%w: url: no fragment (#…) in a webhook URL", ErrInvalid)
	}
	return u.String(), nil
}

// Delete removes hook id and its pending deliveries, in one write. A
// Notify storing deliveries for it meanwhile deletes them once stored.
func (s *Service) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hooks[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, sanitize.Clip(id, 40))
	}
	ops := make([]storage.PluginOp, 0, len(h.queue)+len(h.stored)+1)
	for _, d := range h.queue {
		ops = append(ops, storage.PluginOp{Key: d.key, Delete: true})
	}
	for _, d := range h.stored {
		if d != nil {
			ops = append(ops, storage.PluginOp{Key: d.key, Delete: true})
		}
	}
	ops = append(ops, storage.PluginOp{Key: hookKey(id), Delete: true})
	if err := s.st.PluginApply(Name, ops); err != nil {
		return err
	}
	delete(s.hooks, id)
	return nil
}

// Hooks lists the hooks, oldest first.
func (s *Service) Hooks() []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Hook, 0, len(s.hooks))
	for _, h := range s.hooks {
		out = append(out, h.view())
	}
	slices.SortFunc(out, func(a, b Hook) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Get returns hook id.
func (s *Service) Get(id string) (Hook, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hooks[id]
	if !ok {
		return Hook{}, fmt.Errorf("%w: %q", ErrNotFound, sanitize.Clip(id, 40))
	}
	return h.view(), nil
}

// view is h as the API shows it. The caller holds s.mu.
func (h *hook) view() Hook {
	v := h.rec.Hook
	v.Pending = len(h.queue)
	v.NextAttempt = time.Time{}
	if len(h.queue) > 0 {
		v.NextAttempt = h.queue[0].Next
	}
	return v
}

// saveHook stores h. The caller holds s.mu.
func (s *Service) saveHook(h *hook) error {
	b, err := json.Marshal(h.rec)
	if err != nil {
		return err
	}
	return s.st.PluginPut(Name, hookKey(h.rec.Hook.ID), b)
}

// hookKey is the key of hook id's record.
func hookKey(id string) string { return "hook/" + id }

// deliveryKey is the key of hook id's delivery number seq.
func deliveryKey(id string, seq uint64) string { return fmt.Sprintf("delivery/%s/%020d", id, seq) }

// saveDelivery stores d. The caller holds s.mu.
func (s *Service) saveDelivery(d *delivery) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return s.st.PluginPut(Name, d.key, b)
}

// feedInfo is the "feed" of a delivery.
type feedInfo struct {
	// Ref is how hooks name the feed: "pipe/SLUG", "sensor/NAME" or
	// "feed/ID".
	Ref   string       `json:"ref"`
	ID    uint64       `json:"id"`
	Kind  storage.Kind `json:"kind"`
	Slug  string       `json:"slug,omitempty"`
	URL   string       `json:"url,omitempty"`
	Title string       `json:"title,omitempty"`
	Site  string       `json:"site,omitempty"`
}

// bodies makes the delivery bodies of items, at most MaxDeliveryItems
// and (but for a single large item) MaxDeliveryBytes each.
func bodies(f storage.Feed, items []storage.Item) ([][]byte, []int, error) {
	fi := feedInfo{ID: f.ID, Kind: f.Kind, Slug: f.Slug, URL: sanitize.RedactURL(f.URL), Title: f.Title, Site: f.Site, Ref: "feed/" + strconv.FormatUint(f.ID, 10)}
	if f.Kind == storage.KindPipe || f.Kind == storage.KindSensor {
		fi.Ref = map[storage.Kind]string{storage.KindPipe: "pipe/", storage.KindSensor: "sensor/"}[f.Kind] + f.Slug
	}
	head, err := json.Marshal(fi)
	if err != nil {
		return nil, nil, err
	}
	var out [][]byte
	var counts []int
	var cur []json.RawMessage
	size := 0
	flush := func() {
		if len(cur) == 0 {
			return
		}
		var b bytes.Buffer
		b.WriteString(`{"feed":`)
		b.Write(head)
		b.WriteString(`,"items":[`)
		for i, it := range cur {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(it)
		}
		b.WriteString("]}")
		out = append(out, b.Bytes())
		counts = append(counts, len(cur))
		cur, size = nil, 0
	}
	for _, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			return nil, nil, fmt.Errorf("item %q: %w", sanitize.Clip(it.ID, 40), err)
		}
		if len(cur) == MaxDeliveryItems || (len(cur) > 0 && size+len(raw) > MaxDeliveryBytes) {
			flush()
		}
		cur = append(cur, raw)
		size += len(raw) + 1
	}
	flush()
	return out, counts, nil
}

// Notify implements plugins.Service: a feed a hook names gained items,
// which are queued (and stored) for delivery.
//
// The deliveries, one per hook and body, are numbered under s.mu and
// stored without it, all in one write (storage.PluginApply), so that
// the API and the delivery loop do not wait for the store. They are
// queued once stored, each hook's in number order (see hook.stored). A
// failed write is logged and queues nothing; a hook deleted meanwhile
// has the deliveries stored for it deleted again (what a failure leaves
// of them, New deletes: their hook is gone). Full queues are trimmed in
// a second write, for all of them at once.
func (s *Service) Notify(f storage.Feed, items []storage.Item) {
	if len(items) == 0 {
		return
	}
	s.mu.Lock()
	var targets []*hook
	for _, h := range s.hooks {
		if matches(h.ref, f) {
			targets = append(targets, h)
		}
	}
	s.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	bs, counts, err := bodies(f, items)
	if err != nil {
		s.log.Error("webhook: encoding a delivery", "feed", f.ID, "err", err)
		return
	}
	now := s.opt.Now().UTC()
	ids := make([]string, len(targets)*len(bs))
	for i := range ids {
		ids[i] = newID(12)
	}

	type batch struct {
		h  *hook
		ds []*delivery
	}
	var batches []batch
	s.mu.Lock()
	for _, h := range targets {
		id := h.rec.Hook.ID
		if s.hooks[id] != h {
			continue // deleted meanwhile
		}
		ds := make([]*delivery, len(bs))
		for i, b := range bs {
			d := &delivery{ID: ids[0], Body: b, Items: counts[i], Created: now, Next: now, seq: h.seq}
			d.key = deliveryKey(id, d.seq)
			ids = ids[1:]
			h.seq++
			ds[i] = d
		}
		batches = append(batches, batch{h, ds})
	}
	s.mu.Unlock()

	// The deliveries are not queued yet: no one else sees them.
	ops := make([]storage.PluginOp, 0, len(batches)*len(bs))
	for _, b := range batches {
		for _, d := range b.ds {
			v, merr := json.Marshal(d)
			if merr != nil && err == nil {
				err = fmt.Errorf("encoding delivery %s: %w", d.ID, merr)
			}
			ops = append(ops, storage.PluginOp{Key: d.key, Value: v})
		}
	}
	if err == nil {
		err = s.st.PluginApply(Name, ops)
	}
	if err != nil {
		s.log.Error("webhook: storing deliveries, none queued", "feed", f.ID, "deliveries", len(ops), "err", err)
	}

	var orphans, drops []storage.PluginOp
	if err != nil {
		// A store that writes a batch one record at a time (JetStream)
		// may have kept some: none is queued, so none may be sent after
		// a restart either, out of order.
		for _, op := range ops {
			orphans = append(orphans, storage.PluginOp{Key: op.Key, Delete: true})
		}
	}
	var dropped []func()
	s.mu.Lock()
	for _, b := range batches {
		h := b.h
		if s.hooks[h.rec.Hook.ID] != h {
			for _, d := range b.ds {
				orphans = append(orphans, storage.PluginOp{Key: d.key, Delete: true})
			}
			continue
		}
		if h.stored == nil {
			h.stored = map[uint64]*delivery{}
		}
		for _, d := range b.ds {
			if err != nil {
				h.stored[d.seq] = nil // skipped
			} else {
				h.stored[d.seq] = d
			}
		}
		s.release(h)
		if ops, done := s.trim(h); len(ops) > 0 {
			drops = append(drops, ops...)
			dropped = append(dropped, done)
		}
	}
	if len(drops) > 0 {
		// Under s.mu, as every write of a hook's record, so that the
		// records are stored in the order they change. A queue
		// overflows only while its receiver fails.
		if err := s.st.PluginApply(Name, drops); err != nil {
			s.log.Error("webhook: dropping deliveries of full queues", "feed", f.ID, "err", err)
		} else {
			for _, done := range dropped {
				done()
			}
		}
	}
	s.mu.Unlock()
	if len(orphans) > 0 {
		if err := s.st.PluginApply(Name, orphans); err != nil {
			s.log.Warn("webhook: deleting stored deliveries that were not queued (of a hook deleted meanwhile, or of a failed write)", "err", err)
		}
	}
	// Even after a failed write: it may have let other calls' deliveries
	// be queued.
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// release queues h's stored deliveries that no earlier one still waits
// for. The caller holds s.mu.
func (s *Service) release(h *hook) {
	for {
		d, ok := h.stored[h.queued]
		if !ok {
			break
		}
		delete(h.stored, h.queued)
		h.queued++
		if d != nil {
			h.queue = append(h.queue, d)
		}
	}
}

// trim returns the writes that drop h's oldest pending deliveries
// beyond MaxPending (never the one being attempted) and store h's counts
// (none when the queue has room), and what to do once they are made.
// The caller holds s.mu until then.
func (s *Service) trim(h *hook) ([]storage.PluginOp, func()) {
	over := len(h.queue) - s.opt.MaxPending
	if over <= 0 {
		return nil, nil
	}
	first := 0
	if h.busy {
		first = 1 // MaxPending ≥ 1: first+over ≤ len(h.queue)
	}
	dropped := h.queue[first : first+over]
	rec := h.rec
	last := dropped[len(dropped)-1]
	rec.Hook.Dropped += int64(over)
	rec.Hook.LastError = fmt.Sprintf("queue full (%d pending): dropped the oldest delivery %s (%d items)", s.opt.MaxPending, last.ID, last.Items)
	v, err := json.Marshal(rec)
	if err != nil {
		s.log.Error("webhook: encoding a hook", "hook", rec.Hook.ID, "err", err)
		return nil, nil
	}
	ops := make([]storage.PluginOp, 0, over+1)
	for _, d := range dropped {
		ops = append(ops, storage.PluginOp{Key: d.key, Delete: true})
	}
	ops = append(ops, storage.PluginOp{Key: hookKey(rec.Hook.ID), Value: v})
	return ops, func() {
		h.rec = rec
		h.queue = slices.Delete(h.queue, first, first+over)
	}
}

// Routes implements plugins.Service. They are not public: changes need
// the token like the rest of the API.
func (s *Service) Routes() []web.Route {
	return []web.Route{
		{Pattern: "POST /api/v1/webhooks", Handler: http.HandlerFunc(s.handleCreate)},
		{Pattern: "GET /api/v1/webhooks", Handler: http.HandlerFunc(s.handleList)},
		{Pattern: "GET /api/v1/webhooks/{id}", Handler: http.HandlerFunc(s.handleGet)},
		{Pattern: "DELETE /api/v1/webhooks/{id}", Handler: http.HandlerFunc(s.handleDelete)},
	}
}

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Feed   string `json:"feed"`
		URL    string `json:"url"`
		Secret string `json:"secret"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		web.RespondError(w, http.StatusBadRequest, "want {\"feed\": ..., \"url\": ..., \"secret\": ...}: "+sanitize.Clip(err.Error(), 200))
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		web.RespondError(w, http.StatusBadRequest, "data after the JSON object")
		return
	}
	h, err := s.Create(req.Feed, req.URL, req.Secret)
	switch {
	case errors.Is(err, ErrInvalid):
		web.RespondError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrTooMany), errors.Is(err, ErrExists):
		web.RespondError(w, http.StatusConflict, err.Error())
	case err != nil:
		s.log.Error("webhook: creating", "err", err)
		web.RespondError(w, http.StatusInternalServerError, "storing the webhook failed")
	default:
		web.RespondJSON(w, http.StatusCreated, h)
	}
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	web.RespondJSON(w, http.StatusOK, map[string]any{"webhooks": s.Hooks()})
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) {
	h, err := s.Get(r.PathValue("id"))
	if err != nil {
		web.RespondError(w, http.StatusNotFound, err.Error())
		return
	}
	web.RespondJSON(w, http.StatusOK, h)
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) {
	err := s.Delete(r.PathValue("id"))
	switch {
	case errors.Is(err, ErrNotFound):
		web.RespondError(w, http.StatusNotFound, err.Error())
	case err != nil:
		s.log.Error("webhook: deleting", "err", err)
		web.RespondError(w, http.StatusInternalServerError, "deleting the webhook failed")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

var _ plugins.Service = (*Service)(nil)
