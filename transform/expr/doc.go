// Package expr gives slogfeed's pipes sandboxed expressions: small
// formulas over an item's fields that filter items (where) or compute new
// field values (compute). The language is CEL, the Common Expression
// Language (https://cel.dev), with the restrictions below. An expression
// cannot read files, reach the network, loop forever or grow without
// bound: it is compiled once when the pipe is saved and every evaluation
// runs within a cost budget and the pipe's time limit.
//
// # Operators
//
// where keeps the items for which a boolean expression is true:
//
//	{"op": "where", "config": {"expr": "value > 25 && sensor.startsWith(\"lab\")"}}
//
// An item whose evaluation fails (a division by zero, int("abc"), an
// index out of range) stops the run with an error naming the node and the
// item's id, unless "on_error" says otherwise: "drop" leaves such items
// out, "keep" passes them on. Running over the cost budget or the time
// limit always stops the run.
//
//	{"expr": "int(title) > 3", "on_error": "drop"}
//
// compute sets item fields to the values of expressions, 1 to 32 of them:
//
//	{"op": "compute", "config": {"set": {
//	    "value": "value * 1.8 + 32",
//	    "unit":  "\"F\"",
//	    "title": "sensor + \": \" + string(value)"}}}
//
// Every expression sees the input item, not the other results: above,
// the title shows the reading in Celsius. The results are stored in a
// copy of the item in the order of the field names; read-only fields
// (fetched, feed) cannot be set. A number field (value, lat, lon) wants a
// number, a time field (published, updated, time) a timestamp; a text
// field takes any result, written as text (numbers as short as they
// round-trip, timestamps in RFC 3339, lists joined with ", "), and
// categories takes a list or a single value. null clears a field. Setting
// a reading field (value, unit, sensor, time, lat, lon) on an item
// without a reading gives it one, observed at its publish time. A value
// the field refuses (a latitude of 95, an empty id) is an error of the
// item, handled as "on_error" says (default "fail"), like an evaluation
// error.
//
// # Variables
//
// Every item field is a variable of the same name:
//
//	title, summary, content, link, author, id, guid, enclosure   string
//	unit, sensor                                                 string
//	value, lat, lon, feed                                        double
//	published, updated, fetched, time                            timestamp
//	categories                                                   list(string)
//	now                                                          timestamp: the time of the run
//
// A field the item does not have holds its zero value: "", 0.0, the
// timestamp 0001-01-01T00:00:00Z, an empty list. present("value") tells
// whether the item has a value there (for value, lat and lon: whether it
// has a reading, resp. coordinates; for text: whether it is not empty);
// its argument must be a field name in quotes ("category" is accepted
// for categories).
//
//	present("value") && value > 25
//	present("updated") ? updated : published
//
// # Language
//
// CEL is a C-like language without statements: literals (1, 2.5, 3u,
// "text", 'text', r"raw", true, null, [lists], {"maps": 1}), the
// operators + - * / % == != < <= > >= && || ! ?: and in, indexing
// (categories[0]), and calls. Integers and doubles are distinct types;
// where an operator meets an int and a double, slogfeed converts the int
// (value * 2, value == 25, cond ? 0 : value all work), but % takes ints
// only (int(value) % 2) and 7 / 2 is the integer 3. Comparisons of
// timestamps and durations work as expected:
//
//	published > now - duration("24h")
//	time.getHours() >= 8 && time.getDayOfWeek() != 0   // UTC
//	time.getHours("+02:00") >= 8                       // at a fixed offset
//
// Functions and macros available:
//
//   - standard: size, int, uint, double, string, bool, bytes, dyn, type,
//     timestamp("2025-01-02T03:04:05Z"), duration("1h30m"), the timestamp
//     accessors getFullYear, getMonth (0-11), getDayOfMonth (0-based),
//     getDate (1-based), getDayOfWeek (0 = Sunday), getDayOfYear,
//     getHours, getMinutes, getSeconds, getMilliseconds; contains,
//     startsWith, endsWith, matches.
//   - macros: all, exists, exists_one, map, filter, and has for maps
//     (categories.exists(c, c == "alert")); at most 3 nested.
//   - strings: charAt, indexOf, lastIndexOf, lowerAscii, upperAscii,
//     replace(old, new[, n]), split(sep[, n]), substring(start[, end]),
//     trim, reverse, join on lists, format ("%s: %.1f".format([sensor,
//     value])), strings.quote.
//   - math: math.greatest, math.least (of arguments or a list),
//     math.abs, math.ceil, math.floor, math.round, math.trunc,
//     math.sign, math.sqrt, math.isNaN, math.isInf, math.isFinite and
//     the bit operations on ints.
//
// Restrictions:
//
//   - matches() takes its pattern as a string literal, checked when the
//     pipe is saved under the same limits as every regular expression of
//     slogfeed (RE2 syntax, at most 512 bytes, at most 4096 program
//     instructions) and compiled once: title.matches("^[A-Z]") compiles,
//     title.matches(summary) does not.
//   - the timestamp accessors take their time zone as a literal "UTC" or
//     a fixed offset such as "+02:00" or "-05:30"; named zones
//     ("Europe/Paris") are refused, since they read the system's zone
//     files.
//   - replace() refuses to build a string larger than 4 MiB (an error
//     counted as over the cost limit).
//
// # Results
//
// where wants a bool. compute wants, for each field, what is said above.
// A list result is written as a list of strings (numbers, bools and
// timestamps in it as text); a map, bytes or a duration cannot be
// stored. A result of type dyn is checked when evaluated. A number result
// that is NaN or infinite is an error.
//
// # Limits
//
//   - An expression is at most Limits.MaxExpr bytes (default 2048), nested
//     at most 32 levels deep (parentheses, calls, operands: a chain of 32
//     additions is already 32 levels; && and || chains are balanced and do
//     not count so), and holds at most 4096 nodes after macros expand.
//     Longer or deeper ones are refused when the pipe is saved, as errors
//     wrapping transform.ErrLimit.
//   - Each evaluation has a budget of Limits.ExprCost cost units (default
//     100000): about one unit per operation, variable or comparison, and
//     one per ten characters a string function reads (so a contains() over
//     a 1 MiB content costs about 100000). An evaluation over its budget
//     fails with transform.ErrCostLimit, which stops the run. An
//     expression whose cheapest evaluation already exceeds the default
//     budget (three nested comprehensions over lists of 50) is refused
//     when the pipe is saved.
//   - Comprehensions check the pipe's deadline every 100 iterations, so a
//     run over Limits.RunTime stops with transform.ErrTimeLimit.
//
// # Errors
//
// Configuration errors are *transform.FieldError values naming the field
// ("expr", "set.title", "on_error") with CEL's message on one line and
// the column (counted from 1) where it applies:
//
//	expr: column 9: undeclared reference to 'limit'
//	set.value: expression gives a string, want a number
package expr
