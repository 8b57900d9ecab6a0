package expr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"

	"github.com/slogfeed/slogfeed/transform"
)

// Kind is the kind of result a Program must give.
type Kind int

// Result kinds.
const (
	// Any accepts a bool, a number, a string, a timestamp, a list or
	// null (see Program.Eval for what each becomes).
	Any Kind = iota
	// Bool wants true or false (the filters' kind).
	Bool
	// Number wants an int, a uint or a double.
	Number
	// String wants a string.
	String
	// Time wants a timestamp.
	Time
)

func (k Kind) String() string {
	switch k {
	case Any:
		return "any value"
	case Bool:
		return "a bool"
	case Number:
		return "a number"
	case String:
		return "a string"
	case Time:
		return "a timestamp"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Limits of the language itself (the length of the source and the
// evaluation budget come from transform.Limits).
const (
	// MaxDepth bounds the nesting of an expression (parentheses, calls,
	// operators): deeper expressions do not compile.
	MaxDepth = 32
	// MaxNodes bounds an expression's nodes after macro expansion.
	MaxNodes = 4096
	// MaxComprehensionNesting bounds how deeply all/exists/map/filter
	// may be nested in each other.
	MaxComprehensionNesting = 3
	// MaxString bounds the string a replace() may make, in bytes; a
	// larger one fails the evaluation as over its cost limit before it
	// is built.
	MaxString = 4 << 20
	// interruptEvery is how many comprehension iterations pass between
	// two checks of the run's deadline.
	interruptEvery = 100
	// maxCachedPrograms bounds the cost limits a Program keeps a
	// planned program for.
	maxCachedPrograms = 8
)

// presentPrefix names the hidden variables present("f") expands to.
// '@' cannot start an identifier a user writes.
const presentPrefix = "@present_"

// Program is a compiled expression, safe for concurrent use.
type Program struct {
	src  string
	want Kind
	env  *cel.Env
	ast  *cel.Ast

	mu   sync.Mutex
	prgs map[uint64]cel.Program // by cost limit
}

// Source returns the expression's text.
func (p *Program) Source() string { return p.src }

// Compile compiles src, read from configuration field field, into a
// Program whose result is of kind want. Errors are *transform.FieldError
// values naming field: a syntax or type error (with its column), a
// result of the wrong type, a regular expression or time zone the
// language refuses (see the package documentation), or a limit
// (wrapping transform.ErrLimit): the source longer than
// transform.DefaultLimits.MaxExpr bytes, nested deeper than MaxDepth, or
// an expression whose cheapest evaluation already costs more than
// transform.DefaultLimits.ExprCost.
func Compile(field, src string, want Kind) (*Program, error) {
	lim := transform.DefaultLimits
	if len(src) > lim.MaxExpr {
		return nil, &transform.FieldError{Field: field, Err: fmt.Errorf("%w: expression is %d bytes, at most %d", transform.ErrLimit, len(src), lim.MaxExpr)}
	}
	if strings.TrimSpace(src) == "" {
		return nil, transform.Fieldf(field, "empty expression")
	}
	env, err := baseEnv()
	if err != nil {
		return nil, &transform.FieldError{Field: field, Err: fmt.Errorf("expression language unavailable: %w", err)}
	}
	ast, err := compile(field, env, src)
	if err != nil {
		return nil, err
	}
	if err := checkCalls(field, src, ast); err != nil {
		return nil, err
	}
	if err := checkKind(field, ast.OutputType(), want); err != nil {
		return nil, err
	}
	if err := checkCost(field, env, ast, lim.ExprCost); err != nil {
		return nil, err
	}
	p := &Program{src: src, want: want, env: env, ast: ast, prgs: map[uint64]cel.Program{}}
	if _, err := p.program(lim.ExprCost); err != nil {
		return nil, transform.Fieldf(field, "%v", oneLine(err.Error()))
	}
	return p, nil
}

// compile parses and checks src. CEL does not convert between int and
// double, so "value * 1.8 + 32" would not type-check (value is a double,
// 32 an int): when the checker finds an operator applied to an int and
// a double, the int operand is wrapped in double() and the expression
// checked again (see widen). A panic inside the compiler becomes an
// error so that no source text can bring the process down.
func compile(field string, env *cel.Env, src string) (ast *cel.Ast, err error) {
	defer func() {
		if r := recover(); r != nil {
			ast, err = nil, transform.Fieldf(field, "expression does not compile")
		}
	}()
	var w widening
	for round := 0; ; round++ {
		parsed, iss := env.Parse(src)
		if iss != nil && iss.Err() != nil {
			return nil, issuesError(field, src, iss)
		}
		w.apply(parsed)
		checked, iss := env.Check(parsed)
		if iss == nil || iss.Err() == nil {
			if checked == nil {
				return nil, transform.Fieldf(field, "expression does not compile")
			}
			return checked, nil
		}
		if round >= maxWidenRounds || !w.add(iss) {
			return nil, issuesError(field, src, iss)
		}
	}
}

// program returns the planned program for a cost limit, planning and
// caching it on first use.
func (p *Program) program(costLimit uint64) (cel.Program, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prg, ok := p.prgs[costLimit]; ok {
		return prg, nil
	}
	prg, err := p.env.Program(p.ast,
		cel.CostLimit(costLimit),
		cel.InterruptCheckFrequency(interruptEvery),
		cel.OptimizeRegex(interpreter.MatchesRegexOptimization),
	)
	if err != nil {
		return nil, err
	}
	if len(p.prgs) < maxCachedPrograms {
		p.prgs[costLimit] = prg
	}
	return prg, nil
}

// Eval evaluates the program on it, with now = c.Now, within
// c.Limits.ExprCost cost units and the run's deadline. The result is a
// bool, a float64 (ints and uints too; NaN and infinities are errors), a
// string, a time.Time (UTC), a []string (a list's elements written as
// strings) or nil (null), as the Program's Kind allows.
//
// An evaluation over its cost limit fails with an error wrapping
// transform.ErrCostLimit, one stopped by the run's deadline with
// transform.ErrTimeLimit (c.Err()). Other errors (division by zero, a
// bad timestamp string, an index out of range) are data errors of this
// item.
func (p *Program) Eval(c *transform.Context, it *transform.Item) (any, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	lim := transform.DefaultLimits.ExprCost
	var now time.Time
	if c != nil {
		if c.Limits.ExprCost > 0 {
			lim = c.Limits.ExprCost
		}
		now = c.Now
	}
	prg, err := p.program(lim)
	if err != nil {
		return nil, err
	}
	act := &activation{it: it, now: now}
	out, _, err := prg.ContextEval(c.Context(), act)
	if err != nil {
		return nil, evalError(c, err, lim)
	}
	return toGo(out, p.want)
}

// evalError classifies an evaluation error.
func evalError(c *transform.Context, err error, lim uint64) error {
	var ce interpreter.EvalCancelledError
	if errors.As(err, &ce) {
		if ce.Cause == interpreter.CostLimitExceeded {
			return fmt.Errorf("%w (%d units)", transform.ErrCostLimit, lim)
		}
		if cerr := c.Err(); cerr != nil {
			return cerr
		}
	}
	if errors.Is(err, transform.ErrCostLimit) {
		return err
	}
	if errors.Is(err, interpreter.InterruptError{}) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		if cerr := c.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w (evaluation interrupted)", transform.ErrTimeLimit)
	}
	return errors.New(oneLine(err.Error()))
}

// IsFatal reports whether an evaluation error must stop the run whatever
// the operator's on_error says: the cost limit, the time limit, a
// cancelled run.
func IsFatal(err error) bool {
	return errors.Is(err, transform.ErrCostLimit) || errors.Is(err, transform.ErrTimeLimit) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// activation resolves the variables of one evaluation.
type activation struct {
	it  *transform.Item
	now time.Time
}

func (a *activation) ResolveName(name string) (any, bool) {
	if name == "now" {
		return types.Timestamp{Time: a.now}, true
	}
	if f, ok := strings.CutPrefix(name, presentPrefix); ok {
		_, has := transform.Get(a.it, f)
		return types.Bool(has), true
	}
	v, _ := transform.Get(a.it, name)
	switch x := v.(type) {
	case string:
		return types.String(x), true
	case float64:
		return types.Double(x), true
	case time.Time:
		return types.Timestamp{Time: x}, true
	case []string:
		return types.NewStringList(types.DefaultTypeAdapter, x), true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// toGo converts a result to its Go value, checking it against want.
func toGo(v ref.Val, want Kind) (any, error) {
	switch x := v.(type) {
	case types.Bool:
		if want == Bool || want == Any {
			return bool(x), nil
		}
	case types.Int:
		if want == Number || want == Any {
			return float64(x), nil
		}
	case types.Uint:
		if want == Number || want == Any {
			return float64(x), nil
		}
	case types.Double:
		if want == Number || want == Any {
			f := float64(x)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("expression gives %v, not a finite number", f)
			}
			return f, nil
		}
	case types.String:
		if want == String || want == Any {
			return string(x), nil
		}
	case types.Timestamp:
		if want == Time || want == Any {
			return x.Time.UTC(), nil
		}
	case types.Null:
		if want == Any {
			return nil, nil
		}
	case traits.Lister:
		if want == Any {
			return listToGo(x)
		}
	}
	return nil, fmt.Errorf("expression gives %s, want %s", typeName(v), want)
}

// listToGo converts a list to []string, writing scalars as text.
func listToGo(l traits.Lister) ([]string, error) {
	n, ok := l.Size().(types.Int)
	if !ok {
		return nil, errors.New("expression gives a list of unknown size")
	}
	out := make([]string, 0, int(n))
	it := l.Iterator()
	for it.HasNext() == types.True {
		e := it.Next()
		switch e.(type) {
		case types.Bool, types.Int, types.Uint, types.Double, types.String, types.Timestamp:
			g, err := toGo(e, Any)
			if err != nil {
				return nil, err
			}
			out = append(out, transform.AsString(g))
		default:
			return nil, fmt.Errorf("expression gives a list holding %s, want strings, numbers, bools or timestamps", typeName(e))
		}
	}
	return out, nil
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	switch v.(type) {
	case types.Bool:
		return "a bool"
	case types.Int, types.Uint, types.Double:
		return "a number"
	case types.String:
		return "a string"
	case types.Timestamp:
		return "a timestamp"
	case types.Duration:
		return "a duration"
	case types.Null:
		return "null"
	case types.Bytes:
		return "bytes"
	case traits.Lister:
		return "a list"
	case traits.Mapper:
		return "a map"
	}
	return "a value of type " + v.Type().TypeName()
}
