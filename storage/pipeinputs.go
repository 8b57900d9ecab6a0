package storage

import "errors"

// ErrNoPipeInputs means a pipe has no input queue (PipeInputQueue): it
// was never made, or was deleted.
var ErrNoPipeInputs = errors.New("pipe input queue not found")

// PipeInputQueue is optional, like StateLoader: a backend whose items are
// delivered to each pipe through a durable queue of its own (the
// JetStream backend's per-pipe consumer), so that whichever node runs the
// pipe next resumes where the last one stopped and a run's inputs are
// acknowledged only once its outputs and state are committed. A backend
// without it (the bbolt Store) is read by the cursors the runner keeps in
// the pipe's state.
//
// Sequences are Item.Seq: store-wide and increasing in arrival order.
type PipeInputQueue interface {
	// SetPipeInputs makes the pipe's input queue deliver the items of
	// feeds. An existing queue keeps its place and only changes feeds; a
	// new one starts at the items of sequence from onwards, or, when from
	// is 0, at the items stored from now on.
	SetPipeInputs(pipeID uint64, feeds []uint64, from uint64) error
	// NextPipeInputs takes up to max items from the queue without waiting
	// for new ones: first those handed back or not acknowledged in time,
	// then new ones in arrival order. They are the caller's until it
	// acknowledges or releases them, or until the queue's hold lapses and
	// it hands them out again. ErrNoPipeInputs when the pipe has none.
	NextPipeInputs(pipeID uint64, max int) (PipeBatch, error)
	// PipeInputsWaiting returns how many items the queue holds that no
	// reader has taken yet (a moment after an item is stored it may not
	// count yet); ErrNoPipeInputs when the pipe has no queue.
	PipeInputsWaiting(pipeID uint64) (int, error)
}

// PipeBatch is what one NextPipeInputs took.
type PipeBatch interface {
	// Items in delivery order, each with FeedID (the input feed) and Seq.
	Items() []Item
	// Queue names the queue the items came from; another name means the
	// queue was made afresh (deleted and made again) since.
	Queue() string
	// AckFloor is a sequence at or below which every item the queue
	// delivered has been acknowledged, as the queue said before this
	// batch.
	AckFloor() uint64
	// Held is how many items of the queue were out with a reader, or due
	// to be handed out again, when this batch was taken and are not in
	// it: another node's, or left over. The caller may look again later.
	Held() int
	// Ack acknowledges the items at these indexes (in their order), and
	// returns once the store has processed the acknowledgements.
	Ack(idx []int) error
	// Release hands the items at these indexes back, to be taken again at
	// once (first), and returns once the store has them back.
	Release(idx []int) error
}
