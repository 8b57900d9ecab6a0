package schedule

import (
	"testing"
	"time"
)

// planStep is one poll of a feed whose publisher may plan its next update:
// due is Hints.Due in seconds after the poll (negative: no plan).
type planStep struct {
	at   float64
	pubs []float64
	more bool
	due  float64
	want float64
}

func runPlanSteps(t *testing.T, p Policy, steps []planStep) {
	t.Helper()
	for i, s := range steps {
		o := obsOf(step{at: s.at, pubs: s.pubs, more: s.more})
		if s.due >= 0 {
			o.Hints.Due, o.Hints.HasDue = time.Duration(s.due*float64(time.Second)), true
		}
		got := p.Next(o)
		if d := got.Sub(at(s.want)); d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("step %d (at %.3f, hit %v, due %.1f): next = %.6f s, want %.6f s",
				i, s.at, len(s.pubs) > 0, s.due, got.Sub(t0).Seconds(), s.want)
		}
	}
}

// Auto follows a publisher's planned update, falls back on its own
// prediction after MaxPlanMisses plan-placed misses in a row, and picks
// plans up again after a hit.
func TestAutoFollowsPlans(t *testing.T) {
	// A strictly periodic 60 s publisher: Auto's own poll lands 1.2 s after
	// each expected publish (see TestAutoSteadyPublisher).
	pubs := periodic(30, 60)
	tp := pubs[len(pubs)-1]
	const off = 1.2
	tests := []struct {
		name  string
		steps []planStep
	}{
		{"no plan: Auto's own schedule", []planStep{
			{at: tp, pubs: []float64{tp}, due: -1, want: tp + 60 + off},
			{at: tp + 60 + off, pubs: []float64{tp + 60}, due: -1, want: tp + 120 + off},
		}},
		{"a plan earlier than Auto's own poll is followed", []planStep{
			{at: tp, pubs: []float64{tp}, due: 20, want: tp + 20},
			{at: tp + 20, pubs: []float64{tp + 19}, due: 45, want: tp + 65},
		}},
		{"a plan later than Auto's own poll is followed", []planStep{
			{at: tp, pubs: []float64{tp}, due: 90, want: tp + 90},
		}},
		{"early plan misses leave Auto's own poll in place", []planStep{
			{at: tp, pubs: []float64{tp}, due: 10, want: tp + 10},
			{at: tp + 10, due: 5, want: tp + 15},
			{at: tp + 15, due: 5, want: tp + 20},
			// The third plan-placed miss in a row: back to Auto's own
			// poll, which these early misses did not move.
			{at: tp + 20, due: 5, want: tp + 60 + off},
			// Plans are ignored until a hit...
			{at: tp + 60 + off, pubs: []float64{tp + 60}, due: 30, want: tp + 60 + off + 30},
			// ...and followed again after it.
			{at: tp + 91.2, due: 2, want: tp + 93.2},
		}},
		{"ignored plans, then a miss of Auto's own", []planStep{
			{at: tp, pubs: []float64{tp}, due: 10, want: tp + 10},
			{at: tp + 10, due: 5, want: tp + 15},
			{at: tp + 15, due: 5, want: tp + 20},
			{at: tp + 20, due: 5, want: tp + 60 + off},
			// Auto's own poll misses: its own retry (the next slot) even
			// though the publisher still sends plans.
			{at: tp + 60 + off, due: 5, want: tp + 120 + off},
		}},
		{"a plan-placed miss after Auto's own poll was due counts as Auto's miss", []planStep{
			{at: tp, pubs: []float64{tp}, due: 70, want: tp + 70},
			{at: tp + 70, due: -1, want: tp + 120 + off},
		}},
		{"more data beats a plan", []planStep{
			{at: tp, pubs: []float64{tp}, more: true, due: 30, want: tp},
		}},
		{"a plan beyond MaxDelay is not one", []planStep{
			{at: tp, pubs: []float64{tp}, due: (MaxDelay + time.Hour).Seconds(), want: tp + 60 + off},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runPlanSteps(t, learn(NewAuto(), pubs...), tt.steps)
		})
	}
}

// While a poll follows a plan, Auto predicts the publish at the plan, so
// the scheduler ranks the feed by it.
func TestAutoPredictsThePlan(t *testing.T) {
	pubs := periodic(30, 60)
	tp := pubs[len(pubs)-1]
	a := learn(NewAuto(), pubs...)
	a.Next(Observation{At: at(tp), Hit: true, Published: []time.Time{at(tp)}, Hints: Hints{Due: 25 * time.Second, HasDue: true}})
	if got, ok := a.PredictedPublish(); !ok || !got.Equal(at(tp+25)) {
		t.Errorf("predicted publish %v (%v), want the plan at %v", got, ok, at(tp+25))
	}
	// The publisher's own model is not moved by plans it receives.
	if got, ok := a.EarliestNext(at(tp)); !ok || got.Sub(at(tp+60)) > 0 {
		t.Errorf("earliest next %v (%v), want before %v", got, ok, at(tp+60))
	}
	a.Next(Observation{At: at(tp + 60 + 1.2), Hit: true, Published: []time.Time{at(tp + 60)}})
	if got, ok := a.PredictedPublish(); !ok || !got.Equal(at(tp+120)) {
		t.Errorf("predicted publish without a plan %v (%v), want Auto's own %v", got, ok, at(tp+120))
	}
}
