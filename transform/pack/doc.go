// Package pack implements PACK (Chen & Kotz) data reduction for
// slogfeed: filters that thin a queue of items, digesters that summarise
// items into digest items which merge exactly, and reduction policies
// that decide, the fuller a feed is, how much of what falls beyond its
// capacity is kept, and how the rest is summarised.
//
// Importing the package registers its operators in the transform
// catalogue, in family "pack", under their names in the paper, in upper
// case. Every operator takes one or more inputs; the items of all inputs,
// in the order of the node's edges, form the queue it works on. The
// examples below show an operator as a pipe node (with an "id" besides)
// or a policy's step writes it: its op and its config.
//
// # Filters
//
// A filter is applied to a whole queue (one run's batch) and keeps a
// subset of it, in order, unchanged. Configurations are strict: unknown
// fields and bad values are errors naming the field.
//
// GT, GE, EQ, NE, LT, LE keep the items whose field compares so with
// value: numbers numerically, times chronologically (value in RFC 3339 or
// Unix seconds), text byte-wise (a text that reads as a number compares
// numerically with a number). Items without the field are dropped, by NE
// too. List fields are refused (see CONTAIN).
//
//	{"op":"GT","config":{"field":"value","value":20}}
//	{"op":"EQ","config":{"field":"sensor","value":"lab-1"}}
//	{"op":"LT","config":{"field":"published","value":"2026-01-01T00:00:00Z"}}
//
// MATCH keeps the items whose field, as text, matches an RE2 regular
// expression (at most 512 bytes); a list field matches when one entry
// does.
//
//	{"op":"MATCH","config":{"field":"title","pattern":"(?i)alarm|alert"}}
//
// WITHIN keeps the items whose number or time field lies in [min, max],
// both inclusive (either bound may be left out). For a time field,
// "last" keeps the values within that long before the run's time instead.
//
//	{"op":"WITHIN","config":{"field":"value","min":10,"max":20}}
//	{"op":"WITHIN","config":{"field":"published","last":"1h"}}
//
// INSET keeps the items whose field value is in set (1 to 1024 strings or
// numbers; numbers and times compare as values, text exactly); for a list
// field, the items with at least one entry in set.
//
//	{"op":"INSET","config":{"field":"sensor","set":["lab-1","lab-2"]}}
//
// CONTAIN, SUBSET and SUPSET work on a list field (default "categories";
// entries compare exactly). CONTAIN keeps the items whose list contains
// value; SUBSET those whose every entry is in set (item ⊆ set); SUPSET
// those that have every entry of set (item ⊇ set). Items without the
// field are dropped.
//
//	{"op":"CONTAIN","config":{"field":"categories","value":"alarm"}}
//	{"op":"SUBSET","config":{"set":["temperature","humidity"]}}
//	{"op":"SUPSET","config":{"set":["temperature","outdoor"]}}
//
// FIRST and LAST keep the first or last n items of the queue; EVERY keeps
// every n-th, starting with the first (the 1st, n+1-th, 2n+1-th…). n is
// 1 to 100000.
//
//	{"op":"FIRST","config":{"n":10}}
//	{"op":"EVERY","config":{"n":2}}
//
// UNIQ drops an item whose field equals that of the item just before it
// in the queue, so a run of equal values keeps its first item; GUNIQ
// keeps only the first item of each distinct value in the queue. The
// field defaults to "value"; items without it count as one more value.
//
//	{"op":"UNIQ","config":{"field":"value"}}
//	{"op":"GUNIQ","config":{"field":"sensor"}}
//
// DELTA keeps an item only when its number field (default "value")
// differs by more than delta from the last value kept (in its group of
// "by", when given); the first item of a group is kept, and items without
// the field are dropped. It is the one stateful filter: a pipe's DELTA
// remembers the last kept value of up to 10000 groups between runs (the
// least recently kept are forgotten first). In a reduction policy it
// starts afresh on every reduction.
//
//	{"op":"DELTA","config":{"field":"value","delta":0.5,"by":"sensor"}}
//
// LATEST keeps only the latest item of each group of "by" (all items
// without the field form one group), or the one latest item when "by" is
// left out: the one published last, and of those published at the same
// time (or without a publish time), the last in the queue.
//
//	{"op":"LATEST","config":{"by":"sensor"}}
//
// RANDOM keeps each item with probability p, or n items chosen at random
// (all of them when the queue has at most n). The choices are drawn from
// the pipe, node and item ids, so a rerun on the same input keeps the
// same items, and with p an item is kept or dropped whatever else is in
// the queue.
//
//	{"op":"RANDOM","config":{"p":0.25}}
//	{"op":"RANDOM","config":{"n":10}}
//
// # Digesters
//
// MAX, MIN, COUNT, SUM and MEAN summarise the queue into one digest item
// per group of "by" (one in all without it), in order of the groups'
// first items. They read a number field ("field", default "value"); items
// without it are left out, and no digest is made for a queue without
// readings.
//
//	{"op":"MEAN","config":{"field":"value","by":"sensor"}}
//
// A digest item is an ordinary item with Digest set (storage.Digest: the
// field, count, sum, min, max, the span From–To of the readings' times,
// and the ids of up to 16 of them), and a reading: its value is what the
// digester computes (for COUNT the count), its unit that of the inputs
// when they all agree (none for COUNT), its sensor the group and its
// time To (also its publish time; the run's time when no reading had a
// time). Its title says what it is ("MEAN value of lab-1 (42
// readings): 21.37 C"), its categories are "digest" and "digest:MEAN",
// and its id is derived from the digester, the group and the ids of the
// group's first and last items, so that a rerun gives the same id.
//
// Digest items among the input (Digest set, of the same field) are not
// counted as one reading: their digests merge whole (counts and sums add,
// extremes combine, the span widens), so a digest of digests is exact. A
// digest item belongs to the group it was made for, its reading's sensor.
// Merge and Summarise are these operations for Go callers.
//
// # Reduction policies
//
// A policy says what becomes of the items a feed holds beyond its
// retention (storage.Retention). It is an ordered list of levels, each
// applying from a fill ratio "above", (capacity + overflow) / capacity:
//
//	{"levels":[
//	  {"above":1,   "filters":[{"op":"EVERY","config":{"n":2}}], "digest":["MEAN"]},
//	  {"above":1.5, "filters":[{"op":"DELTA","config":{"delta":1,"by":"sensor"}}],
//	                "digest":["MEAN","MIN","MAX"], "by":"sensor"},
//	  {"above":3,   "digest":["COUNT","MEAN"]}
//	]}
//
// When items overflow, the highest level whose above the fill ratio
// reaches applies (none: plain deletion, nothing kept or digested). Its
// filters (any PACK filter, at most 8) run in sequence over the items over
// capacity, oldest first; the items the last one keeps stay in the feed.
// A level without filters keeps nothing. The dropped items are summarised
// by the level's digesters ("digest", on "field", default "value",
// grouped by "by" when given) into digest items added to the feed; a
// level without digesters just deletes them. Higher levels should drop
// more: the fuller the feed, the harder it is thinned. A policy has 1 to
// 8 levels in strictly ascending order of above.
//
// Kept items stay beyond capacity, so they go through the policy again at
// the next reduction, and the fill ratio counts them. A positional filter
// (EVERY, FIRST, LAST, RANDOM with n) thins them further each time, but a
// filter that keeps an item for what it is (GT, MATCH, INSET, RANDOM with
// p, which decides by the item's id…) keeps it every time: the feed then
// grows until the fill ratio reaches a higher level. Make the highest
// level drop enough, for instance with no filters at all.
//
// Digests live in the same feed as the items and age like them. A digest
// item's id is stable for the feed, digester, field and group, so the
// digest of a later reduction replaces the earlier one; the earlier one,
// being older than the feed's newer items, is itself among the items over
// capacity by then and is merged into the new digest rather than counted
// as one reading, so the feed holds one exact digest per digester and
// group of everything it dropped. An earlier digest whose digester the
// level that applies does not run (or of another field) is kept as it is
// until a level that runs it merges it; plain deletion (no level applying)
// deletes digests too. Items that carry a digest made elsewhere (by a
// pipe's digester, say) are ordinary items to a policy.
//
// Attach a policy to a pipe's output, whose feed then keeps its
// retention this way:
//
//	"output": {"slug": "lab-temps", "retention": {"max_items": 500},
//	           "reduce": {"levels": [{"above": 1, "digest": ["MEAN", "MIN", "MAX"], "by": "sensor"}]}}
//
// or to any stored feed, as storage.Feed.Reduce (the same JSON), with a
// Reducer installed in the store:
//
//	store.SetReducer(pack.NewReducer().WithClock(now))
//
// The Reducer parses each feed's policy (ParsePolicy, cached) and applies
// it at the fill ratio (Retention.MaxItems + over) / Retention.MaxItems,
// 1 for a feed bounded by age only. ParsePolicy checks a policy before it
// is saved and reports problems as *transform.FieldError values naming
// the field, such as "levels[1].filters[0].config.n".
package pack
