// Package ulb is slogfeed's "ulb" source adapter: it replays a recorded
// sensor trace in the line format of the ULB sensorNet traces (see
// schedule/sim.ParseULB) as a live feed, for demos and tests. The fetched
// body is a whole trace file; each fetch returns the readings of one mote
// that the replay has reached by the time of the fetch, published at
// their replay times, so the scheduler learns the mote's real publishing
// pattern (its period, jitter, lost readings and outages).
//
// A trace line is space separated: A the arrival time in Unix
// milliseconds, B the mote id, C its sequence counter, then D internal
// temperature, E internal voltage, F humidity, G temperature, H PAR light
// and I TSR light, with decimal commas ("21,21").
//
// Configuration (storage.Feed.Source.Config), e.g.
//
//	{"mote": 20, "quantity": "temperature", "speed": 12, "loop": true}
//
// Settings:
//
//   - mote (required): the mote whose readings become items;
//   - quantity: a name of Quantities (default temperature);
//   - speed: the time compression (default 1; 12 replays a minute in 5 s);
//   - start: when the replay began; Prepare sets it to the subscription
//     time;
//   - loop (default true): start over after the last reading;
//   - backlog: how many of the newest replayed readings a fetch returns
//     (default 20);
//   - sensor: the readings' sensor id (default "mote-<id>").
//
// A reading of arrival time A is replayed at start + (A − A0)/speed, A0
// being the first arrival of the whole file. A loop lasts the file's span
// plus the mote's mean interval, so the last and first readings keep
// their spacing. Since its items depend on the time of the fetch, the
// adapter is an aggregator.TimedSource: the trace is fetched without
// conditional GET.
//
// Malformed lines (no time or mote, a bad value of the replayed quantity,
// longer than MaxLineLen bytes) are skipped and counted; a trace without
// the configured mote is a feed error.
package ulb
