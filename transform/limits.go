package transform

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"time"
)

// Limits bound what a pipe may be and do. Zero fields take the defaults.
type Limits struct {
	// MaxNodes bounds a pipe's nodes, loop bodies included (default 64).
	MaxNodes int `json:"max_nodes,omitempty"`
	// MaxEdges bounds its edges (default 256).
	MaxEdges int `json:"max_edges,omitempty"`
	// MaxDepth bounds the nesting of loops (default 3).
	MaxDepth int `json:"max_depth,omitempty"`
	// MaxRegex bounds a regular expression's length in bytes (default 512).
	MaxRegex int `json:"max_regex,omitempty"`
	// MaxRegexProg bounds a compiled regular expression's size in
	// instructions (default 4096): RE2 runs in linear time, but
	// "(a{1,1000}){1,1000}" is still a million-state program.
	MaxRegexProg int `json:"max_regex_prog,omitempty"`
	// MaxExpr bounds an expression's length in bytes (default 2048).
	MaxExpr int `json:"max_expr,omitempty"`
	// ExprCost bounds one evaluation of an expression, in the expression
	// language's cost units (default 100000).
	ExprCost uint64 `json:"expr_cost,omitempty"`
	// MaxItems bounds the items any node may hold or emit in one run
	// (default 100000).
	MaxItems int `json:"max_items,omitempty"`
	// MaxText bounds the bytes of text a string operator (template,
	// regex replace) may make per field (default 64 KiB).
	MaxText int `json:"max_text,omitempty"`
	// RunTime bounds one run (default 10 s). Every operator checks it
	// between items.
	RunTime time.Duration `json:"run_time,omitempty"`
	// MaxRegexInput bounds the bytes of one field a regular expression
	// looks at (default 16 KiB): RE2 is linear in its input, but the
	// factor is the program's size, so a large program over a long
	// summary takes a second per item. Regex operators match within the
	// first MaxRegexInput bytes and keep the rest of the field as it is.
	MaxRegexInput int `json:"max_regex_input,omitempty"`
	// MaxNodeBytes bounds the bytes one node's output may hold in a run
	// (default 32 MiB), counted by ItemBytes.
	MaxNodeBytes int64 `json:"max_node_bytes,omitempty"`
	// MaxRunBytes bounds the bytes all the nodes of a run may
	// materialise together (default 128 MiB), counted by ItemBytes. It
	// applies to previews and saved pipes alike.
	MaxRunBytes int64 `json:"max_run_bytes,omitempty"`
	// MaxPreviewBytes bounds the bytes of the items a preview shows, all
	// nodes together (default 4 MiB); past it a node shows its count and
	// fewer items (NodeOutput.Truncated).
	MaxPreviewBytes int64 `json:"max_preview_bytes,omitempty"`
}

// DefaultLimits are the limits of a pipe that sets none.
var DefaultLimits = Limits{
	MaxNodes:     64,
	MaxEdges:     256,
	MaxDepth:     3,
	MaxRegex:     512,
	MaxRegexProg: 4096,
	MaxExpr:      2048,
	ExprCost:     100000,
	MaxItems:     100000,
	MaxText:      64 << 10,
	RunTime:      10 * time.Second,

	MaxRegexInput:   16 << 10,
	MaxNodeBytes:    32 << 20,
	MaxRunBytes:     128 << 20,
	MaxPreviewBytes: 4 << 20,
}

// WithDefaults returns l with its zero fields set to DefaultLimits'.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxNodes > 0 {
		d.MaxNodes = l.MaxNodes
	}
	if l.MaxEdges > 0 {
		d.MaxEdges = l.MaxEdges
	}
	if l.MaxDepth > 0 {
		d.MaxDepth = l.MaxDepth
	}
	if l.MaxRegex > 0 {
		d.MaxRegex = l.MaxRegex
	}
	if l.MaxRegexProg > 0 {
		d.MaxRegexProg = l.MaxRegexProg
	}
	if l.MaxExpr > 0 {
		d.MaxExpr = l.MaxExpr
	}
	if l.ExprCost > 0 {
		d.ExprCost = l.ExprCost
	}
	if l.MaxItems > 0 {
		d.MaxItems = l.MaxItems
	}
	if l.MaxText > 0 {
		d.MaxText = l.MaxText
	}
	if l.RunTime > 0 {
		d.RunTime = l.RunTime
	}
	if l.MaxRegexInput > 0 {
		d.MaxRegexInput = l.MaxRegexInput
	}
	if l.MaxNodeBytes > 0 {
		d.MaxNodeBytes = l.MaxNodeBytes
	}
	if l.MaxRunBytes > 0 {
		d.MaxRunBytes = l.MaxRunBytes
	}
	if l.MaxPreviewBytes > 0 {
		d.MaxPreviewBytes = l.MaxPreviewBytes
	}
	return d
}

// CompileRegex compiles an RE2 expression from configuration field
// field, refusing one longer than DefaultLimits.MaxRegex bytes or whose
// program exceeds DefaultLimits.MaxRegexProg instructions. Errors are
// *FieldError values (wrapping ErrLimit for the limits).
func CompileRegex(field, expr string) (*regexp.Regexp, error) {
	lim := DefaultLimits
	if len(expr) > lim.MaxRegex {
		return nil, &FieldError{Field: field, Err: fmt.Errorf("%w: regex is %d bytes, at most %d", ErrLimit, len(expr), lim.MaxRegex)}
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, Fieldf(field, "bad regex: %v", err)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, Fieldf(field, "bad regex: %v", err)
	}
	if n := len(prog.Inst); n > lim.MaxRegexProg {
		return nil, &FieldError{Field: field, Err: fmt.Errorf("%w: regex compiles to %d instructions, at most %d", ErrLimit, n, lim.MaxRegexProg)}
	}
	rx, err := regexp.Compile(expr)
	if err != nil {
		return nil, Fieldf(field, "bad regex: %v", err)
	}
	return rx, nil
}
