package runner

import (
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// FeedHints are what the runner tells subscribers of a pipe's output feed
// (web.PipeFeedOptions.Hints).
type FeedHints struct {
	// Next is the earliest time the output is expected to change (Cache-
	// Control max-age, Slogfeed-Next); zero when unknown or overdue.
	Next time.Time
	// Due is the update the pipe plans (Slogfeed-Due), zero when it has no
	// plan; see Runner.Hints.
	Due time.Time
	// Formats are the formats the pipe serves, by extension.
	Formats []string
}

// fanInLen is how many outputs the fan-in of a pipe is learned over, and
// fanInMin how many must agree before the pipe plans from it.
const (
	fanInLen = 8
	fanInMin = 4
)

// cronMargin is how long after its cron time a pipe's run is planned to
// have stored its output.
const cronMargin = time.Second

// fanIn learns how many distinct inputs must bring new items before a pipe
// adds output: 1 for a pipe that republishes each input item, n for a join
// that fuses a round of n inputs. It counts the inputs that brought items
// since the last run that added output.
type fanIn struct {
	arrived []uint64        // input feeds with new items since the last output
	ring    [fanInLen]uint8 // inputs per output, the last fanInLen outputs
	n, next uint8
}

// ran records a run on fresh inputs that added output or not.
func (f *fanIn) ran(fresh []uint64, output bool) {
	for _, id := range fresh {
		if !slices.Contains(f.arrived, id) {
			f.arrived = append(f.arrived, id)
		}
	}
	if !output {
		return
	}
	f.ring[f.next] = uint8(min(len(f.arrived), 255))
	f.next = (f.next + 1) % fanInLen
	f.n = min(f.n+1, fanInLen)
	f.arrived = f.arrived[:0]
}

// typical returns the fan-in most recent outputs agree on: the most
// common count among them, when at least fanInMin outputs are known and
// three in four agree.
func (f *fanIn) typical() (int, bool) {
	if f.n < fanInMin {
		return 0, false
	}
	var best, bestN int
	for i := range int(f.n) {
		c := 0
		for j := range int(f.n) {
			if f.ring[j] == f.ring[i] {
				c++
			}
		}
		if c > bestN {
			best, bestN = int(f.ring[i]), c
		}
	}
	if best == 0 || 4*bestN < 3*int(f.n) {
		return 0, false
	}
	return best, true
}

// Hints returns, for the output feed of a pipe, what its subscribers are
// told (web.PipeFeedOptions.Hints):
//
//   - cron triggers plan their next run: Due and Next are the next cron
//     time (plus a second for the run);
//   - manual triggers plan nothing;
//   - update and mdpt triggers plan when their inputs are fetched here
//     (Options.PlannedFetch) and the pipe's fan-in is steady: a pipe that
//     added output after k of its inputs brought items, in three of its
//     last four to eight outputs, is due when the k-th input still
//     missing since its last output is fetched (the latest of them for a
//     join of all its inputs); a pipe of one input plans from the start,
//     due when that input is fetched. An
//     input whose items do not come from a scheduled fetch (a sensor
//     posted here, another pipe, a feed a hub pushes) leaves the pipe
//     without a plan. Without a plan, Next is the earliest next output
//     the model of the output's own arrivals expects
//     (schedule.Auto.EarliestNext), which subscribers may safely wait for.
func (r *Runner) Hints(feed storage.Feed, now time.Time) FeedHints {
	r.mu.Lock()
	p := r.byFeed[feed.ID]
	var next time.Time
	var feeds []uint64
	if p != nil {
		if p.cron != nil {
			next = p.nextCron
			if !next.After(now) {
				next = p.cron.Next(now)
			}
		}
		feeds = p.feeds
	}
	r.mu.Unlock()
	if p == nil {
		return FeedHints{Formats: transform.Formats}
	}
	h := FeedHints{Formats: formats(p.def)}
	switch p.def.Trigger.On {
	case transform.OnCron:
		if !next.IsZero() {
			h.Next, h.Due = next, next.Add(cronMargin)
		}
		return h
	case transform.OnManual:
		return h
	}
	if due, ok := r.plan(p, feeds, now); ok {
		h.Next, h.Due = due, due
		return h
	}
	h.Next = r.predict(p, now)
	return h
}

// plan returns when the update or mdpt pipe p, reading feeds, is due to
// add output next (see Hints).
func (r *Runner) plan(p *pipe, feeds []uint64, now time.Time) (time.Time, bool) {
	if r.opt.PlannedFetch == nil || len(feeds) == 0 {
		return time.Time{}, false
	}
	p.modelMu.Lock()
	k, ok := p.fan.typical()
	if !ok && len(feeds) == 1 {
		// One input: its next fetch is the only one the pipe can wait
		// for, from the first run on.
		k, ok = 1, true
	}
	var buf [64]uint64
	arrived := append(buf[:0], p.fan.arrived...)
	p.modelMu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	var tb [64]time.Time
	times, got := tb[:0], 0
	for _, id := range feeds { // distinct (setInputs)
		if slices.Contains(arrived, id) {
			got++
			continue
		}
		t, ok := r.opt.PlannedFetch(id, now)
		if !ok {
			return time.Time{}, false
		}
		times = append(times, t)
	}
	need := k - got
	if need <= 0 || need > len(times) {
		return time.Time{}, false
	}
	slices.SortFunc(times, time.Time.Compare)
	due := times[need-1]
	if due.Before(now) {
		due = now
	}
	return due, true
}
