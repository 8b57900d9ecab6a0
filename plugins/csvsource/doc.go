// Package csvsource is slogfeed's "csv" source adapter: it reads sensor
// readings from CSV or TSV fetched over HTTP (a data logger's export, an
// open-data portal), one reading per row.
//
// Configuration (storage.Feed.Source.Config), e.g. for
// "Zeit;Temperatur;Station\n05.01.2026 10:00;21,3;nord\n":
//
//	{"delimiter": ";", "header": true,
//	 "columns": {"time": "Zeit", "value": "Temperatur", "sensor": "Station"},
//	 "decimal_comma": true, "time_format": "02.01.2006 15:04", "unit": "C"}
//
// Settings:
//
//   - delimiter is ",", ";", "\t", "|" or absent: told from the
//     Content-Type (text/tab-separated-values) or else from the first
//     line (the most frequent of tab, semicolon, comma, bar);
//   - header (default true): the first row names the columns;
//   - columns map time and value (required), unit, sensor and id
//     (optional) to a column: a header name (text) or a position from 0
//     (a number);
//   - decimal_comma: true (a comma is the decimal mark, dots group
//     thousands: "1.234,5"), false (a dot is the decimal mark, commas
//     group thousands: "1,234.5"), or "auto" (default: a lone comma is a
//     decimal comma, both marks are read as in feedext.ParseLocalNumber);
//   - time_format as in sourcekit.TimeFormat (default auto);
//   - unit and sensor: the unit and sensor id of rows without a unit or
//     sensor column, or whose cell is empty.
//
// A leading byte order mark is ignored. Quotes follow RFC 4180 strictly
// (no lazy quotes). A header without a configured column, or a document
// that is not CSV, is a feed error; a row with a bad value, too few
// columns, a cell over MaxFieldLen bytes or a quoting error is skipped
// and counted ("row" numbers count data rows from 1, the header not
// included).
package csvsource
