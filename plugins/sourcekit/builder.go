package sourcekit

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
)

// Limits on what a Builder takes.
const (
	// MaxRecords bounds the records read from one document; a document
	// with more is cut there (parser.Parsed.Truncated).
	MaxRecords = 100_000
	// MaxUnitRunes bounds a reading's unit.
	MaxUnitRunes = 64
	// MaxSensorRunes bounds a reading's sensor id.
	MaxSensorRunes = 256
	// MaxIDLen bounds a configured item id, in bytes.
	MaxIDLen = 512
	// FutureSkew is how far after the fetch a record's time may lie
	// before it is implausible (the record is skipped).
	FutureSkew = time.Hour
)

// Record is one reading as an adapter read it.
type Record struct {
	// ID is the item's id when the data has one; empty derives it from
	// Sensor and Time.
	ID string
	// Time is the data's own timestamp: the item's publish time and the
	// reading's time.
	Time   time.Time
	Value  float64
	Unit   string
	Sensor string
}

// Builder collects the records of one document into items: stable IDs,
// readable titles ("21.3 C at field-north"), Published from the data,
// the first of each ID kept, the newest MaxItems returned newest first,
// skipped records counted. It is not safe for concurrent use.
type Builder struct {
	noun      string
	now       time.Time
	max       int
	records   int
	skipped   int
	first     []*RecordError
	items     []storage.Item
	seen      map[string]bool
	truncated bool
}

// NewBuilder returns a builder for one document whose records are called
// noun ("record", "row", "line"), bounded by opt.MaxItems, checking times
// against opt.Now.
func NewBuilder(noun string, opt parser.Options) *Builder {
	if opt.MaxItems <= 0 {
		opt.MaxItems = parser.DefaultMaxItems
	}
	return &Builder{noun: noun, now: opt.Now, max: opt.MaxItems, seen: map[string]bool{}}
}

// Next counts the next record and returns its number (from 1), or false
// when the document has reached MaxRecords: the adapter stops reading and
// the result is marked truncated.
func (b *Builder) Next() (int, bool) {
	if b.records >= MaxRecords {
		b.truncated = true
		return 0, false
	}
	b.records++
	return b.records, true
}

// Errorf returns the error of record n, field (may be empty).
func (b *Builder) Errorf(n int, field, format string, args ...any) *RecordError {
	return &RecordError{Noun: b.noun, Record: n, Field: field, Err: fmt.Errorf(format, args...)}
}

// Skip records that record n was skipped, and why.
func (b *Builder) Skip(err *RecordError) {
	b.skipped++
	if len(b.first) < MaxReasons {
		b.first = append(b.first, err)
	}
}

// Add adds record n. A record with a time beyond FutureSkew after the
// fetch, a value that is not finite or an id that is too long is skipped
// instead; a repeated id is ignored.
func (b *Builder) Add(n int, r Record) {
	switch {
	case r.Time.IsZero():
		b.Skip(b.Errorf(n, "time", "missing"))
		return
	case !b.now.IsZero() && r.Time.After(b.now.Add(FutureSkew)):
		b.Skip(b.Errorf(n, "time", "%s is in the future", r.Time.UTC().Format(time.RFC3339)))
		return
	case math.IsNaN(r.Value) || math.IsInf(r.Value, 0):
		b.Skip(b.Errorf(n, "value", "not a finite number"))
		return
	case len(r.ID) > MaxIDLen:
		b.Skip(b.Errorf(n, "id", "%d bytes, more than %d", len(r.ID), MaxIDLen))
		return
	}
	t := r.Time.UTC()
	rd := &storage.Reading{
		Value:  r.Value,
		Unit:   sanitize.PlainText(r.Unit, MaxUnitRunes),
		Sensor: sanitize.PlainText(r.Sensor, MaxSensorRunes),
		Time:   t,
	}
	id := sanitize.PlainText(r.ID, 0)
	if id == "" {
		id = t.Format(time.RFC3339Nano)
		if rd.Sensor != "" {
			id = rd.Sensor + "@" + id
		}
	}
	if b.seen[id] {
		return
	}
	b.seen[id] = true
	b.items = append(b.items, storage.Item{ID: id, Title: Title(rd), Published: t, Reading: rd})
}

// Title is a reading's item title: "21.3 C at field-north".
func Title(r *storage.Reading) string {
	s := strconv.FormatFloat(r.Value, 'f', -1, 64)
	if len(s) > 24 {
		s = strconv.FormatFloat(r.Value, 'g', 6, 64)
	}
	if r.Unit != "" {
		s += " " + r.Unit
	}
	if r.Sensor != "" {
		s += " at " + r.Sensor
	}
	return s
}

// Parsed returns the document's items, newest first, at most MaxItems
// (the newest), with the skipped records in Skipped. When the document
// had records and every one was skipped, it returns an error wrapping
// ErrNoGoodRecords and the *SkipError instead.
func (b *Builder) Parsed(title string) (*parser.Parsed, error) {
	var skip *SkipError
	if b.skipped > 0 {
		skip = &SkipError{Noun: b.noun, Skipped: b.skipped, Records: b.records, First: b.first}
		if b.skipped >= b.records {
			return nil, fmt.Errorf("%w: %w", ErrNoGoodRecords, skip)
		}
	}
	slices.SortStableFunc(b.items, func(x, y storage.Item) int { return y.Published.Compare(x.Published) })
	p := &parser.Parsed{Title: sanitize.PlainText(title, 256), Items: b.items, Truncated: b.truncated}
	if len(p.Items) > b.max {
		p.Items, p.Truncated = p.Items[:b.max:b.max], true
	}
	if skip != nil {
		p.Skipped = skip
	}
	return p, nil
}
