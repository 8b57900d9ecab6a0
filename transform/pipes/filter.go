package pipes

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// FilterConfig is the configuration of "filter".
type FilterConfig struct {
	// Mode is "permit" (default: keep the items that match) or "block"
	// (drop them).
	Mode string `json:"mode,omitempty" jsonschema:"enum=permit,enum=block,description=permit keeps the matching items and block drops them (default permit)"`
	// Match is "all" (default: an item matches when every rule holds)
	// or "any" (when one does).
	Match string `json:"match,omitempty" jsonschema:"enum=all,enum=any,description=all: every rule must hold; any: one is enough (default all)"`
	// Rules are the conditions (1 to 64).
	Rules []Rule `json:"rules" jsonschema:"description=the conditions (1 to 64)"`
}

// Rule is one condition of a filter: Field Op Value.
type Rule struct {
	// Field is the item field tested.
	Field string `json:"field" jsonschema:"description=item field tested"`
	// Op is one of eq ne lt le gt ge contains not_contains matches
	// not_matches exists missing in not_in.
	Op string `json:"op" jsonschema:"enum=eq,enum=ne,enum=lt,enum=le,enum=gt,enum=ge,enum=contains,enum=not_contains,enum=matches,enum=not_matches,enum=exists,enum=missing,enum=in,enum=not_in"`
	// Value is what the field is compared with: a number, a string, a
	// time (RFC 3339, or relative to the run such as "-1h"), a regular
	// expression for matches, an array for in; none for exists and
	// missing.
	Value any `json:"value,omitempty" jsonschema:"description=number or string or time or regex or array (none for exists and missing)"`
}

// Bounds of a filter's configuration.
const (
	maxRules   = 64
	maxInItems = 256
)

func init() {
	register("filter",
		"Keeps (mode permit) or drops (mode block) the items that match all (or any) of its rules; a rule compares an item field with a value: eq ne lt le gt ge, contains, matches (a regular expression), exists, missing, in, and their negations.",
		`{"mode":"permit","match":"all","rules":[{"field":"value","op":"gt","value":25},{"field":"published","op":"gt","value":"-1h"}]}`,
		1, 1, newFilter)
}

// ruleOp is a rule's operator.
type ruleOp int

const (
	opEq ruleOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
	opContains
	opNotContains
	opMatches
	opNotMatches
	opExists
	opMissing
	opIn
	opNotIn
)

var ruleOps = map[string]ruleOp{
	"eq": opEq, "ne": opNe, "lt": opLt, "le": opLe, "gt": opGt, "ge": opGe,
	"contains": opContains, "not_contains": opNotContains,
	"matches": opMatches, "not_matches": opNotMatches,
	"exists": opExists, "missing": opMissing,
	"in": opIn, "not_in": opNotIn,
}

const ruleOpNames = "eq, ne, lt, le, gt, ge, contains, not_contains, matches, not_matches, exists, missing, in, not_in"

// negated reports whether o holds when the field has no value.
func (o ruleOp) negated() bool {
	return o == opMissing || o == opNotContains || o == opNotMatches || o == opNotIn
}

// operandKind is the kind of a comparison's right-hand side.
type operandKind int

const (
	kindString operandKind = iota
	kindNumber
	kindTime
)

// operand is a checked comparison value.
type operand struct {
	kind operandKind
	str  string
	num  float64
	tv   timeValue
}

// resolved is an operand for one run (relative times made absolute).
type resolved struct {
	kind operandKind
	str  string
	num  float64
	t    time.Time
}

func (o operand) at(now time.Time) resolved {
	r := resolved{kind: o.kind, str: o.str, num: o.num}
	if o.kind == kindTime {
		r.t = o.tv.at(now)
	}
	return r
}

// rule is a checked rule.
type rule struct {
	field  string
	list   bool // the field is a list: the rule tests its elements
	op     ruleOp
	vals   []operand // one, or the set of in/not_in
	needle string    // lower-cased, for contains
	re     *regexp.Regexp
}

type filterOp struct {
	block bool
	any   bool
	regex bool // a rule matches a regular expression
	rules []rule
}

func newFilter(cfg FilterConfig) (transform.Operator, error) {
	f := &filterOp{}
	switch cfg.Mode {
	case "", "permit":
	case "block":
		f.block = true
	default:
		return nil, transform.Fieldf("mode", "want \"permit\" or \"block\", got %q", clip(cfg.Mode))
	}
	switch cfg.Match {
	case "", "all":
	case "any":
		f.any = true
	default:
		return nil, transform.Fieldf("match", "want \"all\" or \"any\", got %q", clip(cfg.Match))
	}
	if len(cfg.Rules) == 0 {
		return nil, transform.Fieldf("rules", "give at least one rule")
	}
	if len(cfg.Rules) > maxRules {
		return nil, transform.Fieldf("rules", "%w: %d rules, at most %d", transform.ErrLimit, len(cfg.Rules), maxRules)
	}
	for i, r := range cfg.Rules {
		cr, err := checkRule(fmt.Sprintf("rules[%d]", i), r)
		if err != nil {
			return nil, err
		}
		f.rules = append(f.rules, cr)
		f.regex = f.regex || cr.re != nil
	}
	return f, nil
}

// clip shortens a user's string for an error message.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	return transform.CutUTF8(s, 40) + "…"
}

func checkRule(path string, r Rule) (rule, error) {
	if err := transform.CheckField(path+".field", r.Field, false); err != nil {
		return rule{}, err
	}
	op, ok := ruleOps[r.Op]
	if !ok {
		return rule{}, transform.Fieldf(path+".op", "unknown operator %q (want one of %s)", clip(r.Op), ruleOpNames)
	}
	t := fieldType(r.Field)
	cr := rule{field: r.Field, list: t == transform.TypeList, op: op}
	vpath := path + ".value"
	switch op {
	case opExists, opMissing:
		if r.Value != nil {
			return rule{}, transform.Fieldf(vpath, "%s takes no value", r.Op)
		}
	case opContains, opNotContains:
		s, err := stringValue(vpath, r.Value)
		if err != nil {
			return rule{}, err
		}
		cr.needle = strings.ToLower(s)
	case opMatches, opNotMatches:
		s, ok := r.Value.(string)
		if !ok {
			return rule{}, transform.Fieldf(vpath, "want a regular expression (a string)")
		}
		re, err := transform.CompileRegex(vpath, s)
		if err != nil {
			return rule{}, err
		}
		cr.re = re
	case opIn, opNotIn:
		arr, ok := r.Value.([]any)
		if !ok {
			return rule{}, transform.Fieldf(vpath, "%s wants an array of values", r.Op)
		}
		if len(arr) > maxInItems {
			return rule{}, transform.Fieldf(vpath, "%w: %d values, at most %d", transform.ErrLimit, len(arr), maxInItems)
		}
		for j, v := range arr {
			o, err := checkOperand(fmt.Sprintf("%s[%d]", vpath, j), t, v)
			if err != nil {
				return rule{}, err
			}
			cr.vals = append(cr.vals, o)
		}
	default:
		o, err := checkOperand(vpath, t, r.Value)
		if err != nil {
			return rule{}, err
		}
		cr.vals = []operand{o}
	}
	return cr, nil
}

// stringValue reads a string (or a number, as text) from a configuration.
func stringValue(path string, v any) (string, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case nil:
		return "", transform.Fieldf(path, "required")
	default:
		return "", transform.Fieldf(path, "want a string or a number")
	}
	if len(s) > maxString {
		return "", transform.Fieldf(path, "%w: %d bytes, at most %d", transform.ErrLimit, len(s), maxString)
	}
	return s, nil
}

// checkOperand reads the value a field of type t is compared with.
func checkOperand(path string, t transform.Type, v any) (operand, error) {
	switch v.(type) {
	case nil:
		return operand{}, transform.Fieldf(path, "required")
	case string, float64, bool:
	default:
		return operand{}, transform.Fieldf(path, "want a number, a string or a time")
	}
	switch t {
	case transform.TypeNumber:
		n, ok := transform.AsNumber(v)
		if !ok {
			return operand{}, transform.Fieldf(path, "want a number, got %q", clip(transform.AsString(v)))
		}
		return operand{kind: kindNumber, num: n}, nil
	case transform.TypeTime:
		tv, ok := parseTimeValue(v)
		if !ok {
			return operand{}, transform.Fieldf(path, "want a time: RFC 3339 (\"2025-01-02T15:04:05Z\"), Unix seconds, \"now\" or relative (\"-1h\"), got %q", clip(transform.AsString(v)))
		}
		return operand{kind: kindTime, tv: tv}, nil
	}
	// A string or list field: a number compares numerically, anything
	// else as text.
	if n, ok := v.(float64); ok {
		return operand{kind: kindNumber, num: n}, nil
	}
	s := transform.AsString(v)
	if len(s) > maxString {
		return operand{}, transform.Fieldf(path, "%w: %d bytes, at most %d", transform.ErrLimit, len(s), maxString)
	}
	return operand{kind: kindString, str: s}, nil
}

func (f *filterOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	// Resolve relative times once for the run.
	vals := make([][]resolved, len(f.rules))
	for i, r := range f.rules {
		vals[i] = make([]resolved, len(r.vals))
		for j, o := range r.vals {
			vals[i][j] = o.at(c.Now)
		}
	}
	var out []transform.Item
	n := 0
	for _, items := range in {
		for i := range items {
			if f.regex { // a match may take a while: look at the deadline every item
				if err := c.Err(); err != nil {
					return nil, err
				}
			} else if err := tick(c, n); err != nil {
				return nil, err
			}
			n++
			if f.match(c, &items[i], vals) != f.block {
				out = append(out, items[i])
			}
		}
	}
	return out, nil
}

// match reports whether it satisfies the rules.
func (f *filterOp) match(c *transform.Context, it *transform.Item, vals [][]resolved) bool {
	for i := range f.rules {
		ok := f.rules[i].holds(c, it, vals[i])
		if f.any && ok {
			return true
		}
		if !f.any && !ok {
			return false
		}
	}
	return !f.any
}

// holds reports whether rule r holds for it.
func (r *rule) holds(c *transform.Context, it *transform.Item, vals []resolved) bool {
	v, ok := transform.Get(it, r.field)
	if !ok {
		return r.op.negated()
	}
	switch r.op {
	case opExists:
		return true
	case opMissing:
		return false
	case opNe:
		return !r.anyElem(v, func(x any) bool { return cmpHolds(opEq, x, vals[0]) })
	case opContains, opNotContains:
		var found bool
		if r.list {
			found = r.anyElem(v, func(x any) bool { return strings.EqualFold(x.(string), r.needle) })
		} else {
			found = strings.Contains(strings.ToLower(transform.AsString(v)), r.needle)
		}
		return found == (r.op == opContains)
	case opMatches, opNotMatches:
		found := r.anyElem(v, func(x any) bool { return r.re.MatchString(c.RegexInput(transform.AsString(x))) })
		return found == (r.op == opMatches)
	case opIn, opNotIn:
		found := r.anyElem(v, func(x any) bool {
			for _, o := range vals {
				if cmpHolds(opEq, x, o) {
					return true
				}
			}
			return false
		})
		return found == (r.op == opIn)
	}
	return r.anyElem(v, func(x any) bool { return cmpHolds(r.op, x, vals[0]) })
}

// anyElem reports whether pred holds for v or, for a list field, for one
// of its elements.
func (r *rule) anyElem(v any, pred func(any) bool) bool {
	if !r.list {
		return pred(v)
	}
	l, _ := v.([]string)
	for _, e := range l {
		if pred(e) {
			return true
		}
	}
	return false
}

// cmpHolds reports whether "v op o" holds for a comparison operator. A
// value that cannot be read as o's kind (a title that is not a number,
// compared with a number) satisfies no comparison.
func cmpHolds(op ruleOp, v any, o resolved) bool {
	var r int
	switch o.kind {
	case kindNumber:
		x, ok := transform.AsNumber(v)
		if !ok {
			return false
		}
		r = transform.Compare(x, o.num)
	case kindTime:
		t, ok := transform.AsTime(v)
		if !ok {
			return false
		}
		r = t.Compare(o.t)
	default:
		r = strings.Compare(transform.AsString(v), o.str)
	}
	switch op {
	case opEq:
		return r == 0
	case opNe:
		return r != 0
	case opLt:
		return r < 0
	case opLe:
		return r <= 0
	case opGt:
		return r > 0
	case opGe:
		return r >= 0
	}
	return false
}
