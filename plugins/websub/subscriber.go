package websub

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
)

// subKeyPrefix starts the subscriber's records in the plugin data.
const subKeyPrefix = "sub/"

// maxPushBody bounds a pushed document (the fetcher's default MaxBody;
// Ingest checks the configured one).
const maxPushBody = fetcher.DefaultMaxBody

// maxHubReply bounds what is read of a hub's answer.
const maxHubReply = 4 << 10

// maxGrantedLease bounds the lease a hub may grant (a longer one is taken
// as this long).
const maxGrantedLease = 365 * 24 * time.Hour

// States of a subscription, as the subscriber sees it.
const (
	// StateNew: the feed advertises a hub; the request is to be sent.
	StateNew = "new"
	// StatePending: requested, waiting for the hub to verify.
	StatePending = "pending"
	// StateActive: verified; the hub pushes until the lease ends.
	StateActive = "active"
	// StateFailed: the last request failed; it is retried later.
	StateFailed = "failed"
	// StateLeaving: the feed was unsubscribed; the hub is being told.
	StateLeaving = "unsubscribing"
)

// subRecord is one feed's subscription as stored.
type subRecord struct {
	Feed        uint64    `json:"feed"`
	Hub         string    `json:"hub"`
	Topic       string    `json:"topic"`
	Callback    string    `json:"callback,omitempty"`
	Token       string    `json:"token,omitempty"`
	Secret      string    `json:"secret,omitempty"`
	State       string    `json:"state"`
	Requested   time.Time `json:"requested,omitzero"` // the last request sent
	Verified    time.Time `json:"verified,omitzero"`  // the last lease granted
	Lease       int64     `json:"lease_seconds,omitempty"`
	Expires     time.Time `json:"expires,omitzero"`
	ActiveSince time.Time `json:"active_since,omitzero"`
	Failures    int       `json:"failures,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	Due         time.Time `json:"due,omitzero"` // the next thing to do about it
}

// SubCounters count what the subscriber received since it started.
type SubCounters struct {
	Pushes        int64 `json:"pushes"`         // documents accepted
	Items         int64 `json:"items"`          // new items they brought
	Missed        int64 `json:"missed"`         // items a fallback poll found first ("pushes missed")
	BadSignatures int64 `json:"bad_signatures"` // pushes ignored for a missing or wrong signature
	Rejected      int64 `json:"rejected"`       // pushes that could not be stored
}

func (c *SubCounters) add(d SubCounters) {
	c.Pushes += d.Pushes
	c.Items += d.Items
	c.Missed += d.Missed
	c.BadSignatures += d.BadSignatures
	c.Rejected += d.Rejected
}

// Subscriber subscribes slogfeed's remote feeds to the hubs they
// advertise and stores what they push.
type Subscriber struct {
	st     Store
	log    *slog.Logger
	base   string
	now    func() time.Time
	client *http.Client
	agg    Aggregator
	wake   chan struct{}

	mu       sync.Mutex
	recs     map[uint64]*subRecord
	counters map[uint64]*SubCounters
	total    SubCounters
}

func newSubscriber(opt Options) (*Subscriber, error) {
	s := &Subscriber{
		st: opt.Store, log: opt.Logger.With("websub", "subscriber"), base: opt.BaseURL,
		now: opt.Now, client: opt.Client, agg: opt.Aggregator,
		wake: make(chan struct{}, 1),
		recs: map[uint64]*subRecord{}, counters: map[uint64]*SubCounters{},
	}
	err := opt.Store.PluginList(Name, func(key string, value []byte) error {
		if !strings.HasPrefix(key, subKeyPrefix) {
			return nil
		}
		var r subRecord
		if err := json.Unmarshal(value, &r); err != nil || subKey(r.Feed) != key {
			s.log.Warn("ignoring an unreadable subscription", "key", key, "err", err)
			return nil
		}
		s.recs[r.Feed] = &r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("websub: load subscriptions: %w", err)
	}
	opt.Aggregator.Watch(aggregator.Watcher{Fetched: s.fetched, Removed: s.removed})
	return s, nil
}

func subKey(feed uint64) string { return subKeyPrefix + strconv.FormatUint(feed, 10) }

// callbackURL is the callback of feed's subscription with token.
func (s *Subscriber) callbackURL(feed uint64, token string) string {
	return s.base + CallbackPrefix + strconv.FormatUint(feed, 10) + "/" + token
}

// saveLocked stores r (s.mu held).
func (s *Subscriber) saveLocked(r *subRecord) {
	raw, err := json.Marshal(r)
	if err == nil {
		err = s.st.PluginPut(Name, subKey(r.Feed), raw)
	}
	if err != nil {
		s.log.Error("cannot store subscription", "feed", r.Feed, "err", err)
	}
}

// deleteLocked forgets feed's subscription (s.mu held).
func (s *Subscriber) deleteLocked(feed uint64) {
	delete(s.recs, feed)
	delete(s.counters, feed)
	if err := s.st.PluginDelete(Name, subKey(feed)); err != nil {
		s.log.Error("cannot delete subscription", "feed", feed, "err", err)
	}
}

func (s *Subscriber) countersLocked(feed uint64) *SubCounters {
	c := s.counters[feed]
	if c == nil {
		c = &SubCounters{}
		s.counters[feed] = c
	}
	return c
}

func (s *Subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// fetched hears of every poll: it starts a subscription when the document
// advertises a hub and a self URL, and counts items a poll found although
// the feed is pushed.
func (s *Subscriber) fetched(ev aggregator.Fetched) {
	if ev.Feed.Kind != storage.KindRemote {
		return
	}
	id := ev.Feed.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[id]
	if r != nil && r.State == StateActive && len(ev.Added) > 0 {
		missed := 0
		for _, it := range ev.Added {
			if !it.Published.Before(r.ActiveSince) && it.Published.Before(ev.At.Add(-MissGrace)) {
				missed++
			}
		}
		if missed > 0 {
			c := s.countersLocked(id)
			c.Missed += int64(missed)
			s.total.Missed += int64(missed)
			s.log.Warn("pushes missed: a fallback poll found items the hub did not deliver; resubscribing",
				"feed", id, "items", missed, "hub", r.Hub)
			r.Due = s.now()
			s.signal()
		}
	}
	if ev.NotModified || len(ev.Hubs) == 0 || ev.Self == "" {
		return
	}
	switch {
	case r == nil:
		s.recs[id] = &subRecord{Feed: id, Hub: ev.Hubs[0], Topic: ev.Self, State: StateNew, Due: s.now()}
	case r.State == StateLeaving:
		return
	case r.Topic != ev.Self || !slices.Contains(ev.Hubs, r.Hub):
		// The feed moved to another hub or topic: subscribe afresh. The
		// old callback answers 410 Gone, so the old hub stops.
		s.log.Info("feed advertises another hub or topic", "feed", id, "hub", sanitize.RedactURL(ev.Hubs[0]), "topic", sanitize.RedactURL(ev.Self))
		*r = subRecord{Feed: id, Hub: ev.Hubs[0], Topic: ev.Self, State: StateNew, Due: s.now()}
	default:
		return
	}
	s.signal()
}

// removed hears of an unsubscribed feed: its subscription ends too.
func (s *Subscriber) removed(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[id]
	if r == nil {
		return
	}
	r.State, r.Requested, r.Due = StateLeaving, time.Time{}, s.now()
	s.signal()
}

// run does the subscriber's requests until ctx ends: first ones, renewals,
// retries, unsubscriptions.
func (s *Subscriber) run(ctx context.Context) {
	s.start()
	for {
		s.actDue(ctx)
		wait := time.Hour
		if next := s.nextDue(); !next.IsZero() {
			wait = min(max(next.Sub(s.now()), 0), time.Hour)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-s.wake:
			timer.Stop()
		}
	}
}

// start resumes the stored subscriptions: pushed feeds get their low-rate
// polling back, expired or moved ones are requested again, feeds deleted
// meanwhile are unsubscribed.
func (s *Subscriber) start() {
	now := s.now()
	type pushed struct {
		id    uint64
		until time.Time
	}
	var push []pushed
	s.mu.Lock()
	for id, r := range s.recs {
		switch r.State {
		case StateActive:
			switch {
			case !now.Before(r.Expires):
				r.State, r.Due = StateNew, now
			case !strings.HasPrefix(r.Callback, s.base+CallbackPrefix):
				// The public URL changed: the hub knows a callback that
				// is no longer ours.
				r.State, r.Token, r.Due = StateNew, "", now
			default:
				push = append(push, pushed{id, r.Expires})
				if r.Due.IsZero() {
					r.Due = renewal(r)
				}
			}
		case StateNew, StatePending, StateLeaving:
			r.Due = now
		}
	}
	s.mu.Unlock()
	for _, p := range push {
		if s.agg.SetPushed(p.id, p.until) {
			continue
		}
		if _, err := s.st.Feed(p.id); errors.Is(err, storage.ErrFeedNotFound) {
			s.removed(p.id) // deleted while slogfeed was down
		}
	}
	if len(s.recs) > 0 {
		s.log.Info("subscriptions resumed", "subscriptions", len(s.recs), "pushed", len(push))
	}
}

// renewal is when an active subscription is renewed.
func renewal(r *subRecord) time.Time {
	return r.Verified.Add(time.Duration(float64(r.Lease) * RenewAt * float64(time.Second)))
}

// nextDue returns the earliest due time (zero when nothing is due).
func (s *Subscriber) nextDue() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for _, r := range s.recs {
		if !r.Due.IsZero() && (next.IsZero() || r.Due.Before(next)) {
			next = r.Due
		}
	}
	return next
}

// actDue does what is due.
func (s *Subscriber) actDue(ctx context.Context) {
	now := s.now()
	s.mu.Lock()
	var due []uint64
	for id, r := range s.recs {
		if !r.Due.IsZero() && !now.Before(r.Due) {
			due = append(due, id)
		}
	}
	s.mu.Unlock()
	slices.Sort(due)
	for _, id := range due {
		if ctx.Err() != nil {
			return
		}
		s.act(ctx, id)
	}
}

// act does what is due for feed id's subscription.
func (s *Subscriber) act(ctx context.Context, id uint64) {
	now := s.now()
	s.mu.Lock()
	r := s.recs[id]
	if r == nil || r.Due.IsZero() || now.Before(r.Due) {
		s.mu.Unlock()
		return
	}
	switch r.State {
	case StateLeaving:
		if r.Token == "" || r.Verified.IsZero() || !r.Requested.IsZero() {
			// Never verified, or the hub did not confirm in time.
			s.deleteLocked(id)
			s.mu.Unlock()
			return
		}
		r.Requested, r.Due = now, now.Add(unsubscribeWait)
		s.saveLocked(r)
		hub, form := r.Hub, s.form("unsubscribe", r)
		s.mu.Unlock()
		if err := s.post(ctx, hub, form); err != nil {
			s.log.Info("unsubscription not accepted by the hub", "feed", id, "hub", hub, "err", err)
			s.mu.Lock()
			if s.recs[id] == r {
				s.deleteLocked(id)
			}
			s.mu.Unlock()
		}
		return
	case StatePending:
		s.failLocked(r, now, errors.New("the hub did not verify the subscription in time"))
		s.mu.Unlock()
		return
	case StateActive:
		if !now.Before(r.Expires) {
			r.State = StateNew // the lease ended: start again (the aggregator's mark ends by itself)
		} else if r.Requested.After(r.Verified) && !now.Before(r.Requested.Add(VerifyWait)) {
			// A renewal the hub did not verify: the lease still runs.
			s.failLocked(r, now, errors.New("the hub did not verify the renewal in time"))
			s.mu.Unlock()
			return
		}
	}
	if r.State == StateNew || r.Token == "" {
		r.Token, r.Secret = randomHex(16), randomHex(32)
	}
	r.Callback = s.callbackURL(id, r.Token)
	r.Requested = now
	if r.State != StateActive {
		r.State = StatePending
	}
	r.Due = now.Add(VerifyWait)
	s.saveLocked(r)
	hub, form := r.Hub, s.form("subscribe", r)
	s.mu.Unlock()
	err := s.post(ctx, hub, form)
	if err == nil {
		s.log.Debug("subscription requested", "feed", id, "hub", hub)
		return
	}
	s.mu.Lock()
	if s.recs[id] == r && r.Requested.Equal(now) {
		s.failLocked(r, s.now(), err)
	}
	s.mu.Unlock()
}

// failLocked records a failed request and schedules the retry (s.mu
// held). An active subscription stays active until its lease ends.
func (s *Subscriber) failLocked(r *subRecord, now time.Time, err error) {
	r.Failures++
	r.LastError = sanitize.Clip(err.Error(), 300)
	r.Due = now.Add(backoff(r.Failures, SubscribeRetryBase, SubscribeRetryMax))
	if r.State != StateActive {
		r.State = StateFailed
	} else if r.Due.After(r.Expires) {
		r.Due = r.Expires
	}
	s.saveLocked(r)
	s.log.Info("subscription request failed", "feed", r.Feed, "hub", r.Hub, "failures", r.Failures, "retry_at", r.Due, "err", err)
}

// form is a subscription request for r.
func (s *Subscriber) form(mode string, r *subRecord) url.Values {
	f := url.Values{}
	f.Set("hub.mode", mode)
	f.Set("hub.topic", r.Topic)
	f.Set("hub.callback", r.Callback)
	if mode == "subscribe" {
		f.Set("hub.lease_seconds", strconv.FormatInt(int64(DefaultLease/time.Second), 10))
		f.Set("hub.secret", r.Secret)
	}
	return f
}

// post sends a request to a hub; any 2xx is accepted.
func (s *Subscriber) post(ctx context.Context, hub string, form url.Values) error {
	if _, ok := checkURL(hub); !ok {
		return fmt.Errorf("hub URL %q is not an absolute http(s) URL", sanitize.Clip(hub, 100))
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hub, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "slogfeed-websub-subscriber")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxHubReply))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the hub answered %d: %s", resp.StatusCode, sanitize.Clip(strings.TrimSpace(string(msg)), 200))
	}
	return nil
}

// lookup returns a copy of the subscription the callback path names, when
// its token matches.
func (s *Subscriber) lookup(r *http.Request) (subRecord, bool) {
	id, err := strconv.ParseUint(r.PathValue("feed"), 10, 64)
	if err != nil {
		return subRecord{}, false
	}
	token := r.PathValue("token")
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.recs[id]
	if rec == nil || rec.Token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(rec.Token)) != 1 {
		return subRecord{}, false
	}
	return *rec, true
}

// serveVerify is GET /websub/callback/{feed}/{token}: the hub verifies a
// request of ours (echo hub.challenge) or tells of a denial. Anything
// else is a 404.
func (s *Subscriber) serveVerify(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.lookup(r)
	q := r.URL.Query()
	mode, topic, challenge := q.Get("hub.mode"), q.Get("hub.topic"), q.Get("hub.challenge")
	if !ok || topic != rec.Topic {
		httpError(w, http.StatusNotFound, "websub: no such subscription")
		return
	}
	now := s.now()
	switch mode {
	case "subscribe":
		lease, err := strconv.ParseInt(q.Get("hub.lease_seconds"), 10, 64)
		if rec.Requested.IsZero() || rec.State == StateLeaving || rec.State == StateNew ||
			err != nil || lease <= 0 || challenge == "" || len(challenge) > maxChallenge {
			httpError(w, http.StatusNotFound, "websub: no such subscription request")
			return
		}
		lease = min(lease, int64(maxGrantedLease/time.Second))
		until := now.Add(time.Duration(lease) * time.Second)
		if !s.confirm(rec, func(x *subRecord) {
			if x.State != StateActive {
				x.ActiveSince = now
			}
			x.State, x.Verified, x.Lease, x.Expires = StateActive, now, lease, until
			x.Failures, x.LastError = 0, ""
			x.Due = renewal(x)
		}) {
			httpError(w, http.StatusNotFound, "websub: no such subscription request")
			return
		}
		s.agg.SetPushed(rec.Feed, until)
		s.log.Info("subscription verified", "feed", rec.Feed, "hub", rec.Hub, "lease", time.Duration(lease)*time.Second)
	case "unsubscribe":
		if rec.State != StateLeaving || rec.Requested.IsZero() || challenge == "" || len(challenge) > maxChallenge {
			httpError(w, http.StatusNotFound, "websub: no such unsubscription request")
			return
		}
		s.mu.Lock()
		if x := s.recs[rec.Feed]; x != nil && x.Token == rec.Token {
			s.deleteLocked(rec.Feed)
		}
		s.mu.Unlock()
		s.log.Info("unsubscription verified", "feed", rec.Feed, "hub", rec.Hub)
	case "denied":
		reason := sanitize.Clip(q.Get("hub.reason"), 200)
		s.confirm(rec, func(x *subRecord) {
			x.State = StateFailed
			x.Failures++
			x.LastError = "the hub denied the subscription: " + reason
			x.Due = now.Add(backoff(x.Failures, SubscribeRetryBase, SubscribeRetryMax))
		})
		s.agg.SetPushed(rec.Feed, time.Time{})
		s.log.Info("subscription denied", "feed", rec.Feed, "hub", rec.Hub, "reason", reason)
		w.WriteHeader(http.StatusOK)
		return
	default:
		httpError(w, http.StatusNotFound, "websub: unknown hub.mode")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, challenge)
}

// confirm applies fn to the stored subscription rec was copied from, if
// it is still the same one (same token), and stores it.
func (s *Subscriber) confirm(rec subRecord, fn func(*subRecord)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.recs[rec.Feed]
	if x == nil || x.Token != rec.Token || x.State == StateLeaving {
		return false
	}
	fn(x)
	s.saveLocked(x)
	s.signal()
	return true
}

// serveContent is POST /websub/callback/{feed}/{token}: a content
// distribution. A missing or wrong signature is ignored with a 202 (the
// spec lets subscribers acknowledge what they drop, which tells a forger
// nothing); an unknown callback is 410 Gone, so that hubs stop.
func (s *Subscriber) serveContent(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.lookup(r)
	if !ok || rec.State == StateLeaving || rec.State == StateNew {
		httpError(w, http.StatusGone, "websub: no such subscription")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPushBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.count(rec.Feed, SubCounters{Rejected: 1})
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("websub: body larger than %d bytes", maxPushBody))
			return
		}
		httpError(w, http.StatusBadRequest, "websub: unreadable body")
		return
	}
	received := s.now()
	if rec.Secret != "" {
		if err := Verify(rec.Secret, body, r.Header.Get(SignatureHeader)); err != nil {
			s.count(rec.Feed, SubCounters{BadSignatures: 1})
			s.log.Warn("push ignored", "feed", rec.Feed, "err", err)
			w.WriteHeader(http.StatusAccepted)
			return
		}
	}
	n, err := s.agg.Ingest(r.Context(), rec.Feed, body, r.Header, received)
	switch {
	case err == nil:
	case errors.Is(err, storage.ErrFeedNotFound), errors.Is(err, aggregator.ErrNotRemote):
		httpError(w, http.StatusGone, "websub: the feed is gone")
		return
	case errors.Is(err, fetcher.ErrTooLarge):
		s.count(rec.Feed, SubCounters{Rejected: 1})
		httpError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	case errors.Is(err, parser.ErrNotFeed), errors.Is(err, parser.ErrMalformed):
		s.count(rec.Feed, SubCounters{Rejected: 1})
		s.log.Info("push not stored", "feed", rec.Feed, "err", err)
		httpError(w, http.StatusBadRequest, sanitize.Clip(err.Error(), 300))
		return
	default:
		s.count(rec.Feed, SubCounters{Rejected: 1})
		s.log.Error("push not stored", "feed", rec.Feed, "err", err)
		httpError(w, http.StatusInternalServerError, "websub: the push could not be stored")
		return
	}
	s.count(rec.Feed, SubCounters{Pushes: 1, Items: int64(n)})
	s.log.Debug("push stored", "feed", rec.Feed, "new", n, "bytes", len(body))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Subscriber) count(feed uint64, d SubCounters) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total.add(d)
	if s.recs[feed] != nil {
		s.countersLocked(feed).add(d)
	}
}

// SubscriberStatus describes the subscriber.
type SubscriberStatus struct {
	Subscriptions []SubscriptionStatus `json:"subscriptions"`
	Counters      SubCounters          `json:"counters"`
}

// SubscriptionStatus is one feed's subscription, without its secrets.
type SubscriptionStatus struct {
	Feed        uint64    `json:"feed"`
	Hub         string    `json:"hub"`
	Topic       string    `json:"topic"`
	State       string    `json:"state"`
	Expires     time.Time `json:"expires,omitzero"`
	ActiveSince time.Time `json:"active_since,omitzero"`
	Next        time.Time `json:"next_action,omitzero"`
	Failures    int       `json:"failures,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	SubCounters
}

// Status returns the subscriptions, by feed.
func (s *Subscriber) Status() SubscriberStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SubscriberStatus{Counters: s.total, Subscriptions: []SubscriptionStatus{}}
	for id, r := range s.recs {
		ss := SubscriptionStatus{
			Feed: id, Hub: sanitize.RedactURL(r.Hub), Topic: sanitize.RedactURL(r.Topic), State: r.State, Expires: r.Expires, ActiveSince: r.ActiveSince,
			Next: r.Due, Failures: r.Failures, LastError: r.LastError,
		}
		if c := s.counters[id]; c != nil {
			ss.SubCounters = *c
		}
		st.Subscriptions = append(st.Subscriptions, ss)
	}
	slices.SortFunc(st.Subscriptions, func(a, b SubscriptionStatus) int {
		switch {
		case a.Feed < b.Feed:
			return -1
		case a.Feed > b.Feed:
			return 1
		}
		return 0
	})
	return st
}
