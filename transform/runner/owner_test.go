package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// fakeOwner is a cluster.Owner whose owned pipes the test sets.
type fakeOwner struct {
	mu      sync.Mutex
	pipes   map[uint64]bool
	changed chan struct{}
}

func newFakeOwner() *fakeOwner {
	return &fakeOwner{pipes: map[uint64]bool{}, changed: make(chan struct{})}
}

func (o *fakeOwner) OwnsFeed(uint64) bool { return true }

func (o *fakeOwner) OwnsPipe(id uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pipes[id]
}

func (o *fakeOwner) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// set gives the pipes ids to the owner and announces the change.
func (o *fakeOwner) set(ids ...uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.pipes)
	for _, id := range ids {
		o.pipes[id] = true
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// TestRunnerFollowsOwner: two nodes' runners over one store. Only the
// owner runs a pipe, though neither is notified of its input's items
// (another node stored them); a pipe created on one node is run by the
// other when it owns it; the pipe moves with its shard and resumes at the
// stored cursors, so every output is emitted once.
func TestRunnerFollowsOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		lab := storage.Feed{Kind: storage.KindSensor, Slug: "lab-1", Title: "lab-1", Policy: "auto"}
		if err := st.CreateFeed(&lab); err != nil {
			t.Fatal(err)
		}
		n := 0
		post := func(values ...float64) { // readings stored by a third node
			var its []storage.Item
			for _, v := range values {
				n++
				its = append(its, storage.Item{ID: fmt.Sprint("r", n), Title: fmt.Sprint(v), Published: time.Now(), Fetched: time.Now(),
					Reading: &storage.Reading{Value: v, Unit: "C", Sensor: "lab-1", Time: time.Now()}})
			}
			if _, err := st.AddItems(lab.ID, its); err != nil {
				t.Fatal(err)
			}
		}
		owners := []*fakeOwner{newFakeOwner(), newFakeOwner()}
		runners := make([]*Runner, 2)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := range runners {
			r, err := New(Options{Store: st, Owner: owners[i], Resync: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Load(); err != nil {
				t.Fatal(err)
			}
			runners[i] = r
			wg.Go(func() { _ = r.Run(ctx) })
		}
		// Created on node 0, owned by node 1.
		info, err := runners[0].Create(ctx, hotPipe("hot", "sensor/lab-1"))
		if err != nil {
			t.Fatal(err)
		}
		owners[1].set(info.ID)
		post(21, 10, 22)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		out := func() int {
			its, err := st.Items(info.FeedID, storage.ItemQuery{})
			if err != nil {
				t.Fatal(err)
			}
			return len(its)
		}
		if got := out(); got != 2 {
			t.Fatalf("%d outputs after node 1 ran the pipe node 0 created, want 2", got)
		}
		runs := func() int64 {
			sp, err := st.Pipe(info.ID)
			if err != nil {
				t.Fatal(err)
			}
			return sp.Runs
		}
		before := runs()
		time.Sleep(5 * time.Second) // nothing new: no run
		if got := runs(); got != before {
			t.Errorf("%d runs with no new input", got-before)
		}

		// The shard moves to node 0, which resumes at the cursors node 1
		// committed.
		owners[1].set()
		owners[0].set(info.ID)
		post(30, 31, 5)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := out(); got != 4 {
			t.Errorf("%d outputs after the move, want 4 (each once)", got)
		}
		// Node 1 no longer runs it, even when told of new items.
		owners[0].set()
		post(40)
		runners[1].Notify(lab, []storage.Item{{ID: "x"}})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := out(); got != 4 {
			t.Errorf("%d outputs while no node owns the pipe, want 4", got)
		}
		cancel()
		wg.Wait()
	})
}
