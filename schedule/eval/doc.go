// Package eval holds the scenarios of `slogfeed eval`: the scheduling
// policies of package schedule, the code that runs live, against
// simulated publishers (schedule/sim) and recorded traces on a virtual
// clock. Each Scenario runs to a Report (a table of rows, one per policy
// and parameter, its figures as SVG, and notes); a note that starts with
// FailPrefix states a failed acceptance check, and `slogfeed eval` then
// exits with ErrChecksFailed. All lists the scenarios in the order
// `slogfeed eval --help` shows them; docs/evaluation.md gives what each
// one measures and its current figures.
package eval
