package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
	"github.com/slogfeed/slogfeed/transform"
)

// tallyOp passes its input through and counts, in its state, every item
// it was given: an input run twice shows in the count, though the
// output feed stores each output ID once.
type tallyOp struct{ N int }

func (o *tallyOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	var out []transform.Item
	for _, b := range in {
		o.N += len(b)
		out = append(out, b...)
	}
	return out, nil
}
func (o *tallyOp) SaveState() (json.RawMessage, error) { return json.Marshal(o.N) }
func (o *tallyOp) LoadState(b json.RawMessage) error   { return json.Unmarshal(b, &o.N) }

func init() {
	transform.Register(transform.Spec{Name: "t_tally", Family: transform.FamilyPlugin, MinInputs: 1, MaxInputs: 1, Config: struct{}{},
		New: func(json.RawMessage) (transform.Operator, error) { return &tallyOp{}, nil }})
}

// tallyPipe reads sources (through a union when more than one) into a
// t_tally node, its output.
func tallyPipe(slug string, sources ...string) transform.Pipe {
	p := transform.Pipe{Output: transform.Output{Slug: slug, From: "t"}}
	p.Nodes = append(p.Nodes, transform.Node{ID: "t", Op: "t_tally"})
	into := "t"
	if len(sources) > 1 {
		p.Nodes = append(p.Nodes, transform.Node{ID: "u", Op: "union"})
		p.Edges = append(p.Edges, transform.Edge{From: "u", To: "t"})
		into = "u"
	}
	for i, s := range sources {
		id := fmt.Sprint("in", i)
		p.Nodes = append(p.Nodes, transform.Node{ID: id, Op: "source", Config: json.RawMessage(fmt.Sprintf(`{"feed":%q}`, s))})
		p.Edges = append(p.Edges, transform.Edge{From: id, To: into})
	}
	return p
}

// tally is the count of pipe id's t_tally node as stored.
func tally(t testing.TB, st Store, id uint64) int {
	t.Helper()
	sp, err := st.Pipe(id)
	if err != nil {
		t.Fatal(err)
	}
	var s state
	if err := json.Unmarshal(sp.State, &s); err != nil {
		t.Fatalf("pipe state %s: %v", sp.State, err)
	}
	var n int
	if raw := s.Nodes["t"]; raw != nil {
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// openJetStream opens a JetStream backend on c with the pipes' input
// hold ackWait (PipeAckWait), on a connection of its own.
func openJetStream(t testing.TB, c *jstest.Cluster, now func() time.Time, ackWait time.Duration) *sjs.Backend {
	t.Helper()
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sjs.Open(ctx, js, sjs.Options{Now: now, PipeAckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	b := sjs.NewBackend(st, 10*time.Second)
	t.Cleanup(func() { b.Close() })
	return b
}

// backends are the stores a runner reads its inputs from: bbolt by cursor,
// JetStream through each pipe's input queue.
var backends = []struct {
	name  string
	queue bool
	open  func(t testing.TB, now func() time.Time) storage.Backend
}{
	{"bbolt", false, func(t testing.TB, now func() time.Time) storage.Backend {
		st, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{NoSync: true, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
	{"jetstream", true, func(t testing.TB, now func() time.Time) storage.Backend {
		return openJetStream(t, jstest.NewServer(t), now, time.Second)
	}},
}

func newSensor(t testing.TB, st storage.Backend, slug string) storage.Feed {
	t.Helper()
	f := storage.Feed{Kind: storage.KindSensor, Slug: slug, Title: slug, Policy: "auto"}
	if err := st.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

// addItems stores n items of size bytes (of summary) in f, IDs prefix-i.
func addItems(t testing.TB, st storage.Backend, f storage.Feed, prefix string, from, n, size int) {
	t.Helper()
	var its []storage.Item
	for i := from; i < from+n; i++ {
		its = append(its, storage.Item{ID: fmt.Sprintf("%s-%d", prefix, i), Title: fmt.Sprint(i), Summary: strings.Repeat("x", size), Published: t0, Fetched: t0})
	}
	if added, err := st.AddItems(f.ID, its); err != nil || len(added) != n {
		t.Fatalf("added %d of %d items: %v", len(added), n, err)
	}
}

// queued waits, on a store with input queues, until pipe id's queue
// counts want items not taken yet: JetStream counts a stored item a
// moment after acknowledging its publication.
func queued(t testing.TB, st Store, id uint64, want int) {
	t.Helper()
	q := queueOf(st)
	if q == nil {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := q.PipeInputsWaiting(id)
		if err != nil {
			t.Fatal(err)
		}
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pipe %d's queue has %d items waiting, want %d", id, n, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// outputIDs are the IDs of the output feed's items, in arrival order.
func outputIDs(t testing.TB, st Store, feedID uint64) []string {
	t.Helper()
	its, err := st.Items(feedID, storage.ItemQuery{Order: storage.ByArrivalAsc})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(its))
	for i, it := range its {
		ids[i] = it.ID
	}
	return ids
}

// The runner keeps the same guarantees whether it reads by cursor (bbolt)
// or through the pipe's input queue (JetStream): a new pipe takes its
// inputs' backlog, then only new items, each run once, across a restart;
// a backlog over the run's byte budget is read a part per run; a changed
// input set is followed; deleting the pipe deletes its queue.
func TestInputsOnEveryBackend(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			clock := schedule.NewVirtualClock(t0)
			st := be.open(t, clock.Now)
			_, isQueue := st.(storage.PipeInputQueue)
			if isQueue != be.queue {
				t.Fatalf("%s: input queue %v, want %v", be.name, isQueue, be.queue)
			}
			ctx := context.Background()
			runNow := func(t *testing.T, r *Runner, id uint64) RunResult {
				t.Helper()
				res, err := r.RunNow(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			newRunner := func(t *testing.T, lim transform.Limits) *Runner {
				t.Helper()
				r, err := New(Options{Store: st, Clock: clock, Limits: lim})
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Load(); err != nil {
					t.Fatal(err)
				}
				return r
			}

			t.Run("incremental", func(t *testing.T) {
				lab := newSensor(t, st, "lab-1")
				addItems(t, st, lab, "a", 0, 3, 10)
				r := newRunner(t, transform.Limits{})
				info, err := r.Create(ctx, tallyPipe("lab-tally", "sensor/lab-1"))
				if err != nil {
					t.Fatal(err)
				}
				steps := []struct {
					name   string
					add    int  // items added before the run
					fresh  bool // run on a runner started afresh
					wantIn int
				}{
					{"backlog (some stored after the pipe)", 2, false, 5},
					{"new items only", 2, false, 2},
					{"nothing new", 0, false, 0},
					{"after a restart", 0, true, 0},
					{"new items after a restart", 4, false, 4},
				}
				n := 3
				for _, s := range steps {
					if s.fresh {
						r = newRunner(t, transform.Limits{})
					}
					addItems(t, st, lab, "a", n, s.add, 10)
					queued(t, st, info.ID, s.add)
					n += s.add
					if res := runNow(t, r, info.ID); res.In != s.wantIn || res.Added != s.wantIn {
						t.Errorf("%s: run %+v, want %d in and added", s.name, res, s.wantIn)
					}
				}
				if got := len(outputIDs(t, st, info.FeedID)); got != n {
					t.Errorf("%d outputs of %d inputs", got, n)
				}
				if got := tally(t, st, info.ID); got != n {
					t.Errorf("the pipe ran %d inputs, want each of %d once", got, n)
				}
			})

			t.Run("backlog a part per run", func(t *testing.T) {
				big := newSensor(t, st, "big")
				r := newRunner(t, transform.Limits{MaxRunBytes: 64 << 10})
				addItems(t, st, big, "b", 0, 1, 8<<10)
				info, err := r.Create(ctx, tallyPipe("big-tally", "sensor/big"))
				if err != nil {
					t.Fatal(err)
				}
				if res := runNow(t, r, info.ID); res.In != 1 {
					t.Fatalf("first run %+v", res)
				}
				addItems(t, st, big, "b", 1, 20, 8<<10) // 20 × 8 KiB: more than half of the 64 KiB budget
				queued(t, st, info.ID, 20)
				total, runs := 0, 0
				for total < 20 && runs < 20 {
					res := runNow(t, r, info.ID)
					if res.In == 0 || res.In >= 20 {
						t.Fatalf("run %d read %d items, want a part of the backlog", runs, res.In)
					}
					total += res.In
					runs++
				}
				if total != 20 {
					t.Errorf("%d runs read %d items, want 20", runs, total)
				}
				if res := runNow(t, r, info.ID); res.In != 0 {
					t.Errorf("run after catching up: %+v", res)
				}
				want := make([]string, 21)
				for i := range want {
					want[i] = fmt.Sprintf("%d:b-%d", big.ID, i)
				}
				if got := outputIDs(t, st, info.FeedID); !slices.Equal(got, want) {
					t.Errorf("outputs %q,\nwant in input order %q", got, want)
				}
				if got := tally(t, st, info.ID); got != 21 {
					t.Errorf("the pipe ran %d inputs, want 21", got)
				}
			})

			t.Run("backlog over the budget", func(t *testing.T) {
				// Stored after the pipe was made: the first run takes the
				// newest that fit, as by cursor, and the older are never
				// run, though the input queue has them too.
				big := newSensor(t, st, "big-2")
				r := newRunner(t, transform.Limits{MaxRunBytes: 64 << 10})
				info, err := r.Create(ctx, tallyPipe("big-2-tally", "sensor/big-2"))
				if err != nil {
					t.Fatal(err)
				}
				addItems(t, st, big, "b", 0, 20, 8<<10)
				queued(t, st, info.ID, 20)
				first := runNow(t, r, info.ID)
				if first.In == 0 || first.In >= 20 {
					t.Fatalf("first run read %d items, want the newest that fit", first.In)
				}
				if res := runNow(t, r, info.ID); res.In != 0 {
					t.Errorf("second run %+v, want nothing: the backlog's older items are not run", res)
				}
				var want []string
				for i := 20 - first.In; i < 20; i++ {
					want = append(want, fmt.Sprintf("%d:b-%d", big.ID, i))
				}
				if got := outputIDs(t, st, info.FeedID); !slices.Equal(got, want) {
					t.Errorf("outputs %q, want the newest %q", got, want)
				}
			})

			t.Run("inputs changed", func(t *testing.T) {
				x, y := newSensor(t, st, "x"), newSensor(t, st, "y")
				r := newRunner(t, transform.Limits{})
				info, err := r.Create(ctx, tallyPipe("xy", "sensor/x"))
				if err != nil {
					t.Fatal(err)
				}
				addItems(t, st, x, "x", 0, 2, 10)
				addItems(t, st, y, "y", 0, 2, 10) // not an input yet
				queued(t, st, info.ID, 2)
				if res := runNow(t, r, info.ID); res.In != 2 {
					t.Errorf("run over x: %+v, want 2 in", res)
				}
				if _, err := r.Update(ctx, info.ID, tallyPipe("xy", "sensor/x", "sensor/y")); err != nil {
					t.Fatal(err)
				}
				addItems(t, st, x, "x", 2, 1, 10)
				queued(t, st, info.ID, 1)
				if res := runNow(t, r, info.ID); res.In != 3 {
					t.Errorf("run after y became an input: %+v, want 3 in (y's backlog of 2, x's new one)", res)
				}
				addItems(t, st, y, "y", 2, 2, 10)
				queued(t, st, info.ID, 2)
				if res := runNow(t, r, info.ID); res.In != 2 {
					t.Errorf("run over y's new items: %+v, want 2 in", res)
				}
				if got := tally(t, st, info.ID); got != 7 {
					t.Errorf("the pipe ran %d inputs, want 7", got)
				}
				if err := r.Delete(info.ID); err != nil {
					t.Fatal(err)
				}
				if q, ok := st.(storage.PipeInputQueue); ok {
					if _, err := q.NextPipeInputs(info.ID, 1); !errors.Is(err, storage.ErrNoPipeInputs) {
						t.Errorf("input queue of a deleted pipe: %v, want ErrNoPipeInputs", err)
					}
				}
			})
		})
	}
}

// dyingStore is a node's store that dies on demand: from then on the
// first batch of inputs it takes is never acknowledged nor handed back,
// later ones fail, and, when it dies before committing, so do commits.
type dyingStore struct {
	storage.Backend
	q       storage.PipeInputQueue
	dead    atomic.Bool
	commit  bool         // a dead node's commits still succeed
	held    atomic.Int32 // items a dead node took
	taken   atomic.Bool
	settled atomic.Bool // the dead node's run is over: it would have settled its batch now
}

var errDead = errors.New("node died")

func (d *dyingStore) SetPipeInputs(pipeID uint64, feeds []uint64, from uint64) error {
	if d.dead.Load() {
		return errDead
	}
	return d.q.SetPipeInputs(pipeID, feeds, from)
}

func (d *dyingStore) PipeInputsWaiting(pipeID uint64) (int, error) {
	if d.dead.Load() && d.taken.Load() {
		return 0, errDead
	}
	return d.q.PipeInputsWaiting(pipeID)
}

func (d *dyingStore) NextPipeInputs(pipeID uint64, max int) (storage.PipeBatch, error) {
	if !d.dead.Load() {
		return d.q.NextPipeInputs(pipeID, max)
	}
	if d.taken.Swap(true) {
		return nil, errDead
	}
	b, err := d.q.NextPipeInputs(pipeID, max)
	if err != nil {
		return nil, err
	}
	d.held.Store(int32(len(b.Items())))
	return deadBatch{b, d}, nil
}

func (d *dyingStore) CommitPipeRun(pipeID uint64, st json.RawMessage, out []storage.Item, run storage.PipeRun) ([]storage.Item, error) {
	if d.dead.Load() && !d.commit {
		return nil, errDead
	}
	return d.Backend.CommitPipeRun(pipeID, st, out, run)
}

// deadBatch is a batch whose node died before settling it.
type deadBatch struct {
	storage.PipeBatch
	d *dyingStore
}

func (b deadBatch) Ack([]int) error {
	b.d.settled.Store(true)
	return errDead
}

func (b deadBatch) Release([]int) error {
	b.d.settled.Store(true)
	return errDead
}

// TestPipeMovesOnJetStream: two nodes' runners over a 3-server JetStream
// cluster, the pipe's inputs posted by a third. The pipe's owner takes a
// batch of inputs and dies, before committing its run or after
// committing it but before acknowledging the inputs; the pipe moves to
// the other node at once, before the dead node's hold on the batch
// lapses (1 s), while inputs keep coming. The new owner runs what came
// since, then the dead node's batch once its hold lapsed (not again when
// it was committed): every input is run once and emitted once.
func TestPipeMovesOnJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server JetStream cluster")
	}
	c := jstest.NewCluster(t, 3)
	tests := []struct {
		name   string
		commit bool
	}{
		{"died before committing", false},
		{"died after committing, before acknowledging", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const ackWait = time.Second
			poster := openJetStream(t, c, nil, ackWait)
			nodes := []*dyingStore{{commit: tt.commit}, {}}
			for _, n := range nodes {
				b := openJetStream(t, c, nil, ackWait)
				n.Backend, n.q = b, b
				if queueOf(n) == nil {
					t.Fatal("the node's store has no input queue")
				}
			}
			lab := newSensor(t, poster, fmt.Sprint("lab-", i))
			owners := []*fakeOwner{newFakeOwner(), newFakeOwner()}
			runners := make([]*Runner, 2)
			stops := make([]context.CancelFunc, 2)
			var wg sync.WaitGroup
			for j := range runners {
				r, err := New(Options{Store: nodes[j], Owner: owners[j], Resync: 100 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Load(); err != nil {
					t.Fatal(err)
				}
				runners[j] = r
				ctx, cancel := context.WithCancel(t.Context())
				stops[j] = cancel
				wg.Go(func() { _ = r.Run(ctx) })
			}
			defer func() {
				for _, stop := range stops {
					stop()
				}
				wg.Wait()
			}()
			info, err := runners[1].Create(t.Context(), tallyPipe(fmt.Sprint("moving-", i), "sensor/"+lab.Slug))
			if err != nil {
				t.Fatal(err)
			}
			owners[0].set(info.ID)
			posted := 0
			post := func(n int) {
				addItems(t, poster, lab, "r", posted, n, 10)
				posted += n
			}
			waitFor := func(what string, limit time.Duration, ok func() bool) {
				t.Helper()
				deadline := time.Now().Add(limit)
				for !ok() {
					if time.Now().After(deadline) {
						t.Fatalf("%s: not within %v", what, limit)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			outputs := func() int { return len(outputIDs(t, poster, info.FeedID)) }

			post(5)
			waitFor("node 0 runs the pipe", 10*time.Second, func() bool { return outputs() == 5 })

			nodes[0].dead.Store(true)
			post(5)
			waitFor("node 0 takes a batch and runs it", 10*time.Second, func() bool { return nodes[0].settled.Load() })
			stops[0]()
			died := time.Now()
			held := int(nodes[0].held.Load())
			owners[0].set()
			owners[1].set(info.ID)
			post(5) // mid-stream
			time.Sleep(ackWait / 4)
			post(5)
			waitFor("every input emitted", 15*time.Second, func() bool { return outputs() == posted })
			t.Logf("node 0 held %d inputs when it died; node 1 had emitted every output %v later", held, time.Since(died).Round(time.Millisecond))
			time.Sleep(2 * ackWait) // anything handed out again meanwhile is run by now

			got := outputIDs(t, poster, info.FeedID)
			slices.Sort(got)
			var want []string
			for k := range posted {
				want = append(want, fmt.Sprintf("%d:r-%d", lab.ID, k))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("outputs %q,\nwant each input once: %q", got, want)
			}
			if n := tally(t, poster, info.ID); n != posted {
				t.Errorf("the pipe ran %d inputs, want each of %d once", n, posted)
			}
		})
	}
}

// cursorOnly hides a store's input queues: the runner reads by cursor.
type cursorOnly struct{ storage.Backend }

// BenchmarkSavedPipeRun: one run of a saved pipe over 10 new items of an
// input that holds 2,000, on one JetStream server, reading through the
// pipe's input queue or by cursor (the bbolt way, over the same store),
// and on bbolt for reference.
func BenchmarkSavedPipeRun(b *testing.B) {
	const held, fresh = 2000, 10
	for _, bc := range []struct {
		name string
		open func(t testing.TB) storage.Backend
		wrap func(storage.Backend) Store
	}{
		{"jetstream-queue", func(t testing.TB) storage.Backend { return openJetStream(t, jstest.NewServer(t), nil, 0) }, func(s storage.Backend) Store { return s }},
		{"jetstream-cursor", func(t testing.TB) storage.Backend { return openJetStream(t, jstest.NewServer(t), nil, 0) }, func(s storage.Backend) Store { return cursorOnly{s} }},
		{"bbolt", func(t testing.TB) storage.Backend { return backends[0].open(t, nil) }, func(s storage.Backend) Store { return s }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st := bc.open(b)
			f := newSensor(b, st, "bench")
			addItems(b, st, f, "h", 0, held, 100)
			r, err := New(Options{Store: bc.wrap(st)})
			if err != nil {
				b.Fatal(err)
			}
			info, err := r.Create(context.Background(), tallyPipe("bench-tally", "sensor/bench"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.RunNow(context.Background(), info.ID); err != nil {
				b.Fatal(err)
			}
			n := held
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				addItems(b, st, f, "h", n, fresh, 100)
				queued(b, bc.wrap(st), info.ID, fresh)
				n += fresh
				b.StartTimer()
				res, err := r.RunNow(context.Background(), info.ID)
				if err != nil || res.In != fresh {
					b.Fatalf("run %+v, %v; want %d in", res, err, fresh)
				}
			}
		})
	}
}

// A pipe that read by cursor on JetStream before it had an input queue,
// and one whose queue was deleted by hand, go on through a queue made
// then: the items after their cursors are run, each once, and none
// before.
func TestInputQueueMadeLater(t *testing.T) {
	c := jstest.NewServer(t)
	tests := []struct {
		name   string
		before func(t *testing.T, st *sjs.Backend, id uint64) // between the first runs and the next
	}{
		{"read by cursor before", nil},
		{"queue deleted by hand", func(t *testing.T, st *sjs.Backend, id uint64) {
			if err := st.Store().DeletePipeInputs(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openJetStream(t, c, nil, time.Second)
			lab := newSensor(t, st, fmt.Sprint("later-", i))
			var first Store = st
			if tt.before == nil {
				first = cursorOnly{st}
			}
			r, err := New(Options{Store: first})
			if err != nil {
				t.Fatal(err)
			}
			info, err := r.Create(context.Background(), tallyPipe(fmt.Sprint("later-", i), "sensor/"+lab.Slug))
			if err != nil {
				t.Fatal(err)
			}
			addItems(t, st, lab, "a", 0, 3, 10)
			for range 2 {
				if _, err := r.RunNow(context.Background(), info.ID); err != nil {
					t.Fatal(err)
				}
			}
			if tt.before != nil {
				tt.before(t, st, info.ID)
			}
			addItems(t, st, lab, "a", 3, 2, 10)
			r, err = New(Options{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Load(); err != nil {
				t.Fatal(err)
			}
			for _, want := range []int{2, 0} {
				if res, err := r.RunNow(context.Background(), info.ID); err != nil || res.In != want {
					t.Errorf("run through the queue: %+v, %v; want %d in", res, err, want)
				}
			}
			addItems(t, st, lab, "a", 5, 1, 10)
			queued(t, st, info.ID, 1)
			if res, err := r.RunNow(context.Background(), info.ID); err != nil || res.In != 1 {
				t.Errorf("run over a new item: %+v, %v", res, err)
			}
			if got := tally(t, st, info.ID); got != 6 {
				t.Errorf("the pipe ran %d inputs, want each of 6 once", got)
			}
			if _, err := st.NextPipeInputs(info.ID, 0); err != nil {
				t.Errorf("no input queue after the runs: %v", err)
			}
		})
	}
}

// lateQueue is a store whose input queue counts stored items late: every
// other fetch finds nothing, as JetStream's does right after a publish
// now and then.
type lateQueue struct {
	storage.Backend
	q storage.PipeInputQueue
	n atomic.Int64
}

func (l *lateQueue) SetPipeInputs(pipeID uint64, feeds []uint64, from uint64) error {
	return l.q.SetPipeInputs(pipeID, feeds, from)
}

func (l *lateQueue) PipeInputsWaiting(pipeID uint64) (int, error) {
	return l.q.PipeInputsWaiting(pipeID)
}

func (l *lateQueue) NextPipeInputs(pipeID uint64, max int) (storage.PipeBatch, error) {
	if l.n.Add(1)%2 == 1 {
		max = 0 // the queue as it is, without its new items
	}
	return l.q.NextPipeInputs(pipeID, max)
}

// A pipe notified of items it then does not find in its input queue
// looks again shortly: on one JetStream server, without a cluster's
// Resync, every reading stored and notified is run within a second, none
// left waiting for the next, whether the queue counts it at once or late.
func TestNotifiedItemsAreRun(t *testing.T) {
	c := jstest.NewServer(t)
	for i, tt := range []struct {
		name string
		late bool
	}{{"counted at once", false}, {"counted late", true}} {
		t.Run(tt.name, func(t *testing.T) {
			st := openJetStream(t, c, nil, time.Second)
			var rs Store = st
			if tt.late {
				rs = &lateQueue{Backend: st, q: st}
			}
			lab := newSensor(t, st, fmt.Sprint("notified-", i))
			r, err := New(Options{Store: rs})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() { _ = r.Run(ctx) })
			defer func() {
				cancel()
				wg.Wait()
			}()
			info, err := r.Create(ctx, tallyPipe(fmt.Sprint("notified-", i), "sensor/"+lab.Slug))
			if err != nil {
				t.Fatal(err)
			}
			const readings = 30
			for k := range readings {
				added, err := st.AddItems(lab.ID, []storage.Item{{ID: fmt.Sprint("n-", k), Title: "reading", Published: time.Now()}})
				if err != nil || len(added) != 1 {
					t.Fatalf("reading %d: %v", k, err)
				}
				r.Notify(lab, added)
				deadline := time.Now().Add(time.Second)
				for len(outputIDs(t, st, info.FeedID)) < k+1 {
					if time.Now().After(deadline) {
						t.Fatalf("reading %d not run a second after it was stored and notified", k)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			// A run stores its outputs before the pipe's record with its
			// state: the last run's record may still be on its way.
			n, deadline := tally(t, st, info.ID), time.Now().Add(time.Second)
			for n < readings && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
				n = tally(t, st, info.ID)
			}
			if n != readings {
				t.Errorf("the pipe ran %d inputs, want each of %d once", n, readings)
			}
		})
	}
}
