// Package jsonsource is slogfeed's "json" source adapter: it reads
// sensor readings from any JSON document fetched over HTTP (a weather
// API, a gateway's status page), with JMESPath expressions
// (https://jmespath.site) selecting the readings and, in each, its time,
// value, unit, sensor id and optionally item id.
//
// Configuration (storage.Feed.Source.Config), e.g. for
// {"data": {"readings": [{"ts": 1767607200, "t": 21.3, "station": "north"}]}}:
//
//	{"items": "data.readings", "time": "ts", "value": "t",
//	 "unit": "'C'", "sensor": "station", "time_format": "unix"}
//
// Settings:
//
//   - items selects the array of readings in the document (default "@":
//     the document is the array);
//   - time, value (required), unit, sensor, id (optional) are evaluated
//     on each reading; a literal is a JMESPath raw string: "'C'";
//   - time_format is auto (default: RFC 3339 text, or Unix seconds or
//     milliseconds by magnitude), rfc3339, unix, unix_ms or a Go layout.
//
// Values may be JSON numbers or text ("21.3", "21,3"). Expressions are at
// most MaxExprLen bytes, may not use the root reference $ inside a
// reading, and may call only the functions that cannot build large
// values (AllowedFunctions). The document is refused beyond MaxDepth
// nesting or MaxNodes values. Without an id expression, an item's id is
// the sensor id and the time, so a reading is stored once however often
// the API repeats it.
package jsonsource
