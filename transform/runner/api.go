package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/pack"
)

// resolve finds the feed of every source node of g. With subscribe set,
// a URL that is not a feed yet is subscribed (when Options.Subscribe
// allows). Missing inputs are reported together, each naming its node.
func (r *Runner) resolve(g *transform.Graph, subscribe bool) ([]Input, error) {
	var errs transform.Errors
	var out []Input
	for _, s := range g.Sources() {
		f, err := r.feedOf(s.Ref, subscribe)
		if err != nil {
			errs = append(errs, &transform.NodeError{Node: s.Node, Op: "source", Err: &transform.FieldError{Field: "feed", Err: err}})
			continue
		}
		out = append(out, Input{Node: s.Node, Ref: s.Ref.String(), Kind: f.Kind, FeedID: f.ID, Title: f.Title})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func (r *Runner) feedOf(ref transform.Ref, subscribe bool) (storage.Feed, error) {
	var f storage.Feed
	var err error
	switch ref.Kind {
	case "feed":
		id, _ := strconv.ParseUint(ref.Key, 10, 64)
		f, err = r.st.Feed(id)
	case "sensor":
		f, err = r.st.FeedBySlug(storage.KindSensor, ref.Key)
	case "pipe":
		f, err = r.st.FeedBySlug(storage.KindPipe, ref.Key)
	case "url":
		if local, ok := r.local(ref); ok {
			return r.feedOf(local, subscribe)
		}
		f, err = r.st.FeedByURL(ref.Key)
		if errors.Is(err, storage.ErrFeedNotFound) {
			// Subscribed without its fragment, which is never fetched.
			if key, _, cut := strings.Cut(ref.Key, "#"); cut {
				f, err = r.st.FeedByURL(key)
			}
		}
		if errors.Is(err, storage.ErrFeedNotFound) && strings.Contains(ref.Key, "@") {
			// A definition read back from the API has the credentials of
			// its URLs masked: it names the feed whose URL masks so.
			f, err = r.feedByMaskedURL(ref.Key)
		}
		if errors.Is(err, storage.ErrFeedNotFound) && subscribe && r.opt.Subscribe != nil && !masked(ref.Key) {
			f, err = r.opt.Subscribe(storage.Feed{URL: ref.Key, Policy: schedule.DefaultPolicy})
			if err != nil {
				return f, fmt.Errorf("subscribing to %s: %w", sanitize.RedactURL(ref.Key), err)
			}
		}
	default:
		return f, fmt.Errorf("%w: %s", ErrInputNotFound, ref)
	}
	if errors.Is(err, storage.ErrFeedNotFound) {
		what := map[string]string{"feed": "no feed", "sensor": "no sensor", "pipe": "no pipe", "url": "no subscribed feed"}[ref.Kind]
		return f, fmt.Errorf("%w: %s %q", ErrInputNotFound, what, sanitize.RedactURL(ref.Key))
	}
	return f, err
}

// local is the feed of this slogfeed that ref names by its URL
// (Options.Local).
func (r *Runner) local(ref transform.Ref) (transform.Ref, bool) {
	if ref.Kind != "url" || r.opt.Local == nil {
		return transform.Ref{}, false
	}
	local, ok := r.opt.Local(ref.Key)
	return local, ok && local.Kind != "url"
}

// masked reports whether url has credentials and they are masked, as
// the API shows them: such a URL names a subscribed feed, never one to
// subscribe to.
func masked(url string) bool {
	return strings.Contains(url, "@") && sanitize.RedactURL(url) == url && strings.Contains(url, sanitize.Masked+"@")
}

// unmask gives the source nodes of def whose URL is the masked form of
// the URL the same node reads in old (the stored definition) that URL
// back, so that a definition read from the API and sent back keeps
// reading the feeds it read.
func unmask(def, old transform.Pipe) transform.Pipe {
	feedOf := func(n transform.Node) (map[string]json.RawMessage, string, bool) {
		var cfg map[string]json.RawMessage
		var feed string
		if n.Op != "source" || json.Unmarshal(n.Config, &cfg) != nil || json.Unmarshal(cfg["feed"], &feed) != nil {
			return nil, "", false
		}
		return cfg, feed, true
	}
	real := make(map[string]string)
	for _, n := range old.Nodes {
		if _, feed, ok := feedOf(n); ok && sanitize.RedactURL(feed) != feed {
			real[n.ID] = feed
		}
	}
	if len(real) == 0 {
		return def
	}
	nodes := slices.Clone(def.Nodes)
	for i, n := range nodes {
		cfg, feed, ok := feedOf(n)
		if was, known := real[n.ID]; ok && known && sanitize.RedactURL(was) == feed {
			cfg["feed"], _ = json.Marshal(was)
			nodes[i].Config, _ = json.Marshal(cfg)
		}
	}
	def.Nodes = nodes
	return def
}

// feedByMaskedURL finds the remote feed whose URL, its credentials
// masked (sanitize.RedactURL), is masked; storage.ErrFeedNotFound when
// none or more than one is.
func (r *Runner) feedByMaskedURL(masked string) (storage.Feed, error) {
	if sanitize.RedactURL(masked) != masked {
		return storage.Feed{}, storage.ErrFeedNotFound // not a masked URL
	}
	feeds, err := r.st.Feeds()
	if err != nil {
		return storage.Feed{}, err
	}
	var found []storage.Feed
	for _, f := range feeds {
		if f.Kind == storage.KindRemote && f.URL != masked && sanitize.RedactURL(f.URL) == masked {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		return storage.Feed{}, storage.ErrFeedNotFound
	}
	return found[0], nil
}

// loadBudget counts an input's items, read from the store before the
// run, against the run's byte budget: loaded is what the inputs read
// before took. It returns the new total, or an error wrapping
// transform.ErrByteLimit that names the source node.
func loadBudget(lim transform.Limits, in Input, list []transform.Item, loaded int64) (int64, error) {
	for i := range list {
		loaded += transform.ItemBytes(&list[i])
	}
	if max := lim.WithDefaults().MaxRunBytes; loaded > max {
		return loaded, &transform.NodeError{Node: in.Node, Op: "source", Err: fmt.Errorf("%w: the inputs read %d bytes by this one, at most %d (max_run_bytes)", transform.ErrByteLimit, loaded, max)}
	}
	return loaded, nil
}

// redactDef masks the credentials of the URLs def's source nodes read,
// for the API (see feedByMaskedURL for the way back).
func redactDef(def transform.Pipe) transform.Pipe {
	nodes := slices.Clone(def.Nodes)
	for i, n := range nodes {
		if n.Op != "source" || !strings.Contains(string(n.Config), "@") {
			continue
		}
		var cfg map[string]json.RawMessage
		var feed string
		if json.Unmarshal(n.Config, &cfg) != nil || json.Unmarshal(cfg["feed"], &feed) != nil {
			continue
		}
		if masked := sanitize.RedactURL(feed); masked != feed {
			cfg["feed"], _ = json.Marshal(masked)
			nodes[i].Config, _ = json.Marshal(cfg)
		}
	}
	def.Nodes = nodes
	return def
}

// compile checks def as a pipe to store: it compiles, its output's
// reduction policy parses, its inputs exist, and it does not read its own
// output through other pipes (self is the pipe's id, 0 for a new pipe).
func (r *Runner) compile(def transform.Pipe, self uint64) (*transform.Graph, []Input, error) {
	g, err := transform.Compile(def, r.opt.Limits)
	if err != nil {
		return nil, nil, err
	}
	if len(def.Output.Reduce) > 0 && string(def.Output.Reduce) != "null" {
		if _, err := pack.ParsePolicy(def.Output.Reduce); err != nil {
			var fe *transform.FieldError
			field := "output.reduce"
			if errors.As(err, &fe) && fe.Field != "" {
				field += "." + fe.Field
				err = fe.Err
			}
			return nil, nil, transform.Errors{&transform.FieldError{Field: field, Err: err}}
		}
	}
	if err := r.readsOwnSlug(g, def); err != nil {
		return nil, nil, err
	}
	inputs, err := r.resolve(g, true)
	if err != nil {
		return nil, nil, err
	}
	if err := r.checkLoop(self, inputs); err != nil {
		return nil, nil, err
	}
	return g, inputs, nil
}

// readsOwnSlug refuses a source of g that names def's own output.
func (r *Runner) readsOwnSlug(g *transform.Graph, def transform.Pipe) error {
	for _, s := range g.Sources() {
		ref := s.Ref
		if local, ok := r.local(ref); ok {
			ref = local
		}
		if ref.Kind == "pipe" && ref.Key == def.Output.Slug {
			return transform.Errors{&transform.NodeError{Node: s.Node, Op: "source",
				Err: transform.Fieldf("feed", "the pipe would read its own output (%s)", s.Ref)}}
		}
	}
	return nil
}

// checkLoop refuses inputs that lead back to pipe self's output through
// other pipes (self 0: a new pipe, which no pipe reads yet).
func (r *Runner) checkLoop(self uint64, inputs []Input) error {
	if self == 0 {
		return nil
	}
	if path := r.readsItself(self, inputs); path != "" {
		return transform.Errors{transform.Fieldf("nodes", "the pipe would read its own output (%s)", path)}
	}
	return nil
}

// readsItself reports, as a path of slugs, whether inputs lead back to
// pipe self's output through pipes.
func (r *Runner) readsItself(self uint64, inputs []Input) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := r.pipes[self]
	if sp == nil {
		return ""
	}
	seen := map[uint64]bool{}
	var walk func(feed uint64, path string) string
	walk = func(feed uint64, path string) string {
		if feed == sp.feedID {
			return path + " → " + sp.slug
		}
		p := r.byFeed[feed]
		if p == nil || seen[p.id] {
			return ""
		}
		seen[p.id] = true
		for _, f := range p.feeds {
			if s := walk(f, path+" → "+p.slug); s != "" {
				return s
			}
		}
		return ""
	}
	for _, in := range inputs {
		if s := walk(in.FeedID, sp.slug); s != "" {
			return s
		}
	}
	return ""
}

// outputFeed is the output feed a definition asks for.
func outputFeed(def transform.Pipe, f storage.Feed) storage.Feed {
	o := def.Output
	f.Kind, f.Slug = storage.KindPipe, o.Slug
	f.Title, f.Description = o.Title, o.Description
	if f.Title == "" {
		f.Title = def.Name
	}
	if f.Title == "" {
		f.Title = o.Slug
	}
	f.Retention = o.Retention
	if f.Retention.MaxItems == 0 {
		f.Retention.MaxItems = transform.DefaultOutputItems
	}
	f.Reduce = o.Reduce
	return f
}

// checkNew refuses what a definition saved now may not have, though a
// stored one keeps working: a cron trigger under schedule.MinEvery
// (rounded up to it when a stored pipe loads).
func checkNew(def transform.Pipe) error {
	if def.Trigger.On == transform.OnCron {
		if err := schedule.CheckEvery(def.Trigger.Cron); err != nil {
			return transform.Errors{transform.Fieldf("trigger.cron", "%v", err)}
		}
	}
	return nil
}

// Create checks and stores a new pipe, and runs it at once (on its
// inputs' backlog) unless its trigger is manual or cron.
func (r *Runner) Create(ctx context.Context, def transform.Pipe) (Info, error) {
	r.defMu.Lock()
	defer r.defMu.Unlock()
	if err := checkNew(def); err != nil {
		return Info{}, err
	}
	_, inputs, err := r.compile(def, 0)
	if err != nil {
		return Info{}, err
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return Info{}, fmt.Errorf("runner: encoding pipe: %w", err)
	}
	sp := storage.Pipe{Slug: def.Output.Slug, Def: raw}
	out := outputFeed(def, storage.Feed{})
	if err := r.st.CreatePipe(&sp, &out); err != nil {
		if errors.Is(err, storage.ErrPipeExists) || errors.Is(err, storage.ErrFeedExists) {
			return Info{}, fmt.Errorf("%w: %q", ErrSlugTaken, def.Output.Slug)
		}
		return Info{}, fmt.Errorf("runner: storing pipe: %w", err)
	}
	p := &pipe{id: sp.ID, feedID: sp.FeedID, slug: sp.Slug, def: def, raw: raw}
	p.setInputs(inputs)
	p.setTrigger(def)
	if r.q != nil && len(p.feeds) > 0 {
		// The input queue is made with the pipe; should that fail, the
		// first run makes it (the backlog is read from the store anyway).
		if err := r.setInputs(p, &state{}); err != nil {
			r.log.Warn("pipe input queue", "pipe", p.id, "slug", p.slug, "err", err)
		}
	}
	r.mu.Lock()
	r.add(p)
	if updated(p) {
		r.enqueue(p)
	}
	r.mu.Unlock()
	r.kickCron()
	r.log.Info("pipe created", "pipe", p.id, "slug", p.slug)
	return r.Get(p.id)
}

// Update replaces pipe id's definition. Input cursors carry over, so the
// pipe goes on from where it was; operator states carry over where the
// node keeps its id and its state still loads.
func (r *Runner) Update(ctx context.Context, id uint64, def transform.Pipe) (Info, error) {
	p, unlock, err := r.lockChange(id)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	r.mu.Lock()
	def = unmask(def, p.def)
	r.mu.Unlock()
	if err := checkNew(def); err != nil {
		return Info{}, err
	}
	_, inputs, err := r.compile(def, id)
	if err != nil {
		return Info{}, err
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return Info{}, fmt.Errorf("runner: encoding pipe: %w", err)
	}
	if def.Output.Slug != p.slug {
		// Readers name the pipe by its slug: a new one would leave them
		// reading whatever takes the old one next.
		r.mu.Lock()
		readers := r.byInput[p.feedID]
		r.mu.Unlock()
		for _, q := range readers {
			if q != p {
				return Info{}, fmt.Errorf("%w: pipe %q reads it as pipe/%s: change its source first", ErrInUse, q.slug, p.slug)
			}
		}
	}
	sp, err := r.st.Pipe(id)
	if err != nil {
		return Info{}, r.notFound(id, err)
	}
	sp.Def, sp.Slug = raw, def.Output.Slug
	if err := r.st.UpdatePipeFeed(sp, func(f *storage.Feed) error {
		*f = outputFeed(def, *f)
		return nil
	}); err != nil {
		if errors.Is(err, storage.ErrPipeExists) || errors.Is(err, storage.ErrFeedExists) {
			return Info{}, fmt.Errorf("%w: %q", ErrSlugTaken, def.Output.Slug)
		}
		return Info{}, r.notFound(id, err)
	}
	r.mu.Lock()
	r.remove(p)
	p.def, p.raw, p.slug, p.graph = def, raw, sp.Slug, nil
	p.setInputs(inputs)
	p.setTrigger(def)
	p.nextCron, p.cronNever = time.Time{}, false
	r.add(p)
	r.mu.Unlock()
	p.inputsSet = false
	if r.q != nil && len(p.feeds) > 0 {
		// The input queue follows the new inputs now; should that fail,
		// the next run sets them.
		var st state
		_ = json.Unmarshal(sp.State, &st) // only the cursors: a queue made now starts after them
		if err := r.setInputs(p, &st); err != nil {
			r.log.Warn("pipe input queue", "pipe", p.id, "slug", p.slug, "err", err)
		}
	}
	r.mu.Lock()
	if updated(p) { // on its inputs' backlog, as a new pipe
		r.enqueue(p)
	}
	r.mu.Unlock()
	r.kickCron()
	r.log.Info("pipe updated", "pipe", id, "slug", p.slug)
	return r.info(p)
}

func (r *Runner) notFound(id uint64, err error) error {
	if errors.Is(err, storage.ErrPipeNotFound) {
		return fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return err
}

// Delete removes pipe id, its output feed and its items. A pipe whose
// output another pipe reads is not deleted (ErrInUse).
func (r *Runner) Delete(id uint64) error {
	p, unlock, err := r.lockChange(id)
	if err != nil {
		return err
	}
	defer unlock()
	r.mu.Lock()
	for _, q := range r.byInput[p.feedID] {
		if q != p {
			r.mu.Unlock()
			return fmt.Errorf("%w: pipe %q reads it", ErrInUse, q.slug)
		}
	}
	r.mu.Unlock()
	if err := r.st.DeletePipe(id); err != nil {
		return r.notFound(id, err)
	}
	r.mu.Lock()
	r.remove(p)
	r.mu.Unlock()
	r.log.Info("pipe deleted", "pipe", id, "slug", p.slug)
	return nil
}

// lockChange takes pipe id's run lock, then the lock of definition
// changes (Runner.defMu), and returns the pipe and the function that
// releases both. In that order, a slow run of the pipe holds up its own
// change only, not the changes of other pipes.
func (r *Runner) lockChange(id uint64) (*pipe, func(), error) {
	r.mu.Lock()
	p := r.pipes[id]
	r.mu.Unlock()
	if p == nil {
		return nil, nil, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	p.runMu.Lock()
	r.defMu.Lock()
	r.mu.Lock()
	still := r.pipes[id] == p
	r.mu.Unlock()
	unlock := func() {
		r.defMu.Unlock()
		p.runMu.Unlock()
	}
	if !still { // deleted meanwhile
		unlock()
		return nil, nil, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return p, unlock, nil
}

// ReleaseFeed calls remove, which removes feed id (an unsubscription),
// unless a pipe reads the feed: then it fails with ErrFeedInUse naming
// the pipe (a pipe's output is left to remove, which refuses it with
// storage.ErrPipeOutput: the pipe is what to delete). No pipe can be made
// to read the feed while remove runs.
func (r *Runner) ReleaseFeed(id uint64, remove func() error) error {
	r.defMu.Lock()
	defer r.defMu.Unlock()
	r.mu.Lock()
	readers, output := r.byInput[id], r.byFeed[id] != nil
	r.mu.Unlock()
	if len(readers) > 0 && !output { // a pipe's output: remove says to delete the pipe
		return fmt.Errorf("%w: pipe %q reads it", ErrFeedInUse, readers[0].slug)
	}
	return remove()
}

// Get returns pipe id.
func (r *Runner) Get(id uint64) (Info, error) {
	r.mu.Lock()
	p := r.pipes[id]
	r.mu.Unlock()
	if p == nil {
		return Info{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return r.info(p)
}

// List returns every pipe, by id.
func (r *Runner) List() ([]Info, error) {
	r.mu.Lock()
	ps := make([]*pipe, 0, len(r.pipes))
	for _, p := range r.pipes {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	slices.SortFunc(ps, func(a, b *pipe) int { return cmp.Compare(a.id, b.id) })
	out := make([]Info, 0, len(ps))
	for _, p := range ps {
		in, err := r.info(p)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// IDs returns the ids of the pipes, ascending. It reads nothing: a list
// of many pipes pages on them and reads only its page's pipes (Get).
func (r *Runner) IDs() []uint64 {
	r.mu.Lock()
	ids := make([]uint64, 0, len(r.pipes))
	for id := range r.pipes {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// PipeOfFeed returns the id of the pipe whose output is feed feedID, false
// when no pipe's is. It reads nothing.
func (r *Runner) PipeOfFeed(feedID uint64) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.byFeed[feedID]; p != nil {
		return p.id, true
	}
	return 0, false
}

func (r *Runner) info(p *pipe) (Info, error) {
	sp, err := r.st.Pipe(p.id)
	if err != nil {
		return Info{}, r.notFound(p.id, err)
	}
	var def transform.Pipe
	if err := json.Unmarshal(sp.Def, &def); err != nil {
		return Info{}, fmt.Errorf("runner: pipe %d definition: %w", p.id, err)
	}
	in := Info{ID: sp.ID, Slug: sp.Slug, FeedID: sp.FeedID, Pipe: redactDef(def), Runs: sp.Runs, LastError: sp.LastError, Created: sp.Created, Updated: sp.Updated}
	in.Name = def.Name
	if in.Name == "" {
		in.Name = def.Output.Title
	}
	if in.Name == "" {
		in.Name = sp.Slug
	}
	r.mu.Lock()
	in.Inputs = slices.Clone(p.inputs)
	r.mu.Unlock()
	for i := range in.Inputs {
		in.Inputs[i].Ref = sanitize.RedactURL(in.Inputs[i].Ref)
	}
	if in.Inputs == nil {
		in.Inputs = []Input{}
	}
	if !sp.LastRun.IsZero() {
		t := sp.LastRun
		in.LastRun = &t
	}
	in.Feeds = map[string]string{}
	for _, f := range formats(def) {
		in.Feeds[f] = r.opt.FeedPath + sp.Slug + "." + f
	}
	if f, err := r.st.Feed(sp.FeedID); err == nil {
		if n, err := r.st.CountItems(f.ID); err == nil {
			in.Items = int64(n)
		}
		if h := r.Hints(f, r.clock.Now()); !h.Next.IsZero() {
			in.NextUpdate = &h.Next
		}
	}
	return in, nil
}

func formats(def transform.Pipe) []string {
	if len(def.Output.Formats) == 0 {
		return transform.Formats
	}
	return def.Output.Formats
}

// Preview runs def (or, when def has no nodes, the saved pipe id) on the
// newest items of its inputs, from a fresh state (the saved state has
// already taken those items in: fed them again, a window would count
// them twice), and returns every node's output. Nothing is saved. A run over its time limit or byte
// budget returns the preview so far and an error wrapping
// transform.ErrTimeLimit or transform.ErrByteLimit that names the node;
// a node's other failures are in the preview.
func (r *Runner) Preview(ctx context.Context, def transform.Pipe, id uint64) (*transform.Preview, error) {
	given := len(def.Nodes) > 0 // a definition to save, checked as a save checks it
	if !given && id != 0 {
		r.mu.Lock()
		p := r.pipes[id]
		r.mu.Unlock()
		if p == nil {
			return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
		}
		def = p.def
	}
	if given {
		if err := checkNew(def); err != nil {
			return nil, err
		}
	}
	named := def.Output.Slug != ""
	if !named { // a preview does not need a name yet
		def.Output.Slug = "preview"
	}
	g, err := transform.Compile(def, r.opt.Limits)
	if err != nil {
		return nil, err
	}
	if given && named {
		if err := r.readsOwnSlug(g, def); err != nil {
			return nil, err
		}
	}
	inputs, err := r.resolve(g, false)
	if err != nil {
		return nil, err
	}
	if given {
		if err := r.checkLoop(id, inputs); err != nil {
			return nil, err
		}
	}
	items := make(map[string][]transform.Item, len(inputs))
	byFeed := make(map[uint64][]transform.Item) // sources reading one feed share its items
	var loaded int64
	for _, in := range inputs {
		list, ok := byFeed[in.FeedID]
		if !ok {
			var err error
			if list, err = r.st.Items(in.FeedID, storage.ItemQuery{Limit: r.opt.PreviewItems, Order: storage.ByArrival}); err != nil {
				return nil, fmt.Errorf("runner: reading input %s: %w", sanitize.RedactURL(in.Ref), err)
			}
			slices.Reverse(list)
			byFeed[in.FeedID] = list
			if loaded, err = loadBudget(g.Limits(), in, list, loaded); err != nil {
				return nil, err
			}
		}
		items[in.Node] = list
	}
	_, pv, err := g.Run(ctx, r.clock.Now(), items, true)
	if pv != nil {
		for i := range pv.Output { // as a run would republish them
			cleanOutput(&pv.Output[i])
		}
	}
	if errors.Is(err, transform.ErrTimeLimit) || errors.Is(err, transform.ErrByteLimit) {
		// Over a limit of the run itself, not a node's bad luck with
		// an item: the caller answers with the limit, not a preview.
		return pv, err
	}
	return pv, nil
}

// observe tells the pipe's output model that the output gained items at t.
func (p *pipe) observe(t time.Time) {
	p.modelMu.Lock()
	defer p.modelMu.Unlock()
	if p.model == nil {
		return // built from the store when first needed
	}
	p.model.Next(schedule.Observation{At: t, Hit: true, Published: []time.Time{t}})
}

// predict returns the output model's earliest expected next publish
// after now (schedule.Auto.EarliestNext); zero when it has no prediction
// or the publish is overdue.
func (r *Runner) predict(p *pipe, now time.Time) time.Time {
	p.modelMu.Lock()
	defer p.modelMu.Unlock()
	if p.model == nil {
		p.model = schedule.NewAuto()
		items, err := r.st.Items(p.feedID, storage.ItemQuery{Limit: 256, Order: storage.ByArrival})
		if err == nil {
			var last time.Time
			for i := len(items) - 1; i >= 0; i-- {
				t := items[i].Published
				if t.IsZero() || t.Equal(last) {
					continue // one observation per run
				}
				last = t
				p.model.Next(schedule.Observation{At: t, Hit: true, Published: []time.Time{t}})
			}
		}
	}
	t, _ := p.model.EarliestNext(now)
	return t
}
