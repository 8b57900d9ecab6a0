package jetstream

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// Policy states. A remote feed's record (its value in the defs bucket)
// carries the state of the feed's scheduling policy as of the newest
// observation the record counts, beside the storage.Feed fields, under
// "policy_state". Every poll's record write folds the poll's observation
// into it through the Learner the polling service installs (SetLearner),
// in the same compare-and-set as the poll's counters, so a node taking a
// feed over restores its policy from the record instead of replaying the
// feed's observations (TakeFeedStates).
//
// A record without a state (written before states were kept, by a node
// without a Learner, or of a policy that saves none) is rebuilt by
// replaying its observations; the takeover that replays it stores the
// state reached, at the revision it read, so the next one restores it.
// A crash between a poll's observation and its record leaves that
// observation out of the state as it leaves it out of the counters.
// Readers that know only storage.Feed ignore the field, and a write by
// such a reader drops it (the feed is replayed again).

// feedRecord is the value of a feed key of the defs bucket.
type feedRecord struct {
	storage.Feed
	State *recordState `json:"policy_state,omitempty"`
	// Dropped are the items retention dropped that the feed remembers
	// (dropped.go).
	Dropped []byte `json:"dropped,omitempty"`
}

// recordState is storage.PolicyState as a record keeps it.
type recordState struct {
	Next   time.Time `json:"next,omitzero"`
	Last   time.Time `json:"last,omitzero"`
	Policy []byte    `json:"policy,omitempty"`
}

func (st *recordState) policyState() *storage.PolicyState {
	if st == nil {
		return nil
	}
	return &storage.PolicyState{Next: st.Next, Last: st.Last, Policy: st.Policy}
}

func recordStateOf(p *storage.PolicyState) *recordState {
	return &recordState{Next: p.Next, Last: p.Last, Policy: p.Policy}
}

// statedFeed reports whether a feed of kind k keeps a policy state.
func statedFeed(k storage.Kind) bool { return k == storage.KindRemote }

type learnerBox struct{ l storage.Learner }

// learners holds the Learner of a Store.
type learners struct{ p atomic.Pointer[learnerBox] }

// SetLearner installs l as the learner of policy states (nil removes it:
// every poll written from then on drops its feed's state).
func (s *Store) SetLearner(l storage.Learner) {
	if l == nil {
		s.learner.p.Store(nil)
		return
	}
	s.learner.p.Store(&learnerBox{l})
}

func (s *Store) currentLearner() storage.Learner {
	if b := s.learner.p.Load(); b != nil {
		return b.l
	}
	return nil
}

// learn folds observation o, written with rec, into rec's state: a
// record without a state stays without, one whose state already learned
// o (a write tried again) keeps it, and without a Learner, or when the
// Learner keeps none, the state is dropped.
func (s *Store) learn(rec *feedRecord, o *storage.Observation) {
	if rec.State == nil {
		return
	}
	l := s.currentLearner()
	if l == nil || !statedFeed(rec.Kind) {
		rec.State = nil
		return
	}
	if !rec.State.Last.IsZero() && o.At.Equal(rec.State.Last) {
		return
	}
	prev := rec.State.policyState()
	next, ok := l(&rec.Feed, prev, o)
	if !ok || len(next.Policy) > storage.MaxPolicyStateSize {
		rec.State = nil
		return
	}
	rec.State = recordStateOf(&next)
}

// encodeRecord encodes rec as the defs bucket stores it (records.go).
// When the record's JSON would be too large, its dropped set goes first
// (items it held may come back), then its state (the feed is replayed at
// a takeover).
func (s *Store) encodeRecord(rec *feedRecord) ([]byte, error) {
	for rec.State != nil || rec.Dropped != nil {
		data, err := json.Marshal(rec)
		if err == nil && len(data) <= storage.MaxFeedSize && len(data) <= s.maxData {
			return packRecord(data, s.compressRecords()), nil
		}
		if rec.Dropped != nil {
			rec.Dropped = nil
		} else {
			rec.State = nil
		}
	}
	data, err := s.encodeFeed(&rec.Feed)
	if err != nil {
		return nil, err
	}
	return packRecord(data, s.compressRecords()), nil
}

// decodeRecord decodes the stored record of feed id.
func decodeRecord(id uint64, data []byte) (feedRecord, error) {
	var rec feedRecord
	data, err := unpackRecord(data)
	if err != nil {
		return feedRecord{}, fmt.Errorf("feed %d: %w", id, err)
	}
	if err := json.Unmarshal(data, &rec); err != nil || rec.ID != id {
		return feedRecord{}, fmt.Errorf("feed %d: %w: %v", id, storage.ErrCorrupt, err)
	}
	if rec.State != nil && len(rec.State.Policy) > storage.MaxPolicyStateSize {
		rec.State = nil // replayed
	}
	return rec, nil
}
