package websub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// Name is the service's name and its plugin-data namespace.
const Name = "websub"

// Routes.
const (
	// HubPath is the hub's endpoint (POST, form-encoded).
	HubPath = "/websub/hub"
	// CallbackPrefix starts every subscriber callback:
	// /websub/callback/{feed}/{token}.
	CallbackPrefix = "/websub/callback/"
	// StatusPath shows the hub's and the subscriber's subscriptions
	// (GET; no secrets, no callback tokens).
	StatusPath = "/api/v1/websub"
)

// Lease bounds. A hub subscription lasts its lease; the subscriber asks
// for DefaultLease and renews at RenewAt of the lease granted.
const (
	DefaultLease = 10 * 24 * time.Hour
	MinLease     = 10 * time.Minute
	MaxLease     = 30 * 24 * time.Hour
	// RenewAt is the fraction of a lease after which the subscriber renews.
	RenewAt = 0.8
)

// Limits of what the hub accepts.
const (
	// MaxSecret bounds hub.secret: the spec wants fewer than 200 bytes.
	MaxSecret = 199
	// MaxURL bounds hub.topic and hub.callback, in bytes.
	MaxURL = 2048
	// MaxSubscriptions bounds the hub's subscriptions; MaxPerTopic those
	// of one topic; MaxPending the verifications in progress.
	MaxSubscriptions = 10000
	MaxPerTopic      = 1000
	MaxPending       = 256
	// maxForm bounds a subscription request's body.
	maxForm = 16 << 10
	// maxChallengeReply bounds what is read of a verification answer;
	// maxReplyBody what is read (and dropped) of a distribution answer.
	maxChallengeReply = 1 << 10
	maxReplyBody      = 64 << 10
	// maxDocument bounds a rendered topic document.
	maxDocument = 16 << 20
	// maxChallenge bounds the hub.challenge a subscriber echoes.
	maxChallenge = 1 << 10
)

// Timing of deliveries and of the subscriber.
const (
	// RetryBase and RetryMax: a failed delivery is retried after
	// RetryBase·2^(n−1), at most RetryMax, MaxAttempts times in all; the
	// next change of the topic starts again.
	RetryBase   = time.Second
	RetryMax    = 5 * time.Minute
	MaxAttempts = 8
	// maxDeliveries is how many deliveries are in flight at once.
	maxDeliveries = 32
	// requestTimeout bounds each outgoing request.
	requestTimeout = 30 * time.Second
	// VerifyWait is how long the subscriber waits for a hub to verify a
	// request before it counts as failed.
	VerifyWait = 2 * time.Minute
	// SubscribeRetryBase and SubscribeRetryMax space the subscriber's
	// retries after a failed subscription (doubling).
	SubscribeRetryBase = time.Minute
	SubscribeRetryMax  = time.Hour
	// MissGrace: an item a fallback poll finds that was published more
	// than MissGrace before the poll, while the feed was pushed, is a
	// missed push.
	MissGrace = 30 * time.Second
	// unsubscribeWait is how long an unsubscription waits for the hub's
	// verification before it is forgotten.
	unsubscribeWait = 10 * time.Minute
)

// Errors of subscription requests (the hub answers them as 400s, with the
// error's text).
var (
	// ErrMode: hub.mode is not subscribe or unsubscribe.
	ErrMode = errors.New("websub: hub.mode must be subscribe or unsubscribe")
	// ErrTopic: hub.topic is not one of this slogfeed's feeds.
	ErrTopic = errors.New("websub: hub.topic is not a feed of this slogfeed")
	// ErrCallback: hub.callback is not an absolute http(s) URL.
	ErrCallback = errors.New("websub: hub.callback must be an absolute http or https URL")
	// ErrSecret: hub.secret is too long.
	ErrSecret = errors.New("websub: hub.secret must be shorter than 200 bytes")
	// ErrLease: hub.lease_seconds is not a positive integer.
	ErrLease = errors.New("websub: hub.lease_seconds must be a positive integer")
	// ErrFull: the hub holds as many subscriptions as it may (overall, for
	// the topic, or verifications in progress); answered 503.
	ErrFull = errors.New("websub: the hub is full")
)

func init() {
	plugins.RegisterService(Name, func(env plugins.Env) (plugins.Service, error) {
		if on, ok := env.Settings[Name]; ok {
			enabled, err := strconv.ParseBool(on)
			if err != nil {
				return nil, fmt.Errorf("setting websub=%q: %w", on, err)
			}
			if !enabled {
				return nil, nil
			}
		}
		opt := Options{
			Store: env.Store, Logger: env.Logger, BaseURL: env.BaseURL, Now: env.Now,
			Client: env.Client, Documents: env.Documents,
		}
		if env.Aggregator != nil {
			opt.Aggregator = env.Aggregator
		}
		return New(opt)
	})
}

// Aggregator is what the subscriber needs of the live aggregator
// (*aggregator.Service).
type Aggregator interface {
	Ingest(ctx context.Context, id uint64, body []byte, header http.Header, received time.Time) (int, error)
	SetPushed(id uint64, until time.Time) bool
	Watch(aggregator.Watcher)
}

// Options configure the service.
type Options struct {
	// Store keeps the subscriptions (plugin data "websub"). Required.
	Store Store
	// Logger (default: discarded).
	Logger *slog.Logger
	// BaseURL is this slogfeed's public URL (no trailing slash): the base
	// of the hub URL, of topics and of callbacks. Required.
	BaseURL string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Client makes every outgoing request, through the SSRF guard
	// (default: http.DefaultClient, for tests only). Redirects are never
	// followed.
	Client *http.Client
	// Documents renders this slogfeed's own feeds (GET /sensors/…,
	// /feeds/…); nil switches the hub off.
	Documents http.Handler
	// Aggregator, when set, switches the subscriber on.
	Aggregator Aggregator
}

// Service is the hub and the subscriber together (plugins.Service).
type Service struct {
	hub *Hub
	sub *Subscriber
	log *slog.Logger
}

// New builds the service and loads the stored subscriptions.
func New(opt Options) (*Service, error) {
	if opt.Store == nil {
		return nil, errors.New("websub: a store is required")
	}
	base := strings.TrimRight(opt.BaseURL, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("websub: public URL %q must be an absolute http or https URL", opt.BaseURL)
	}
	opt.BaseURL = base
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Client == nil {
		opt.Client = http.DefaultClient
	}
	// Never follow redirects: a POST would become a GET, and the spec
	// counts a redirect as a failure.
	c := *opt.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opt.Client = &c
	s := &Service{log: opt.Logger}
	if opt.Documents != nil {
		if s.hub, err = newHub(opt); err != nil {
			return nil, err
		}
	}
	if opt.Aggregator != nil {
		if s.sub, err = newSubscriber(opt); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Hub returns the hub (nil when off).
func (s *Service) Hub() *Hub { return s.hub }

// Subscriber returns the subscriber (nil when off).
func (s *Service) Subscriber() *Subscriber { return s.sub }

// Routes implements plugins.Service: the hub endpoint, the callbacks and
// the status page.
func (s *Service) Routes() []web.Route {
	var rs []web.Route
	if s.hub != nil {
		rs = append(rs, web.Route{Pattern: "POST " + HubPath, Handler: http.HandlerFunc(s.hub.serveHub), Public: true})
	}
	if s.sub != nil {
		cb := CallbackPrefix + "{feed}/{token}"
		rs = append(rs,
			web.Route{Pattern: "GET " + cb, Handler: http.HandlerFunc(s.sub.serveVerify), Public: true},
			web.Route{Pattern: "POST " + cb, Handler: http.HandlerFunc(s.sub.serveContent), Public: true},
		)
	}
	rs = append(rs, web.Route{Pattern: "GET " + StatusPath, Handler: http.HandlerFunc(s.serveStatus)})
	return rs
}

// Notify implements plugins.Service: the hub distributes the new state of
// a sensor or pipe feed. It never blocks.
func (s *Service) Notify(f storage.Feed, items []storage.Item) {
	if s.hub != nil && len(items) > 0 {
		s.hub.Notify(f)
	}
}

// Run implements plugins.Service: it expires hub subscriptions, renews the
// subscriber's and waits for deliveries to end when ctx ends.
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if s.hub != nil {
		wg.Go(func() { s.hub.run(ctx) })
	}
	if s.sub != nil {
		wg.Go(func() { s.sub.run(ctx) })
	}
	wg.Wait()
	return nil
}

// Status is what GET /api/v1/websub shows.
type Status struct {
	Hub        *HubStatus        `json:"hub,omitempty"`
	Subscriber *SubscriberStatus `json:"subscriber,omitempty"`
}

func (s *Service) serveStatus(w http.ResponseWriter, r *http.Request) {
	var st Status
	if s.hub != nil {
		h := s.hub.Status()
		st.Hub = &h
	}
	if s.sub != nil {
		u := s.sub.Status()
		st.Subscriber = &u
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ") // as the rest of the API answers
	_ = enc.Encode(st)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// httpError answers a request with a plain-text error.
func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

// backoff returns base·2^(n−1), at most limit (n ≥ 1).
func backoff(n int, base, limit time.Duration) time.Duration {
	if n < 1 {
		n = 1
	}
	d := base << min(n-1, 30)
	if d <= 0 || d > limit {
		return limit
	}
	return d
}

// checkURL parses an absolute http(s) URL of at most MaxURL bytes with a
// host and no user information.
func checkURL(raw string) (*url.URL, bool) {
	if raw == "" || len(raw) > MaxURL {
		return nil, false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, false
	}
	return u, true
}
