package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	bolt "go.etcd.io/bbolt"
)

// Policy states. A remote feed's scheduling policy learns from every
// observation; rebuilding it at start-up by replaying the stored
// observations reads them all (up to MaxObservations a feed). So the
// policy's state as of the feed's newest observation is kept beside its
// record, in the feeds bucket under the record's key followed by
// stateSuffix (on the leaf a poll rewrites anyway), and every write of
// an observation folds the observation into it in the same transaction,
// through the Learner the polling service installs: the state never lags
// the observations.
//
// A feed without a state (stored before states were kept, or written to
// while no Learner was installed, or whose policy keeps none) is rebuilt
// by replaying its observations; InitPolicyState then stores the state
// the replay reached, unless an observation came in meanwhile.

// stateSuffix ends a policy state's key: the feed's 8-byte ID, then 's'.
const stateSuffix = 's'

// MaxPolicyStateSize bounds an encoded policy state; a larger one is not
// stored (the feed is rebuilt by replay).
const MaxPolicyStateSize = 8192

// policyStateVersion is the first byte of an encoded PolicyState.
const policyStateVersion = 1

// PolicyState is a feed's scheduling policy as of its newest observation.
type PolicyState struct {
	// Next is the policy's answer to the newest observation it learned
	// from (zero while it learned from none): the feed's learned
	// prediction.
	Next time.Time
	// Last is when the newest observation the policy learned from was
	// made (zero while none).
	Last time.Time
	// Policy is the policy's own encoding (schedule.Stateful); empty for
	// a policy that has learned nothing yet.
	Policy []byte
}

// Learner folds observation o of feed f into the feed's policy state
// prev and returns the new state; ok false means the feed keeps no state
// (its policy saves none, or prev cannot be read). It runs inside the
// write's transaction and may run more than once for one write (see
// Store): it must be a pure function of its arguments.
type Learner func(f *Feed, prev *PolicyState, o *Observation) (next PolicyState, ok bool)

type learnerBox struct{ l Learner }

// SetLearner installs l as the learner of policy states (nil removes it:
// every observation written from then on drops its feed's state).
func (s *Store) SetLearner(l Learner) {
	if l == nil {
		s.learner.Store(nil)
		return
	}
	s.learner.Store(&learnerBox{l})
}

func (s *Store) currentLearner() Learner {
	if b := s.learner.Load(); b != nil {
		return b.l
	}
	return nil
}

// stateKey is the key of feed id's policy state in the feeds bucket.
func stateKey(id uint64) []byte {
	k := make([]byte, 9)
	binary.BigEndian.PutUint64(k, id)
	k[8] = stateSuffix
	return k
}

func timeNs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// encodePolicyState encodes st: a version byte, Next and Last as Unix
// nanoseconds (0 for zero), the policy's bytes.
func encodePolicyState(st *PolicyState) []byte {
	b := make([]byte, 0, 17+len(st.Policy))
	b = append(b, policyStateVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(timeNs(st.Next)))
	b = binary.LittleEndian.AppendUint64(b, uint64(timeNs(st.Last)))
	return append(b, st.Policy...)
}

// decodePolicyState decodes v; Policy aliases v.
func decodePolicyState(v []byte) (PolicyState, error) {
	if len(v) < 17 || v[0] != policyStateVersion || len(v) > MaxPolicyStateSize {
		return PolicyState{}, fmt.Errorf("policy state of %d bytes, version %d", len(v), firstByte(v))
	}
	return PolicyState{
		Next:   nsTime(int64(binary.LittleEndian.Uint64(v[1:9]))),
		Last:   nsTime(int64(binary.LittleEndian.Uint64(v[9:17]))),
		Policy: v[17:],
	}, nil
}

func firstByte(v []byte) int {
	if len(v) == 0 {
		return -1
	}
	return int(v[0])
}

// statedFeed reports whether a feed of kind k keeps a policy state.
func statedFeed(k Kind) bool { return k == KindRemote }

// putFreshState stores the state of a new feed's policy: nothing learned.
func putFreshState(feeds *bolt.Bucket, f *Feed) error {
	if !statedFeed(f.Kind) {
		return nil
	}
	return feeds.Put(stateKey(f.ID), encodePolicyState(&PolicyState{}))
}

// foldState folds observation o of feed id (as the write stores it) into
// the feed's policy state, in tx (feed returns the feed as the write
// stores it): with no state, no Learner, or a
// Learner that keeps none, the feed is left (or becomes) without one.
func (s *Store) foldState(tx *bolt.Tx, id uint64, feed func() (*Feed, error), o *Observation) error {
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return err
	}
	key := stateKey(id)
	old := feeds.Get(key)
	if old == nil {
		return nil
	}
	l := s.currentLearner()
	if l == nil {
		return feeds.Delete(key)
	}
	f, err := feed()
	if err != nil {
		return err
	}
	prev, err := decodePolicyState(old)
	if err != nil {
		return feeds.Delete(key) // rebuilt by replay at the next start
	}
	next, ok := l(f, &prev, o)
	if !ok {
		return feeds.Delete(key)
	}
	v := encodePolicyState(&next)
	if len(v) > MaxPolicyStateSize {
		return feeds.Delete(key)
	}
	if bytes.Equal(v, old) {
		return nil
	}
	return feeds.Put(key, v)
}

// feedOf returns f, for foldState.
func feedOf(f *Feed) func() (*Feed, error) { return func() (*Feed, error) { return f, nil } }

// StateRef names a feed and, when it keeps a policy state, the learned
// prediction of its next fetch (PolicyState.Next).
type StateRef struct {
	ID       uint64
	Next     time.Time
	HasState bool
}

// StateOrder lists every feed (of any kind) in order of its next fetch as
// its policy state predicts it: the feeds without a state first (by ID),
// then those with one, the earliest prediction first. It reads the
// states' headers only, no record.
func (s *Store) StateOrder() ([]StateRef, error) {
	var out []StateRef
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			switch {
			case isFeedKey(k):
				id, _ := getU64(k)
				out = append(out, StateRef{ID: id})
			case len(k) == 9 && k[8] == stateSuffix:
				id := binary.BigEndian.Uint64(k)
				// The record's key sorts right before its state's.
				if n := len(out); n > 0 && out[n-1].ID == id && len(v) >= 17 && v[0] == policyStateVersion {
					out[n-1].Next = nsTime(int64(binary.LittleEndian.Uint64(v[1:9])))
					out[n-1].HasState = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: feed states: %w", err)
	}
	slices.SortStableFunc(out, func(a, b StateRef) int {
		switch {
		case a.HasState != b.HasState:
			if a.HasState {
				return 1
			}
			return -1
		case !a.HasState:
			return 0
		}
		return a.Next.Compare(b.Next)
	})
	return out, nil
}

// FeedsWithStates calls fn, in the order of ids, with each feed of ids
// that exists and its policy state (nil when it keeps none), as of one
// read transaction. Of the feed, only what scheduling it takes is read
// (SchedulingFields); the state's Policy is fn's only for the call. Read
// many feeds a slice of ids at a time: one long read would keep the
// store from growing its file.
func (s *Store) FeedsWithStates(ids []uint64, fn func(f Feed, st *PolicyState) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		for _, id := range ids {
			k := u64(id)
			v := b.Get(k)
			if v == nil {
				continue // deleted since it was listed
			}
			f, err := decodeSchedulingFields(k, v)
			if err != nil {
				return err
			}
			var st *PolicyState
			if sv := b.Get(stateKey(id)); sv != nil {
				if p, err := decodePolicyState(sv); err == nil {
					st = &p
				}
			}
			if err := fn(f, st); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: feeds with states: %w", err)
	}
	return nil
}

// PolicyStateOf returns feed id's policy state, false when it keeps none.
func (s *Store) PolicyStateOf(id uint64) (PolicyState, bool, error) {
	var st PolicyState
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		if b.Get(u64(id)) == nil {
			return ErrFeedNotFound
		}
		if v := b.Get(stateKey(id)); v != nil {
			p, err := decodePolicyState(v)
			if err != nil {
				return corruptf("feed %d: %v", id, err)
			}
			st, ok = PolicyState{Next: p.Next, Last: p.Last, Policy: bytes.Clone(p.Policy)}, true
		}
		return nil
	})
	if err != nil {
		return PolicyState{}, false, fmt.Errorf("storage: policy state of feed %d: %w", id, err)
	}
	return st, ok, nil
}

// StateInit is the state a replay of a feed's observations reached, for
// InitPolicyStates.
type StateInit struct {
	ID uint64
	// Newest is when the newest observation replayed was made (zero:
	// none).
	Newest time.Time
	State  PolicyState
}

// InitPolicyStates stores, in one transaction, the states replays of
// feeds' observations reached (the migration of a store written before
// states were kept). A feed's state is left out when the feed is gone,
// has a state by now, its newest observation is no longer the one
// replayed (it changed meanwhile: the next start replays it again), or
// the state is larger than MaxPolicyStateSize. It returns how many were
// stored.
func (s *Store) InitPolicyStates(inits []StateInit) (int, error) {
	vals := make([][]byte, len(inits))
	for i := range inits {
		vals[i] = encodePolicyState(&inits[i].State)
	}
	var stored int
	err := s.update(func(tx *bolt.Tx) error {
		stored = 0
		feeds, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		for i, in := range inits {
			key := stateKey(in.ID)
			if len(vals[i]) > MaxPolicyStateSize || feeds.Get(u64(in.ID)) == nil || feeds.Get(key) != nil {
				continue
			}
			at, err := newestObservationAt(tx, feeds, in.ID)
			if err != nil {
				return err
			}
			if !at.Equal(in.Newest) {
				continue
			}
			if err := feeds.Put(key, vals[i]); err != nil {
				return err
			}
			stored++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storage: init policy states: %w", err)
	}
	return stored, nil
}

// newestObservationAt returns when feed id's newest observation was made
// (zero when it has none).
func newestObservationAt(tx *bolt.Tx, feeds *bolt.Bucket, id uint64) (time.Time, error) {
	tail, err := feedTail(feeds, id)
	if err != nil {
		return time.Time{}, err
	}
	var raw []byte
	if n := len(tail); n > 0 {
		raw = tail[n-1]
	} else {
		obs, err := openObsBucket(tx, id)
		if err != nil {
			return time.Time{}, err
		}
		_, raw = obs.Cursor().Last()
	}
	if raw == nil {
		return time.Time{}, nil
	}
	at, err := observationAt(raw)
	if err != nil {
		return time.Time{}, corruptf("feed %d: newest observation: %v", id, err)
	}
	return at, nil
}

// checkPolicyState checks a policy state's key and encoding.
func checkPolicyState(k, v []byte) error {
	id := binary.BigEndian.Uint64(k)
	if _, err := decodePolicyState(v); err != nil {
		return fmt.Errorf("feed %d: %w", id, err)
	}
	return nil
}

// SchedulingFields are the fields of a Feed FeedsWithStates reads: what
// scheduling a feed takes. The others are left zero.
type SchedulingFields struct {
	ID          uint64             `json:"id"`
	Kind        Kind               `json:"kind"`
	URL         string             `json:"url,omitempty"`
	Policy      string             `json:"policy"`
	Weight      float64            `json:"weight,omitempty"`
	IgnoreCache bool               `json:"ignore_cache,omitempty"`
	Sleep       schedule.SleepPlan `json:"sleep"`
	UpdateHint  time.Duration      `json:"update_hint,omitempty"`
	RetryAfter  time.Time          `json:"retry_after,omitempty"`
}

// decodeSchedulingFields decodes a feed record's SchedulingFields into a
// Feed: a start-up decodes every record, and skipping the rest (texts,
// counters, a dozen times) halves the cost.
func decodeSchedulingFields(k, v []byte) (Feed, error) {
	var s SchedulingFields
	if err := json.Unmarshal(v, &s); err != nil {
		return Feed{}, corruptf("feed record %x: %v", k, err)
	}
	if id, _ := getU64(k); s.ID != id {
		return Feed{}, corruptf("feed record %x holds id %d", k, s.ID)
	}
	return Feed{
		ID: s.ID, Kind: s.Kind, URL: s.URL, Policy: s.Policy, Weight: s.Weight, IgnoreCache: s.IgnoreCache,
		Sleep: s.Sleep, UpdateHint: s.UpdateHint, RetryAfter: s.RetryAfter,
	}, nil
}
