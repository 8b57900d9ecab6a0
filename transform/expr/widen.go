package expr

import (
	"regexp"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
)

// maxWidenRounds bounds the checks compile makes while widening ints.
const maxWidenRounds = 16

// widenable are the operators whose int operands are widened to double
// when another operand is a double.
var widenable = map[string]bool{
	operators.Add: true, operators.Subtract: true, operators.Multiply: true, operators.Divide: true,
	operators.Equals: true, operators.NotEquals: true,
	operators.Less: true, operators.LessEquals: true, operators.Greater: true, operators.GreaterEquals: true,
	operators.Conditional: true,
}

var noOverload = regexp.MustCompile(`^found no matching overload for '([^']+)' applied to '\((.*)\)'$`)

// widen is one int operand to wrap in double(): the call's id and the
// argument's position.
type widen struct {
	call int64
	arg  int
}

// widening is the set of operands compile wraps, found round by round.
type widening struct {
	list []widen
	seen map[widen]bool
}

// add records the operands the overload errors of iss ask to widen; it
// reports whether it found any new one.
func (w *widening) add(iss *cel.Issues) bool {
	added := false
	for _, e := range iss.Errors() {
		m := noOverload.FindStringSubmatch(e.Message)
		if m == nil || !widenable[m[1]] || e.ExprID == 0 {
			continue
		}
		args := strings.Split(m[2], ", ")
		first := 0
		if m[1] == operators.Conditional {
			first = 1 // the condition is not an operand
		}
		hasDouble := false
		for _, a := range args[first:] {
			hasDouble = hasDouble || a == "double"
		}
		if !hasDouble {
			continue
		}
		for i := first; i < len(args); i++ {
			if args[i] != "int" && args[i] != "uint" {
				continue
			}
			k := widen{call: e.ExprID, arg: i}
			if w.seen[k] {
				continue
			}
			if w.seen == nil {
				w.seen = map[widen]bool{}
			}
			w.seen[k] = true
			w.list = append(w.list, k)
			added = true
		}
	}
	return added
}

// apply wraps the recorded operands of a freshly parsed AST (whose ids
// are those the errors named, parsing being deterministic) in double().
func (w *widening) apply(parsed *cel.Ast) {
	if len(w.list) == 0 {
		return
	}
	nat := parsed.NativeRep()
	byID := map[int64]ast.Expr{}
	var maxID int64
	ast.PostOrderVisit(nat.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		byID[e.ID()] = e
		maxID = max(maxID, e.ID())
	}))
	for id := range nat.SourceInfo().MacroCalls() {
		maxID = max(maxID, id)
	}
	for id := range nat.SourceInfo().OffsetRanges() {
		maxID = max(maxID, id)
	}
	fac := ast.NewExprFactory()
	for _, k := range w.list {
		e, ok := byID[k.call]
		if !ok || e.Kind() != ast.CallKind {
			continue
		}
		args := e.AsCall().Args()
		if k.arg >= len(args) {
			continue
		}
		arg := args[k.arg]
		maxID++
		inner := fac.NewUnspecifiedExpr(maxID)
		inner.SetKindCase(arg)
		if r, ok := nat.SourceInfo().GetOffsetRange(arg.ID()); ok {
			nat.SourceInfo().SetOffsetRange(maxID, r)
		}
		arg.SetKindCase(fac.NewCall(0, "double", inner))
	}
}
