package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	"github.com/slogfeed/slogfeed/transform"
)

// Options configure a Runner.
type Options struct {
	Store Store
	// Clock gives the time of runs and drives cron triggers (default
	// schedule.RealClock).
	Clock  schedule.Clock
	Logger *slog.Logger
	// Limits bound every pipe (zero fields: transform.DefaultLimits).
	Limits transform.Limits
	// Subscribe, when set, subscribes a URL input that is not a feed yet
	// (aggregator.Service.Subscribe); without it such inputs are errors.
	Subscribe func(storage.Feed) (storage.Feed, error)
	// Local, when set, names the feed of this slogfeed a URL serves (a
	// pipe's or a sensor's document at the server's own address): a
	// source naming such a URL reads that feed directly, not through a
	// subscription to the server's own documents, and a pipe that would
	// read its own output so is refused as any cycle is.
	Local func(rawURL string) (transform.Ref, bool)
	// Workers is how many pipes may run at once (default 2).
	Workers int
	// FeedPath is the path under which outputs are served (default
	// "/feeds/").
	FeedPath string
	// PreviewItems is how many of each input's newest items a preview
	// runs on (default 50).
	PreviewItems int
	// PlannedFetch, when set, tells when what the next fetch of an input
	// feed finds is expected to be stored, as of now, or false when the
	// feed's next items do not come from a scheduled fetch
	// (aggregator.Service.PlannedFetch). With it a pipe plans its next
	// update and tells subscribers (Hints, Slogfeed-Due).
	PlannedFetch func(feedID uint64, now time.Time) (time.Time, bool)
	// OnOutput, when set, is told of every run that added items to a
	// pipe's output feed, after they are stored (sinks, WebSub
	// distribution). It runs on the pipe's worker: keep it short.
	OnOutput func(feed storage.Feed, items []storage.Item)
	// Owner says which pipes this node runs (a cluster node's shards);
	// nil means cluster.Everything, a single slogfeed that runs all.
	// Every pipe is loaded (for the API and the output feeds' hints);
	// only owned pipes run, and the runner follows Owner.Changed.
	Owner cluster.Owner
	// Resync is how often a clustered runner re-reads the stored pipes
	// and checks the owned pipes' inputs for new items (DefaultResync
	// when zero); without an Owner it is unused.
	Resync time.Duration
}

// Runner runs pipes. Its methods are safe for concurrent use.
type Runner struct {
	opt   Options
	st    Store
	q     storage.PipeInputQueue // nil: inputs are read by cursor
	clock schedule.Clock
	log   *slog.Logger

	// defMu serialises changes of definitions (Create, Update, Delete)
	// and removals of input feeds (ReleaseFeed), each from its checks
	// (inputs exist, no cycle, no reader) to its commit, so that two
	// changes cannot each pass their checks against the state the other
	// is about to replace. Taken after the changed pipe's runMu (see
	// lockChange) and before mu.
	defMu   sync.Mutex
	mu      sync.Mutex
	pipes   map[uint64]*pipe   // by pipe id
	byInput map[uint64][]*pipe // input feed id → pipes reading it
	byFeed  map[uint64]*pipe   // output feed id → pipe
	queue   []*pipe
	wake    chan struct{} // a pipe was queued
	rearm   chan struct{} // cron schedules changed
	running bool
}

// pipe is the runner's view of one pipe.
type pipe struct {
	id, feedID uint64
	slug       string
	def        transform.Pipe
	raw        []byte  // def as stored (storage.Pipe.Def)
	inputs     []Input // resolved sources, in definition order
	feeds      []uint64
	cron       cron.Schedule

	// Under Runner.mu.
	queued   bool
	nextCron time.Time
	// cronNever: the cron schedule has no next activation (one a
	// definition check refuses, stored before it did).
	cronNever bool

	// Input queue: items were held elsewhere at the last run; the newest
	// Seq notified per input feed, not run yet; runs that missed it.
	retry       bool
	expect      map[uint64]uint64
	expectTries int

	runMu sync.Mutex       // serialises runs and changes
	graph *transform.Graph // compiled, its operators' state as committed; nil to rebuild
	// inputsSet: this node has set the input queue's feeds (under runMu).
	inputsSet bool

	// recent holds the hashes of the ids of the pipe's newest output
	// items (under runMu; nil until read); looped counts the input items
	// dropped as its own output come back.
	recent map[uint64]struct{}
	looped int

	modelMu sync.Mutex
	model   *schedule.Auto // arrivals of the pipe's output
	fan     fanIn          // under modelMu
}

// state is what a pipe keeps between runs (storage.Pipe.State).
type state struct {
	V int `json:"v"`
	// Cursors: "<node>@<feed id>" → the Seq of the last input item taken.
	Cursors map[string]uint64 `json:"cursors,omitempty"`
	// Nodes are the operators' states.
	Nodes map[string]json.RawMessage `json:"nodes,omitempty"`

	// With an input queue (storage.PipeInputQueue) a node's items come
	// from the queue, except its backlog, read from the store when its
	// cursor is 0; Cursors still hold the Seq of the last item taken.
	//
	// Floors: "<node>@<feed id>" → the Seq at or below which the node's
	// items of the feed were read from the store (its backlog, or every
	// item read by cursor before the queue was made): the queue's items
	// at or below it are not taken again.
	Floors map[string]uint64 `json:"floors,omitempty"`
	// Queue names the input queue Floors and Unacked refer to; a queue
	// made afresh starts at the lowest cursor, and its items at or below
	// each node's cursor are not taken again.
	Queue string `json:"queue,omitempty"`
	// Unacked are the Seqs of queued items consumed by committed runs
	// and not known to be acknowledged: handed out again (their node
	// died between the commit and the acknowledgement), they are
	// acknowledged and not run twice.
	Unacked []uint64 `json:"unacked,omitempty"`
}

// New returns a Runner; call Load, then Run.
func New(opt Options) (*Runner, error) {
	if opt.Store == nil {
		return nil, errors.New("runner: no store")
	}
	if opt.Clock == nil {
		opt.Clock = schedule.RealClock{}
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Workers <= 0 {
		opt.Workers = 2
	}
	if opt.FeedPath == "" {
		opt.FeedPath = "/feeds/"
	}
	if opt.PreviewItems <= 0 {
		opt.PreviewItems = 50
	}
	if opt.Owner == nil {
		opt.Owner = cluster.Everything
	}
	if opt.Resync <= 0 {
		opt.Resync = DefaultResync
	}
	return &Runner{
		opt: opt, st: opt.Store, clock: opt.Clock, log: opt.Logger,
		q:       queueOf(opt.Store),
		pipes:   make(map[uint64]*pipe),
		byInput: make(map[uint64][]*pipe),
		byFeed:  make(map[uint64]*pipe),
		wake:    make(chan struct{}, 1),
		rearm:   make(chan struct{}, 1),
	}, nil
}

// Load reads every stored pipe. A pipe whose definition no longer
// compiles, or whose inputs are gone, is kept (its runs fail with the
// reason, shown as its last error) and the others load.
func (r *Runner) Load() error {
	sps, err := r.st.Pipes()
	if err != nil {
		return fmt.Errorf("runner: loading pipes: %w", err)
	}
	for _, sp := range sps {
		r.loadPipe(sp)
	}
	r.kickCron()
	return nil
}

// loadPipe adds stored pipe sp to the runner.
func (r *Runner) loadPipe(sp storage.Pipe) {
	var def transform.Pipe
	if err := json.Unmarshal(sp.Def, &def); err != nil {
		r.log.Error("pipe definition unreadable", "pipe", sp.ID, "slug", sp.Slug, "err", err)
		return
	}
	p := &pipe{id: sp.ID, feedID: sp.FeedID, slug: sp.Slug, def: def, raw: sp.Def}
	if g, err := transform.Compile(def, r.opt.Limits); err != nil {
		r.log.Warn("pipe does not compile", "pipe", sp.ID, "slug", sp.Slug, "err", err)
	} else if inputs, err := r.resolve(g, false); err != nil {
		r.log.Warn("pipe inputs missing", "pipe", sp.ID, "slug", sp.Slug, "err", err)
	} else {
		p.setInputs(inputs)
	}
	p.setTrigger(def)
	r.mu.Lock()
	r.add(p)
	r.mu.Unlock()
}

// setInputs sets the pipe's inputs; r.mu is held. p.feeds gets a new
// array (Hints reads the old one after releasing r.mu), and the fan-in is
// learned afresh.
func (p *pipe) setInputs(in []Input) {
	p.inputs = in
	p.feeds = make([]uint64, 0, len(in))
	p.modelMu.Lock()
	p.fan = fanIn{}
	p.modelMu.Unlock()
	for _, i := range in {
		if !slices.Contains(p.feeds, i.FeedID) {
			p.feeds = append(p.feeds, i.FeedID)
		}
	}
}

func (p *pipe) setTrigger(def transform.Pipe) {
	p.cron = nil
	if def.Trigger.On == transform.OnCron {
		p.cron, _ = transform.CronParser.Parse(def.Trigger.Cron)
	}
}

// add registers p in the indexes; r.mu is held.
func (r *Runner) add(p *pipe) {
	r.pipes[p.id] = p
	r.byFeed[p.feedID] = p
	for _, f := range p.feeds {
		r.byInput[f] = append(r.byInput[f], p)
	}
}

// remove drops p from the indexes; r.mu is held.
func (r *Runner) remove(p *pipe) {
	delete(r.pipes, p.id)
	if r.byFeed[p.feedID] == p {
		delete(r.byFeed, p.feedID)
	}
	for _, f := range p.feeds {
		list := slices.DeleteFunc(r.byInput[f], func(q *pipe) bool { return q == p })
		if len(list) == 0 {
			delete(r.byInput, f)
		} else {
			r.byInput[f] = list
		}
	}
	r.queue = slices.DeleteFunc(r.queue, func(q *pipe) bool { return q == p })
}

// Notify tells the runner that feed gained items (the aggregator's
// OnNewItems, the sensor store's, and the runner's own outputs). Pipes
// reading the feed run according to their triggers. It never blocks on a
// run.
//
// An "mdpt" pipe runs on every arrival too: its inputs are fetched on
// their own schedules (each feed's DPT policy), and what it republishes
// when is its operators' choice: a join with "min": m fuses a round once m
// inputs have a reading in it. (Gating the runs themselves on m fresh
// inputs falls a round behind for good as soon as one input publishes its
// next round before another's reading of this one.)
func (r *Runner) Notify(feed storage.Feed, items []storage.Item) {
	if len(items) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.byInput[feed.ID] {
		switch p.def.Trigger.On {
		case "", transform.OnUpdate, transform.OnMDPT:
			r.enqueue(p)
		default:
			continue
		}
		if r.q != nil {
			p.expectSeq(feed.ID, items)
		}
	}
}

// enqueue queues p for a run unless it is queued already; r.mu is held.
func (r *Runner) enqueue(p *pipe) {
	if p.queued {
		return
	}
	p.queued = true
	r.queue = append(r.queue, p)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run runs queued pipes and cron triggers until ctx ends, then waits for
// the runs in progress.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return errors.New("runner: already running")
	}
	r.running = true
	r.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { r.owned(ctx) })
	for range r.opt.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx)
		}()
	}
	r.cronLoop(ctx)
	wg.Wait()
	return nil
}

func (r *Runner) work(ctx context.Context) {
	for {
		r.mu.Lock()
		var p *pipe
		if len(r.queue) > 0 {
			p = r.queue[0]
			r.queue = r.queue[1:]
			p.queued = false
		}
		more := len(r.queue) > 0
		r.mu.Unlock()
		if p == nil {
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
				continue
			}
		}
		if more { // let another worker take the next one
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
		if !r.owns(p) {
			continue // another node's: it runs the pipe
		}
		if _, err := r.run(ctx, p); err != nil && ctx.Err() == nil {
			r.log.Warn("pipe run failed", "pipe", p.id, "slug", p.slug, "err", err)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// cronLoop fires cron triggers on the clock.
func (r *Runner) cronLoop(ctx context.Context) {
	timer := r.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := r.clock.Now()
		var next time.Time
		r.mu.Lock()
		for _, p := range r.pipes {
			if p.cron == nil || p.cronNever {
				continue
			}
			if p.nextCron.IsZero() {
				p.nextCron = p.cron.Next(now)
			}
			if p.nextCron.IsZero() {
				p.cronNever = true // never fires: no run, and no wait on it
				continue
			}
			if !p.nextCron.After(now) {
				r.enqueue(p)
				if p.nextCron = p.cron.Next(now); p.nextCron.IsZero() {
					p.cronNever = true
					continue
				}
			}
			if next.IsZero() || p.nextCron.Before(next) {
				next = p.nextCron
			}
		}
		r.mu.Unlock()
		wait := 24 * time.Hour
		if !next.IsZero() {
			wait = next.Sub(now)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-r.rearm:
			if !timer.Stop() {
				select {
				case <-timer.C():
				default:
				}
			}
		}
	}
}

func (r *Runner) kickCron() {
	select {
	case r.rearm <- struct{}{}:
	default:
	}
}

// RunNow runs pipe id at once, whatever its trigger, and returns what the
// run did.
func (r *Runner) RunNow(ctx context.Context, id uint64) (RunResult, error) {
	r.mu.Lock()
	p := r.pipes[id]
	r.mu.Unlock()
	if p == nil {
		return RunResult{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return r.run(ctx, p)
}

// run runs p once on the input items that arrived since its last run and
// commits the output, the new cursors and operator states together.
func (r *Runner) run(ctx context.Context, p *pipe) (RunResult, error) {
	p.runMu.Lock()
	defer p.runMu.Unlock()
	now := r.clock.Now()
	res := RunResult{At: now}
	if p.inputs == nil {
		// The definition did not compile or an input was missing at
		// load; try again, the input may exist now.
		g, err := transform.Compile(p.def, r.opt.Limits)
		if err == nil {
			var in []Input
			if in, err = r.resolve(g, false); err == nil {
				r.mu.Lock()
				r.remove(p)
				p.setInputs(in)
				p.setTrigger(p.def)
				r.add(p)
				r.mu.Unlock()
			}
		}
		if err != nil {
			r.fail(p, now, err)
			return res, err
		}
	}
	if path := r.readsItself(p.id, p.inputs); path != "" {
		// Stored so by a definition changed on two cluster nodes at once,
		// or before the server's own URLs were known as its feeds.
		err := fmt.Errorf("runner: the pipe reads its own output (%s): change its sources", path)
		r.fail(p, now, err)
		return res, err
	}
	sp, err := r.st.Pipe(p.id)
	if err != nil {
		return res, fmt.Errorf("runner: pipe %d: %w", p.id, r.notFound(p.id, err))
	}
	var st state
	if len(sp.State) > 0 {
		if err := json.Unmarshal(sp.State, &st); err != nil {
			r.log.Warn("pipe state unreadable, starting afresh", "pipe", p.id, "err", err)
			st = state{}
		}
	}
	if st.Cursors == nil {
		st.Cursors = make(map[string]uint64)
	}
	g := p.graph
	if g == nil {
		if g, err = transform.Compile(p.def, r.opt.Limits); err != nil {
			r.fail(p, now, err)
			return res, err
		}
		for _, e := range g.LoadState(st.Nodes) {
			r.log.Warn("pipe operator state", "pipe", p.id, "err", e)
		}
	}

	var rd read
	if r.q != nil && len(p.feeds) > 0 {
		rd, err = r.readQueue(p, g, &st)
	} else {
		rd, err = r.readCursors(p, g, &st)
	}
	defer func() { rd.release(r, p) }() // hands back what a failed run took
	if err != nil {
		p.graph = nil
		r.fail(p, now, err)
		return res, err
	}
	inputs, fresh := rd.inputs, rd.fresh
	r.dropReturned(p, inputs)
	res.In = rd.n
	// Drop the cursors and floors of sources that are gone.
	for _, m := range []map[string]uint64{st.Cursors, st.Floors} {
		for k := range m {
			if !slices.ContainsFunc(p.inputs, func(in Input) bool { return k == inputKey(in) }) {
				delete(m, k)
			}
		}
	}

	out, _, err := g.Run(ctx, now, inputs, false)
	if err != nil {
		p.graph = nil // its operators may hold half a run
		r.fail(p, now, err)
		var pe *transform.PanicError
		if errors.As(err, &pe) {
			r.log.Error("pipe operator panicked", "pipe", p.id, "slug", p.slug, "panic", pe.Value, "stack", string(pe.Stack))
		}
		return res, err
	}
	if st.Nodes, err = g.SaveState(); err != nil {
		p.graph = nil
		r.fail(p, now, err)
		return res, err
	}
	st.V = 1
	if rd.batch != nil {
		st.Unacked = rd.unacked
	}
	raw, err := json.Marshal(st)
	if err != nil {
		p.graph = nil
		return res, fmt.Errorf("runner: encoding state: %w", err)
	}
	for i := range out {
		it := &out[i]
		it.FeedID, it.Seq = 0, 0
		it.GUID = it.ID
		it.Published, it.Updated, it.Fetched = now, now, now
		cleanOutput(it)
	}
	added, err := r.st.CommitPipeRun(p.id, raw, out, storage.PipeRun{At: now})
	if err != nil {
		p.graph = nil
		if errors.Is(err, storage.ErrInvalid) {
			err = fmt.Errorf("%w: %w", ErrOutputRefused, err)
		}
		err = fmt.Errorf("runner: storing the output of pipe %d: %w", p.id, err)
		r.fail(p, now, err)
		return res, err
	}
	rd.settle(r, p) // acknowledged only now that the run is committed
	p.rememberOutput(added)
	p.graph = g
	p.modelMu.Lock()
	p.fan.ran(fresh, len(added) > 0)
	p.modelMu.Unlock()
	res.Out, res.Added = len(out), len(added)
	res.TookS = r.clock.Now().Sub(now).Seconds()
	if len(added) > 0 {
		p.observe(now)
		r.log.Debug("pipe ran", "pipe", p.id, "slug", p.slug, "in", res.In, "out", res.Out, "added", res.Added)
		if f, err := r.st.Feed(p.feedID); err == nil {
			r.Notify(f, added)
			if r.opt.OnOutput != nil {
				r.opt.OnOutput(f, added)
			}
		}
	}
	return res, nil
}

// recentOutputs is how many of a pipe's newest output ids dropReturned
// compares with.
const recentOutputs = 2048

// dropReturned removes from the items of p's remote inputs (by source
// node) those that are p's own output come back through another
// slogfeed's pipe (A reads B, B reads A), before p's operators see them,
// so that such a loop ends at its first turn whatever the operators make
// of its items. Each pipe prefixes the ids of the items it takes with
// their feed ("12:…"), and RSS and JSON Feed publish the ids as they are
// (Atom as the end of its entry ids): an item of p's come back has an id
// whose part after its first ":" ends with ":" and the id of one of p's
// outputs, or is one. Items of local feeds are never dropped: a pipe may
// read one item twice, directly and through another pipe. p.runMu is
// held.
func (r *Runner) dropReturned(p *pipe, inputs map[string][]transform.Item) {
	var remote []string
	for _, in := range p.inputs {
		if in.Kind == storage.KindRemote && len(inputs[in.Node]) > 0 {
			remote = append(remote, in.Node)
		}
	}
	if len(remote) == 0 {
		return
	}
	if p.recent == nil {
		items, err := r.st.Items(p.feedID, storage.ItemQuery{Limit: recentOutputs, Order: storage.ByArrival})
		if err != nil {
			return // read again at the next run
		}
		p.recent = make(map[uint64]struct{}, len(items))
		for _, it := range items {
			p.recent[idHash(it.ID)] = struct{}{}
		}
	}
	returned := func(it transform.Item) bool {
		// The other slogfeed's pipe added at least its own prefix: the
		// whole id is never compared, so that an id that merely equals
		// one of p's (feed numbers agree by chance) is kept.
		for i := strings.IndexByte(it.ID, ':'); i >= 0; {
			if _, ok := p.recent[idHash(it.ID[i+1:])]; ok {
				return true
			}
			j := strings.IndexByte(it.ID[i+1:], ':')
			if j < 0 {
				break
			}
			i += j + 1
		}
		return false
	}
	dropped := 0
	for _, node := range remote {
		n := len(inputs[node])
		inputs[node] = slices.DeleteFunc(inputs[node], returned)
		dropped += n - len(inputs[node])
	}
	if dropped > 0 {
		if p.looped == 0 {
			r.log.Warn("pipe output came back through its inputs: dropped (a loop between slogfeeds)",
				"pipe", p.id, "slug", p.slug, "items", dropped)
		}
		p.looped += dropped
	}
}

// idHash is the hash of an item id that dropReturned remembers.
func idHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// rememberOutput adds the ids of items just added to p's output to those
// dropReturned compares with; p.runMu is held.
func (p *pipe) rememberOutput(added []storage.Item) {
	if p.recent == nil {
		return
	}
	if len(p.recent)+len(added) > 2*recentOutputs {
		p.recent = nil // read again from the store, newest first
		return
	}
	for _, it := range added {
		p.recent[idHash(it.ID)] = struct{}{}
	}
}

// cleanOutput holds an output item to the rules of fetched items, since
// operators (set, compute, template, regex_replace, WebAssembly) may
// have written any text: its summary and content are sanitised HTML, and
// its link and enclosures keep only absolute http and https URLs. The
// plain-text fields are made plain where the items are shown.
func cleanOutput(it *storage.Item) {
	// Operators cap a text at transform's MaxText, the store a title
	// and an id lower: a title is cut, an id too long is named by its
	// digest (the same id gives the same digest, run after run).
	if len(it.Title) > storage.MaxTitleLen {
		it.Title = storage.TruncateUTF8(it.Title, storage.MaxTitleLen)
	}
	if len(it.ID) > storage.MaxIDLen {
		sum := sha256.Sum256([]byte(it.ID))
		it.ID = "sha256:" + hex.EncodeToString(sum[:])
		it.GUID = it.ID
	}
	it.Summary = sanitize.HTML(it.Summary, nil)
	it.Content = sanitize.HTML(it.Content, nil)
	if it.Link != "" {
		it.Link, _ = sanitize.ResolveURL(nil, it.Link, false)
	}
	if len(it.Enclosures) > 0 {
		encs := it.Enclosures[:0:0]
		for _, e := range it.Enclosures {
			if u, ok := sanitize.ResolveURL(nil, e.URL, false); ok {
				e.URL = u
				encs = append(encs, e)
			}
		}
		it.Enclosures = encs
	}
}

// fail records a failed run.
func (r *Runner) fail(p *pipe, now time.Time, err error) {
	msg := err.Error()
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	if _, cerr := r.st.CommitPipeRun(p.id, nil, nil, storage.PipeRun{At: now, Err: msg}); cerr != nil && !errors.Is(cerr, storage.ErrPipeNotFound) {
		r.log.Error("recording pipe failure", "pipe", p.id, "err", cerr)
	}
}

// readAllowance is how many bytes of items a saved pipe's run reads from
// one more input, loaded bytes having been read already: half of the node
// and of the run budget, so that its operators have room for their output.
func readAllowance(lim transform.Limits, loaded int64) int64 {
	lim = lim.WithDefaults()
	return min(lim.MaxNodeBytes, lim.MaxRunBytes)/2 - loaded
}

// fitBytes returns how many of the items seq yields, in its order, fit in
// max bytes (transform.ItemBytes), and at least one, so that a run always
// moves on.
func fitBytes(seq iter.Seq2[int, storage.Item], max int64) int {
	n, used := 0, int64(0)
	for _, it := range seq {
		if used += transform.ItemBytes(&it); n > 0 && used > max {
			break
		}
		n++
	}
	return n
}
