package transform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// Item is what flows along a pipe's edges: a stored feed item.
type Item = storage.Item

// Operator is one node's processing step. Apply is given the items of each
// incoming edge (in[i] from the i-th edge into the node, in the order the
// pipe lists its edges) and returns the node's output, in order. It must
// not modify the given items in place: items share slices (Categories,
// Enclosures) and the Reading pointer with other branches, so an
// operator that changes an item works on Clone(item).
//
// Apply must honour c.Err() between items (it is how a pipe's time limit
// ends a long run) and must not keep references to c after returning.
type Operator interface {
	Apply(c *Context, in [][]Item) ([]Item, error)
}

// Stateful is an Operator that remembers something between runs (a
// window of readings, the side of a threshold, the last emitted value).
// The runner saves the state after every run that stored its output and
// restores it before the next, so a pipe only ever processes new items.
// SaveState returns nil when there is nothing to keep. LoadState is given
// what SaveState returned (never nil), possibly by an earlier version of
// the operator's configuration: it must check what it reads and may
// start afresh (returning nil) when the state does not fit.
type Stateful interface {
	Operator
	SaveState() (json.RawMessage, error)
	LoadState(json.RawMessage) error
}

// Context is what an operator is given besides its input.
type Context struct {
	ctx context.Context
	// Now is the time of the run; operators never read the clock.
	Now time.Time
	// Pipe is the pipe's slug, Node the node's id (for ids and errors).
	Pipe, Node string
	// Preview is set when the run is a preview: its state and output
	// are thrown away.
	Preview bool
	// Limits are the pipe's limits.
	Limits Limits
	// seed makes RANDOM and similar reproducible for the same run.
	seed uint64
	// made counts the bytes of text the node made (Grow).
	made int64
}

// NewContext returns a Context for running node of pipe at now under ctx.
func NewContext(ctx context.Context, now time.Time, pipe, node string, lim Limits) *Context {
	return &Context{ctx: ctx, Now: now, Pipe: pipe, Node: node, Limits: lim.withDefaults()}
}

// Err reports whether the run must stop (deadline or cancellation), with
// ErrTimeLimit when the pipe's time limit passed.
func (c *Context) Err() error {
	if c == nil || c.ctx == nil {
		return nil
	}
	if err := c.ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w (%v)", ErrTimeLimit, c.Limits.RunTime)
		}
		return err
	}
	return nil
}

// Context returns the run's context.Context (for libraries that take one).
func (c *Context) Context() context.Context {
	if c == nil || c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

// Rand returns a random source determined by the node and key (an item
// id, say), so that a rerun of the same input makes the same choices.
func (c *Context) Rand(key string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(c.Pipe))
	h.Write([]byte{0})
	h.Write([]byte(c.Node))
	h.Write([]byte{0})
	h.Write([]byte(key))
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^c.seed^0x9e3779b97f4a7c15))
}

// DeriveID returns a stable id for an item a node makes (a digest, a
// window, an alert): the node's id and the parts, hashed when long. The
// same node and parts always give the same id, which is what makes a
// rerun of a pipe on the same input idempotent.
func (c *Context) DeriveID(parts ...string) string {
	h := fnv.New128a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s:%x", c.Node, h.Sum(nil))
}

// Clone returns a deep copy of it, safe to modify.
func Clone(it Item) Item {
	it.Categories = slices.Clone(it.Categories)
	it.Enclosures = slices.Clone(it.Enclosures)
	if it.Reading != nil {
		r := *it.Reading
		if r.Lat != nil {
			v := *r.Lat
			r.Lat = &v
		}
		if r.Lon != nil {
			v := *r.Lon
			r.Lon = &v
		}
		it.Reading = &r
	}
	return it
}

// Family names a family of operators in the catalogue.
type Family string

// Operator families.
const (
	FamilyPipes  Family = "pipes"  // Yahoo Pipes' modules
	FamilyPACK   Family = "pack"   // PACK's filters and digesters
	FamilySensor Family = "sensor" // numbers: units, windows, alerts, joins
	FamilyExpr   Family = "expr"   // sandboxed expressions
	FamilyPlugin Family = "plugin" // operators added by plugins
)

// Spec describes an operator type: its name in pipe definitions, what it
// does, its configuration and how to build it.
type Spec struct {
	// Name is the operator's "op" in a pipe definition: lower case
	// ("filter", "window"), except PACK's operators, which keep the
	// paper's upper-case names ("GT", "EVERY", "MEAN").
	Name   string
	Family Family
	// Doc says what the operator does, in a sentence or three.
	Doc string
	// Example is a node configuration that works, as JSON.
	Example string
	// MinInputs and MaxInputs bound the node's incoming edges
	// (MaxInputs < 0: any number). Source nodes have 0 and 0.
	MinInputs, MaxInputs int
	// Config is a zero value of the configuration struct (not a pointer);
	// the catalogue derives its JSON Schema from it.
	Config any
	// New builds the operator from its configuration, already checked to
	// be a JSON object. It reports bad values as *FieldError (see Decode).
	New func(cfg json.RawMessage) (Operator, error)
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Spec{}
)

// Register adds an operator type. It panics on an empty or duplicate name
// or a missing constructor: registration happens in init functions.
func Register(s Spec) {
	if s.Name == "" || s.New == nil {
		panic("transform: Register: spec needs a name and a constructor")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[s.Name]; dup {
		panic("transform: Register: duplicate operator " + s.Name)
	}
	registry[s.Name] = s
}

// Lookup returns the operator type called name.
func Lookup(name string) (Spec, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	s, ok := registry[name]
	return s, ok
}

// Specs returns every registered operator type, by set and name.
func Specs() []Spec {
	registryMu.RLock()
	out := make([]Spec, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	registryMu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Family != out[j].Family {
			return setOrder(out[i].Family) < setOrder(out[j].Family)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func setOrder(s Family) int {
	switch s {
	case FamilyPipes:
		return 0
	case FamilySensor:
		return 1
	case FamilyPACK:
		return 2
	case FamilyExpr:
		return 3
	}
	return 4
}
