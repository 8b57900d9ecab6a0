// Package transform is slogfeed's Pipes-style transform chains: a pipe is a
// DAG of operators over feed items, read from slogfeed's feeds and
// republished as a feed of its own.
//
// # Pipes
//
// A pipe is written as JSON (type Pipe):
//
//	{
//	  "name": "Warm readings, regional mean",
//	  "nodes": [
//	    {"id": "a", "op": "source", "config": {"feed": "sensor/lab-1"}},
//	    {"id": "b", "op": "source", "config": {"feed": "sensor/lab-2"}},
//	    {"id": "c", "op": "source", "config": {"feed": "feed/3"}},
//	    {"id": "all", "op": "union"},
//	    {"id": "warm", "op": "filter", "config": {"rules": [{"field": "value", "op": "gt", "value": 20}]}},
//	    {"id": "mean", "op": "window", "config": {"stat": "mean", "size": 10, "by": ""}}
//	  ],
//	  "edges": [
//	    {"from": "a", "to": "all"}, {"from": "b", "to": "all"}, {"from": "c", "to": "all"},
//	    {"from": "all", "to": "warm"}, {"from": "warm", "to": "mean"}
//	  ],
//	  "output": {"from": "mean", "slug": "warm-mean", "title": "Warm readings, mean of 10",
//	             "formats": ["rss", "atom", "json"], "retention": {"max_items": 500}},
//	  "trigger": {"on": "update"}
//	}
//
// Nodes name an operator of the catalogue ("op") and configure it
// ("config", an object whose fields the operator defines). Edges send a
// node's output into another node; a node with several incoming edges gets
// each edge's items as a separate input, in the order the edges are
// listed. Source nodes read one of slogfeed's feeds: "sensor/NAME" (the
// sensor store), "pipe/SLUG" (another pipe's output), "feed/ID" (a
// subscribed feed) or the URL of a subscribed feed (subscribed on save
// when it is not yet). The output names the node whose items are
// republished, at /feeds/{slug}.rss, .atom and .json.
//
// Compile checks a definition and reports every problem at once (Errors),
// each naming its node and the field at fault: unknown operators or
// fields, wrong types, bad values, duplicate ids, dangling or duplicate
// edges, cycles, wrong numbers of inputs, a missing or malformed output,
// an unknown trigger or a bad cron schedule, and anything over Limits
// (nodes, edges, loop nesting, regex length and program size, expression
// size and cost, items per node; a run's time and bytes are bounded as
// "Bounds of a run" says).
//
// # Items and ids
//
// Items are stored feed items (storage.Item), with their typed sensor
// reading when they carry one. Operators name item fields as Fields lists
// them: title, summary, content, link, author, id, guid, categories,
// enclosure, published, updated, fetched, feed, and the reading's value,
// unit, sensor, time, lat and lon.
//
// A pipe is idempotent: the same input item always gives the same output
// id. Sources prefix ids with the input feed's id ("12:lab-1/…/7");
// operators that change an item keep its id; operators that make new items
// (digests, windows, alerts, fused items) derive ids from stable parts of
// their input (Context.DeriveID). The republished feed deduplicates by id,
// so a rerun after a crash repeats nothing.
//
// # Running
//
// Pipes run event-driven (package transform/runner): a pipe runs when an
// input gained items and processes only the items that arrived since its
// previous run (the first run takes each source's newest "backlog" items,
// 20 by default). Operators that need history (windows, resampling,
// hysteresis, deadbands, gap detection, joins, DELTA) keep state between
// runs (Stateful); the runner stores the state with the run's output and
// input cursors in one transaction. Output items are stamped with the
// run's time as their publish time, so subscribers measure latency from
// the republish, and the reading keeps its observation time.
//
// Triggers ("trigger": {"on": ...}):
//
//   - "update" (default): on every input change;
//   - "mdpt": as "update" (the pipe runs on every input update;
//     {"on": "mdpt", "m": 2}, m defaults to n). Each input is fetched on
//     its own DPT schedule; republishing m of n is the fusing operator's
//     part: a join with "min": m (docs/evaluation.md, mdpt, measures why
//     bringing the inputs' fetches forward does not pay);
//   - "cron": on a robfig/cron schedule ({"on": "cron", "cron": "*/5 * * * *"}
//     or "@every 10m"), for digests and gap detection;
//   - "manual": only through POST /api/v1/pipes/{id}/run.
//
// A preview (Graph.Run with trace) runs every node on the inputs' newest
// items from a fresh state and returns each node's output and error
// without saving anything.
//
// # Bounds of a run
//
// A run, saved pipe or preview alike, is bounded by Limits (serve's
// --pipe-time, --pipe-node-bytes, --pipe-run-bytes and --regex-input):
//
//   - time: Limits.RunTime (10 s). Every operator looks at the deadline
//     between items (Context.Err), the regex operators before each item,
//     and a run whose operator returns after the deadline fails all the
//     same, with ErrTimeLimit naming the node;
//   - work per item: regular expressions (regex_replace, filter's
//     matches, split's pattern, PACK's MATCH, extract) look at the first
//     Limits.MaxRegexInput bytes of a field (16 KiB) and leave the rest as
//     it is: RE2 is linear in its input, but a large program over a long
//     summary takes a second per item;
//   - bytes: each node's output may hold Limits.MaxNodeBytes (32 MiB) and
//     all the nodes of a run together Limits.MaxRunBytes (128 MiB), as
//     ItemBytes counts them; operators that make text (template,
//     regex_replace, loops) count it as they go (Context.Grow). Past
//     either the run fails with ErrByteLimit naming the node and the
//     limit (the API answers 422);
//   - a preview shows at most PreviewItems items of each node, and
//     Limits.MaxPreviewBytes (4 MiB) of items in all: past it a node shows
//     its count and fewer items (NodeOutput.Truncated).
//
// # Operators
//
// The catalogue (Catalogue, GET /api/v1/operators) lists every operator
// with its documentation, an example configuration and the JSON Schema of
// its configuration. The families, each documented with examples in its
// package:
//
//   - this package: source, loop (a sub-chain of steps run on each item on
//     its own: {"steps": [{"op": "split", "config": {...}}, ...]}).
//   - transform/pipes, Yahoo Pipes' modules: union, merge, filter, sort,
//     unique, truncate, tail, count, reverse, rename, set, regex_replace,
//     template, date_format, split.
//   - transform/sensor, numbers: extract, convert, calibrate, window,
//     resample, threshold, deadband, gap, join.
//   - transform/pack, PACK data reduction: the filters GT GE EQ NE LT LE
//     MATCH WITHIN INSET CONTAIN SUBSET SUPSET FIRST LAST UNIQ GUNIQ DELTA
//     LATEST EVERY RANDOM, the digesters MAX MIN COUNT SUM MEAN, and
//     reduction policies for outputs and stored feeds.
//   - transform/expr, sandboxed CEL expressions with cost limits: where,
//     compute.
//
// An operator implements Operator (and Stateful when it keeps state) and
// registers a Spec in an init function; plugins add operators the same way
// (FamilyPlugin).
package transform
