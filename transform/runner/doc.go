// Package runner runs slogfeed's pipes: it keeps their definitions and
// state in the store, runs each pipe when its trigger says (new input
// items, m of n inputs updated, a cron schedule, or a request), feeds it
// only the items that arrived since its previous run, and commits the
// output and the new state together (CommitPipeRun), so a pipe's
// republished feed never loses or repeats an item across crashes. It
// also tells the subscribers of each pipe's feed when the pipe plans to
// update next (Hints), from its inputs' fetch schedule and the pipe's
// learned fan-in.
//
// On bbolt a run reads each input after the cursor kept in the pipe's
// state. On a store with input queues (storage.PipeInputQueue: the
// JetStream backend's durable consumer per pipe) it takes the new items
// from the pipe's queue and acknowledges them only once the run is
// committed, so whichever node runs the pipe next resumes at the first
// input not acknowledged, and inputs committed but not acknowledged are
// not run twice (queue.go).
package runner
