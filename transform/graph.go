package transform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/slogfeed/slogfeed/schedule"
)

// Graph is a compiled pipe: its operators built, its edges checked and its
// nodes in the order they run. A Graph holds the operators' state between
// runs, so one Graph serves one pipe and its runs must not overlap.
type Graph struct {
	pipe    Pipe
	lim     Limits
	nodes   []*gnode // in run order (topological; ties in definition order)
	byID    map[string]*gnode
	out     *gnode
	sources []*gnode
}

type gnode struct {
	Node
	spec   Spec
	op     Operator
	in     []*gnode // one per incoming edge, in edge order
	ref    Ref      // source nodes
	used   bool     // upstream of the output
	weight int      // nodes it stands for (a loop counts its steps)
}

// SourceNode is one of a pipe's inputs.
type SourceNode struct {
	Node    string
	Ref     Ref
	Backlog int
}

// CronParser parses the schedules of cron triggers: five fields, or
// descriptors such as "@hourly" and "@every 10m". A schedule is in UTC
// unless it starts with CRON_TZ=<zone> or TZ=<zone> (schedule.ParseCron):
// its activations do not depend on the zone of the clock that drives it.
var CronParser cron.ScheduleParser = cronParser{}

type cronParser struct{}

var cronFields = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func (cronParser) Parse(spec string) (cron.Schedule, error) {
	return schedule.ParseCron(cronFields, spec)
}

// Compile checks p and builds its operators. Every problem found is
// reported, as an Errors value: unknown operators, bad configurations
// (naming the field), duplicate or malformed node ids, dangling edges,
// cycles, wrong numbers of inputs, a bad output or trigger, and pipes over
// lim (zero fields: DefaultLimits).
func Compile(p Pipe, lim Limits) (*Graph, error) {
	lim = lim.withDefaults()
	g := &Graph{pipe: p, lim: lim, byID: make(map[string]*gnode, len(p.Nodes))}
	var errs Errors
	nodeErr := func(n *Node, err error) { errs = append(errs, &NodeError{Node: n.ID, Op: n.Op, Err: err}) }

	if len(p.Nodes) == 0 {
		errs = append(errs, Fieldf("nodes", "a pipe needs at least one source node"))
	}
	if len(p.Nodes) > lim.MaxNodes {
		return nil, Errors{&FieldError{Field: "nodes", Err: fmt.Errorf("%w: %d nodes, at most %d", ErrLimit, len(p.Nodes), lim.MaxNodes)}}
	}
	if len(p.Edges) > lim.MaxEdges {
		return nil, Errors{&FieldError{Field: "edges", Err: fmt.Errorf("%w: %d edges, at most %d", ErrLimit, len(p.Edges), lim.MaxEdges)}}
	}
	total := 0
	sourceOps := 0 // nodes whose op is "source", well configured or not
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if n.Op == "source" {
			sourceOps++
		}
		switch {
		case !nodeIDPattern.MatchString(n.ID):
			errs = append(errs, Fieldf(fmt.Sprintf("nodes[%d].id", i), "node id %q must be 1 to 64 letters, digits, '_' or '-'", truncate(n.ID, 70)))
			continue
		case g.byID[n.ID] != nil:
			errs = append(errs, Fieldf(fmt.Sprintf("nodes[%d].id", i), "duplicate node id %q", n.ID))
			continue
		}
		gn := &gnode{Node: *n, weight: 1}
		g.byID[n.ID] = gn
		spec, ok := Lookup(n.Op)
		if !ok {
			nodeErr(n, &FieldError{Field: "op", Err: fmt.Errorf("unknown operator %q", truncate(n.Op, 40))})
			continue
		}
		gn.spec = spec
		cfg := n.Config
		if t := strings.TrimSpace(string(cfg)); t != "" && t != "null" && !strings.HasPrefix(t, "{") {
			nodeErr(n, &FieldError{Field: "config", Err: errors.New("want a JSON object")})
			continue
		}
		op, err := newOperator(spec, cfg, 1, lim)
		if err != nil {
			nodeErr(n, err)
			continue
		}
		gn.op = op
		if l, ok := op.(*loopOp); ok {
			gn.weight += l.size
		}
		total += gn.weight
		if s, ok := op.(*sourceOp); ok {
			gn.ref = s.ref
			g.sources = append(g.sources, gn)
		}
	}
	if total > lim.MaxNodes {
		errs = append(errs, &FieldError{Field: "nodes", Err: fmt.Errorf("%w: %d nodes counting loop steps, at most %d", ErrLimit, total, lim.MaxNodes)})
	}
	if sourceOps == 0 && len(p.Nodes) > 0 {
		// A source refused for its id or its configuration is reported
		// as such, not as missing.
		errs = append(errs, Fieldf("nodes", "a pipe needs at least one \"source\" node"))
	}

	// Edges.
	seen := make(map[Edge]bool, len(p.Edges))
	for i, e := range p.Edges {
		from, to := g.byID[e.From], g.byID[e.To]
		switch {
		case from == nil:
			errs = append(errs, Fieldf(fmt.Sprintf("edges[%d].from", i), "no node %q", truncate(e.From, 70)))
		case to == nil:
			errs = append(errs, Fieldf(fmt.Sprintf("edges[%d].to", i), "no node %q", truncate(e.To, 70)))
		case e.From == e.To:
			errs = append(errs, Fieldf(fmt.Sprintf("edges[%d]", i), "node %q is joined to itself", e.From))
		case seen[e]:
			errs = append(errs, Fieldf(fmt.Sprintf("edges[%d]", i), "duplicate edge %s → %s", e.From, e.To))
		default:
			seen[e] = true
			to.in = append(to.in, from)
		}
	}
	for i := range p.Nodes {
		gn := g.byID[p.Nodes[i].ID]
		if gn == nil || gn.op == nil || gn.Node.Op != p.Nodes[i].Op {
			continue
		}
		n, s := len(gn.in), gn.spec
		switch {
		case s.MaxInputs == 0 && n > 0:
			nodeErr(&gn.Node, fmt.Errorf("a %s node takes no input, but %d edges lead to it", s.Name, n))
		case n < s.MinInputs:
			nodeErr(&gn.Node, fmt.Errorf("a %s node needs at least %d input(s), has %d", s.Name, s.MinInputs, n))
		case s.MaxInputs > 0 && n > s.MaxInputs:
			nodeErr(&gn.Node, fmt.Errorf("a %s node takes at most %d input(s), has %d", s.Name, s.MaxInputs, n))
		}
	}

	// Order: Kahn's algorithm, ties broken by definition order.
	indeg := make(map[string]int, len(g.byID))
	outs := make(map[string][]*gnode, len(g.byID))
	for _, gn := range g.byID {
		indeg[gn.ID] = len(gn.in)
		for _, src := range gn.in {
			outs[src.ID] = append(outs[src.ID], gn)
		}
	}
	var ready []*gnode
	for i := range p.Nodes {
		if gn := g.byID[p.Nodes[i].ID]; gn != nil && gn.Node.Op == p.Nodes[i].Op && indeg[gn.ID] == 0 && !slices.Contains(ready, gn) {
			ready = append(ready, gn)
		}
	}
	pos := make(map[string]int, len(p.Nodes))
	for i := range p.Nodes {
		if _, dup := pos[p.Nodes[i].ID]; !dup {
			pos[p.Nodes[i].ID] = i
		}
	}
	for len(ready) > 0 {
		slices.SortFunc(ready, func(a, b *gnode) int { return pos[a.ID] - pos[b.ID] })
		gn := ready[0]
		ready = ready[1:]
		g.nodes = append(g.nodes, gn)
		for _, next := range outs[gn.ID] {
			indeg[next.ID]--
			if indeg[next.ID] == 0 {
				ready = append(ready, next)
			}
		}
	}
	if len(g.nodes) < len(g.byID) {
		// The nodes left wait on a cycle; those downstream of it, which
		// lead back to none, are peeled off so that the error names the
		// cycle's nodes only.
		left := map[string]bool{}
		for id, n := range indeg {
			if n > 0 {
				left[id] = true
			}
		}
		outdeg := map[string]int{}
		for id := range left {
			for _, next := range outs[id] {
				if left[next.ID] {
					outdeg[id]++
				}
			}
		}
		var sinks []string
		for id := range left {
			if outdeg[id] == 0 {
				sinks = append(sinks, id)
			}
		}
		for len(sinks) > 0 {
			id := sinks[len(sinks)-1]
			sinks = sinks[:len(sinks)-1]
			delete(left, id)
			for _, src := range g.byID[id].in {
				if left[src.ID] {
					if outdeg[src.ID]--; outdeg[src.ID] == 0 {
						sinks = append(sinks, src.ID)
					}
				}
			}
		}
		var cyc []string
		for i := range p.Nodes {
			if id := p.Nodes[i].ID; left[id] && !slices.Contains(cyc, id) {
				cyc = append(cyc, id)
			}
		}
		errs = append(errs, Fieldf("edges", "the edges form a cycle through %s", strings.Join(cyc, ", ")))
	}

	// Output.
	g.checkOutput(&errs, outs)
	checkTrigger(&errs, p.Trigger, len(g.sources))

	if len(errs) > 0 {
		return nil, errs
	}
	g.markUsed(g.out)
	return g, nil
}

func (g *Graph) checkOutput(errs *Errors, outs map[string][]*gnode) {
	o := g.pipe.Output
	switch {
	case o.Slug == "":
		*errs = append(*errs, Fieldf("output.slug", "the output needs a slug (the name in /feeds/{slug}.rss)"))
	case !SlugPattern.MatchString(o.Slug):
		*errs = append(*errs, Fieldf("output.slug", "slug %q must be 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", truncate(o.Slug, 70)))
	}
	if len(o.Title) > 256 {
		*errs = append(*errs, Fieldf("output.title", "at most 256 bytes"))
	}
	if len(o.Description) > 4096 {
		*errs = append(*errs, Fieldf("output.description", "at most 4096 bytes"))
	}
	if len(g.pipe.Name) > 256 {
		*errs = append(*errs, Fieldf("name", "at most 256 bytes"))
	}
	if len(g.pipe.Description) > 4096 {
		*errs = append(*errs, Fieldf("description", "at most 4096 bytes"))
	}
	for i, f := range o.Formats {
		if !slices.Contains(Formats, f) {
			*errs = append(*errs, Fieldf(fmt.Sprintf("output.formats[%d]", i), "unknown format %q (want rss, atom or json)", truncate(f, 20)))
		}
	}
	r := o.Retention
	if r.MaxItems < 0 || r.MaxItems > MaxOutputItems {
		*errs = append(*errs, Fieldf("output.retention.max_items", "want 0 (default %d) to %d", DefaultOutputItems, MaxOutputItems))
	}
	if r.MaxAge < 0 {
		*errs = append(*errs, Fieldf("output.retention.max_age", "must not be negative"))
	}
	if o.From != "" {
		g.out = g.byID[o.From]
		if g.out == nil {
			*errs = append(*errs, Fieldf("output.from", "no node %q", truncate(o.From, 70)))
		}
		return
	}
	var sinks []*gnode
	for _, gn := range g.nodes {
		if len(outs[gn.ID]) == 0 {
			sinks = append(sinks, gn)
		}
	}
	switch len(sinks) {
	case 1:
		g.out = sinks[0]
	case 0:
		if len(g.byID) > 0 && len(g.nodes) == len(g.byID) {
			*errs = append(*errs, Fieldf("output.from", "no node to republish"))
		}
	default:
		ids := make([]string, len(sinks))
		for i, s := range sinks {
			ids[i] = s.ID
		}
		*errs = append(*errs, Fieldf("output.from", "name the node to republish: %s all end the pipe", strings.Join(ids, ", ")))
	}
}

func checkTrigger(errs *Errors, t Trigger, sources int) {
	switch t.On {
	case "", OnUpdate, OnManual:
		if t.M != 0 {
			*errs = append(*errs, Fieldf("trigger.m", "m is for \"mdpt\" triggers"))
		}
		if t.Cron != "" {
			*errs = append(*errs, Fieldf("trigger.cron", "cron is for \"cron\" triggers"))
		}
	case OnMDPT:
		if t.M < 0 || (sources > 0 && t.M > sources) {
			*errs = append(*errs, Fieldf("trigger.m", "want 1 to %d (the number of sources; 0 means all)", sources))
		}
	case OnCron:
		if len(t.Cron) > 128 {
			*errs = append(*errs, Fieldf("trigger.cron", "at most 128 bytes"))
		} else if s, err := CronParser.Parse(t.Cron); err != nil {
			*errs = append(*errs, Fieldf("trigger.cron", "bad schedule %q: %v (e.g. \"*/5 * * * *\" or \"@every 10m\")", t.Cron, err))
		} else if schedule.NeverFires(s) {
			*errs = append(*errs, Fieldf("trigger.cron", "schedule %q never fires (a date that does not exist?)", t.Cron))
		}
	default:
		*errs = append(*errs, Fieldf("trigger.on", "unknown trigger %q (want update, mdpt, cron or manual)", truncate(t.On, 20)))
	}
}

func (g *Graph) markUsed(n *gnode) {
	if n == nil || n.used {
		return
	}
	n.used = true
	for _, in := range n.in {
		g.markUsed(in)
	}
}

// newOperator builds spec's operator from cfg, turning a panic of a
// constructor into an error.
func newOperator(spec Spec, cfg json.RawMessage, depth int, lim Limits) (op Operator, err error) {
	defer func() {
		if v := recover(); v != nil {
			op, err = nil, fmt.Errorf("operator %s failed on its configuration: %v", spec.Name, v)
		}
	}()
	if spec.Name == loopName {
		return newLoop(cfg, depth, lim)
	}
	op, err = spec.New(cfg)
	if err == nil && op == nil {
		err = fmt.Errorf("operator %s built nothing", spec.Name)
	}
	return op, err
}

// Pipe returns the definition g was compiled from.
func (g *Graph) Pipe() Pipe { return g.pipe }

// Limits returns the limits g runs under.
func (g *Graph) Limits() Limits { return g.lim }

// Sources returns the pipe's source nodes, in definition order.
func (g *Graph) Sources() []SourceNode {
	out := make([]SourceNode, len(g.sources))
	for i, s := range g.sources {
		out[i] = SourceNode{Node: s.ID, Ref: s.ref, Backlog: s.op.(*sourceOp).backlog}
	}
	return out
}

// LoadState restores the operators' states saved by SaveState. A node
// whose state does not load (its configuration changed, say) starts
// afresh; its error is returned among the others, for logging.
func (g *Graph) LoadState(state map[string]json.RawMessage) []error {
	var errs []error
	for _, gn := range g.nodes {
		s, ok := gn.op.(Stateful)
		raw := state[gn.ID]
		if !ok || len(raw) == 0 {
			continue
		}
		if err := s.LoadState(raw); err != nil {
			errs = append(errs, &NodeError{Node: gn.ID, Op: gn.Op, Err: fmt.Errorf("state not restored, starting afresh: %w", err)})
			if op, err := newOperator(gn.spec, gn.Config, 1, g.lim); err == nil {
				gn.op = op
			}
		}
	}
	return errs
}

// SaveState returns the operators' states, by node id.
func (g *Graph) SaveState() (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage)
	for _, gn := range g.nodes {
		s, ok := gn.op.(Stateful)
		if !ok {
			continue
		}
		raw, err := s.SaveState()
		if err != nil {
			return nil, &NodeError{Node: gn.ID, Op: gn.Op, Err: fmt.Errorf("saving state: %w", err)}
		}
		if len(raw) > 0 {
			out[gn.ID] = raw
		}
	}
	return out, nil
}

// Run runs the pipe once at now on inputs (the new items of each source
// node, by node id, oldest first) and returns what its output node
// emitted. The run ends with ErrTimeLimit after Limits.RunTime, and with
// ErrByteLimit when a node's output is over Limits.MaxNodeBytes or all
// outputs so far over Limits.MaxRunBytes (counted by ItemBytes). A failing
// node fails the run with a *NodeError; operator states may then be
// partly updated, so a caller that wants to retry reloads them.
//
// With trace set, every node runs (not only those the output depends on)
// and a Preview of each node's output is returned; a node's failure is
// recorded and the nodes after it still run where they can.
func (g *Graph) Run(ctx context.Context, now time.Time, inputs map[string][]Item, trace bool) ([]Item, *Preview, error) {
	ctx, cancel := context.WithTimeout(ctx, g.lim.RunTime)
	defer cancel()
	outs := make(map[*gnode][]Item, len(g.nodes))
	failed := make(map[*gnode]bool)
	var pv *Preview
	if trace {
		pv = &Preview{Nodes: make([]NodeOutput, 0, len(g.nodes))}
	}
	var runErr error
	bud := budget{lim: g.lim}
	pvb := previewBudget{left: g.lim.MaxPreviewBytes}
	for _, gn := range g.nodes {
		if !gn.used && !trace {
			continue
		}
		var in [][]Item
		skip := false
		if _, ok := gn.op.(*sourceOp); ok {
			in = [][]Item{inputs[gn.ID]}
		} else {
			in = make([][]Item, len(gn.in))
			for i, src := range gn.in {
				if failed[src] {
					skip = true
				}
				in[i] = outs[src]
			}
		}
		if skip {
			failed[gn] = true
			if trace {
				pv.Nodes = append(pv.Nodes, NodeOutput{Node: gn.ID, Op: gn.Op, Items: []Item{}, Error: "not run: an input failed"})
			}
			continue
		}
		c := NewContext(ctx, now, g.pipe.Output.Slug, gn.ID, g.lim)
		c.Preview = trace
		start := time.Now() //nolint:forbidigo // measures the operator's cost for the preview; never used for scheduling
		items, err := apply(gn, c, in)
		took := time.Since(start)
		if err == nil && len(items) > g.lim.MaxItems {
			err = fmt.Errorf("%w: %d items, at most %d", ErrLimit, len(items), g.lim.MaxItems)
		}
		if err == nil {
			err = bud.add(items)
		}
		if err == nil {
			// The deadline passed while the operator ran its last item.
			err = c.Err()
		}
		if err != nil {
			if ne := (*NodeError)(nil); !errors.As(err, &ne) || ne.Node != gn.ID {
				err = &NodeError{Node: gn.ID, Op: gn.Op, Err: err}
			}
			failed[gn] = true
			if runErr == nil {
				runErr = err
			}
			if trace {
				pv.Nodes = append(pv.Nodes, NodeOutput{Node: gn.ID, Op: gn.Op, Items: []Item{}, Error: err.Error(), TookS: took.Seconds()})
				if errors.Is(err, ErrTimeLimit) || errors.Is(err, ErrByteLimit) || ctx.Err() != nil {
					break
				}
				continue
			}
			return nil, nil, err
		}
		outs[gn] = items
		if trace {
			shown, cut := pvb.head(items)
			pv.Nodes = append(pv.Nodes, NodeOutput{Node: gn.ID, Op: gn.Op, Count: len(items), Items: shown, Truncated: cut, TookS: took.Seconds()})
		}
	}
	out := outs[g.out]
	if trace {
		pv.Output, pv.Truncated = pvb.head(out)
		if runErr != nil {
			pv.Error = runErr.Error()
		}
	}
	return out, pv, runErr
}

// apply runs one operator, turning a panic into an error so that a bug
// in one operator fails its pipe's run, not the process.
func apply(gn *gnode, c *Context, in [][]Item) (out []Item, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	if err := c.Err(); err != nil {
		return nil, err
	}
	return gn.op.Apply(c, in)
}

// PanicError is the error of an operator that panicked; Stack is for the
// log, not for the API.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("operator failed: %v", e.Value) }

// previewBudget shares Limits.MaxPreviewBytes among the items a preview
// shows.
type previewBudget struct{ left int64 }

// head returns the first items (at most PreviewItems) that fit in what is
// left of the budget, and whether it left some out.
func (b *previewBudget) head(items []Item) ([]Item, bool) {
	n := 0
	for n < len(items) && n < PreviewItems {
		size := ItemBytes(&items[n])
		if size > b.left {
			break
		}
		b.left -= size
		n++
	}
	return head(items, n), n < min(len(items), PreviewItems)
}

func head(items []Item, n int) []Item {
	if len(items) > n {
		items = items[:n]
	}
	if items == nil {
		return []Item{}
	}
	return items
}
