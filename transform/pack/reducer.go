package pack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// maxCachedPolicies bounds the Reducer's cache of parsed policies.
const maxCachedPolicies = 64

// Reducer applies feeds' PACK policies (Feed.Reduce) to the items over
// their retention: install it with storage.Store.SetReducer. It is safe
// for concurrent use.
type Reducer struct {
	mu    sync.Mutex
	cache map[string]cachedPolicy
	now   func() time.Time
}

type cachedPolicy struct {
	p   *Policy
	err error
}

var _ storage.Reducer = (*Reducer)(nil)

// NewReducer returns a Reducer whose runs are at the wall-clock time
// (what WITHIN's "last" is measured from); see WithClock.
func NewReducer() *Reducer {
	return &Reducer{cache: map[string]cachedPolicy{}, now: time.Now}
}

// WithClock makes r's runs happen at now() (give it the store's clock)
// and returns r.
func (r *Reducer) WithClock(now func() time.Time) *Reducer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now == nil {
		now = time.Now
	}
	r.now = now
	return r
}

// Reduce implements storage.Reducer: it applies feed.Reduce to items, the
// feed's items over capacity, oldest first, at the fill ratio
// (Retention.MaxItems + len(items)) / Retention.MaxItems (1 without
// MaxItems). A feed without a policy gets plain deletion: nothing kept,
// nothing digested. Digest ids are scoped by the feed's id. A policy
// that does not parse is an error, and the store then removes nothing.
func (r *Reducer) Reduce(feed storage.Feed, items []storage.Item) (keep, digests []storage.Item, err error) {
	if len(bytes.TrimSpace(feed.Reduce)) == 0 || len(items) == 0 {
		return nil, nil, nil
	}
	p, now, err := r.policy(feed.Reduce)
	if err != nil {
		return nil, nil, fmt.Errorf("pack: reduction policy of feed %d: %w", feed.ID, err)
	}
	scope := strconv.FormatUint(feed.ID, 10)
	c := transform.NewContext(context.Background(), now, "feed-"+scope, "pack", transform.DefaultLimits)
	keep, digests, err = p.Apply(c, scope, Fill(feed.Retention, len(items)), items)
	if err != nil {
		return nil, nil, fmt.Errorf("pack: reduction of feed %d: %w", feed.ID, err)
	}
	return keep, digests, nil
}

// policy returns the parsed policy of raw (cached) and the time to run
// it at.
func (r *Reducer) policy(raw json.RawMessage) (*Policy, time.Time, error) {
	key := string(bytes.TrimSpace(raw))
	r.mu.Lock()
	now := r.now()
	cp, ok := r.cache[key]
	r.mu.Unlock()
	if ok {
		return cp.p, now, cp.err
	}
	p, err := ParsePolicy(raw)
	r.mu.Lock()
	if len(r.cache) >= maxCachedPolicies {
		clear(r.cache)
	}
	r.cache[key] = cachedPolicy{p, err}
	r.mu.Unlock()
	return p, now, err
}
