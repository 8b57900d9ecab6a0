package sourcekit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Errors of source adapters. Match them with errors.Is.
var (
	// ErrConfig is returned by Prepare for a configuration that cannot be
	// used; the message names the setting at fault.
	ErrConfig = errors.New("invalid source configuration")
	// ErrRecordsSkipped matches a *SkipError: some records were left out.
	ErrRecordsSkipped = errors.New("records skipped")
	// ErrNoGoodRecords is returned when a document has records but every
	// one of them was skipped; it wraps the *SkipError saying why.
	ErrNoGoodRecords = errors.New("no usable record")
)

// maxQuoted bounds the runes of a value quoted in an error.
const maxQuoted = 40

// Quote quotes a value for an error message, cut to 40 runes.
func Quote(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) > maxQuoted {
		return strconv.Quote(string([]rune(s)[:maxQuoted])) + "…"
	}
	return strconv.Quote(s)
}

// RecordError is why one record was skipped, e.g. `row 12: field value:
// "abc" is not a number`.
type RecordError struct {
	// Noun names records: "record", "row", "line".
	Noun string
	// Record is the record's position in the document, from 1.
	Record int
	// Field is the field at fault (empty for the record as a whole).
	Field string
	// Err says what is wrong with it.
	Err error
}

// Error says which record and field, and what is wrong.
func (e *RecordError) Error() string {
	noun := e.Noun
	if noun == "" {
		noun = "record"
	}
	if e.Field == "" {
		return fmt.Sprintf("%s %d: %v", noun, e.Record, e.Err)
	}
	return fmt.Sprintf("%s %d: field %s: %v", noun, e.Record, e.Field, e.Err)
}

// Unwrap returns the reason.
func (e *RecordError) Unwrap() error { return e.Err }

// SkipError counts the records of a document that were skipped and keeps
// the first reasons.
type SkipError struct {
	Noun    string
	Skipped int // records skipped
	Records int // records seen
	// First are the reasons of the first skipped records (at most
	// MaxReasons).
	First []*RecordError
}

// MaxReasons is how many reasons a SkipError keeps.
const MaxReasons = 3

// Error reads e.g. `3 of 100 rows skipped: row 7: field value: "abc" is
// not a number; row 9: …; row 12: …`.
func (e *SkipError) Error() string {
	noun := e.Noun
	if noun == "" {
		noun = "record"
	}
	var b strings.Builder
	if e.Skipped == e.Records {
		fmt.Fprintf(&b, "all %d %ss skipped", e.Records, noun)
	} else {
		fmt.Fprintf(&b, "%d of %d %ss skipped", e.Skipped, e.Records, noun)
	}
	for i, r := range e.First {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(r.Error())
	}
	if e.Skipped > len(e.First) && len(e.First) > 0 {
		b.WriteString("; …")
	}
	return b.String()
}

// Is reports whether target is ErrRecordsSkipped.
func (e *SkipError) Is(target error) bool { return target == ErrRecordsSkipped }
