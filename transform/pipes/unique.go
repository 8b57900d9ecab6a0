package pipes

import (
	"container/list"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"strings"

	"github.com/slogfeed/slogfeed/transform"
)

// UniqueConfig is the configuration of "unique".
type UniqueConfig struct {
	// Field is the item field whose values must be distinct (default
	// "title").
	Field string `json:"field,omitempty" jsonschema:"description=item field whose values must be distinct (default title)"`
	// Remember is how many distinct values of earlier runs to remember
	// (0 to 100000; default 0: each run on its own).
	Remember int `json:"remember,omitempty" jsonschema:"description=distinct values of earlier runs remembered (0 to 100000)"`
}

const (
	// maxRemember bounds what unique remembers between runs.
	maxRemember = 100000
	// maxKeyBytes is the longest remembered value kept as is; longer
	// ones are hashed.
	maxKeyBytes = 64
)

func init() {
	register("unique",
		"Keeps the first item of each distinct value of a field and drops later items with the same value; items lacking the field are kept. With remember N it also drops values seen among the last N distinct values of earlier runs.",
		`{"field":"title","remember":0}`, 1, 1, newUnique)
}

func newUnique(cfg UniqueConfig) (transform.Operator, error) {
	if cfg.Field == "" {
		cfg.Field = "title"
	}
	if err := transform.CheckField("field", cfg.Field, false); err != nil {
		return nil, err
	}
	if cfg.Remember < 0 {
		return nil, transform.Fieldf("remember", "must not be negative, got %d", cfg.Remember)
	}
	if cfg.Remember > maxRemember {
		return nil, transform.Fieldf("remember", "%w: %d values, at most %d", transform.ErrLimit, cfg.Remember, maxRemember)
	}
	u := uniqueOp{field: cfg.Field}
	if cfg.Remember == 0 {
		return u, nil
	}
	return &rememberingUnique{uniqueOp: u, n: cfg.Remember, index: map[string]*list.Element{}, order: list.New()}, nil
}

// uniqueOp is "unique" without memory.
type uniqueOp struct {
	field string
}

// key returns the value of it's field as a map key (hashed when long),
// or false when it has none.
func (u uniqueOp) key(it *transform.Item) (string, bool) {
	v, ok := transform.Get(it, u.field)
	if !ok {
		return "", false
	}
	var s string
	if l, isList := v.([]string); isList {
		s = strings.Join(l, "\x00")
	} else {
		s = transform.AsString(v)
	}
	if len(s) <= maxKeyBytes {
		return "=" + s, true
	}
	h := fnv.New128a()
	h.Write([]byte(s))
	return "#" + hex.EncodeToString(h.Sum(nil)), true
}

func (u uniqueOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	out, _, err := u.apply(c, in, nil)
	return out, err
}

// apply keeps the first item of each value not in seen, and returns the
// values of the kept items in order.
func (u uniqueOp) apply(c *transform.Context, in [][]transform.Item, seen func(string) bool) ([]transform.Item, []string, error) {
	var out []transform.Item
	var keys []string
	batch := map[string]bool{}
	n := 0
	for _, items := range in {
		for i := range items {
			if err := tick(c, n); err != nil {
				return nil, nil, err
			}
			n++
			k, ok := u.key(&items[i])
			if !ok {
				out = append(out, items[i])
				continue
			}
			if batch[k] {
				continue
			}
			batch[k] = true
			keys = append(keys, k)
			if seen != nil && seen(k) {
				continue
			}
			out = append(out, items[i])
		}
	}
	return out, keys, nil
}

// rememberingUnique is "unique" with a memory of the last n distinct
// values of earlier runs (least recently seen first in order).
//
// A run's values join the memory when its state is saved, which the
// runner does only after a run whose output it stored: a run that failed
// further down the pipe, or a preview, leaves the memory as it was.
type rememberingUnique struct {
	uniqueOp
	n     int
	index map[string]*list.Element
	order *list.List // of string keys, least recently seen first
	// pending are the values of the last run, not yet remembered.
	pending []string
}

func (u *rememberingUnique) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	u.pending = nil
	out, keys, err := u.apply(c, in, func(k string) bool { return u.index[k] != nil })
	if err != nil {
		return nil, err
	}
	if !c.Preview {
		u.pending = keys
	}
	return out, nil
}

// remember makes k the most recently seen value, forgetting the least
// recently seen beyond n.
func (u *rememberingUnique) remember(k string) {
	if e := u.index[k]; e != nil {
		u.order.MoveToBack(e)
		return
	}
	u.index[k] = u.order.PushBack(k)
	for u.order.Len() > u.n {
		e := u.order.Front()
		delete(u.index, e.Value.(string))
		u.order.Remove(e)
	}
}

// uniqueState is what a remembering unique saves between runs.
type uniqueState struct {
	Field string `json:"field"`
	// Keys are the remembered values, least recently seen first: "="
	// and the value, or "#" and the hex FNV-128a hash of a long value.
	Keys []string `json:"keys"`
}

// SaveState remembers the values of the last run and returns the
// remembered values.
func (u *rememberingUnique) SaveState() (json.RawMessage, error) {
	for _, k := range u.pending {
		u.remember(k)
	}
	u.pending = nil
	if u.order.Len() == 0 {
		return nil, nil
	}
	st := uniqueState{Field: u.field, Keys: make([]string, 0, u.order.Len())}
	for e := u.order.Front(); e != nil; e = e.Next() {
		st.Keys = append(st.Keys, e.Value.(string))
	}
	return json.Marshal(st)
}

// LoadState restores the remembered values. A state of another field,
// or one that does not read, is dropped; a longer memory than this
// configuration's keeps its most recent values.
func (u *rememberingUnique) LoadState(raw json.RawMessage) error {
	u.pending = nil
	u.index = map[string]*list.Element{}
	u.order = list.New()
	var st uniqueState
	if err := json.Unmarshal(raw, &st); err != nil || st.Field != u.field {
		return nil
	}
	keys := st.Keys
	if len(keys) > u.n {
		keys = keys[len(keys)-u.n:]
	}
	for _, k := range keys {
		if !validKey(k) {
			u.index = map[string]*list.Element{}
			u.order = list.New()
			return nil
		}
		u.remember(k)
	}
	return nil
}

// validKey reports whether k is a key as uniqueOp.key makes them.
func validKey(k string) bool {
	switch {
	case strings.HasPrefix(k, "="):
		return len(k) <= 1+maxKeyBytes
	case strings.HasPrefix(k, "#"):
		_, err := hex.DecodeString(k[1:])
		return len(k) == 33 && err == nil
	}
	return false
}
