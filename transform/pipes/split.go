package pipes

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/slogfeed/slogfeed/transform"
)

// SplitConfig is the configuration of "split".
type SplitConfig struct {
	// Field is the item field split: categories (one part per category)
	// or a string field with Separator or Pattern.
	Field string `json:"field" jsonschema:"description=item field split: categories or a string field"`
	// Separator splits a string field at each occurrence.
	Separator string `json:"separator,omitempty" jsonschema:"description=split a string field at each occurrence of this text"`
	// Pattern makes one part of each match of an RE2 regular
	// expression in a string field.
	Pattern string `json:"pattern,omitempty" jsonschema:"description=one part per match of this RE2 regular expression"`
	// To is the field that receives the part (default Field).
	To string `json:"to,omitempty" jsonschema:"description=item field that receives the part (default field)"`
}

// maxParts bounds the parts of one item.
const maxParts = 1000

func init() {
	register("split",
		"Makes one item per part of a field: per category, per piece of a string field cut at a separator, or per match of a regular expression; each part is written into a field of a copy of the item, whose id is the original id, '#' and the part's index.",
		`{"field":"summary","separator":";","to":"title"}`, 1, 1, newSplit)
}

type splitOp struct {
	field, to string
	list      bool
	sep       string
	re        *regexp.Regexp
}

func newSplit(cfg SplitConfig) (transform.Operator, error) {
	if err := checkTypedField("field", cfg.Field, false, transform.TypeList, transform.TypeString); err != nil {
		return nil, err
	}
	op := &splitOp{field: canonical(cfg.Field), list: fieldType(cfg.Field) == transform.TypeList}
	if cfg.To == "" {
		cfg.To = cfg.Field
	}
	if err := transform.CheckField("to", cfg.To, true); err != nil {
		return nil, err
	}
	op.to = canonical(cfg.To)
	if op.to == "id" {
		return nil, transform.Fieldf("to", "the parts' ids are made from the item's id: write the part to another field")
	}
	switch {
	case cfg.Separator != "" && cfg.Pattern != "":
		return nil, transform.Fieldf("pattern", "give a separator or a pattern, not both")
	case op.list && cfg.Separator != "":
		return nil, transform.Fieldf("separator", "%s is split per element: no separator", cfg.Field)
	case op.list && cfg.Pattern != "":
		return nil, transform.Fieldf("pattern", "%s is split per element: no pattern", cfg.Field)
	case op.list:
	case cfg.Separator != "":
		if len(cfg.Separator) > maxString {
			return nil, transform.Fieldf("separator", "%w: %d bytes, at most %d", transform.ErrLimit, len(cfg.Separator), maxString)
		}
		op.sep = cfg.Separator
	case cfg.Pattern != "":
		re, err := transform.CompileRegex("pattern", cfg.Pattern)
		if err != nil {
			return nil, err
		}
		if re.MatchString("") {
			return nil, transform.Fieldf("pattern", "matches the empty string: every part would be empty")
		}
		op.re = re
	default:
		return nil, transform.Fieldf("separator", "a string field is split by a separator or a pattern: give one")
	}
	return op, nil
}

// parts returns the non-empty parts of v, at most maxParts.
func (o *splitOp) parts(v any) []string {
	var parts []string
	switch {
	case o.list:
		l, _ := v.([]string)
		parts = l
	case o.re != nil:
		parts = o.re.FindAllString(v.(string), maxParts)
	default:
		parts = strings.SplitN(v.(string), o.sep, maxParts+1)
		if len(parts) > maxParts {
			parts = parts[:maxParts]
		}
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" && len(out) < maxParts {
			out = append(out, p)
		}
	}
	return out
}

func (o *splitOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	limit := maxItems(c)
	var out []transform.Item
	n := 0
	for _, items := range in {
		for i := range items {
			v, ok := transform.Get(&items[i], o.field)
			var parts []string
			if ok {
				if o.re != nil {
					if err := c.Err(); err != nil { // a match may take a while
						return nil, err
					}
					v = c.RegexInput(v.(string))
				}
				parts = o.parts(v)
			}
			if len(parts) == 0 {
				if err := tick(c, n); err != nil {
					return nil, err
				}
				n++
				out = append(out, items[i])
				continue
			}
			for j, p := range parts {
				if err := tick(c, n); err != nil {
					return nil, err
				}
				n++
				it := transform.Clone(items[i])
				if err := transform.Set(&it, o.to, p); err != nil {
					continue // the part does not fit the field (not a number, say)
				}
				suffix := "#" + strconv.Itoa(j)
				it.ID += suffix
				if it.GUID != "" {
					it.GUID += suffix
				}
				out = append(out, it)
			}
			if len(out) > limit {
				return nil, errTooMany(c, len(out))
			}
		}
	}
	return out, nil
}
