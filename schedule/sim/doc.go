// Package sim is slogfeed's publishing model, trace replay and
// discrete-event simulator for fetch policies.
//
// A publisher is a sorted list of Items (or a Stream of them, for
// simulations of very many feeds). Items come from the DPT publishing
// model (Model), from a disruption-tolerant publisher that batches its
// daytime readings (DTN), or from real traces (ParseULB, ParsePlain, Load).
// Run polls one publisher with a schedule.Policy on a virtual clock and
// records what every poll found; Stats and Summarize turn the use latencies
// into the medians, means, percentiles and hit rates the evaluation reports.
//
// Everything here is deterministic: randomness comes from the *rand.Rand the
// caller passes in, and no function reads the wall clock.
//
// # Publishing model
//
// The model follows the DPT paper: a publisher tries to publish once every
// period λ; whether a try succeeds is a two-state Markov chain (Pss is the
// probability of success after a success, Pfs after a failure). The time
// between two published items is I = (k+1)λ + j where k is the number of
// failed tries in between and j ~ Laplace(JitterLoc, JitterScale) is the
// publishing jitter. Jitter is applied to every inter-publish time, so it
// accumulates: the publisher has no fixed grid, and a subscriber has to
// follow its phase (this is what DPT's phase adjustment is for). Inter-publish
// times that the jitter would make negative are clamped to zero (two items
// at the same instant); this only happens when JitterScale is a sizeable
// fraction of Period.
//
// The first try is at start+Phase (or at a uniformly random phase in
// [0, λ) with RandomPhase) and succeeds with the chain's stationary
// probability Pfs/(1−Pss+Pfs), so that statistics over a run do not depend
// on how it begins. The first item carries no jitter.
//
// Optional realism, beyond the paper's model: long outages (after each
// published item an outage starts with probability OutageProb and lasts a
// uniform time in [OutageMin, OutageMax]; the next item comes after it
// either on the publisher's old grid, last + m·λ + j with the smallest
// m ≥ 1 that clears the outage, or at a random phase after it with
// PhaseShiftOnRestart) and clock drift (the publisher's period is
// λ·(1+DriftPPM·1e-6)). The Markov chain restarts in the success state after
// an outage.
//
// # Simulation
//
// Run polls at schedule.First(p, start) and then at whatever the policy
// returns, while the poll time is before end. Items published before start
// were already in the feed when it was subscribed and are ignored; items
// published at or after end are outside the run. A poll at now sees every
// item with Published in (previous poll, now] (the first poll sees
// [start, now]); each such item is fetched with latency At − Published, At
// being the time the response arrives (now plus the fetch delay). Items
// published in [start, end) after the last poll are counted as Unfetched.
//
// Run reuses one buffer for Observation.Published across polls: a policy
// must not retain obs.Published (or any slice of it) after Next returns; it
// has to copy what it wants to keep.
package sim
