package pipes

import (
	"fmt"
	"slices"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// UnionConfig is the configuration of "union": it has none.
type UnionConfig struct{}

// MergeConfig is the configuration of "merge".
type MergeConfig struct {
	// By is the item field the merged items are ordered by (default
	// "published").
	By string `json:"by,omitempty" jsonschema:"description=item field the items are ordered by (default published)"`
	// Desc orders from the largest value to the smallest.
	Desc bool `json:"desc,omitempty" jsonschema:"description=order from the largest value down"`
}

// SortConfig is the configuration of "sort".
type SortConfig struct {
	// By are the sort keys, the first one first (1 to 8).
	By []SortKey `json:"by" jsonschema:"description=sort keys: the first decides and the next break ties"`
}

// SortKey is one key of a sort.
type SortKey struct {
	// Field is the item field to order by.
	Field string `json:"field" jsonschema:"description=item field to order by"`
	// Desc orders from the largest value to the smallest.
	Desc bool `json:"desc,omitempty" jsonschema:"description=order from the largest value down"`
}

// CountConfig is the configuration of "truncate" and "tail".
type CountConfig struct {
	// Count is how many items to keep (0 to 100000).
	Count *int `json:"count" jsonschema:"description=how many items to keep (0 to 100000)"`
}

// EmptyConfig is the configuration of "reverse" and "count": they have
// none.
type EmptyConfig struct{}

// maxSortKeys bounds a sort's keys; maxCount a truncate's or tail's count.
const (
	maxSortKeys = 8
	maxCount    = 100000
)

func init() {
	register("union",
		"Concatenates the items of all its inputs, the first input's items first, each input's in their order.",
		`{}`, 1, -1,
		func(UnionConfig) (transform.Operator, error) { return unionOp{}, nil })
	register("merge",
		"Interleaves the items of all its inputs into one list ordered by a field (published time by default); items with equal values keep their input order and items lacking the field come last.",
		`{"by":"published","desc":false}`, 1, -1, newMerge)
	register("sort",
		"Orders the items by one or more fields, each ascending or descending; the sort is stable and items lacking a field come last for that key.",
		`{"by":[{"field":"value","desc":true}]}`, 1, 1, newSort)
	register("truncate",
		"Keeps the first count items and drops the rest.",
		`{"count":10}`, 1, 1,
		func(cfg CountConfig) (transform.Operator, error) {
			n, err := checkCount(cfg)
			return truncateOp{n: n}, err
		})
	register("tail",
		"Keeps the last count items and drops the rest.",
		`{"count":10}`, 1, 1,
		func(cfg CountConfig) (transform.Operator, error) {
			n, err := checkCount(cfg)
			return tailOp{n: n}, err
		})
	register("reverse",
		"Reverses the order of the items.",
		`{}`, 1, 1,
		func(EmptyConfig) (transform.Operator, error) { return reverseOp{}, nil })
	register("count",
		"Emits one item whose reading value is the number of input items (nothing when there are none).",
		`{}`, 1, 1,
		func(EmptyConfig) (transform.Operator, error) { return countOp{}, nil })
}

type unionOp struct{}

func (unionOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	n := 0
	for _, items := range in {
		n += len(items)
	}
	if n > maxItems(c) {
		return nil, errTooMany(c, n)
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	return concat(in), nil
}

// sortKey is a checked sort key.
type sortKey struct {
	field string
	desc  bool
}

// sortOp orders items by keys; it is both "merge" and "sort".
type sortOp struct {
	keys []sortKey
}

func newMerge(cfg MergeConfig) (transform.Operator, error) {
	if cfg.By == "" {
		cfg.By = "published"
	}
	if err := transform.CheckField("by", cfg.By, false); err != nil {
		return nil, err
	}
	return sortOp{keys: []sortKey{{cfg.By, cfg.Desc}}}, nil
}

func newSort(cfg SortConfig) (transform.Operator, error) {
	if len(cfg.By) == 0 {
		return nil, transform.Fieldf("by", "give at least one sort key")
	}
	if len(cfg.By) > maxSortKeys {
		return nil, transform.Fieldf("by", "%w: %d sort keys, at most %d", transform.ErrLimit, len(cfg.By), maxSortKeys)
	}
	op := sortOp{}
	for i, k := range cfg.By {
		if err := transform.CheckField(fmt.Sprintf("by[%d].field", i), k.Field, false); err != nil {
			return nil, err
		}
		op.keys = append(op.keys, sortKey{k.Field, k.Desc})
	}
	return op, nil
}

// keyed is an item's position and its values for the sort keys.
type keyed struct {
	i    int
	vals []any // nil where the item lacks the field
}

func (o sortOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	items := concat(in)
	if len(items) > maxItems(c) {
		return nil, errTooMany(c, len(items))
	}
	ks := make([]keyed, len(items))
	for i := range items {
		if err := tick(c, i); err != nil {
			return nil, err
		}
		vals := make([]any, len(o.keys))
		for k, key := range o.keys {
			if v, ok := transform.Get(&items[i], key.field); ok {
				vals[k] = v
			}
		}
		ks[i] = keyed{i, vals}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		for k, key := range o.keys {
			x, y := a.vals[k], b.vals[k]
			switch {
			case x == nil && y == nil:
				continue
			case x == nil:
				return 1
			case y == nil:
				return -1
			}
			r := transform.Compare(x, y)
			if key.desc {
				r = -r
			}
			if r != 0 {
				return r
			}
		}
		return 0
	})
	if err := c.Err(); err != nil {
		return nil, err
	}
	out := make([]transform.Item, len(items))
	for j, k := range ks {
		out[j] = items[k.i]
	}
	return out, nil
}

func checkCount(cfg CountConfig) (int, error) {
	if cfg.Count == nil {
		return 0, transform.Fieldf("count", "required: how many items to keep")
	}
	n := *cfg.Count
	if n < 0 {
		return 0, transform.Fieldf("count", "must not be negative, got %d", n)
	}
	if n > maxCount {
		return 0, transform.Fieldf("count", "%w: %d items, at most %d", transform.ErrLimit, n, maxCount)
	}
	return n, nil
}

type truncateOp struct{ n int }

func (o truncateOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	return span(in, 0, o.n), nil
}

type tailOp struct{ n int }

func (o tailOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	total := 0
	for _, items := range in {
		total += len(items)
	}
	return span(in, total-o.n, total), nil
}

type reverseOp struct{}

func (reverseOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	out := concat(in)
	slices.Reverse(out)
	return out, nil
}

// span returns, in a new slice, the items at positions from to to-1 of
// the concatenation of in (positions outside it are ignored).
func span(in [][]transform.Item, from, to int) []transform.Item {
	total := 0
	for _, items := range in {
		total += len(items)
	}
	from, to = max(from, 0), min(to, total)
	out := make([]transform.Item, 0, max(0, to-from))
	pos := 0
	for _, items := range in {
		lo, hi := max(from-pos, 0), min(to-pos, len(items))
		if lo < hi {
			out = append(out, items[lo:hi]...)
		}
		pos += len(items)
	}
	return out
}

type countOp struct{}

func (countOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	var ids []string
	for _, items := range in {
		for i := range items {
			if err := tick(c, len(ids)); err != nil {
				return nil, err
			}
			ids = append(ids, items[i].ID)
		}
	}
	n := len(ids)
	if n == 0 {
		return nil, nil
	}
	return []transform.Item{{
		ID:        c.DeriveID(ids...),
		Title:     fmt.Sprintf("count: %d", n),
		Published: c.Now,
		Reading:   &storage.Reading{Value: float64(n), Time: c.Now},
	}}, nil
}
