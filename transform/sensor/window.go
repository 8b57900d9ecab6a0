package sensor

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// WindowConfig configures window. Exactly one of Size and Span is given.
type WindowConfig struct {
	// Stat is the statistic: mean (default), min, max, median, stddev
	// (population), sum or count.
	Stat string `json:"stat,omitempty" jsonschema:"enum=mean,enum=min,enum=max,enum=median,enum=stddev,enum=sum,enum=count,description=statistic (default mean)"`
	// Size makes the window the last Size readings of the group (1 to
	// 10000).
	Size int `json:"size,omitempty" jsonschema:"minimum=1,maximum=10000,description=the last N readings of the group"`
	// Span makes the window the group's readings observed within Span
	// before the current one (at most 10000 of them).
	Span *transform.Duration `json:"span,omitempty" jsonschema:"description=readings observed within this span before the current one"`
	// By names the item field that groups readings (default "sensor";
	// "" puts all readings in one group).
	By *string `json:"by,omitempty" jsonschema:"description=item field that groups readings (default sensor)"`
	// Every emits for every Every-th reading of a group (default 1).
	Every int `json:"every,omitempty" jsonschema:"minimum=1,maximum=10000,description=emit for every N-th reading of a group (default 1)"`
	// Emit is "all" (default: every due reading emits) or "last" (only
	// the last due reading of each group in a run).
	Emit string `json:"emit,omitempty" jsonschema:"enum=all,enum=last,description=all (default) or last"`
	// Lateness is how long a reading may arrive out of time order and
	// still be processed in order (default 0); see the package
	// documentation.
	Lateness *transform.Duration `json:"lateness,omitempty" jsonschema:"description=how long readings are waited for to process them in time order (default 0s)"`
}

type windowOp struct {
	stat  string
	size  int           // > 0: count window
	span  time.Duration // > 0: time window
	by    grouper
	every int
	last  bool

	groups   *groups[winGroup]
	total    int // readings held over all groups
	maxTotal int // bound of total (MaxWindowTotal)
	scratch  []float64
	vals     []float64
	seq      *sequencer
}

// winGroup is one group's window: its readings in arrival order.
type winGroup struct {
	ring ring
	n    uint64 // readings seen, for every
	maxT int64  // newest observation time seen (span windows)
}

// ring is a bounded queue of readings, oldest first.
type ring struct {
	v    []float64
	t    []int64
	head int
	n    int
	// units are the readings' units, oldest first, as runs: a group's
	// readings seldom change unit.
	units []unitRun
}

// unitRun is N consecutive readings of a ring with unit U. Unknown runs
// are readings restored from a state saved without units; they agree
// with any unit.
type unitRun struct {
	U       string `json:"u,omitempty"`
	N       int32  `json:"n"`
	Unknown bool   `json:"x,omitempty"`
}

func (r *ring) len() int { return r.n }

func (r *ring) at(i int) (float64, int64) {
	j := (r.head + i) % len(r.v)
	return r.v[j], r.t[j]
}

// push appends a reading of unit u (u.N is ignored), growing up to limit
// and then dropping the oldest; it reports whether one was dropped.
func (r *ring) push(v float64, t int64, u unitRun, limit int) (dropped bool) {
	if k := len(r.units); k > 0 && r.units[k-1].U == u.U && r.units[k-1].Unknown == u.Unknown {
		r.units[k-1].N++
	} else {
		r.units = append(r.units, unitRun{U: u.U, N: 1, Unknown: u.Unknown})
	}
	if r.n == len(r.v) && len(r.v) < limit {
		size := min(max(8, 2*len(r.v)), limit)
		nv, nt := make([]float64, size), make([]int64, size)
		for i := 0; i < r.n; i++ {
			nv[i], nt[i] = r.at(i)
		}
		r.v, r.t, r.head = nv, nt, 0
	}
	if r.n < len(r.v) {
		j := (r.head + r.n) % len(r.v)
		r.v[j], r.t[j] = v, t
		r.n++
		return false
	}
	r.v[r.head], r.t[r.head] = v, t
	r.head = (r.head + 1) % len(r.v)
	r.dropUnit()
	return true
}

func (r *ring) popFront() {
	if r.n == 0 {
		return
	}
	r.head = (r.head + 1) % len(r.v)
	r.n--
	r.dropUnit()
}

// dropUnit forgets the unit of the oldest reading.
func (r *ring) dropUnit() {
	if len(r.units) == 0 {
		return
	}
	if r.units[0].N--; r.units[0].N <= 0 {
		r.units = r.units[1:]
	}
}

// unitWalk yields the units of a ring's readings, oldest first.
type unitWalk struct {
	runs []unitRun
	left int32 // readings of runs[0] not yet yielded
}

func walkUnits(runs []unitRun) unitWalk {
	w := unitWalk{runs: runs}
	if len(runs) > 0 {
		w.left = runs[0].N
	}
	return w
}

// next is the unit of the next reading (an unknown one past the end).
func (w *unitWalk) next() unitRun {
	for w.left <= 0 {
		if len(w.runs) <= 1 {
			return unitRun{Unknown: true}
		}
		w.runs = w.runs[1:]
		w.left = w.runs[0].N
	}
	w.left--
	return w.runs[0]
}

func newWindow(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[WindowConfig](raw, "span", "lateness")
	if err != nil {
		return nil, err
	}
	op := &windowOp{maxTotal: MaxWindowTotal}
	op.reset()
	if op.stat, err = parseStat(cfg.Stat, windowStats); err != nil {
		return nil, err
	}
	switch {
	case cfg.Size != 0 && cfg.Span != nil:
		return nil, transform.Fieldf("span", "give either size or span, not both")
	case cfg.Size < 0 || cfg.Size > MaxWindow:
		return nil, transform.Fieldf("size", "%w: want 1 to %d readings", transform.ErrLimit, MaxWindow)
	case cfg.Size > 0:
		op.size = cfg.Size
	case cfg.Span != nil:
		if op.span, err = duration("span", cfg.Span, 0, time.Nanosecond); err != nil {
			return nil, err
		}
	default:
		return nil, transform.Fieldf("size", "missing: give size (the last N readings) or span (a duration)")
	}
	if op.by, err = newGrouper(cfg.By, "sensor"); err != nil {
		return nil, err
	}
	switch {
	case cfg.Every == 0:
		op.every = 1
	case cfg.Every < 0 || cfg.Every > MaxWindow:
		return nil, transform.Fieldf("every", "want 1 to %d", MaxWindow)
	default:
		op.every = cfg.Every
	}
	switch strings.ToLower(strings.TrimSpace(cfg.Emit)) {
	case "", "all":
	case "last":
		op.last = true
	default:
		return nil, transform.Fieldf("emit", "want \"all\" or \"last\", not %q", trunc(cfg.Emit, 20))
	}
	if op.seq, err = newSequencer(cfg.Lateness); err != nil {
		return nil, err
	}
	return op, nil
}

// limit is how many readings a group's ring holds.
func (op *windowOp) limit() int {
	if op.size > 0 {
		return op.size
	}
	return MaxWindow
}

func (op *windowOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	c = ctxOrZero(c)
	items, late, err := op.seq.order(c, flatten(in), op.by.key)
	if err != nil {
		return nil, err
	}

	// Which readings emit: every Every-th of its group, and with "last"
	// only the last of those per group.
	keys := make([]string, len(items))
	times := make([]int64, len(items))
	usable := make([]bool, len(items))
	drop := make([]bool, len(items))
	emit := make([]bool, len(items))
	seen := map[string]uint64{}
	lastDue := map[string]int{}
	for i := range items {
		it := &items[i]
		if _, ok := value(it); !ok {
			continue
		}
		var t time.Time
		if tt, ok := obsTime(it); ok {
			t = tt
		} else if op.span > 0 {
			drop[i] = true // a time window needs the time
			continue
		}
		usable[i] = true
		if !t.IsZero() {
			times[i] = t.UnixNano()
		}
		k := op.by.key(it)
		keys[i] = k
		n, ok := seen[k]
		if !ok {
			if g, ok := op.groups.get(k); ok {
				n = g.n
			}
		}
		n++
		seen[k] = n
		if n%uint64(op.every) == 0 {
			emit[i] = true
			if op.last {
				if j, ok := lastDue[k]; ok {
					emit[j] = false
				}
				lastDue[k] = i
			}
		}
	}

	out := make([]transform.Item, 0, len(items))
	for i := range items {
		if err := checkEvery(c, i); err != nil {
			return nil, err
		}
		it := &items[i]
		if !usable[i] {
			if !drop[i] {
				out = append(out, *it) // no reading: unchanged
			}
			continue
		}
		v, _ := value(it)
		g := op.add(keys[i], v, times[i], trunc(it.Reading.Unit, maxUnitRunes))
		if !emit[i] {
			continue
		}
		mixed := op.collect(g, times[i])
		s := compute(op.stat, op.vals, &op.scratch)
		if !finite(s) {
			continue
		}
		out = append(out, op.item(it, keys[i], s, len(op.vals), mixed))
	}
	return append(out, op.seq.notices(c, late)...), nil
}

// add puts a reading into its group's window and returns the group.
func (op *windowOp) add(key string, v float64, t int64, unit string) *winGroup {
	g, _ := op.groups.touch(key)
	g.n++
	if op.span > 0 {
		if g.ring.len() == 0 || t > g.maxT {
			g.maxT = t
		}
		floor := g.maxT - int64(op.span)
		for g.ring.len() > 0 {
			if _, t0 := g.ring.at(0); t0 >= floor {
				break
			}
			g.ring.popFront()
			op.total--
		}
	}
	if !g.ring.push(v, t, unitRun{U: unit}, op.limit()) {
		op.total++
	}
	op.bound()
	return g
}

// bound forgets the least recently updated groups while the readings held
// over all groups exceed MaxWindowTotal.
func (op *windowOp) bound() {
	for op.total > op.maxTotal && op.groups.len() > 1 {
		k, _, _ := op.groups.oldest()
		op.groups.remove(k)
	}
}

// collect puts into op.vals the values of the window ending at a reading
// observed at t, and reports whether their units differ.
func (op *windowOp) collect(g *winGroup, t int64) (mixed bool) {
	op.vals = op.vals[:0]
	floor := t - int64(op.span)
	units := walkUnits(g.ring.units)
	unit, seen := "", false
	for i := 0; i < g.ring.len(); i++ {
		v, ti := g.ring.at(i)
		u := units.next()
		if op.span > 0 && (ti < floor || ti > t) {
			continue
		}
		op.vals = append(op.vals, v)
		switch {
		case u.Unknown:
		case !seen:
			unit, seen = u.U, true
		case u.U != unit:
			mixed = true
		}
	}
	return mixed
}

// item is the statistic s of the window of n readings ending at it. Its
// unit is the readings' unit, none when they differ (mixed).
func (op *windowOp) item(it *transform.Item, key string, s float64, n int, mixed bool) transform.Item {
	w := transform.Clone(*it)
	w.ID = it.ID + "~" + op.stat
	w.GUID = ""
	w.Reading.Value = transform.TidyValue(s)
	if mixed {
		w.Reading.Unit = ""
	}
	w.Reading.Unit = statUnit(op.stat, w.Reading.Unit)
	name := op.by.name(it.Reading, key)
	w.Reading.Sensor = name
	if name == "" {
		w.Reading.Lat, w.Reading.Lon = nil, nil // a pooled statistic is from nowhere in particular
	}
	w.Title = strings.TrimSpace(fmt.Sprintf("%s %s(%d): %s", name, op.stat, n, withUnit(s, w.Reading.Unit)))
	what := fmt.Sprintf("the last %d readings", n)
	if op.span > 0 {
		what = fmt.Sprintf("the %d readings within %s", n, humanDuration(op.span))
	}
	what += ofName(name)
	if t, ok := obsTime(it); ok {
		what += " up to " + fmtTime(t)
	}
	w.Summary = op.stat + " of " + what + "."
	w.Content = ""
	return w
}

type windowGroup struct {
	K string    `json:"k"`
	N uint64    `json:"n"`
	V []float64 `json:"v"`
	T []int64   `json:"t"`
	// U are the units of V, as runs (none in a state saved without
	// them: units unknown).
	U []unitRun `json:"u,omitempty"`
}

func (op *windowOp) SaveState() (json.RawMessage, error) {
	return saveOrdered(op.seq, op.groups, func(k string, g *winGroup) (windowGroup, bool) {
		wg := windowGroup{K: k, N: g.n, V: make([]float64, g.ring.len()), T: make([]int64, g.ring.len()), U: slices.Clone(g.ring.units)}
		for i := range wg.V {
			wg.V[i], wg.T[i] = g.ring.at(i)
		}
		return wg, true
	})
}

// reset forgets every group.
func (op *windowOp) reset() *groups[winGroup] {
	op.groups = newGroups[winGroup](MaxGroups)
	op.groups.onEvict = func(_ string, g *winGroup) { op.total -= g.ring.len() }
	op.total = 0
	return op.groups
}

func (op *windowOp) LoadState(raw json.RawMessage) error {
	return loadOrdered(raw, op.seq, op.reset, func(sg *windowGroup) string { return sg.K },
		func(gi int, sg *windowGroup, g *winGroup) error {
			if len(sg.V) != len(sg.T) {
				return malformed(gi)
			}
			if sg.U != nil {
				n := 0
				for j := range sg.U {
					if sg.U[j].N <= 0 {
						return malformed(gi)
					}
					n += int(sg.U[j].N)
					sg.U[j].U = trunc(sg.U[j].U, maxUnitRunes)
				}
				if n != len(sg.V) {
					return malformed(gi)
				}
			}
			g.n = sg.N
			units := walkUnits(sg.U) // all unknown without units
			start := max(0, len(sg.V)-op.limit())
			for range start {
				units.next()
			}
			for i := start; i < len(sg.V); i++ {
				v, t := sg.V[i], sg.T[i]
				u := units.next()
				if !finite(v) {
					continue
				}
				if op.span > 0 {
					if _, ok := nanoTime(t); !ok {
						continue
					}
				}
				if g.ring.len() == 0 || t > g.maxT {
					g.maxT = t
				}
				if !g.ring.push(v, t, u, op.limit()) {
					op.total++
				}
			}
			op.bound()
			return nil
		})
}

func init() {
	transform.Register(transform.Spec{
		Name:   "window",
		Family: transform.FamilySensor,
		Doc: "Rolling statistics per group (default: per sensor): for each reading, an item whose value is the mean, min, max, median, stddev, sum or count " +
			"of the last size readings, or of those within span before it. Its id is the reading's id plus \"~\" and the statistic.",
		Example:   `{"stat":"mean","size":10,"by":"sensor"}`,
		MinInputs: 1, MaxInputs: 1,
		Config: WindowConfig{},
		New:    newWindow,
	})
}
