package wasm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// ABIVersion is the version of the ABI this package speaks: a module's
// slogfeed_abi export must return it.
const ABIVersion = 1

// The two forms of a batch (Config.ABI).
const (
	ABIRecords = "records" // fixed-size binary records (the default)
	ABIJSON    = "json"    // JSON documents
)

// Layout of the "records" ABI. Every number is little-endian.
const (
	// HeaderSize is the size of the input header: u32 item count, u32
	// parameter count.
	HeaderSize = 8
	// RecordSize is the size of one record: f64 value, i64 observation
	// time in Unix nanoseconds, i32 item index, i32 flags.
	RecordSize = 24
)

// Record flags.
const (
	// FlagValue: on input, the item carries a reading (its value is in
	// the record; NaN otherwise). On output, set the reading's value.
	FlagValue = 1 << 0
	// FlagTime: on input, the record holds the reading's observation
	// time (else the item's publish time; without either the flag is
	// clear and the time is 0). On output, set the observation time.
	FlagTime = 1 << 1
	// FlagInputShift: on input, bits 8 to 15 hold the number of the
	// input (edge) the item came from, 0 for the first. Output records
	// must leave them clear.
	FlagInputShift = 8

	outputFlags = FlagValue | FlagTime
)

// Other bounds of a batch.
const (
	// MaxParams bounds Config.Params.
	MaxParams = 16
	// MaxJSONBytes bounds a batch and an output in the "json" ABI.
	MaxJSONBytes = 8 << 20
	// MaxCategories bounds the categories a "json" output item sets, and
	// MaxCategoryBytes each category.
	MaxCategories    = 64
	MaxCategoryBytes = 256
	// MaxInputs bounds the incoming edges of a "wasm" node.
	MaxInputs = 16
	// maxUnitBytes bounds a unit set by a module or the configuration.
	maxUnitBytes = 64
)

// batch is one run's input: the items of every incoming edge, in edge
// order (pointers into the run's input, which is never modified), and
// the number of the edge each came from.
type batch struct {
	items  []*transform.Item
	inputs []int
}

func newBatch(in [][]transform.Item) batch {
	n := 0
	for _, list := range in {
		n += len(list)
	}
	b := batch{items: make([]*transform.Item, 0, n), inputs: make([]int, 0, n)}
	for k, list := range in {
		for i := range list {
			b.items = append(b.items, &list[i])
			b.inputs = append(b.inputs, k)
		}
	}
	return b
}

// unixNano returns t in Unix nanoseconds; ok is false for a zero time or
// one that int64 nanoseconds cannot hold (before 1678 or after 2262).
func unixNano(t time.Time) (int64, bool) {
	if t.IsZero() || t.Year() < 1678 || t.Year() > 2261 {
		return 0, false
	}
	return t.UnixNano(), true
}

// encodeRecords writes b in the "records" form: the header, the
// parameters, then one record per item.
func encodeRecords(b batch, params []float64) []byte {
	out := make([]byte, HeaderSize+8*len(params)+RecordSize*len(b.items))
	binary.LittleEndian.PutUint32(out[0:], uint32(len(b.items)))
	binary.LittleEndian.PutUint32(out[4:], uint32(len(params)))
	p := out[HeaderSize:]
	for _, v := range params {
		binary.LittleEndian.PutUint64(p, math.Float64bits(v))
		p = p[8:]
	}
	for i, it := range b.items {
		r := p[i*RecordSize : (i+1)*RecordSize]
		v := math.NaN()
		flags := uint32(b.inputs[i]) << FlagInputShift
		t := it.Published
		if it.Reading != nil {
			v = it.Reading.Value
			flags |= FlagValue
			if !it.Reading.Time.IsZero() {
				t = it.Reading.Time
			}
		}
		ns, ok := unixNano(t)
		if ok {
			flags |= FlagTime
		}
		binary.LittleEndian.PutUint64(r[0:], math.Float64bits(v))
		binary.LittleEndian.PutUint64(r[8:], uint64(ns))
		binary.LittleEndian.PutUint32(r[16:], uint32(i))
		binary.LittleEndian.PutUint32(r[20:], flags)
	}
	return out
}

// outputBuilder turns the records or JSON items a module returned into
// items: each refers to an input item by index; the first reference to
// an item keeps its id, the k-th (k ≥ 2) gets the id plus "~k".
type outputBuilder struct {
	b     batch
	unit  string // set on readings whose value the module set ("" = keep)
	refs  []int  // references to each input item so far
	out   []transform.Item
	limit int // MaxItems
}

func newOutput(b batch, unit string, limit int) *outputBuilder {
	return &outputBuilder{b: b, unit: unit, refs: make([]int, len(b.items)), limit: limit}
}

// item returns a copy of the input item idx for output record rec.
func (o *outputBuilder) item(rec int, idx int64) (*transform.Item, error) {
	if idx < 0 || idx >= int64(len(o.b.items)) {
		return nil, fmt.Errorf("%w: record %d: index %d, but the batch has %d items", ErrOutput, rec, idx, len(o.b.items))
	}
	if len(o.out) >= o.limit {
		return nil, fmt.Errorf("%w: more than %d items (%w)", ErrOutput, o.limit, transform.ErrLimit)
	}
	it := transform.Clone(*o.b.items[idx])
	o.refs[idx]++
	if k := o.refs[idx]; k > 1 {
		it.ID += "~" + strconv.Itoa(k)
	}
	o.out = append(o.out, it)
	return &o.out[len(o.out)-1], nil
}

// setValue gives it's reading the value v (a new reading at the item's
// publish time when it has none), the configured unit, and a title that
// says the new value.
func (o *outputBuilder) setValue(it *transform.Item, v float64, unit string) {
	if it.Reading == nil {
		it.Reading = &storage.Reading{Time: it.Published}
	}
	it.Reading.Value = v
	if unit != "" {
		it.Reading.Unit = unit
	} else if o.unit != "" {
		it.Reading.Unit = o.unit
	}
	it.Title = readingTitle(*it.Reading)
}

// setTime sets it's observation time (its publish time when it has no
// reading).
func setTime(it *transform.Item, t time.Time) {
	if it.Reading == nil {
		it.Published = t
		return
	}
	it.Reading.Time = t
}

// decodeRecords reads a "records" output.
func (o *outputBuilder) decodeRecords(out []byte) ([]transform.Item, error) {
	if len(out)%RecordSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %d-byte records", ErrOutput, len(out), RecordSize)
	}
	n := len(out) / RecordSize
	if n > o.limit {
		return nil, fmt.Errorf("%w: %d records, at most %d (%w)", ErrOutput, n, o.limit, transform.ErrLimit)
	}
	o.out = make([]transform.Item, 0, n)
	for i := range n {
		r := out[i*RecordSize : (i+1)*RecordSize]
		v := math.Float64frombits(binary.LittleEndian.Uint64(r[0:]))
		ns := int64(binary.LittleEndian.Uint64(r[8:]))
		idx := int64(int32(binary.LittleEndian.Uint32(r[16:])))
		flags := binary.LittleEndian.Uint32(r[20:])
		if flags&^outputFlags != 0 {
			return nil, fmt.Errorf("%w: record %d: unknown flags %#x (only %#x are defined)", ErrOutput, i, flags&^outputFlags, outputFlags)
		}
		if flags&FlagValue != 0 && (math.IsNaN(v) || math.IsInf(v, 0)) {
			return nil, fmt.Errorf("%w: record %d: value %v is not a finite number", ErrOutput, i, v)
		}
		it, err := o.item(i, idx)
		if err != nil {
			return nil, err
		}
		if flags&FlagValue != 0 {
			o.setValue(it, v, "")
		}
		if flags&FlagTime != 0 {
			setTime(it, time.Unix(0, ns).UTC())
		}
	}
	return o.out, nil
}

// jsonInput is a batch in the "json" ABI.
type jsonInput struct {
	// ABI is ABIVersion.
	ABI int `json:"abi"`
	// Params are the node's "params".
	Params []float64 `json:"params"`
	// Inputs[i] is the number of the input (edge) Items[i] came from.
	Inputs []int `json:"inputs"`
	// Items are the items, as the API shows them.
	Items []*transform.Item `json:"items"`
}

// encodeJSON writes b in the "json" form.
func encodeJSON(b batch, params []float64) ([]byte, error) {
	in := jsonInput{ABI: ABIVersion, Params: params, Inputs: b.inputs, Items: b.items}
	if in.Params == nil {
		in.Params = []float64{}
	}
	if in.Inputs == nil {
		in.Inputs, in.Items = []int{}, []*transform.Item{}
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encoding the batch as JSON: %w", err)
	}
	if len(raw) > MaxJSONBytes {
		return nil, fmt.Errorf("%w: the batch is %d bytes of JSON, at most %d (use the records ABI or fewer items per run)", transform.ErrLimit, len(raw), MaxJSONBytes)
	}
	return raw, nil
}

// jsonOutput is what a module returns in the "json" ABI.
type jsonOutput struct {
	// Items are the output items, each a change to an input item.
	Items []jsonItem `json:"items"`
	// Error, when not empty, fails the run with this message.
	Error string `json:"error,omitempty"`
}

// jsonItem is one output item in the "json" ABI: input item Index with
// the fields given changed. Absent fields keep the input item's.
type jsonItem struct {
	Index      *int64     `json:"index"`
	Value      *float64   `json:"value,omitempty"`
	Unit       *string    `json:"unit,omitempty"`
	Time       *time.Time `json:"time,omitempty"`
	Title      *string    `json:"title,omitempty"`
	Summary    *string    `json:"summary,omitempty"`
	Categories *[]string  `json:"categories,omitempty"`
}

// decodeJSON reads a "json" output. maxText bounds each text field.
func (o *outputBuilder) decodeJSON(out []byte, maxText int) ([]transform.Item, error) {
	if len(out) > MaxJSONBytes {
		return nil, fmt.Errorf("%w: %d bytes of JSON, at most %d (%w)", ErrOutput, len(out), MaxJSONBytes, transform.ErrLimit)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var doc jsonOutput
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: not the output JSON: %v", ErrOutput, sanitize.Clip(err.Error(), 200))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the output JSON", ErrOutput)
	}
	if doc.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrReported, sanitize.Clip(sanitize.PlainText(doc.Error, 0), 500))
	}
	if len(doc.Items) > o.limit {
		return nil, fmt.Errorf("%w: %d items, at most %d (%w)", ErrOutput, len(doc.Items), o.limit, transform.ErrLimit)
	}
	o.out = make([]transform.Item, 0, len(doc.Items))
	for i, ji := range doc.Items {
		if ji.Index == nil {
			return nil, fmt.Errorf("%w: items[%d]: no index", ErrOutput, i)
		}
		if err := ji.check(i, maxText); err != nil {
			return nil, err
		}
		it, err := o.item(i, *ji.Index)
		if err != nil {
			return nil, err
		}
		if ji.Value != nil {
			unit := ""
			if ji.Unit != nil {
				unit = *ji.Unit
			}
			o.setValue(it, *ji.Value, unit)
		} else if ji.Unit != nil && it.Reading != nil {
			it.Reading.Unit = *ji.Unit
		}
		if ji.Time != nil {
			setTime(it, ji.Time.UTC())
		}
		if ji.Title != nil {
			it.Title = sanitize.PlainText(*ji.Title, maxText)
		}
		if ji.Summary != nil {
			it.Summary = sanitize.HTML(*ji.Summary, nil)
		}
		if ji.Categories != nil {
			cats := make([]string, 0, len(*ji.Categories))
			for _, c := range *ji.Categories {
				if c = sanitize.PlainText(c, 0); c != "" {
					cats = append(cats, c)
				}
			}
			it.Categories = cats
		}
	}
	return o.out, nil
}

// check bounds the fields of output item i.
func (ji *jsonItem) check(i, maxText int) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: items[%d].%s: %s", ErrOutput, i, field, fmt.Sprintf(format, args...))
	}
	if ji.Value != nil && (math.IsNaN(*ji.Value) || math.IsInf(*ji.Value, 0)) {
		return bad("value", "not a finite number")
	}
	if ji.Unit != nil && (len(*ji.Unit) > maxUnitBytes || !utf8.ValidString(*ji.Unit)) {
		return bad("unit", "at most %d bytes of UTF-8", maxUnitBytes)
	}
	if ji.Time != nil {
		if _, ok := unixNano(*ji.Time); !ok {
			return bad("time", "%s is out of range (years 1678 to 2261)", ji.Time.Format(time.RFC3339))
		}
	}
	if ji.Title != nil && len(*ji.Title) > maxText {
		return bad("title", "%d bytes, at most %d", len(*ji.Title), maxText)
	}
	if ji.Summary != nil && len(*ji.Summary) > maxText {
		return bad("summary", "%d bytes, at most %d", len(*ji.Summary), maxText)
	}
	if ji.Categories != nil {
		if len(*ji.Categories) > MaxCategories {
			return bad("categories", "%d categories, at most %d", len(*ji.Categories), MaxCategories)
		}
		for k, c := range *ji.Categories {
			if len(c) > MaxCategoryBytes {
				return bad("categories", "[%d] is %d bytes, at most %d", k, len(c), MaxCategoryBytes)
			}
		}
	}
	return nil
}

// readingTitle is the title of an item whose value a module set, as the
// sensor operators write it: "lab-1: 70.7 °F".
func readingTitle(r storage.Reading) string {
	v := strconv.FormatFloat(r.Value, 'g', 6, 64)
	switch u := r.Unit; u {
	case "":
	case "C", "degC":
		v += " °C"
	case "F", "degF":
		v += " °F"
	default:
		v += " " + u
	}
	if r.Sensor != "" {
		return r.Sensor + ": " + v
	}
	return v
}

// firstLine is the first line of s (wazero's trap errors carry a stack
// trace after it).
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// errorsAs is errors.As for a target type.
func errorsAs[T error](err error) (T, bool) {
	var t T
	ok := errors.As(err, &t)
	return t, ok
}
