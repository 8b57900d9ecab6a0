package expr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// baseEnv is the language's environment: immutable once built and safe
// for concurrent use, so every Program shares it.
var baseEnv = sync.OnceValues(newEnv)

func newEnv() (*cel.Env, error) {
	lim := transform.DefaultLimits
	opts := []cel.EnvOption{
		cel.ParserRecursionLimit(MaxDepth),
		cel.ParserExpressionSizeLimit(lim.MaxExpr),
		cel.ExpressionNodeLimit(MaxNodes),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		cel.ASTValidators(
			cel.ValidateComprehensionNestingLimit(MaxComprehensionNesting),
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
		),
		ext.Strings(),
		ext.Math(),
		cel.Macros(presentMacro),
		cel.Variable("now", cel.TimestampType),
	}
	for _, f := range transform.Fields {
		opts = append(opts,
			cel.Variable(f.Name, celType(f.Type)),
			cel.Variable(presentPrefix+f.Name, cel.BoolType))
	}
	// After ext.Strings: replaces its replace() bindings by guarded ones.
	opts = append(opts, guardedReplace())
	return cel.NewEnv(opts...)
}

func celType(t transform.Type) *cel.Type {
	switch t {
	case transform.TypeNumber:
		return cel.DoubleType
	case transform.TypeTime:
		return cel.TimestampType
	case transform.TypeList:
		return cel.ListType(cel.StringType)
	}
	return cel.StringType
}

// presentMacro expands present("field") to the hidden variable telling
// whether the item has a value in that field.
var presentMacro = cel.GlobalMacro("present", 1,
	func(eh cel.MacroExprFactory, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
		a := args[0]
		if s, ok := stringLiteral(a); ok {
			f, err := transform.Field(s)
			if err != nil {
				return nil, eh.NewError(a.ID(), fmt.Sprintf("present(): unknown item field %q", s))
			}
			return eh.NewIdent(presentPrefix + f.Name), nil
		}
		return nil, eh.NewError(a.ID(), `present() takes an item field's name in quotes, e.g. present("value")`)
	})

func stringLiteral(e ast.Expr) (string, bool) {
	if e == nil || e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// guardedReplace redefines the strings extension's replace() so that it
// refuses, before building it, a result larger than MaxString: the
// cost of a call is counted after it returns, and "x".replace("", y) is
// len(x)·len(y) bytes.
func guardedReplace() cel.EnvOption {
	return cel.Function("replace",
		cel.MemberOverload("string_replace_string_string",
			[]*cel.Type{cel.StringType, cel.StringType, cel.StringType}, cel.StringType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				return replace(args, -1)
			})),
		cel.MemberOverload("string_replace_string_string_int",
			[]*cel.Type{cel.StringType, cel.StringType, cel.StringType, cel.IntType}, cel.StringType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				if len(args) != 4 {
					return types.NoSuchOverloadErr()
				}
				n, ok := args[3].(types.Int)
				if !ok {
					return types.MaybeNoSuchOverloadErr(args[3])
				}
				return replace(args[:3], int64(n))
			})),
	)
}

func replace(args []ref.Val, n int64) ref.Val {
	if len(args) != 3 {
		return types.NoSuchOverloadErr()
	}
	s, ok1 := args[0].(types.String)
	old, ok2 := args[1].(types.String)
	repl, ok3 := args[2].(types.String)
	if !ok1 || !ok2 || !ok3 {
		return types.NoSuchOverloadErr()
	}
	count := int64(strings.Count(string(s), string(old)))
	if n >= 0 && count > n {
		count = n
	}
	size := int64(len(s)) + count*(int64(len(repl))-int64(len(old)))
	if size > MaxString {
		return types.WrapErr(fmt.Errorf("%w: replace() would make a string of %d bytes, at most %d", transform.ErrCostLimit, size, MaxString))
	}
	limit := -1
	if n >= 0 {
		limit = int(min(n, count))
	}
	return types.String(strings.Replace(string(s), string(old), string(repl), limit))
}

// tzGetters are the timestamp accessors that take a time zone argument.
var tzGetters = map[string]bool{
	"getFullYear": true, "getMonth": true, "getDayOfYear": true, "getDayOfMonth": true,
	"getDate": true, "getDayOfWeek": true, "getHours": true, "getMinutes": true,
	"getSeconds": true, "getMilliseconds": true,
}

// checkCalls refuses what the language allows but slogfeed does not:
// matches() with a pattern that is not a string literal, or a literal
// that transform.CompileRegex refuses; a time zone argument that is not
// a literal "UTC" or fixed offset (named zones read the system's zone
// files at every call).
func checkCalls(field, src string, a *cel.Ast) error {
	nat := a.NativeRep()
	var first error
	ast.PreOrderVisit(nat.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if first != nil || e.Kind() != ast.CallKind {
			return
		}
		call := e.AsCall()
		args := call.Args()
		fn := call.FunctionName()
		switch {
		case fn == "matches":
			var pat ast.Expr
			switch {
			case call.IsMemberFunction() && len(args) == 1:
				pat = args[0]
			case !call.IsMemberFunction() && len(args) == 2:
				pat = args[1]
			default:
				return
			}
			s, ok := stringLiteral(pat)
			if !ok {
				first = errorAt(field, src, nat, pat.ID(), errors.New("matches() takes its pattern as a string literal"))
				return
			}
			if _, err := transform.CompileRegex(field, s); err != nil {
				var fe *transform.FieldError
				if errors.As(err, &fe) {
					err = fe.Err
				}
				first = errorAt(field, src, nat, pat.ID(), err)
			}
		case tzGetters[fn] && call.IsMemberFunction() && len(args) == 1:
			if s, ok := stringLiteral(args[0]); !ok || !fixedZone(s) {
				first = errorAt(field, src, nat, args[0].ID(), fmt.Errorf(`%s() takes its time zone as a literal "UTC" or offset such as "+02:00"`, fn))
			}
		}
	}))
	return first
}

// fixedZone reports whether s is "UTC" or an offset [+-]hh:mm.
func fixedZone(s string) bool {
	if s == "UTC" {
		return true
	}
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(m) != 2 || h == "" {
		return false
	}
	if h[0] == '+' || h[0] == '-' {
		h = h[1:]
	}
	if len(h) == 0 || len(h) > 2 {
		return false
	}
	hr, err1 := strconv.Atoi(h)
	mn, err2 := strconv.Atoi(m)
	return err1 == nil && err2 == nil && hr >= 0 && hr <= 23 && mn >= 0 && mn <= 59 &&
		!strings.ContainsAny(h+m, "+-")
}

// checkKind refuses an expression whose static type cannot give want.
// A dyn type is checked when evaluated.
func checkKind(field string, t *cel.Type, want Kind) error {
	if t == nil || kindFits(t, want) {
		return nil
	}
	return transform.Fieldf(field, "expression gives %s, want %s", celTypeName(t), want)
}

func kindFits(t *cel.Type, want Kind) bool {
	k := t.Kind()
	if k == types.DynKind {
		return true
	}
	switch want {
	case Bool:
		return k == types.BoolKind
	case Number:
		return k == types.IntKind || k == types.UintKind || k == types.DoubleKind
	case String:
		return k == types.StringKind
	case Time:
		return k == types.TimestampKind
	}
	switch k {
	case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.StringKind,
		types.TimestampKind, types.NullTypeKind:
		return true
	case types.ListKind:
		ps := t.Parameters()
		if len(ps) != 1 {
			return true
		}
		switch ps[0].Kind() {
		case types.DynKind, types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind,
			types.StringKind, types.TimestampKind:
			return true
		}
	}
	return false
}

func celTypeName(t *cel.Type) string {
	switch t.Kind() {
	case types.BoolKind:
		return "a bool"
	case types.IntKind, types.UintKind, types.DoubleKind:
		return "a number (" + t.String() + ")"
	case types.StringKind:
		return "a string"
	case types.TimestampKind:
		return "a timestamp"
	case types.DurationKind:
		return "a duration"
	}
	return t.String()
}

// sizeEstimator bounds the sizes of the item's fields for the static
// cost estimate, from the storage's limits.
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	p := n.Path()
	if len(p) != 1 {
		return nil
	}
	var max uint64
	switch p[0] {
	case "title":
		max = storage.MaxTitleLen
	case "id":
		max = storage.MaxIDLen
	case "link", "guid", "enclosure":
		max = storage.MaxURLLen
	case "summary", "content", "author", "unit", "sensor":
		max = storage.MaxItemSize
	case "categories":
		max = storage.MaxItemSize / 3 // `"",` at least per category
	default:
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: max}
}

func (sizeEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// estimate returns the static cost estimate of a, or ok false when CEL
// cannot make one.
func estimate(env *cel.Env, a *cel.Ast) (est checker.CostEstimate, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = false
		}
	}()
	e, err := env.EstimateCost(a, sizeEstimator{})
	if err != nil {
		return est, false
	}
	return e, true
}

// checkCost refuses an expression whose cheapest evaluation already
// costs more than limit.
func checkCost(field string, env *cel.Env, a *cel.Ast, limit uint64) error {
	est, ok := estimate(env, a)
	if !ok || est.Min <= limit {
		return nil
	}
	return &transform.FieldError{Field: field, Err: fmt.Errorf("%w: %w: the expression costs at least %d units, at most %d",
		transform.ErrLimit, transform.ErrCostLimit, est.Min, limit)}
}

// EstimatedCost returns the bounds CEL estimates for one evaluation's
// cost, in the units of transform.Limits.ExprCost, with the item's text
// fields as large as storage allows. ok is false when there is no
// estimate.
func (p *Program) EstimatedCost() (min, max uint64, ok bool) {
	est, ok := estimate(p.env, p.ast)
	return est.Min, est.Max, ok
}

// issuesError turns compile issues into a *transform.FieldError with a
// one-line message per issue (at most three), each with its position.
func issuesError(field, src string, iss *cel.Issues) error {
	errs := iss.Errors()
	var parts []string
	limit := false
	for i, e := range errs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-i))
			break
		}
		msg, isLimit := readable(e.Message)
		limit = limit || isLimit
		parts = append(parts, position(src, e.Location)+oneLine(msg))
	}
	if len(parts) == 0 {
		parts = append(parts, oneLine(iss.Err().Error()))
	}
	msg := strings.Join(parts, "; ")
	if limit {
		return &transform.FieldError{Field: field, Err: fmt.Errorf("%w: %s", transform.ErrLimit, msg)}
	}
	return &transform.FieldError{Field: field, Err: errors.New(msg)}
}

// readable shortens a compiler message and tells whether it is about a
// limit.
func readable(msg string) (string, bool) {
	msg = strings.ReplaceAll(msg, " (in container '')", "")
	switch {
	case strings.Contains(msg, "recursion limit exceeded"), strings.Contains(msg, "max recursion depth exceeded"):
		return fmt.Sprintf("expression nested deeper than %d levels", MaxDepth), true
	case strings.Contains(msg, "limit exceeded"), strings.Contains(msg, "exceeds limit"), strings.Contains(msg, "exceeds nesting limit"):
		return msg, true
	}
	if rest, ok := strings.CutPrefix(msg, "Syntax error: "); ok {
		if i := strings.Index(rest, " expecting "); i > 0 {
			rest = rest[:i]
		}
		rest = strings.ReplaceAll(rest, "'<EOF>'", "end of expression")
		rest = strings.Replace(rest, "mismatched input ", "unexpected ", 1)
		rest = strings.Replace(rest, "extraneous input ", "unexpected ", 1)
		msg = "syntax error: " + rest
	}
	return msg, false
}

// errorAt returns a *transform.FieldError for err at expression id.
func errorAt(field, src string, a *ast.AST, id int64, err error) error {
	loc := a.SourceInfo().GetStartLocation(id)
	return &transform.FieldError{Field: field, Err: fmt.Errorf("%s%w", position(src, loc), err)}
}

// position writes a location as "column 7: " (or "line 2, column 7: "
// for a source of several lines); columns count from 1.
func position(src string, loc common.Location) string {
	if loc == nil || loc.Line() <= 0 {
		return ""
	}
	if strings.Contains(src, "\n") {
		return fmt.Sprintf("line %d, column %d: ", loc.Line(), loc.Column()+1)
	}
	return fmt.Sprintf("column %d: ", loc.Column()+1)
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
