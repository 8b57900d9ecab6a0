package pack

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// CompareConfig configures GT, GE, EQ, NE, LT and LE.
type CompareConfig struct {
	// Field is the item field compared (required, not a list).
	Field string `json:"field" jsonschema:"description=the item field compared"`
	// Value is what it is compared with: a number, or a string (a time
	// in RFC 3339 for time fields).
	Value any `json:"value" jsonschema:"description=the value compared with (number or string)"`
}

// MatchConfig configures MATCH.
type MatchConfig struct {
	// Field is the item field matched, as text (required).
	Field string `json:"field" jsonschema:"description=the item field matched"`
	// Pattern is an RE2 regular expression (required).
	Pattern string `json:"pattern" jsonschema:"description=RE2 regular expression"`
}

// WithinConfig configures WITHIN.
type WithinConfig struct {
	// Field is a number or time item field (required).
	Field string `json:"field" jsonschema:"description=a number or time item field"`
	// Min and Max bound the value, inclusively; either may be left out.
	Min any `json:"min,omitempty" jsonschema:"description=inclusive lower bound"`
	Max any `json:"max,omitempty" jsonschema:"description=inclusive upper bound"`
	// Last keeps, for a time field, the values in the last Last before
	// the run ("1h", "15m" or seconds); not with Min or Max.
	Last *transform.Duration `json:"last,omitempty" jsonschema:"description=time fields: within this long before now"`
}

// SetConfig configures INSET, SUBSET and SUPSET.
type SetConfig struct {
	// Field is the item field (INSET: required; SUBSET and SUPSET: a
	// list field, default "categories").
	Field string `json:"field,omitempty" jsonschema:"description=the item field"`
	// Set holds 1 to 1024 strings or numbers.
	Set []any `json:"set" jsonschema:"description=1 to 1024 strings or numbers"`
}

// ContainConfig configures CONTAIN.
type ContainConfig struct {
	// Field is a list field (default "categories").
	Field string `json:"field,omitempty" jsonschema:"description=a list item field (default categories)"`
	// Value is the entry the list must contain.
	Value any `json:"value" jsonschema:"description=the entry the list must contain"`
}

// NConfig configures FIRST, LAST and EVERY.
type NConfig struct {
	// N is a count from 1 to 100000.
	N int `json:"n" jsonschema:"description=a count from 1 to 100000"`
}

// FieldConfig configures UNIQ and GUNIQ.
type FieldConfig struct {
	// Field is the item field compared (default "value").
	Field string `json:"field,omitempty" jsonschema:"description=the item field (default value)"`
}

// DeltaConfig configures DELTA.
type DeltaConfig struct {
	// Field is a number field (default "value").
	Field string `json:"field,omitempty" jsonschema:"description=a number item field (default value)"`
	// Delta is how much the value must move from the last kept one
	// (≥ 0).
	Delta float64 `json:"delta" jsonschema:"description=the change needed to keep an item (>= 0)"`
	// By names a field whose value groups the items (optional).
	By string `json:"by,omitempty" jsonschema:"description=group by this item field"`
}

// LatestConfig configures LATEST.
type LatestConfig struct {
	// By names a field whose value groups the items (optional).
	By string `json:"by,omitempty" jsonschema:"description=group by this item field"`
}

// RandomConfig configures RANDOM: exactly one of P and N.
type RandomConfig struct {
	// P is the fraction of items kept, in (0, 1].
	P *float64 `json:"p,omitempty" jsonschema:"description=fraction kept (0 < p <= 1)"`
	// N is how many items are kept, 1 to 100000.
	N *int `json:"n,omitempty" jsonschema:"description=number of items kept"`
}

// filter is a stateless PACK filter: run keeps a subset of the queue, in
// order. It never changes the items, so it returns them as they are.
type filter struct {
	run func(c *transform.Context, q []Item) ([]Item, error)
}

func (f *filter) Apply(c *transform.Context, in [][]Item) ([]Item, error) {
	return f.run(c, queue(in))
}

// keepIf returns the items of q for which keep is true, checking c.Err().
func keepIf(c *transform.Context, q []Item, keep func(it *Item) bool) ([]Item, error) {
	var out []Item
	for i := range q {
		if err := checkErr(c, i); err != nil {
			return nil, err
		}
		if keep(&q[i]) {
			out = append(out, q[i])
		}
	}
	return out, nil
}

// keeping is the filter that keeps the items for which keep is true
// (see keepIf).
func keeping(keep func(it *Item) bool) *filter {
	return &filter{run: func(c *transform.Context, q []Item) ([]Item, error) {
		return keepIf(c, q, keep)
	}}
}

// newCompare builds GT, GE, EQ, NE, LT or LE: test says whether a
// Compare result keeps the item.
func newCompare(test func(int) bool) func(json.RawMessage) (transform.Operator, error) {
	return func(raw json.RawMessage) (transform.Operator, error) {
		cfg, err := decode[CompareConfig](raw)
		if err != nil {
			return nil, err
		}
		f, err := checkField("field", cfg.Field, "", transform.TypeString, transform.TypeNumber, transform.TypeTime)
		if err != nil {
			return nil, err
		}
		val, err := scalar("value", f, cfg.Value)
		if err != nil {
			return nil, err
		}
		return keeping(func(it *Item) bool {
			v, ok := transform.Get(it, f.Name)
			return ok && test(transform.Compare(v, val))
		}), nil
	}
}

func newMatch(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[MatchConfig](raw)
	if err != nil {
		return nil, err
	}
	f, err := checkField("field", cfg.Field, "")
	if err != nil {
		return nil, err
	}
	if cfg.Pattern == "" {
		return nil, transform.Fieldf("pattern", "required: an RE2 regular expression")
	}
	rx, err := transform.CompileRegex("pattern", cfg.Pattern)
	if err != nil {
		return nil, err
	}
	return &filter{run: func(c *transform.Context, q []Item) ([]Item, error) {
		var err error
		out, kerr := keepIf(c, q, func(it *Item) bool {
			if err != nil {
				return false
			}
			// A match may take a while: look at the deadline every item.
			if err = c.Err(); err != nil {
				return false
			}
			v, ok := transform.Get(it, f.Name)
			return ok && matchValue(c, rx, v)
		})
		if kerr != nil {
			return nil, kerr
		}
		if err != nil {
			return nil, fmt.Errorf("pack: %w", err)
		}
		return out, nil
	}}, nil
}

// matchValue matches a field value as text; a list matches when one of
// its entries does.
// It looks at the first Limits.MaxRegexInput bytes of each text.
func matchValue(c *transform.Context, rx *regexp.Regexp, v any) bool {
	if l, ok := v.([]string); ok {
		for _, s := range l {
			if rx.MatchString(c.RegexInput(s)) {
				return true
			}
		}
		return false
	}
	return rx.MatchString(c.RegexInput(transform.AsString(v)))
}

func newWithin(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[WithinConfig](raw)
	if err != nil {
		return nil, err
	}
	f, err := checkField("field", cfg.Field, "", transform.TypeNumber, transform.TypeTime)
	if err != nil {
		return nil, err
	}
	if cfg.Last != nil {
		switch {
		case f.Type != transform.TypeTime:
			return nil, transform.Fieldf("last", "only for a time field (%q is a %s)", f.Name, f.Type)
		case cfg.Min != nil || cfg.Max != nil:
			return nil, transform.Fieldf("last", "give either last or min/max, not both")
		case cfg.Last.D() <= 0:
			return nil, transform.Fieldf("last", "want a positive duration such as \"1h\"")
		}
		last := cfg.Last.D()
		return &filter{run: func(c *transform.Context, q []Item) ([]Item, error) {
			lo, hi := c.Now.Add(-last), c.Now
			return keepIf(c, q, func(it *Item) bool {
				v, ok := transform.Get(it, f.Name)
				t, isTime := v.(time.Time)
				return ok && isTime && !t.Before(lo) && !t.After(hi)
			})
		}}, nil
	}
	if cfg.Min == nil && cfg.Max == nil {
		return nil, transform.Fieldf("min", "required: give min, max or both (or last, for a time field)")
	}
	var lo, hi any
	if cfg.Min != nil {
		if lo, err = scalar("min", f, cfg.Min); err != nil {
			return nil, err
		}
	}
	if cfg.Max != nil {
		if hi, err = scalar("max", f, cfg.Max); err != nil {
			return nil, err
		}
	}
	if lo != nil && hi != nil && transform.Compare(lo, hi) > 0 {
		return nil, transform.Fieldf("max", "is below min")
	}
	return keeping(func(it *Item) bool {
		v, ok := transform.Get(it, f.Name)
		return ok && (lo == nil || transform.Compare(v, lo) >= 0) && (hi == nil || transform.Compare(v, hi) <= 0)
	}), nil
}

// readSet reads a SetConfig: the field (def when it is left out; of one
// of types, when given) and the set, as setKeys makes it.
func readSet(raw json.RawMessage, def string, types ...transform.Type) (transform.FieldInfo, map[string]bool, error) {
	cfg, err := decode[SetConfig](raw)
	if err != nil {
		return transform.FieldInfo{}, nil, err
	}
	f, err := checkField("field", cfg.Field, def, types...)
	if err != nil {
		return transform.FieldInfo{}, nil, err
	}
	keys, err := setKeys(f, cfg.Set)
	return f, keys, err
}

// setKeys reads a configured set for field f as valueKey keys.
func setKeys(f transform.FieldInfo, set []any) (map[string]bool, error) {
	if len(set) == 0 {
		return nil, transform.Fieldf("set", "required: 1 to %d entries", MaxSet)
	}
	if len(set) > MaxSet {
		return nil, &transform.FieldError{Field: "set", Err: fmt.Errorf("%w: %d entries, at most %d", transform.ErrLimit, len(set), MaxSet)}
	}
	keys := make(map[string]bool, len(set))
	for i, e := range set {
		field := fmt.Sprintf("set[%d]", i)
		if f.Type == transform.TypeList || f.Type == transform.TypeString {
			s, err := listEntry(field, e)
			if err != nil {
				return nil, err
			}
			keys[valueKey(s, true)] = true
			continue
		}
		v, err := scalar(field, f, e)
		if err != nil {
			return nil, err
		}
		keys[valueKey(v, true)] = true
	}
	return keys, nil
}

func newInset(raw json.RawMessage) (transform.Operator, error) {
	f, keys, err := readSet(raw, "")
	if err != nil {
		return nil, err
	}
	return keeping(func(it *Item) bool {
		v, ok := transform.Get(it, f.Name)
		if !ok {
			return false
		}
		if l, isList := v.([]string); isList {
			for _, s := range l {
				if keys[valueKey(s, true)] {
					return true
				}
			}
			return false
		}
		return keys[valueKey(v, true)]
	}), nil
}

// newListSet builds SUBSET (sub) or SUPSET (!sub).
func newListSet(sub bool) func(json.RawMessage) (transform.Operator, error) {
	return func(raw json.RawMessage) (transform.Operator, error) {
		f, keys, err := readSet(raw, "categories", transform.TypeList)
		if err != nil {
			return nil, err
		}
		return keeping(func(it *Item) bool {
			v, ok := transform.Get(it, f.Name)
			l, isList := v.([]string)
			if !ok || !isList {
				return false
			}
			if sub {
				for _, s := range l {
					if !keys[valueKey(s, true)] {
						return false
					}
				}
				return true
			}
			have := make(map[string]bool, len(l))
			for _, s := range l {
				if k := valueKey(s, true); keys[k] {
					have[k] = true
				}
			}
			return len(have) == len(keys)
		}), nil
	}
}

func newContain(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[ContainConfig](raw)
	if err != nil {
		return nil, err
	}
	f, err := checkField("field", cfg.Field, "categories", transform.TypeList)
	if err != nil {
		return nil, err
	}
	want, err := listEntry("value", cfg.Value)
	if err != nil {
		return nil, err
	}
	return keeping(func(it *Item) bool {
		v, ok := transform.Get(it, f.Name)
		l, _ := v.([]string)
		if !ok {
			return false
		}
		for _, s := range l {
			if s == want {
				return true
			}
		}
		return false
	}), nil
}

// checkN checks a count from 1 to MaxN.
func checkN(field string, n int) error {
	if n < 1 || n > MaxN {
		return transform.Fieldf(field, "want a count from 1 to %d, got %d", MaxN, n)
	}
	return nil
}

// newNth builds FIRST, LAST and EVERY: pick returns the kept items.
func newNth(pick func(q []Item, n int) []Item) func(json.RawMessage) (transform.Operator, error) {
	return func(raw json.RawMessage) (transform.Operator, error) {
		cfg, err := decode[NConfig](raw)
		if err != nil {
			return nil, err
		}
		if err := checkN("n", cfg.N); err != nil {
			return nil, err
		}
		return &filter{run: func(c *transform.Context, q []Item) ([]Item, error) {
			if err := c.Err(); err != nil {
				return nil, fmt.Errorf("pack: %w", err)
			}
			return pick(q, cfg.N), nil
		}}, nil
	}
}

func pickFirst(q []Item, n int) []Item {
	return append([]Item(nil), q[:min(n, len(q))]...)
}

func pickLast(q []Item, n int) []Item {
	return append([]Item(nil), q[len(q)-min(n, len(q)):]...)
}

func pickEvery(q []Item, n int) []Item {
	out := make([]Item, 0, (len(q)+n-1)/n)
	for i := 0; i < len(q); i += n {
		out = append(out, q[i])
	}
	return out
}

// newUniq builds UNIQ (global false: drop an item equal to the one
// before it) and GUNIQ (global: keep the first of each value).
func newUniq(global bool) func(json.RawMessage) (transform.Operator, error) {
	return func(raw json.RawMessage) (transform.Operator, error) {
		cfg, err := decode[FieldConfig](raw)
		if err != nil {
			return nil, err
		}
		f, err := checkField("field", cfg.Field, "value")
		if err != nil {
			return nil, err
		}
		return &filter{run: func(c *transform.Context, q []Item) ([]Item, error) {
			if global {
				seen := map[string]bool{}
				return keepIf(c, q, func(it *Item) bool {
					k := valueKey(transform.Get(it, f.Name))
					if seen[k] {
						return false
					}
					seen[k] = true
					return true
				})
			}
			prev, first := "", true
			return keepIf(c, q, func(it *Item) bool {
				k := valueKey(transform.Get(it, f.Name))
				keep := first || k != prev
				prev, first = k, false
				return keep
			})
		}}, nil
	}
}

func newLatest(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[LatestConfig](raw)
	if err != nil {
		return nil, err
	}
	if err := checkBy("by", cfg.By); err != nil {
		return nil, err
	}
	return &filter{run: func(c *transform.Context, q []Item) ([]Item, error) {
		best := map[string]int{} // group → index of its latest item
		for i := range q {
			if err := checkErr(c, i); err != nil {
				return nil, err
			}
			g := groupKey(&q[i], cfg.By)
			j, ok := best[g]
			if !ok || later(&q[i], &q[j]) {
				best[g] = i
			}
		}
		keep := make([]bool, len(q))
		for _, i := range best {
			keep[i] = true
		}
		out := make([]Item, 0, len(best))
		for i := range q {
			if keep[i] {
				out = append(out, q[i])
			}
		}
		return out, nil
	}}, nil
}

// later reports whether a, coming after b in the queue, is the later of
// the two: published no earlier than b (or either has no publish time).
func later(a, b *Item) bool {
	if a.Published.IsZero() || b.Published.IsZero() {
		return true
	}
	return !a.Published.Before(b.Published)
}

func newRandom(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[RandomConfig](raw)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.P == nil && cfg.N == nil:
		return nil, transform.Fieldf("p", "required: give p (a fraction) or n (a count)")
	case cfg.P != nil && cfg.N != nil:
		return nil, transform.Fieldf("n", "give either p or n, not both")
	case cfg.P != nil:
		p := *cfg.P
		if math.IsNaN(p) || p <= 0 || p > 1 {
			return nil, transform.Fieldf("p", "want a fraction in (0, 1], got %v", p)
		}
		return &filter{run: func(c *transform.Context, q []Item) ([]Item, error) {
			return keepIf(c, q, func(it *Item) bool {
				return p == 1 || c.Rand(it.ID).Float64() < p
			})
		}}, nil
	}
	n := *cfg.N
	if err := checkN("n", n); err != nil {
		return nil, err
	}
	return &filter{run: func(c *transform.Context, q []Item) ([]Item, error) {
		if len(q) <= n {
			return append([]Item(nil), q...), nil
		}
		h := fnv.New128a()
		for i := range q {
			if err := checkErr(c, i); err != nil {
				return nil, err
			}
			h.Write([]byte(q[i].ID))
			h.Write([]byte{0})
		}
		rng := c.Rand(fmt.Sprintf("%x", h.Sum(nil)))
		// A partial Fisher–Yates shuffle of the indexes picks n of them.
		idx := make([]int, len(q))
		for i := range idx {
			idx[i] = i
		}
		keep := make([]bool, len(q))
		for i := 0; i < n; i++ {
			j := i + rng.IntN(len(q)-i)
			idx[i], idx[j] = idx[j], idx[i]
			keep[idx[i]] = true
		}
		out := make([]Item, 0, n)
		for i := range q {
			if keep[i] {
				out = append(out, q[i])
			}
		}
		return out, nil
	}}, nil
}
