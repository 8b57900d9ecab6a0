package sensor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// maxHeld bounds the readings a sequencer holds back for its lateness
// allowance; beyond it the oldest are released early.
const maxHeld = 1000

// sequencer puts the readings an operator is given into observation-time
// order per group, and tells late readings apart (see the package
// documentation, "Time order and late readings"). window, deadband,
// threshold, gap and resample put their input through one.
//
// A group's mark is the newest observation time the operator has
// processed for it. A reading older than its group's mark is late: the
// operator cannot fold it in any more without processing the group out of
// order. With an allowance, a reading is held back until the group has a
// reading observed at least allow after it, or the run's clock is allow
// past it, so that readings up to allow out of order are still processed
// in order.
type sequencer struct {
	allow time.Duration
	marks *groups[seqMark]
	held  []transform.Item // waiting for the allowance, in time order
	late  uint64           // late readings so far
}

// seqMark is what a sequencer remembers of a group.
type seqMark struct {
	done int64 // newest observation time processed (Unix ns), when has
	seen int64 // newest observation time received (Unix ns)
	has  bool  // a reading of the group was processed
}

// lateReading is a reading the operator left out because it came late.
type lateReading struct {
	it   transform.Item
	key  string
	mark int64 // the group's mark when it arrived
}

// newSequencer returns the sequencer of an operator configured with
// lateness, its "lateness" configuration (nil: none).
func newSequencer(lateness *transform.Duration) (*sequencer, error) {
	allow, err := duration("lateness", lateness, 0, 0)
	if err != nil {
		return nil, err
	}
	s := &sequencer{allow: allow}
	s.reset()
	return s, nil
}

func (s *sequencer) reset() {
	s.marks = newGroups[seqMark](MaxGroups)
	s.held = nil
	s.late = 0
}

// order returns the items to process in this run: the readings the
// allowance releases, in observation-time order (ties in arrival order),
// and items without a reading or a usable time in their input places
// among them. It returns the late readings apart. key is the operator's
// group of an item.
func (s *sequencer) order(c *transform.Context, items []transform.Item, key func(*transform.Item) string) (ready []transform.Item, late []lateReading, err error) {
	type timed struct {
		it  transform.Item
		key string
		t   int64
	}
	var ts []timed
	untimed := make([]bool, len(items))
	for i := range items {
		if err := checkEvery(c, i); err != nil {
			return nil, nil, err
		}
		it := &items[i]
		t, ok := obsTime(it)
		if _, hasValue := value(it); !hasValue || !ok {
			untimed[i] = true
			continue
		}
		ts = append(ts, timed{it: *it, key: key(it), t: t.UnixNano()})
	}
	for i := range s.held { // held readings come before this run's
		it := &s.held[i]
		t, _ := obsTime(it)
		ts = append(ts, timed{it: *it, key: key(it), t: t.UnixNano()})
	}
	if len(ts) == 0 {
		return items, nil, nil
	}
	slices.SortStableFunc(ts, func(a, b timed) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	s.held = s.held[:0:0]
	// The newest time received per group, for the allowance.
	for i := range ts {
		m, _ := s.marks.touch(ts[i].key)
		if ts[i].t > m.seen {
			m.seen = ts[i].t
		}
	}
	now := int64(0)
	if !c.Now.IsZero() {
		now = c.Now.UnixNano()
	}
	allow := int64(s.allow)
	var released []transform.Item
	for i := range ts {
		x := &ts[i]
		m, _ := s.marks.touch(x.key)
		if m.has && x.t < m.done {
			late = append(late, lateReading{it: x.it, key: x.key, mark: m.done})
			s.late++
			continue
		}
		if allow > 0 && x.t > m.seen-allow && (now == 0 || x.t > now-allow) {
			s.held = append(s.held, x.it)
			continue
		}
		m.done, m.has = x.t, true
		released = append(released, x.it)
	}
	// Bound what is held: release the oldest early (in order: they are
	// older than everything still held in their group).
	if extra := len(s.held) - maxHeld; extra > 0 {
		for _, it := range s.held[:extra] {
			t, _ := obsTime(&it)
			if m, _ := s.marks.touch(key(&it)); !m.has || t.UnixNano() > m.done {
				m.done, m.has = t.UnixNano(), true
			}
			released = append(released, it)
		}
		s.held = slices.Clone(s.held[extra:])
		slices.SortStableFunc(released, func(a, b transform.Item) int {
			ta, _ := obsTime(&a)
			tb, _ := obsTime(&b)
			return ta.Compare(tb)
		})
	}
	// The released readings take the places of the input's readings, in
	// time order; what is left over (held readings released now) follows.
	ready = make([]transform.Item, 0, len(items)+len(released))
	for i := range items {
		switch {
		case untimed[i]:
			ready = append(ready, items[i])
		case len(released) > 0:
			ready = append(ready, released[0])
			released = released[1:]
		}
	}
	return append(ready, released...), late, nil
}

// groupReadingFunc handles one reading of an ordered run as readingFunc
// does; key is the reading's group.
type groupReadingFunc func(out []transform.Item, it *transform.Item, key string, v float64) []transform.Item

// readings puts the run's input in order (see order), its items grouped
// by by, and appends what fn emits for each reading (see appendReadings).
// It returns the items emitted and the late readings apart, for the
// operator to place their notices (see notices).
func (s *sequencer) readings(c *transform.Context, in [][]transform.Item, by grouper, dropBare bool, fn groupReadingFunc) ([]transform.Item, []lateReading, error) {
	items, late, err := s.order(c, flatten(in), by.key)
	if err != nil {
		return nil, nil, err
	}
	out, err := appendReadings(c, nil, items, dropBare, func(out []transform.Item, it *transform.Item, v float64) []transform.Item {
		return fn(out, it, by.key(it), v)
	})
	if err != nil {
		return nil, nil, err
	}
	return out, late, nil
}

// notices returns the late items of the late readings of a node: a copy
// of each reading's item with id "<id>~late", category "late" and a title
// and summary that say what it missed. The reading itself is kept, so a
// downstream node can still use it knowingly.
func (s *sequencer) notices(c *transform.Context, late []lateReading) []transform.Item {
	out := make([]transform.Item, 0, len(late))
	for i := range late {
		out = append(out, lateNotice(c, &late[i], s.allow))
	}
	return out
}

// lateNotice makes the late item of one late reading; allow is the
// node's lateness allowance.
func lateNotice(c *transform.Context, l *lateReading, allow time.Duration) transform.Item {
	it := &l.it
	n := transform.Clone(*it)
	n.ID = it.ID + "~late"
	n.GUID = ""
	n.Categories = append(slices.Clone(it.Categories), "late")
	name := sensorName(it.Reading, l.key)
	when := ""
	if t, ok := obsTime(it); ok {
		when = fmtTime(t)
	}
	mark := fmtTime(time.Unix(0, l.mark))
	var b strings.Builder
	if name != "" {
		b.WriteString(name + ": ")
	}
	value := *it.Reading
	value.Sensor = ""
	fmt.Fprintf(&b, "late reading %s observed at %s", readingTitle(value), when)
	n.Title = b.String()
	node := c.Node
	if node == "" {
		node = "the node"
	} else {
		node = "node " + node
	}
	n.Summary = fmt.Sprintf("%s observed at %s arrived after %s had processed readings of %s up to %s "+
		"(lateness allowance %s); it is not part of the node's results.",
		readingTitle(*it.Reading), when, node, nameOr(name), mark, humanDuration(allow))
	n.Content = ""
	return n
}

// seqState is a sequencer's saved state, a field of its operator's.
type seqState struct {
	Late  uint64           `json:"late,omitempty"`
	Marks []seqSaved       `json:"marks,omitempty"`
	Held  []transform.Item `json:"held,omitempty"`
}

type seqSaved struct {
	K    string `json:"k"`
	Done int64  `json:"done"`
	Seen int64  `json:"seen"`
}

// save returns the state to keep, nil when there is nothing.
func (s *sequencer) save() *seqState {
	if s.marks.len() == 0 && len(s.held) == 0 && s.late == 0 {
		return nil
	}
	st := &seqState{Late: s.late, Held: s.held}
	s.marks.each(func(k string, m *seqMark) {
		if m.has {
			st.Marks = append(st.Marks, seqSaved{K: k, Done: m.done, Seen: m.seen})
		}
	})
	return st
}

// loaded finishes its operator's LoadState: after err, the operator's
// own state failed to load and the sequencer starts afresh too;
// otherwise it restores *st.
func (s *sequencer) loaded(err error, st **seqState) error {
	if err != nil {
		s.reset()
		return err
	}
	s.load(*st)
	return nil
}

// load restores a saved state (nil: a fresh sequencer); it keeps only
// usable marks and held readings with a value and a usable time.
func (s *sequencer) load(st *seqState) {
	s.reset()
	if st == nil {
		return
	}
	s.late = st.Late
	marks := st.Marks
	if len(marks) > MaxGroups {
		marks = marks[len(marks)-MaxGroups:]
	}
	for _, m := range marks {
		_, ok1 := nanoTime(m.Done)
		_, ok2 := nanoTime(m.Seen)
		if !ok1 || !ok2 {
			continue
		}
		g, _ := s.marks.touch(boundKey(m.K))
		g.done, g.seen, g.has = m.Done, m.Seen, true
	}
	held := st.Held
	if len(held) > maxHeld {
		held = held[len(held)-maxHeld:]
	}
	for _, it := range held {
		if _, ok := value(&it); !ok {
			continue
		}
		if _, ok := obsTime(&it); !ok {
			continue
		}
		s.held = append(s.held, it)
	}
}
