package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/internal/testlog"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// gatedLoader is a store whose StateLoader, once armed, waits for a
// token on gate before each call (a takeover's load of many feeds under
// way) and fails the first fail calls after it.
type gatedLoader struct {
	aggregator.Store
	loader storage.StateLoader
	gate   chan struct{}
	mu     sync.Mutex
	armed  bool
	fail   int
}

func (g *gatedLoader) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
}

func (g *gatedLoader) FeedStates(want func(uint64) bool, obsLimit int) (map[uint64]*storage.FeedState, error) {
	g.mu.Lock()
	armed := g.armed
	g.mu.Unlock()
	if !armed {
		return g.loader.FeedStates(want, obsLimit)
	}
	<-g.gate
	g.mu.Lock()
	failing := g.fail > 0
	g.fail--
	g.mu.Unlock()
	if failing {
		return nil, errors.New("feed states: nats: no responders available for request")
	}
	return g.loader.FeedStates(want, obsLimit)
}

// TestOwnershipFollowsTakeover: Ownership counts the feeds of a change
// of the owned shards as pending from before their load starts until
// they are scheduled, and sets Loaded only then; the metrics and the
// log line say the same.
func TestOwnershipFollowsTakeover(t *testing.T) {
	const feeds = 40 // more than are read one by one: one held-back load
	tests := []struct {
		name string
		// before: feeds owned at Load; then the change claims feeds
		// [0, claim) in claims changes 200 ms apart and drops the rest.
		before, claim, claims int
		// more feeds, [claim, claim+more), are claimed while the load
		// is held back: its reconcile does not mark the change loaded,
		// the next one (600 ms later) does.
		more    int
		fail    int  // loads that fail before one succeeds
		unknown bool // feed 0's policy is one this version does not know
		// wantPending while the load is held back; wantTaken,
		// wantLost, wantFailed once loaded.
		wantPending, wantTaken, wantLost, wantFailed int
	}{
		{name: "a takeover of every feed", claim: feeds, claims: 1, wantPending: feeds, wantTaken: feeds},
		{name: "claims a tick apart are one change", claim: feeds, claims: 3, wantPending: feeds, wantTaken: feeds},
		{name: "a load that fails is pending until its retry", claim: feeds, claims: 1, fail: 2, wantPending: feeds, wantTaken: feeds},
		{name: "half kept, half gained", before: 20, claim: feeds, claims: 1, wantPending: feeds - 20, wantTaken: feeds - 20},
		{name: "a feed whose policy is unknown does not hold the change back", claim: feeds, claims: 1, unknown: true,
			wantPending: feeds, wantTaken: feeds - 1, wantFailed: 1},
		{name: "a claim while the load is held back joins the change", claim: 30, claims: 1, more: 10, wantPending: 30, wantTaken: feeds},
		{name: "a change that only loses feeds", before: feeds, claim: 10, claims: 1, wantLost: feeds - 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pub, st := pubAndStore(t)
				var ids []uint64
				for i := range feeds {
					policy := "fixed-1m"
					if i == 0 && tt.unknown {
						policy = "from-a-later-version"
					}
					f := storage.Feed{URL: "http://pub.test/f/" + strconv.Itoa(i) + ".rss", Kind: storage.KindRemote, Policy: policy}
					if err := st.CreateFeed(&f); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, f.ID)
				}
				sensor := storage.Feed{Kind: storage.KindSensor, Slug: "lab", Policy: "auto"}
				if err := st.CreateFeed(&sensor); err != nil {
					t.Fatal(err)
				}
				store := &gatedLoader{Store: st, loader: st, gate: make(chan struct{}), fail: tt.fail}
				owner := newFakeOwner(ids[:tt.before]...)
				var logs testlog.Buffer
				svc, err := aggregator.NewService(aggregator.ServiceOptions{
					Store:     store,
					Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{pub}}),
					Scheduler: schedule.Config{Workers: 2},
					Owner:     owner,
					Resync:    -1, // only the changes and their retries load
					Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
				})
				if err != nil {
					t.Fatal(err)
				}
				reg := prometheus.NewRegistry()
				svc.SetMetrics(aggregator.NewMetrics(reg, svc.Scheduler(), 0))
				started := time.Now()
				if err := svc.Load(); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- svc.Run(ctx) }()
				synctest.Wait()
				// The start counts as a change, loaded by Run's first
				// reconcile.
				before := tt.before
				if tt.unknown && before > 0 {
					before--
				}
				got := svc.Ownership()
				if !got.Clustered || got.Pending != 0 || got.Polled != before || !got.Changed.Equal(started) || !got.Loaded.Equal(started) || got.Taken != before {
					t.Fatalf("after the start: %+v, want %d polled, loaded at once", got, before)
				}

				time.Sleep(time.Minute)
				store.arm()
				changed := time.Now()
				for k := range tt.claims {
					if k > 0 {
						time.Sleep(200 * time.Millisecond)
					}
					// Each claim adds a share of the feeds gained.
					n := tt.before + (tt.claim-tt.before)*(k+1)/tt.claims
					if tt.claim < tt.before {
						n = tt.claim
					}
					owner.set(append(slices.Clone(ids[:n]), sensor.ID)...)
				}
				// Settled (600 ms after the last claim): the load
				// waits for the gate.
				time.Sleep(time.Second)
				synctest.Wait()
				got = svc.Ownership()
				held := tt.wantPending > 0
				if held {
					if got.Pending != tt.wantPending || !got.Loaded.IsZero() || !got.Loading() || !got.Changed.Equal(changed) || got.Polled != before {
						t.Errorf("while the load is held back: %+v, want %d pending since %v, not loaded", got, tt.wantPending, changed)
					}
					if g := gauges(t, reg); g["slogfeed_owned_feeds_pending"] != float64(tt.wantPending) || g["slogfeed_shard_change_loading"] != 1 {
						t.Errorf("metrics while the load is held back: %v", g)
					}
					if tt.more > 0 {
						owner.set(append(slices.Clone(ids[:tt.claim+tt.more]), sensor.ID)...)
					}
					for k := range tt.fail + 1 {
						store.gate <- struct{}{}
						synctest.Wait()
						if k == tt.fail {
							break
						}
						// Failed: still pending, tried again a
						// second later (and held back again).
						if got := svc.Ownership(); got.Pending != tt.wantPending || !got.Loaded.IsZero() {
							t.Errorf("after failed load %d: %+v, want %d pending", k+1, got, tt.wantPending)
						}
						time.Sleep(time.Second)
						synctest.Wait()
					}
				}
				loadedAt := time.Now()
				if tt.more > 0 {
					if got := svc.Ownership(); !got.Loaded.IsZero() || got.Pending != 0 {
						t.Errorf("the load listed before a claim came: %+v, want not loaded", got)
					}
					time.Sleep(600 * time.Millisecond)
					synctest.Wait()
					loadedAt = time.Now()
				}
				if !held {
					// Loaded as the claims settled: 600 ms after
					// the last.
					loadedAt = changed.Add(time.Duration(tt.claims-1)*200*time.Millisecond + 600*time.Millisecond)
				}
				got = svc.Ownership()
				want := aggregator.OwnershipStatus{
					Clustered: true, Polled: min(tt.claim+tt.more, feeds) - tt.wantFailed, Failed: tt.wantFailed,
					Changed: changed, Loaded: loadedAt, Took: loadedAt.Sub(changed),
					Taken: tt.wantTaken, Lost: tt.wantLost,
				}
				if got != want {
					t.Errorf("once loaded: %+v\nwant %+v", got, want)
				}
				g := gauges(t, reg)
				if g["slogfeed_owned_feeds_pending"] != 0 || g["slogfeed_shard_change_loading"] != 0 ||
					g["slogfeed_shard_change_load_seconds"] != want.Took.Seconds() || g["slogfeed_owned_feeds_failed"] != float64(tt.wantFailed) {
					t.Errorf("metrics once loaded: %v, want the change loaded in %v", g, want.Took)
				}
				line := fmt.Sprintf("taken=%d lost=%d failed=%d polled_here=%d since_change=%v", tt.wantTaken, tt.wantLost, tt.wantFailed, want.Polled, want.Took)
				if n := strings.Count(logs.String(), line); n != 1 {
					t.Errorf("log has %d lines with %q, want 1:\n%s", n, line, logs.String())
				}
				// The feeds taken are polled.
				time.Sleep(2 * time.Minute)
				for i := range min(tt.claim+tt.more, feeds) {
					if i == 0 && tt.unknown {
						continue
					}
					if n := pub.since("/f/"+strconv.Itoa(i)+".rss", loadedAt); n < 1 {
						t.Errorf("feed %d not polled after the change was loaded", i)
					}
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// A single node owns every feed for good: nothing is ever pending.
func TestOwnershipSingleNode(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 3 {
		if err := st.CreateFeed(&storage.Feed{URL: "http://pub.test/f/" + strconv.Itoa(i) + ".rss", Kind: storage.KindRemote, Policy: "fixed-1m"}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	svc.SetMetrics(aggregator.NewMetrics(reg, svc.Scheduler(), 0))
	if err := svc.Load(); err != nil {
		t.Fatal(err)
	}
	if got, want := svc.Ownership(), (aggregator.OwnershipStatus{Polled: 3}); got != want || got.Loading() {
		t.Errorf("single node: %+v, want %+v", got, want)
	}
	for name, v := range gauges(t, reg) {
		if strings.Contains(name, "owned") || strings.Contains(name, "shard_change") {
			if v != 0 {
				t.Errorf("single node: %s = %v, want 0", name, v)
			}
		}
	}
}

// gauges reads the gauges of reg by name.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if g := m.GetGauge(); g != nil {
				out[mf.GetName()] = g.GetValue()
			}
		}
	}
	return out
}

// gatedTaker is a store whose records carry policy states, as
// storage/jetstream's Backend: TakeFeedStates hands over each feed
// without a state (so its policy replays its observations), each call
// waiting for a token on gate or the end of its context.
type gatedTaker struct {
	aggregator.Store
	gate chan struct{}
}

func (g gatedTaker) TakeFeedStates(ctx context.Context, ids []uint64, feed func(storage.Feed, *storage.PolicyState) bool, obs func(uint64, storage.Observation), _ func(uint64) *storage.PolicyState, _ func(uint64, error)) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, id := range ids {
		f, err := g.Feed(id)
		if errors.Is(err, storage.ErrFeedNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if !feed(f, nil) {
			continue
		}
		observed, err := g.Observations(id, 0)
		if err != nil {
			return err
		}
		for _, o := range observed {
			obs(id, o)
		}
	}
	return nil
}

// With a store whose records carry policy states, a start's load and a
// takeover's are both pending from the listing on: the start's until
// Load has scheduled them, the takeover's until its load returns. A
// service stopped while a takeover's load is under way ends the load's
// read and returns.
func TestOwnershipTakerLoads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub, st := pubAndStore(t)
		var ids []uint64
		for i := range 30 {
			f := storage.Feed{URL: "http://pub.test/f/" + strconv.Itoa(i) + ".rss", Kind: storage.KindRemote, Policy: "fixed-1m"}
			if err := st.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, f.ID)
		}
		store := gatedTaker{Store: st, gate: make(chan struct{})}
		owner := newFakeOwner(ids[:10]...)
		svc, err := aggregator.NewService(aggregator.ServiceOptions{
			Store:     store,
			Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{pub}}),
			Scheduler: schedule.Config{Workers: 2},
			Owner:     owner,
			Resync:    -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		loaded := make(chan error, 1)
		go func() { loaded <- svc.Load() }()
		synctest.Wait()
		if got := svc.Ownership(); got.Pending != 10 || !got.Loading() || got.Polled != 0 {
			t.Errorf("while the start's load is held back: %+v, want 10 pending", got)
		}
		time.Sleep(time.Second)
		store.gate <- struct{}{}
		if err := <-loaded; err != nil {
			t.Fatal(err)
		}
		if got := svc.Ownership(); got.Pending != 0 || !got.Loading() || got.Polled != 10 || got.Taken != 10 {
			t.Errorf("after Load: %+v, want 10 polled, loading until Run lists them", got)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		synctest.Wait()
		got := svc.Ownership()
		if want := started.Add(time.Second); got.Loading() || !got.Loaded.Equal(want) || got.Took != time.Second || got.Pending != 0 {
			t.Errorf("after Run's first listing: %+v, want loaded at %v, a second after the start", got, want)
		}

		owner.set(ids...)
		changed := time.Now()
		time.Sleep(time.Second) // settled 600 ms after the change
		synctest.Wait()
		if got := svc.Ownership(); got.Pending != 20 || !got.Loading() || !got.Changed.Equal(changed) || got.Polled != 10 {
			t.Errorf("while the takeover's load is held back: %+v, want 20 pending since %v", got, changed)
		}
		store.gate <- struct{}{}
		synctest.Wait()
		got = svc.Ownership()
		if got.Pending != 0 || got.Loading() || got.Polled != 30 || got.Taken != 20 || !got.Loaded.Equal(changed.Add(time.Second)) {
			t.Errorf("after the takeover's load: %+v, want 30 polled, loaded a second after the change", got)
		}
		// A takeover whose load is held back when the service stops:
		// Run ends its read and returns.
		more := make([]uint64, 0, 10)
		for i := range 10 {
			f := storage.Feed{URL: "http://pub.test/g/" + strconv.Itoa(i) + ".rss", Kind: storage.KindRemote, Policy: "fixed-1m"}
			if err := st.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			more = append(more, f.ID)
		}
		owner.set(append(ids, more...)...)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := svc.Ownership(); got.Pending != 10 || !got.Loading() {
			t.Errorf("while the second takeover's load is held back: %+v, want 10 pending", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
