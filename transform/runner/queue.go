package runner

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// queueBatch bounds the input items a run takes from a pipe's input queue
// (storage.PipeInputQueue); a pipe run on updates whose run took this
// many runs again at once.
const queueBatch = 1000

// queueOf returns st's input queues, or nil when its pipes read by cursor.
func queueOf(st Store) storage.PipeInputQueue {
	q, _ := st.(storage.PipeInputQueue)
	return q
}

// inputKey is the key of in's cursor and floor in a pipe's state.
func inputKey(in Input) string { return in.Node + "@" + strconv.FormatUint(in.FeedID, 10) }

// read is what a run read of its inputs.
type read struct {
	inputs map[string][]transform.Item // by source node
	fresh  []uint64                    // input feeds with new items
	n      int                         // items read, counted once per node

	// From an input queue:
	batch    storage.PipeBatch
	max      int               // the most items the batch could hold
	consumed []int             // indexes of the batch's items this run consumed
	leftover []int             // indexes of those it hands back (over the budget)
	unacked  []uint64          // state.Unacked to commit
	missing  map[uint64]uint64 // items notified on an input, not taken yet: feed → Seq
	settled  bool
}

// readCursors reads each input's items after its cursor in st (the
// newest of its backlog when the cursor is 0) and moves the cursors over
// them.
func (r *Runner) readCursors(p *pipe, g *transform.Graph, st *state) (read, error) {
	rd := read{inputs: make(map[string][]transform.Item, len(p.inputs))}
	var loaded int64 // bytes read, against the run's byte budget
	for _, in := range p.inputs {
		key := inputKey(in)
		cur := st.Cursors[key]
		var items []storage.Item
		var err error
		if cur == 0 {
			items, err = r.backlog(in, g, loaded)
		} else {
			items, err = r.st.Items(in.FeedID, storage.ItemQuery{AfterSeq: cur, Order: storage.ByArrivalAsc, Limit: g.Limits().MaxItems})
			// A backlog larger than a run may hold is read a part per run,
			// oldest first: the cursor moves over what was read, so the
			// pipe catches up instead of failing on the same items forever.
			items = items[:fitBytes(slices.All(items), readAllowance(g.Limits(), loaded))]
		}
		if err != nil {
			return rd, fmt.Errorf("reading input %s of node %q: %w", in.Ref, in.Node, err)
		}
		if loaded, err = loadBudget(g.Limits(), in, items, loaded); err != nil {
			return rd, err
		}
		for _, it := range items {
			st.Cursors[key] = max(st.Cursors[key], it.Seq)
		}
		rd.add(in, items)
	}
	return rd, nil
}

// backlog reads the newest items of in's feed its source takes at first
// (transform.Source.Backlog), those that fit in the run's read allowance
// after loaded bytes, oldest first.
func (r *Runner) backlog(in Input, g *transform.Graph, loaded int64) ([]storage.Item, error) {
	backlog := transform.DefaultBacklog
	for _, s := range g.Sources() {
		if s.Node == in.Node {
			backlog = s.Backlog
		}
	}
	items, err := r.st.Items(in.FeedID, storage.ItemQuery{Limit: backlog, Order: storage.ByArrival})
	if err != nil {
		return nil, err
	}
	slices.Reverse(items)
	return items[len(items)-fitBytes(slices.Backward(items), readAllowance(g.Limits(), loaded)):], nil // the newest that fit
}

func (rd *read) add(in Input, items []storage.Item) {
	rd.inputs[in.Node] = items
	rd.n += len(items)
	if len(items) > 0 && !slices.Contains(rd.fresh, in.FeedID) {
		rd.fresh = append(rd.fresh, in.FeedID)
	}
}

// readQueue reads the pipe's inputs through its input queue: a node whose
// cursor is 0 takes its backlog from the store (as by cursor), and every
// node the queue's items of its feed above its floor. Items beyond the
// run's read allowance are handed back after the run, oldest first kept,
// so a backlog is read a part per run as by cursor. Queue items already
// consumed by a committed run (st.Unacked), or at or below every reading
// node's floor, are consumed without being run.
func (r *Runner) readQueue(p *pipe, g *transform.Graph, st *state) (read, error) {
	rd := read{inputs: make(map[string][]transform.Item, len(p.inputs))}
	if st.Floors == nil {
		st.Floors = make(map[string]uint64)
	}
	if !p.inputsSet {
		if err := r.setInputs(p, st); err != nil {
			return rd, err
		}
	}
	rd.max = min(queueBatch, g.Limits().WithDefaults().MaxItems)
	batch, err := r.q.NextPipeInputs(p.id, rd.max)
	if errors.Is(err, storage.ErrNoPipeInputs) {
		// Deleted since (by hand): made afresh, unless the pipe is
		// being deleted too (DeletePipe deletes the record first).
		if _, err = r.st.Pipe(p.id); err == nil {
			err = r.setInputs(p, st)
		}
		if err == nil {
			batch, err = r.q.NextPipeInputs(p.id, rd.max)
		}
	}
	if err != nil {
		return rd, fmt.Errorf("reading the inputs of pipe %d: %w", p.id, err)
	}
	rd.batch = batch
	if batch.Queue() != st.Queue {
		// A queue made afresh starts at the lowest cursor: what each node
		// took by then is not taken again. (A pipe that read by cursor
		// before it had a queue comes here once too.)
		for k, c := range st.Cursors {
			st.Floors[k] = max(st.Floors[k], c)
		}
		st.Queue, st.Unacked = batch.Queue(), nil
	}

	// Backlogs, as by cursor.
	lists := make(map[string][]storage.Item, len(p.inputs))
	var loaded int64
	for _, in := range p.inputs {
		key := inputKey(in)
		if st.Cursors[key] != 0 {
			continue
		}
		items, err := r.backlog(in, g, loaded)
		if err != nil {
			return rd, fmt.Errorf("reading input %s of node %q: %w", in.Ref, in.Node, err)
		}
		if loaded, err = loadBudget(g.Limits(), in, items, loaded); err != nil {
			return rd, err
		}
		for _, it := range items {
			st.Cursors[key] = max(st.Cursors[key], it.Seq)
			st.Floors[key] = max(st.Floors[key], it.Seq)
		}
		lists[key] = items
	}

	// What committed runs consumed and was not acknowledged by then,
	// less what the queue says is acknowledged since.
	unacked := make(map[uint64]bool, len(st.Unacked))
	for _, s := range st.Unacked {
		if s > batch.AckFloor() {
			unacked[s] = true
		}
	}
	allowance := readAllowance(g.Limits(), 0)
	items := batch.Items()
	over := false
	for i := range items {
		it := items[i]
		var need []Input
		if !unacked[it.Seq] {
			for _, in := range p.inputs {
				if in.FeedID == it.FeedID && it.Seq > st.Floors[inputKey(in)] {
					need = append(need, in)
				}
			}
		}
		size := transform.ItemBytes(&it) * int64(len(need))
		if over || len(need) > 0 && loaded > 0 && loaded+size > allowance {
			over = true // keep the order: the rest waits for the next run
			rd.leftover = append(rd.leftover, i)
			continue
		}
		loaded += size
		rd.consumed = append(rd.consumed, i)
		unacked[it.Seq] = true
		for _, in := range need {
			key := inputKey(in)
			lists[key] = append(lists[key], it)
			st.Cursors[key] = max(st.Cursors[key], it.Seq)
		}
	}
	for _, in := range p.inputs {
		list := lists[inputKey(in)]
		slices.SortFunc(list, func(a, b storage.Item) int { return cmp.Compare(a.Seq, b.Seq) })
		list = slices.CompactFunc(list, func(a, b storage.Item) bool { return a.Seq == b.Seq })
		if _, err := loadBudget(g.Limits(), in, list, 0); err != nil {
			return rd, err
		}
		rd.add(in, list)
	}
	for s := range unacked {
		rd.unacked = append(rd.unacked, s)
	}
	slices.Sort(rd.unacked)
	rd.missing = r.missed(p, st)
	return rd, nil
}

// expectSeq records that items of input feed were stored (Notify), so
// that a run which does not find them in the queue looks again shortly;
// r.mu is held.
func (p *pipe) expectSeq(feed uint64, items []storage.Item) {
	var top uint64
	for _, it := range items {
		top = max(top, it.Seq)
	}
	if top == 0 {
		return
	}
	if p.expect == nil {
		p.expect = make(map[uint64]uint64)
	}
	p.expect[feed] = max(p.expect[feed], top)
}

// missed returns the items notified on p's inputs (feed → newest Seq)
// not taken yet by every source reading them, as of st; it forgets
// those that are.
func (r *Runner) missed(p *pipe, st *state) map[uint64]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out map[uint64]uint64
	for feed, seq := range p.expect {
		taken := true
		for _, in := range p.inputs {
			if in.FeedID == feed && st.Cursors[inputKey(in)] < seq {
				taken = false
			}
		}
		if taken {
			delete(p.expect, feed)
			continue
		}
		if out == nil {
			out = make(map[uint64]uint64)
		}
		out[feed] = seq
	}
	return out
}

// lookAgain is how long after a run that missed notified items the pipe
// runs again, doubled each time, up to maxLookAgain times: JetStream tells
// a consumer of a stored message a moment after acknowledging its
// publication, so a run right after a Notify may not find it yet.
const (
	lookAgain    = 5 * time.Millisecond
	maxLookAgain = 6
)

// setInputs makes the pipe's input queue deliver its input feeds; a queue
// made now starts after the lowest cursor in st (at new items when there
// is none).
func (r *Runner) setInputs(p *pipe, st *state) error {
	var from uint64
	for _, c := range st.Cursors {
		if c > 0 && (from == 0 || c+1 < from) {
			from = c + 1
		}
	}
	if err := r.q.SetPipeInputs(p.id, p.feeds, from); err != nil {
		return fmt.Errorf("setting the input queue of pipe %d: %w", p.id, err)
	}
	p.inputsSet = true
	return nil
}

// settle acknowledges what the committed run consumed and hands back what
// it left over; p.runMu is held. A pipe run on updates is queued again
// when more input waits, and marked to be looked at again (Resync) when
// the queue held items elsewhere; a cron or manual pipe takes them at its
// next run.
func (rd *read) settle(r *Runner, p *pipe) {
	if rd.batch == nil || rd.settled {
		return
	}
	rd.settled = true
	if err := rd.batch.Ack(rd.consumed); err != nil {
		// Handed out again after the queue's hold: state.Unacked has
		// them, so they are not run twice.
		r.log.Warn("pipe inputs not acknowledged", "pipe", p.id, "err", err)
	}
	if err := rd.batch.Release(rd.leftover); err != nil {
		r.log.Warn("pipe inputs not handed back", "pipe", p.id, "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p.retry = rd.batch.Held() > 0 && updated(p)
	switch {
	case !updated(p):
	case len(rd.leftover) > 0 || len(rd.batch.Items()) >= rd.max:
		r.enqueue(p)
	case len(rd.missing) > 0 && p.expectTries < maxLookAgain:
		d := lookAgain << p.expectTries
		p.expectTries++
		go func() {
			t := r.clock.NewTimer(d)
			defer t.Stop()
			<-t.C()
			r.mu.Lock()
			if r.pipes[p.id] == p { // not deleted nor reloaded meanwhile
				r.enqueue(p)
			}
			r.mu.Unlock()
		}()
	default:
		// Found, or not found after looking again: the Resync looks at
		// the queue's waiting items. (What was notified since the read
		// is kept.)
		for feed, seq := range rd.missing {
			if p.expect[feed] == seq {
				delete(p.expect, feed)
			}
		}
		p.expectTries = 0
	}
}

// release hands back every item of a run that failed or was not
// committed; p.runMu is held.
func (rd *read) release(r *Runner, p *pipe) {
	if rd.batch == nil || rd.settled {
		return
	}
	rd.settled = true
	all := make([]int, len(rd.batch.Items()))
	for i := range all {
		all[i] = i
	}
	if err := rd.batch.Release(all); err != nil {
		r.log.Warn("pipe inputs not handed back", "pipe", p.id, "err", err)
	}
	r.mu.Lock()
	p.retry = rd.batch.Held() > 0 && updated(p)
	r.mu.Unlock()
}
