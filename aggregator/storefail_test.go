package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// errStoreDown is what failingStore's poll writes return while it is down.
var errStoreDown = errors.New("store unavailable")

// failingStore is a store whose poll writes (RecordFetch) fail, storing
// nothing, while down is above zero (each failure counts it down), and
// which logs when each poll write and each error record (RecordPoll)
// came.
type failingStore struct {
	*storage.Store

	mu     sync.Mutex
	down   int
	err    error       // what a failing write returns (errStoreDown when nil)
	writes []time.Time // every RecordFetch, failed or not
	errRec int         // RecordPoll calls (a fetch error recorded on the feed)
}

func (s *failingStore) RecordFetch(id uint64, items []storage.Item, o storage.Observation, fn func(*storage.Feed, *storage.Observation, []storage.Item) error) (storage.Fetched, error) {
	s.mu.Lock()
	s.writes = append(s.writes, time.Now())
	fail := s.down > 0
	if fail {
		s.down--
	}
	s.mu.Unlock()
	if fail {
		err := s.err
		if err == nil {
			err = errStoreDown
		}
		return storage.Fetched{}, fmt.Errorf("record fetch of feed %d: %w", id, err)
	}
	return s.Store.RecordFetch(id, items, o, fn)
}

func (s *failingStore) RecordPoll(id uint64, o storage.Observation, fn func(*storage.Feed) error) (storage.Feed, error) {
	s.mu.Lock()
	s.errRec++
	s.mu.Unlock()
	return s.Store.RecordPoll(id, o, fn)
}

func (s *failingStore) log() ([]time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.writes...), s.errRec
}

// pollThroughFailures runs the live loop for 90 minutes of fake time
// over one feed (fixed-1h) whose first down poll writes fail with
// failErr (errStoreDown when nil),
// inside the caller's synctest bubble, and returns the store and the
// feed's ID.
func pollThroughFailures(t *testing.T, down int, failErr error) (*failingStore, uint64) {
	t.Helper()
	inner, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true, CommitLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	st := &failingStore{Store: inner, down: down, err: failErr}
	pub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>t</title><link>http://pub.test/</link><description>d</description>`+
			`<item><title>a</title><guid>r-2</guid><pubDate>Mon, 05 Jan 2026 10:05:00 +0000</pubDate></item>`+
			`<item><title>b</title><guid>r-1</guid><pubDate>Mon, 05 Jan 2026 10:00:00 +0000</pubDate></item></channel></rss>`)
	})
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:     st,
		Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{pub}}),
		Scheduler: schedule.Config{Workers: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Subscribe(storage.Feed{URL: "http://pub.test/feed.rss", Policy: "fixed-1h"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	// The retries take 2+4+8+16 s at most in these tests; then
	// the feed's policy polls twice within the 90 minutes.
	time.Sleep(90 * time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return st, f.ID
}

// TestStoreFailureRetriedSoon: a poll whose fetch succeeded but whose
// write failed is the store's failure, not the feed's. The feed is
// polled again after StoreRetryBase, doubling while the writes keep
// failing, rather than after a fetch error's minute-long backoff; no
// error is recorded on the feed; the write that finally succeeds stores
// the document's items; and the feed then goes back to its policy.
func TestStoreFailureRetriedSoon(t *testing.T) {
	for _, tc := range []struct {
		name string
		down int // poll writes that fail
	}{
		{"no failure", 0},
		{"one failure", 1},
		{"failures in a row", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st, id := pollThroughFailures(t, tc.down, nil)
				inner := st.Store
				writes, errRec := st.log()
				if errRec != 0 {
					t.Errorf("%d fetch errors recorded on the feed, want none (the store failed, not the feed)", errRec)
				}
				// The writes: tc.down failures, each followed by the
				// next try StoreRetryBase·2^(n−1) later, then the poll
				// that stores, then two of the policy's (its phase
				// first, then an hour).
				if len(writes) != tc.down+3 {
					t.Fatalf("%d poll writes, want %d: %v", len(writes), tc.down+3, writes)
				}
				for n := 1; n <= tc.down; n++ {
					want := min(aggregator.StoreRetryBase<<(n-1), aggregator.StoreRetryMax)
					if got := writes[n].Sub(writes[n-1]); got != want {
						t.Errorf("try %d came %v after failure %d, want %v", n+1, got, n, want)
					}
				}
				if got := writes[tc.down+1].Sub(writes[tc.down]); got <= aggregator.StoreRetryMax {
					t.Errorf("the poll after the stored one came %v later, want the policy's time, not a retry", got)
				}
				if got := writes[tc.down+2].Sub(writes[tc.down+1]); got != time.Hour {
					t.Errorf("the policy's polls %v apart, want its hour", got)
				}

				got, err := inner.Feed(id)
				if err != nil {
					t.Fatal(err)
				}
				if got.ErrorCount != 0 || got.LastError != "" {
					t.Errorf("feed error count %d, last error %q; want none", got.ErrorCount, got.LastError)
				}
				if got.Polls != 3 || got.ETag != `"v1"` {
					t.Errorf("feed: %d polls stored, ETag %q; want 3 and the publisher's", got.Polls, got.ETag)
				}
				its, err := inner.Items(id, storage.ItemQuery{})
				if err != nil {
					t.Fatal(err)
				}
				if len(its) != 2 {
					t.Errorf("%d items stored, want the document's 2", len(its))
				}
				obs, err := inner.Observations(id, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range obs {
					if o.Err != "" {
						t.Errorf("observation at %v stored with error %q", o.At, o.Err)
					}
				}
				if len(obs) != 3 || !obs[0].Hit || obs[1].Status != http.StatusNotModified || obs[2].Status != http.StatusNotModified {
					t.Errorf("observations %+v, want a hit then two 304s", obs)
				}
			})
		})
	}
}

// TestStoreRefusalIsAFetchError: a write the store refuses as invalid
// (what the document brought cannot be stored) would fail again at once:
// it is recorded on the feed as a fetch error, with the error backoff.
func TestStoreRefusalIsAFetchError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, id := pollThroughFailures(t, 1, storage.ErrInvalid)
		writes, errRec := st.log()
		if errRec != 1 {
			t.Errorf("%d fetch errors recorded on the feed, want 1", errRec)
		}
		if len(writes) < 2 {
			t.Fatalf("%d poll writes, want the refused one and more", len(writes))
		}
		if got := writes[1].Sub(writes[0]); got != aggregator.ErrorBackoffBase {
			t.Errorf("polled again %v after the refused write, want the error backoff %v", got, aggregator.ErrorBackoffBase)
		}
		obs, err := st.Store.Observations(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(obs) == 0 || !strings.Contains(obs[0].Err, "invalid") {
			t.Errorf("observations %+v, want the refusal first", obs)
		}
	})
}

// TestStoreFailureShownOnTheFeed: while its polls cannot be stored, a
// feed reads as failing (LastError, what the API and the UI show, and
// its summary) although its record cannot take the error; the next poll
// stored clears it. The record itself never holds the error.
func TestStoreFailureShownOnTheFeed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		down  int    // poll writes that fail
		polls string // what the error says of them
	}{
		{"one failure", 1, "the last poll was"},
		{"failures in a row", 3, "the last 3 polls were"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testStoreFailureShown(t, tc.down, tc.polls) })
		})
	}
}

func testStoreFailureShown(t *testing.T, down int, polls string) {
	inner, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true, CommitLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	st := &failingStore{Store: inner, down: down}
	pub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>`+
			`<item><title>a</title><guid>r-1</guid><pubDate>Mon, 05 Jan 2026 10:00:00 +0000</pubDate></item></channel></rss>`)
	})
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Scheduler: schedule.Config{Workers: 1},
		Fetcher: fetcher.New(fetcher.Options{Transport: handlerTransport{pub}})})
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Subscribe(storage.Feed{URL: "http://pub.test/shown.rss", Policy: "fixed-1h"})
	if err != nil {
		t.Fatal(err)
	}
	erroring := func() bool {
		var e bool
		if err := inner.EachFeedSummary(func(s *storage.FeedSummary) bool {
			if s.ID == f.ID {
				e = s.Erroring
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	// Until the failing writes are over: each is followed by the next
	// try StoreRetryBase·2^(n−1) later.
	for {
		time.Sleep(time.Second)
		synctest.Wait()
		if writes, _ := st.log(); len(writes) >= down {
			break
		}
	}
	got, err := st.Feed(f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.LastError, polls+" fetched but could not be stored") || !strings.Contains(got.LastError, errStoreDown.Error()) {
		t.Errorf("while the writes fail, the feed's error is %q, want %q … %q", got.LastError, polls, errStoreDown)
	}
	if got.LastErrorAt.IsZero() || got.ErrorCount != 0 {
		t.Errorf("while the writes fail: error at %v, count %d; want a time and the record's count (0)", got.LastErrorAt, got.ErrorCount)
	}
	if !erroring() {
		t.Error("while the writes fail, the feed's summary is not erroring")
	}
	if all, err := st.Feeds(); err != nil || len(all) != 1 || all[0].LastError != got.LastError {
		t.Errorf("Feeds while the writes fail: %+v, %v; want the feed with its error", all, err)
	}
	time.Sleep(time.Minute)
	synctest.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err = st.Feed(f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastError != "" || erroring() {
		t.Errorf("after a poll was stored: error %q, erroring %v; want none", got.LastError, erroring())
	}
	if got.Polls != 1 || got.Items != 1 {
		t.Errorf("%d polls and %d items stored, want the one poll that could be stored and its item", got.Polls, got.Items)
	}
	if _, errRec := st.log(); errRec != 0 {
		t.Errorf("%d fetch errors recorded on the feed, want none", errRec)
	}
}

// TestUnstoredNoteClearedWhenNotPolled: the note that a feed's polls
// cannot be stored goes when this node stops polling the feed: at once
// when the feed moves to another node, and once it expires when the
// service stops without a word.
func TestUnstoredNoteClearedWhenNotPolled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stop  func(owner *fakeOwner, cancel func())
		after time.Duration
	}{
		{"moved to another node", func(owner *fakeOwner, _ func()) { owner.set() }, time.Second},
		{"service stopped", func(_ *fakeOwner, cancel func()) { cancel() }, aggregator.StoreRetryMax + 2*time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				inner, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true, CommitLinger: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer inner.Close()
				st := &failingStore{Store: inner, down: 1000}
				pub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/rss+xml")
					fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>`+
						`<item><title>a</title><guid>r-1</guid><pubDate>Mon, 05 Jan 2026 10:00:00 +0000</pubDate></item></channel></rss>`)
				})
				f := storage.Feed{URL: "http://pub.test/moves.rss", Kind: storage.KindRemote, Policy: "fixed-1h"}
				if err := inner.CreateFeed(&f); err != nil {
					t.Fatal(err)
				}
				owner := newFakeOwner(f.ID)
				svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Scheduler: schedule.Config{Workers: 1},
					Owner:   owner,
					Fetcher: fetcher.New(fetcher.Options{Transport: handlerTransport{pub}})})
				if err != nil {
					t.Fatal(err)
				}
				if err := svc.Load(); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- svc.Run(ctx) }()
				time.Sleep(10 * time.Second)
				synctest.Wait()
				if got, _ := st.Feed(f.ID); got.LastError == "" {
					t.Fatal("the unstorable polls were not noted")
				}
				tc.stop(owner, cancel)
				time.Sleep(tc.after)
				synctest.Wait()
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got, _ := st.Feed(f.ID); got.LastError != "" {
					t.Errorf("%v after this node stopped polling the feed, it still reads %q", tc.after, got.LastError)
				}
			})
		})
	}
}
