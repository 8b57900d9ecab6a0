package pack

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// DigestConfig configures MAX, MIN, COUNT, SUM and MEAN.
type DigestConfig struct {
	// Field is the number field summarised (default "value").
	Field string `json:"field,omitempty" jsonschema:"description=the number item field summarised (default value)"`
	// By names a field whose value groups the items: one digest per
	// group (optional).
	By string `json:"by,omitempty" jsonschema:"description=one digest per value of this item field"`
}

// Merge returns the digest of the union of what a and b summarise:
// counts and sums add, extremes take the extreme, the span widens and
// the traced ids are a's then b's (without repeats, at most
// MaxDigestItems). A digest with no count is the identity. Merge is
// associative (sums up to floating-point rounding), so a digest of
// digests is exact. Both should be of the same field; the result has
// a's field (b's when a names none). Sums beyond ±math.MaxFloat64
// saturate there and counts at math.MaxInt64.
func Merge(a, b storage.Digest) storage.Digest {
	a.Items = slices.Clone(a.Items)
	mergeInto(&a, &b)
	return a
}

// mergeInto merges src into dst (whose Items it may append to).
func mergeInto(dst, src *storage.Digest) {
	if src.Count <= 0 {
		return
	}
	if dst.Count <= 0 {
		field := dst.Field
		*dst = *src
		dst.Items = slices.Clone(src.Items)
		if len(dst.Items) > MaxDigestItems {
			dst.Items = dst.Items[:MaxDigestItems]
		}
		if field != "" {
			dst.Field = field
		}
		return
	}
	if dst.Field == "" {
		dst.Field = src.Field
	}
	if dst.Count > math.MaxInt64-src.Count {
		dst.Count = math.MaxInt64
	} else {
		dst.Count += src.Count
	}
	dst.Sum = saturate(dst.Sum + src.Sum)
	dst.Min = math.Min(dst.Min, src.Min)
	dst.Max = math.Max(dst.Max, src.Max)
	if !src.From.IsZero() && (dst.From.IsZero() || src.From.Before(dst.From)) {
		dst.From = src.From
	}
	if !src.To.IsZero() && (dst.To.IsZero() || src.To.After(dst.To)) {
		dst.To = src.To
	}
	for _, id := range src.Items {
		if len(dst.Items) >= MaxDigestItems {
			break
		}
		if !slices.Contains(dst.Items, id) {
			dst.Items = append(dst.Items, id)
		}
	}
}

func saturate(x float64) float64 {
	switch {
	case math.IsInf(x, 1):
		return math.MaxFloat64
	case math.IsInf(x, -1):
		return -math.MaxFloat64
	}
	return x
}

// validDigest reports whether d can be merged: a positive count and
// finite, ordered extremes and sum.
func validDigest(d *storage.Digest) bool {
	return d.Count > 0 && finite(d.Sum) && finite(d.Min) && finite(d.Max) && d.Min <= d.Max
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// contribution returns what it adds to a digest of field: its digest
// when it is a digest of that field, else a digest of its one reading.
// ok is false when it has neither (or a broken digest).
func contribution(field string, it *Item) (d storage.Digest, ok bool) {
	if it.Digest != nil && it.Digest.Field == field {
		if !validDigest(it.Digest) {
			return d, false
		}
		return *it.Digest, true
	}
	v, ok := transform.Get(it, field)
	x, isNum := v.(float64)
	if !ok || !isNum || !finite(x) {
		return d, false
	}
	t := itemTime(it)
	var ids []string
	if it.ID != "" {
		ids = []string{it.ID}
	}
	return storage.Digest{Field: field, Count: 1, Sum: x, Min: x, Max: x, From: t, To: t, Items: ids}, true
}

// Summarise returns the digest of field over items: each item with a
// finite number in field counts as one reading, and each item that is
// itself a digest of field (Digest set, same Field) is merged whole. ok
// is false when no item contributes.
func Summarise(field string, items []storage.Item) (storage.Digest, bool) {
	d := storage.Digest{Field: field}
	for i := range items {
		if c, ok := contribution(field, &items[i]); ok {
			mergeInto(&d, &c)
		}
	}
	return d, d.Count > 0
}

// digestValue is what digester name reports of d.
func digestValue(name string, d *storage.Digest) float64 {
	switch name {
	case "MAX":
		return d.Max
	case "MIN":
		return d.Min
	case "COUNT":
		return float64(d.Count)
	case "SUM":
		return d.Sum
	}
	if d.Count == 0 {
		return 0
	}
	return saturate(d.Sum / float64(d.Count))
}

// group accumulates one group's digest.
type group struct {
	name        string
	d           storage.Digest
	first, last string // ids of the first and last contributing items
	unit        string
	mixed       bool // the contributing items' units differ
}

// grouping accumulates digests per group, in order of first appearance.
type grouping struct {
	field, by string
	groups    []*group
	index     map[string]*group
}

func newGrouping(field, by string) *grouping {
	return &grouping{field: field, by: by, index: map[string]*group{}}
}

// groupOf is it's group: for a digest item (of any field) the group it
// was made for (its reading's sensor), else its value of by.
func groupOf(it *Item, by string) string {
	if by == "" {
		return ""
	}
	if it.Digest != nil && it.Reading != nil {
		return shortGroup(it.Reading.Sensor)
	}
	return groupKey(it, by)
}

// add adds it to its group; it reports an error past MaxGroups groups.
func (gs *grouping) add(it *Item) error {
	c, ok := contribution(gs.field, it)
	if !ok {
		return nil
	}
	name := groupOf(it, gs.by)
	g := gs.index[name]
	if g == nil {
		if len(gs.groups) >= MaxGroups {
			return &transform.FieldError{Field: "by", Err: fmt.Errorf("%w: more than %d groups", transform.ErrLimit, MaxGroups)}
		}
		g = &group{name: name, d: storage.Digest{Field: gs.field}, first: it.ID}
		if it.Reading != nil {
			g.unit = it.Reading.Unit
		}
		gs.index[name] = g
		gs.groups = append(gs.groups, g)
	}
	unit := ""
	if it.Reading != nil {
		unit = it.Reading.Unit
	}
	if unit != g.unit {
		g.mixed = true
	}
	g.last = it.ID
	mergeInto(&g.d, &c)
	return nil
}

// digestItem makes the item digester name emits for group g, with id.
func digestItem(c *transform.Context, name string, g *group, id string) Item {
	d := g.d
	d.Items = slices.Clone(d.Items)
	v := digestValue(name, &d)
	unit := g.unit
	if g.mixed || name == "COUNT" {
		unit = "" // a count has no unit
	}
	at := d.To
	if at.IsZero() {
		at = c.Now
	}
	readings := "readings"
	if d.Count == 1 {
		readings = "reading"
	}
	of := ""
	if g.name != "" {
		of = " of " + g.name
	}
	title := fmt.Sprintf("%s %s%s (%d %s): %s", name, d.Field, of, d.Count, readings, formatNumber(v))
	if unit != "" {
		title += " " + unit
	}
	span := ""
	if !d.From.IsZero() {
		span = fmt.Sprintf(" from %s to %s", d.From.UTC().Format(time.RFC3339), d.To.UTC().Format(time.RFC3339))
	}
	summary := fmt.Sprintf("%d %s of %s%s%s: mean %s, min %s, max %s, sum %s.",
		d.Count, readings, d.Field, of, span,
		formatNumber(digestValue("MEAN", &d)), formatNumber(d.Min), formatNumber(d.Max), formatNumber(d.Sum))
	return Item{
		ID:         id,
		Title:      title,
		Summary:    summary,
		Categories: []string{"digest", "digest:" + name},
		Published:  at,
		Reading:    &storage.Reading{Value: v, Unit: unit, Sensor: g.name, Time: at},
		Digest:     &d,
	}
}

// formatNumber writes v briefly: at most four decimals, or six
// significant digits for very large or small magnitudes.
func formatNumber(v float64) string {
	a := math.Abs(v)
	if a != 0 && (a >= 1e9 || a < 1e-3) {
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	s := strconv.FormatFloat(v, 'f', 4, 64)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	s = trimDot(s)
	if s == "-0" {
		s = "0"
	}
	return s
}

func trimDot(s string) string {
	if s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}

// digester is MAX, MIN, COUNT, SUM or MEAN as an operator.
type digester struct {
	name      string
	field, by string
}

func newDigester(name string) func(json.RawMessage) (transform.Operator, error) {
	return func(raw json.RawMessage) (transform.Operator, error) {
		cfg, err := decode[DigestConfig](raw)
		if err != nil {
			return nil, err
		}
		f, err := checkField("field", cfg.Field, "value", transform.TypeNumber)
		if err != nil {
			return nil, err
		}
		if err := checkBy("by", cfg.By); err != nil {
			return nil, err
		}
		return &digester{name: name, field: f.Name, by: cfg.By}, nil
	}
}

func (d *digester) Apply(c *transform.Context, in [][]Item) ([]Item, error) {
	q := queue(in)
	gs := newGrouping(d.field, d.by)
	for i := range q {
		if err := checkErr(c, i); err != nil {
			return nil, err
		}
		if err := gs.add(&q[i]); err != nil {
			return nil, err
		}
	}
	out := make([]Item, 0, len(gs.groups))
	for _, g := range gs.groups {
		out = append(out, digestItem(c, d.name, g, c.DeriveID(d.name, g.name, g.first, g.last)))
	}
	return out, nil
}
