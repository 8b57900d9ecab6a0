package pack

import (
	"container/list"
	"encoding/json"
	"math"

	"github.com/slogfeed/slogfeed/transform"
)

// delta is DELTA: it keeps an item when its value moved by more than
// delta from the last value kept in its group, and remembers the last
// kept value of up to MaxGroups groups between runs (the least recently
// kept are forgotten first).
type delta struct {
	field, by string
	delta     float64
	lru       *list.List // of *deltaEntry, most recently kept first
	idx       map[string]*list.Element
}

type deltaEntry struct {
	G string  `json:"g"`
	V float64 `json:"v"`
}

// deltaState is DELTA's saved state.
type deltaState struct {
	Version int          `json:"version"`
	Field   string       `json:"field"`
	By      string       `json:"by,omitempty"`
	Groups  []deltaEntry `json:"groups"` // least recently kept first
}

const deltaStateVersion = 1

func newDelta(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[DeltaConfig](raw)
	if err != nil {
		return nil, err
	}
	f, err := checkField("field", cfg.Field, "value", transform.TypeNumber)
	if err != nil {
		return nil, err
	}
	if math.IsNaN(cfg.Delta) || math.IsInf(cfg.Delta, 0) || cfg.Delta < 0 {
		return nil, transform.Fieldf("delta", "want a finite number ≥ 0, got %v", cfg.Delta)
	}
	if err := checkBy("by", cfg.By); err != nil {
		return nil, err
	}
	d := &delta{field: f.Name, by: cfg.By, delta: cfg.Delta}
	d.reset()
	return d, nil
}

func (d *delta) reset() {
	d.lru = list.New()
	d.idx = map[string]*list.Element{}
}

// fresh returns a DELTA of the same configuration that remembers nothing.
func (d *delta) fresh() transform.Operator {
	n := &delta{field: d.field, by: d.by, delta: d.delta}
	n.reset()
	return n
}

func (d *delta) Apply(c *transform.Context, in [][]Item) ([]Item, error) {
	q := queue(in)
	// What this run keeps is remembered only when the run succeeds.
	pending := map[string]float64{}
	var order []string
	var out []Item
	for i := range q {
		if err := checkErr(c, i); err != nil {
			return nil, err
		}
		it := &q[i]
		v, ok := transform.Get(it, d.field)
		x, isNum := v.(float64)
		if !ok || !isNum || math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		g := groupKey(it, d.by)
		last, seen := pending[g]
		if !seen {
			if e, ok := d.idx[g]; ok {
				last, seen = e.Value.(*deltaEntry).V, true
			}
		}
		if seen && !(math.Abs(x-last) > d.delta) {
			continue
		}
		if _, ok := pending[g]; !ok {
			order = append(order, g)
		}
		pending[g] = x
		out = append(out, *it)
	}
	for _, g := range order {
		d.remember(g, pending[g])
	}
	return out, nil
}

// remember records v as group g's last kept value.
func (d *delta) remember(g string, v float64) {
	if e, ok := d.idx[g]; ok {
		e.Value.(*deltaEntry).V = v
		d.lru.MoveToFront(e)
		return
	}
	d.idx[g] = d.lru.PushFront(&deltaEntry{G: g, V: v})
	for d.lru.Len() > MaxGroups {
		e := d.lru.Back()
		delete(d.idx, e.Value.(*deltaEntry).G)
		d.lru.Remove(e)
	}
}

// SaveState returns the last kept value of each remembered group.
func (d *delta) SaveState() (json.RawMessage, error) {
	if d.lru.Len() == 0 {
		return nil, nil
	}
	st := deltaState{Version: deltaStateVersion, Field: d.field, By: d.by, Groups: make([]deltaEntry, 0, d.lru.Len())}
	for e := d.lru.Back(); e != nil; e = e.Prev() {
		st.Groups = append(st.Groups, *e.Value.(*deltaEntry))
	}
	return json.Marshal(st)
}

// LoadState restores what SaveState returned. A state of another
// version, field or grouping, or one that does not read, is dropped: the
// filter starts afresh and keeps the first item of every group.
func (d *delta) LoadState(raw json.RawMessage) error {
	d.reset()
	var st deltaState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil
	}
	if st.Version != deltaStateVersion || st.Field != d.field || st.By != d.by {
		return nil
	}
	groups := st.Groups
	if len(groups) > MaxGroups {
		groups = groups[len(groups)-MaxGroups:]
	}
	for _, e := range groups {
		if len(e.G) > maxGroupKey+32 || math.IsNaN(e.V) || math.IsInf(e.V, 0) {
			continue
		}
		d.remember(e.G, e.V)
	}
	return nil
}
