package runner

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	"github.com/slogfeed/slogfeed/transform"
)

// DefaultResync is how often a clustered runner (an Owner other than
// cluster.Everything) re-reads the stored pipes and looks for new items of
// the inputs of the pipes it owns, when Options.Resync is zero. Those
// inputs are polled, and their items stored, by whichever node owns their
// feeds' shards: Notify only hears of this node's own fetches.
const DefaultResync = 5 * time.Second

// owns reports whether this node runs pipe p.
func (r *Runner) owns(p *pipe) bool { return r.opt.Owner.OwnsPipe(p.id) }

// clustered reports whether other nodes share the pipes.
func (r *Runner) clustered() bool { return r.opt.Owner != cluster.Everything }

// updated reports whether p runs when its inputs gain items.
func updated(p *pipe) bool {
	switch p.def.Trigger.On {
	case "", transform.OnUpdate, transform.OnMDPT:
		return true
	}
	return false
}

// owned runs until ctx ends on a clustered node: at every change of the
// owned pipes and every Resync it follows the pipes other nodes created,
// changed or deleted, runs the pipes it comes to own (their state and
// cursors are the stored ones: they go on where the last owner
// committed), and runs the owned pipes whose inputs gained items since the
// last look.
func (r *Runner) owned(ctx context.Context) {
	if !r.clustered() {
		return
	}
	changed := r.opt.Owner.Changed()
	mine := map[uint64]bool{}
	var seq uint64 // the store's LastSeq at the last look
	if last, err := r.st.LastSeq(); err == nil {
		seq = last
	}
	for {
		r.resync()
		seq = r.wakeOwned(mine, seq)
		t := r.clock.NewTimer(r.opt.Resync)
		select {
		case <-ctx.Done():
		case <-changed:
			changed = r.opt.Owner.Changed()
		case <-t.C():
		}
		t.Stop()
		if ctx.Err() != nil {
			return
		}
	}
}

// wakeOwned queues the pipes this node has come to own since the last
// call (mine holds the owned ones, updated here) and the owned pipes one of
// whose inputs gained items after store sequence seq, or, on a store with
// input queues, whose queue has items waiting or held items elsewhere at
// their last run; it returns the store's sequence now.
func (r *Runner) wakeOwned(mine map[uint64]bool, seq uint64) uint64 {
	last, err := r.st.LastSeq()
	if err != nil {
		r.log.Warn("cannot read the store's sequence", "err", err)
		last = seq
	}
	r.mu.Lock()
	ps := make([]*pipe, 0, len(r.pipes))
	for _, p := range r.pipes {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	gained := 0
	for _, p := range ps {
		own := r.owns(p)
		switch {
		case own && !mine[p.id]:
			mine[p.id] = true
			gained++
			r.forgetGraph(p)
			if updated(p) {
				r.mu.Lock()
				r.enqueue(p)
				r.mu.Unlock()
			}
			continue
		case !own:
			if mine[p.id] {
				delete(mine, p.id)
				r.forgetGraph(p)
			}
			continue
		}
		if !updated(p) {
			continue
		}
		if r.q != nil {
			r.mu.Lock()
			retry, inputs := p.retry, len(p.feeds) > 0
			r.mu.Unlock()
			if !inputs {
				continue
			}
			if !retry { // else its input queue held items elsewhere
				n, err := r.q.PipeInputsWaiting(p.id)
				retry = n > 0 || errors.Is(err, storage.ErrNoPipeInputs)
			}
			if retry {
				r.mu.Lock()
				r.enqueue(p)
				r.mu.Unlock()
			}
			continue
		}
		if last == seq {
			continue
		}
		r.mu.Lock()
		feeds := slices.Clone(p.feeds)
		r.mu.Unlock()
		for _, f := range feeds {
			items, err := r.st.Items(f, storage.ItemQuery{AfterSeq: seq, Order: storage.ByArrivalAsc, Limit: 1})
			if err == nil && len(items) > 0 {
				r.mu.Lock()
				r.enqueue(p)
				r.mu.Unlock()
				break
			}
		}
	}
	for id := range mine {
		r.mu.Lock()
		_, ok := r.pipes[id]
		r.mu.Unlock()
		if !ok {
			delete(mine, id)
		}
	}
	if gained > 0 {
		r.log.Info("pipes follow the cluster's shards", "taken", gained, "run_here", len(mine))
	}
	return last
}

// forgetGraph drops p's compiled graph, whose operators hold the state of
// this node's last run: another node may have run the pipe since, so the
// next run here loads the stored state.
func (r *Runner) forgetGraph(p *pipe) {
	p.runMu.Lock()
	p.graph = nil
	p.recent = nil // the other node's outputs too: read again
	p.runMu.Unlock()
}

// resync follows the pipes other nodes created, changed or deleted.
func (r *Runner) resync() {
	sps, err := r.st.Pipes()
	if err != nil {
		r.log.Warn("cannot list pipes to follow the cluster", "err", err)
		return
	}
	stored := make(map[uint64]bool, len(sps))
	for _, sp := range sps {
		stored[sp.ID] = true
		r.mu.Lock()
		p := r.pipes[sp.ID]
		r.mu.Unlock()
		if p != nil {
			r.mu.Lock()
			same := bytes.Equal(p.raw, sp.Def)
			r.mu.Unlock()
			if same {
				continue
			}
			r.mu.Lock()
			r.remove(p)
			r.mu.Unlock()
		}
		r.loadPipe(sp)
	}
	r.mu.Lock()
	var unlisted []*pipe
	for id, p := range r.pipes {
		if !stored[id] {
			unlisted = append(unlisted, p)
		}
	}
	r.mu.Unlock()
	for _, p := range unlisted {
		// Deleted on another node, unless created here since the list.
		if _, err := r.st.Pipe(p.id); errors.Is(err, storage.ErrPipeNotFound) {
			r.mu.Lock()
			r.remove(p)
			r.mu.Unlock()
		}
	}
	r.kickCron()
}
