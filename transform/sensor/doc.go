// Package sensor is slogfeed's sensor set: pipe operators for numbers
// (family "sensor"). They work on the typed reading an item carries
// (storage.Reading: value, unit, sensor id, observation time, position)
// rather than on its text. Import the package for its side effect of
// registering the operators:
//
//	import _ "github.com/slogfeed/slogfeed/transform/sensor"
//
// # Common rules
//
// Items without a reading (or whose value is not finite) pass through
// unchanged, except where an operator says otherwise (extract gives them
// one; gap emits only gap items). The stateless operators process
// readings in the order given.
//
// # Time order and late readings
//
// The stateful operators (window, deadband, threshold, gap, resample and
// join) process each group's readings in observation-time order, within
// a run and across runs, whatever order they arrive in: a DTN link's
// batch, listed newest first by its feed, is processed oldest first.
// (The aggregator also stores each fetch's new items oldest first, so
// that a pipe reads them in that order.)
//
// A reading older than one of its group the operator has already
// processed is late. window, deadband, threshold, gap and resample take a
// lateness allowance, "lateness" (a duration, default 0): a reading is
// held back until its group has a reading observed at least lateness
// after it, or the run's clock is lateness past it, so readings up to
// lateness out of order are still processed in order (at the cost of
// that much delay; at most 1000 readings are held, beyond which the
// oldest are released early). Held readings are released only when the
// pipe runs: a pipe triggered by updates whose sensor falls silent keeps
// its last readings held until an input brings items again, so give such
// a pipe a cron trigger when that wait must be bounded. join's allowance is its tolerance: a
// reading up to tolerance older than the last fused item still takes
// part in later ones. resample also counts as late a reading for a bucket
// that has closed (by a later reading or by the clock after grace; give
// grace at least lateness).
//
// A late reading is never folded in out of order, nor dropped silently:
// the operator emits a late item for it, a copy of the reading's item
// with id "<id>~late", category "late", title "<sensor>: late reading
// 21.3 °C observed at <time>" and a summary naming the node and the time
// it had processed up to, and counts it in its state ("late"). Items
// without a usable observation time keep their place in the run.
//
// The observation time of a reading is its Time, or the item's publish
// time when it has none. The operators that compute with time (window
// with span, resample, gap, join) drop readings whose observation time
// is missing or outside the years 1900–2149.
//
// Groups: the stateful operators keep their state per group, the value of
// the item field named by "by" (default "sensor"; "" puts every reading
// in one group; any item field of the catalogue may be named). At most
// 10000 groups are remembered; beyond that the least recently updated
// group is forgotten. Group values longer than 256 bytes are shortened
// (with a hash, so that they stay distinct).
//
// State: window, resample, threshold, deadband, gap and join are
// transform.Stateful. Their state is JSON with a version ({"v":1,...}).
// LoadState replaces the whole state; it refuses what it cannot read
// (returning an error, after which the operator starts afresh) and bounds
// what it loads (groups, readings per window, values per bucket).
//
// Ids: an item that transforms one reading keeps its id (extract,
// convert, calibrate, deadband). Items that stand for one reading but say
// something else get the reading's id plus a suffix (window: "~mean" and
// so on; threshold: "~alert"). New items (resample buckets, gap reports,
// fused items) get ids from the node and stable parts (the group and a
// time), so that a rerun on the same input gives the same ids.
//
// Configurations are checked strictly: unknown fields, wrong types, NaN,
// values out of range are reported as *transform.FieldError naming the
// field. Durations are strings ("90s", "5m", "1h30m") or seconds, at most
// 366 days.
//
// Titles written by the operators show numbers to six significant digits;
// the reading keeps the exact value.
//
// # extract
//
// Gives items without a reading one, read from an item field by an RE2
// regular expression: the first capture group is the number. A decimal
// comma ("21,5"), thousands separators ("1.234,5", "1,234.5"), spaces and
// the Unicode minus sign are accepted. HTML fields (summary, content)
// are reduced to their text first. The reading's unit is "unit", its
// sensor the value of the field "sensor_from" (else "sensor"), its time
// the item's publish time. Items that already carry a reading keep it;
// items where nothing matches are dropped unless "keep" is true (then they
// pass without a reading). The expression defaults to the first number of
// the text; it is bounded like every regular expression of a pipe.
//
//	{"op": "extract", "config": {"field": "title", "regex": "(-?\\d+(?:[.,]\\d+)?)\\s*°?C",
//	  "unit": "C", "sensor_from": "author"}}
//
// # convert
//
// Converts readings to the unit "to" with a built-in table of linear
// conversions:
//
//	temperature  C, F, K
//	pressure     Pa, hPa (mbar), kPa, bar, inHg, mmHg
//	speed        m/s, km/h (kph), mph, kn (kt, knots)
//	length       m, cm, mm, km, in, ft
//	ratio        1, %, ppm
//
// Unit names are matched ignoring case; "°C", "degC", "celsius" and
// similar spellings are understood. The source unit is the reading's own,
// or "from" when given. A reading whose unit is unknown, or of another
// kind than "to" (a pressure to be converted to F), passes unchanged; with
// "strict": true it is dropped instead. A converted reading keeps its id
// and gets the canonical unit name and a title like "lab-1: 70.34 °F"; a
// conversion whose result is not finite drops the item.
//
//	{"op": "convert", "config": {"to": "F"}}
//	{"op": "convert", "config": {"from": "hPa", "to": "inHg", "strict": true}}
//
// # calibrate
//
// The correcting republisher: value' = value·scale + offset (defaults 1
// and 0; a scale of 0 is refused), optionally with a new unit. "sensors"
// maps sensor ids (Reading.Sensor) to their own correction; a field an
// override leaves out takes the general value. The item keeps its id and
// its reading's time; its title becomes "<sensor>: <value> <unit>", as
// in "lab-1: 21.3 °C". A correction whose result is not finite drops the
// item.
//
//	{"op": "calibrate", "config": {"scale": 1.02, "offset": -0.3, "unit": "C",
//	  "sensors": {"lab-1": {"scale": 1, "offset": 0.4}}}}
//
// # window
//
// Rolling statistics per group. For each reading it emits one item: a
// copy of the reading's item whose value is "stat" (mean, min, max,
// median, stddev, sum or count; stddev is the population standard
// deviation) over the window ending at that reading, inclusive. The
// window is the group's last "size" readings (1 to 10000), or with "span"
// the group's readings observed within span before the reading (from
// t − span to t; at most 10000 are kept per group). The item's id is the
// reading's id plus "~" and the statistic ("r17~mean"), its title
// "<sensor> <stat>(N): <value>" with N the readings in the window. Its
// unit is the window's readings' unit; it has none when they differ (a
// window pooling sensors of several quantities, "by": "") and for a
// count. "every": k emits only for every k-th reading of a
// group; "emit": "last" emits only for the last (due) reading of each
// group in a run. The windows are kept between runs (at most a million
// readings over all groups).
//
//	{"op": "window", "config": {"stat": "mean", "size": 10, "by": "sensor"}}
//	{"op": "window", "config": {"stat": "max", "span": "15m", "emit": "last"}}
//
// # resample
//
// Fixed time buckets per group: [align + k·every, align + (k+1)·every)
// of the observation time (every at least 1s; align defaults to 0, so
// buckets of 5m start on the clock's 5-minute marks in UTC). A bucket is
// emitted once a reading of its group observed at or after its end
// arrives, or once the run's clock passes its end plus "grace" (default:
// every), so a pipe triggered by cron closes buckets without input. It
// emits one item per closed bucket and group: value the bucket's "stat"
// (mean, min, max, median, stddev, sum, count, first or last), Reading.Time
// the bucket's start, published at the bucket's end, id derived from the
// group and the bucket's start, title "<sensor> mean(5m) at <start>:
// <value>". The sensor, unit, author and position are those of the
// bucket's last reading, except that when the bucket's readings have
// different units only first and last have one (the first or last
// reading's) and a count never has one. The open bucket is kept between runs. Readings
// for a bucket that has closed (or that a later bucket of the same group
// has replaced) are dropped. A median bucket keeps at most 10000 values
// (beyond, a rolling sample of the latest).
//
//	{"op": "resample", "config": {"every": "5m", "stat": "mean", "by": "sensor", "align": "0s", "grace": "1m"}}
//
// # threshold
//
// Alerts with hysteresis. Each group is "high" or "low": a low group goes
// high when a value is ≥ "above", a high group goes back low when a value
// is ≤ "below" ("below" must not exceed "above"; without "below" a high
// group goes back low when a value is under "above").
// Values between the two change nothing, so noise around a threshold does
// not chatter. A new group's first reading sets its state silently (high
// when ≥ above, else low), unless "initial" ("low" or "high") gives the
// state it starts in. Each crossing emits a copy of the reading's item
// with id "<id>~alert", title "<sensor> above 30 C: 31.2" or "<sensor>
// back below 28 C: 27.9", categories ["alert", "alert:high"] or
// ["alert", "alert:low"]. Readings themselves are not passed on.
//
//	{"op": "threshold", "config": {"above": 30, "below": 28, "by": "sensor"}}
//
// # deadband
//
// Passes a group's first reading, then only readings whose value differs
// from the last passed value by more than "delta" (default 0: any
// change); the others are dropped. Passed items are unchanged.
//
//	{"op": "deadband", "config": {"delta": 0.5, "by": "sensor"}}
//
// # gap
//
// Reports silent sensors. A group's expected period is "period", or when
// that is not given the median of the group's last 20 intervals between
// readings (learned once it has 3). When the run's clock is more than
// k·period (k defaults to 3) past a group's last reading and no gap item
// was emitted yet for that reading, gap emits one gap item for the group;
// when a reading arrives after such a silence not yet reported, the gap
// item is emitted before going on. A gap item has title "<sensor>: no
// reading for 17m (expected every 5m)", category "gap", publish time the
// run's time, a reading whose value is the seconds of silence (unit "s",
// Time the last reading's time) and an id derived from the group and the
// last reading's time, so a gap is reported once. Only gap items are
// emitted: readings and other items are consumed. gap does its work on
// every run, also without input: give the pipe a cron trigger so that it
// notices silence.
//
//	{"op": "gap", "config": {"period": "5m", "k": 3, "by": "sensor"}}
//	{"op": "gap", "config": {"k": 3}}
//
// # join
//
// Time-aligned (as-of) join of several sensors into fused items, such as
// the regional mean of 20 temperature sensors. All inputs are pooled
// (any number of edges); readings are grouped by "by" ("feed" groups by
// the feed an item came from, by input edge for items without one). The
// state is the latest reading (value, time, id) of each group. A run's
// readings are scanned in time order; a group keeps its last 8 readings,
// so a reading older than its group's latest still takes part in the
// rounds to come; one more than tolerance older than the last fused item
// is late (see above).
//
// With "emit": "round" (the default), readings come in rounds: a round
// starts with the first reading newer than the last fused item and
// closes when a reading observed more than "tolerance" after that start
// arrives, or at the end of the run. When a round closes and at least
// "min" groups (default 2) have a reading newer than the last fused time,
// all within "tolerance" (default 1m) of the newest among them, one fused
// item is emitted: its value is "stat" (mean, median, min, max, sum,
// count, stddev) over the latest reading of every group observed within
// tolerance before that newest time. A round that does not reach min
// stays open across runs until it does or a later round replaces it. So
// a run holding 20 readings at t and 20 at t+5m emits two fused items;
// one that receives the sensors one by one emits when the min-th
// arrives (set min to the number of sensors for complete rounds).
//
// With "emit": "each", every reading that becomes its group's latest is
// followed by a fused item as soon as at least min groups have a reading
// within tolerance before it.
//
// The fused reading's time is the newest contributing time (also the
// item's publish time), its sensor "sensor" (default "join"), its unit
// "unit" or else the readings' unit when they all agree. The title reads
// "region mean of 20: 21.37 C", the summary names the first contributors.
// Ids are derived from the fused time (and, with "each", the triggering
// reading's id). Items without a reading pass unchanged; readings
// without a usable time are dropped.
//
//	{"op": "join", "config": {"by": "sensor", "stat": "mean", "tolerance": "2m", "min": 20,
//	  "unit": "C", "sensor": "region"}}
package sensor
