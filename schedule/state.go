package schedule

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Stateful is implemented by policies whose learned state can be saved
// and restored: a restored policy answers every later observation exactly
// as the policy it was saved from would have. A service that stores the
// state with each poll rebuilds a feed's policy at start-up from a few
// hundred bytes instead of replaying its observations. Policies without
// it are rebuilt by replaying their observations.
//
// The state is a compact, versioned binary encoding of what the policy has
// learned. Its configuration (variant, options, seed) is not part of it:
// RestoreState is called on a policy built as the saved one was (ByName
// with the same name and seed) and fails with ErrState on a state saved by
// another kind of policy, another version or a malformed one, leaving the
// policy unchanged.
type Stateful interface {
	// AppendState appends the policy's state to b.
	AppendState(b []byte) []byte
	// RestoreState replaces the policy's learned state by b.
	RestoreState(b []byte) error
}

// ErrState is returned by RestoreState for a state it cannot take.
var ErrState = errors.New("schedule: policy state")

// MaxStateSize bounds an encoded policy state; RestoreState refuses larger
// input before reading it.
const MaxStateSize = 4096

// State kinds: the first byte of an encoded state, then its version.
const (
	stateAuto  = 'A'
	stateDPT   = 'D'
	stateFixed = 'F'
	stateCron  = 'C'

	stateVersion = 1
)

// stateEnc appends fixed-size little-endian fields.
type stateEnc struct{ b []byte }

func (e *stateEnc) u8(v uint8)    { e.b = append(e.b, v) }
func (e *stateEnc) u16(v uint16)  { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *stateEnc) i64(v int64)   { e.b = binary.LittleEndian.AppendUint64(e.b, uint64(v)) }
func (e *stateEnc) f32(v float32) { e.b = binary.LittleEndian.AppendUint32(e.b, math.Float32bits(v)) }
func (e *stateEnc) f64(v float64) { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *stateEnc) flag(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// stateDec reads what stateEnc wrote; the first failure sticks.
type stateDec struct {
	b   []byte
	err error
}

func (d *stateDec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.err = fmt.Errorf("%w: truncated", ErrState)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *stateDec) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *stateDec) u16() uint16 {
	if v := d.take(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (d *stateDec) i64() int64 {
	if v := d.take(8); v != nil {
		return int64(binary.LittleEndian.Uint64(v))
	}
	return 0
}

func (d *stateDec) f32() float32 {
	if v := d.take(4); v != nil {
		return math.Float32frombits(binary.LittleEndian.Uint32(v))
	}
	return 0
}

func (d *stateDec) f64() float64 {
	if v := d.take(8); v != nil {
		return math.Float64frombits(binary.LittleEndian.Uint64(v))
	}
	return 0
}

func (d *stateDec) flag() bool {
	switch v := d.u8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("flag %d", v)
		return false
	}
}

func (d *stateDec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrState}, args...)...)
	}
}

// header checks the kind and version bytes.
func (d *stateDec) header(kind byte) {
	if len(d.b) > MaxStateSize {
		d.fail("%d bytes, more than %d", len(d.b), MaxStateSize)
		return
	}
	if k := d.u8(); d.err == nil && k != kind {
		d.fail("kind %q, want %q", k, kind)
	}
	if v := d.u8(); d.err == nil && v != stateVersion {
		d.fail("version %d, want %d", v, stateVersion)
	}
}

// end reports the first failure, or bytes left over.
func (d *stateDec) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes left over", len(d.b))
	}
	return d.err
}

// rng appends the PCG's 16 bytes of state.
func (e *stateEnc) rng(r *rand.PCG) {
	raw, _ := r.MarshalBinary() // "pcg:" + hi + lo; never fails
	e.b = append(e.b, raw[len(raw)-16:]...)
}

func (d *stateDec) rng(r *rand.PCG) {
	v := d.take(16)
	if v == nil {
		return
	}
	if err := r.UnmarshalBinary(append([]byte("pcg:"), v...)); err != nil {
		d.fail("random source: %v", err)
	}
}

func (e *stateEnc) ring(r *ring) {
	e.u8(r.n)
	e.u8(r.next)
	for _, v := range r.v[:r.n] {
		e.f32(v)
	}
}

func (d *stateDec) ring(r *ring) {
	n, next := d.u8(), d.u8()
	if d.err != nil {
		return
	}
	if n > HistoryLen || next >= HistoryLen || (n < HistoryLen && next != n) {
		d.fail("history of %d with next %d", n, next)
		return
	}
	*r = ring{n: n, next: next}
	for i := range r.v[:n] {
		r.v[i] = d.f32()
	}
}

func (e *stateEnc) tracker(t *tracker, sp spreads) {
	e.ring(&t.gaps)
	e.ring(&t.long)
	e.i64(t.last)
	e.flag(t.hasPub)
	e.f64(t.med)
	e.f64(sp.sigma)
	e.f64(sp.bmed)
	e.f64(sp.bsigma)
}

func (d *stateDec) tracker(t *tracker, sp *spreads) {
	d.ring(&t.gaps)
	d.ring(&t.long)
	t.last = d.i64()
	t.hasPub = d.flag()
	t.med = d.f64()
	sp.sigma = d.f64()
	sp.bmed = d.f64()
	sp.bsigma = d.f64()
}

func (d *stateDec) mode() Mode {
	m := Mode(d.u8())
	if m > ModeBimodal {
		d.fail("mode %d", m)
	}
	return m
}

// model appends Auto's model i. Its offset and top residual are encoded
// as the last refresh fitted them (zero before it could): they are a
// function of what the state holds, so they are fitted again here and
// ignored when decoding.
func (e *stateEnc) model(a *Auto, i int) {
	w := &a.models.res[i]
	e.u8(w.n)
	e.u8(w.next)
	for _, v := range w.v[:w.n] {
		e.f32(v)
	}
	e.u16(w.seen)
	e.f64(a.models.mid[i])
	e.f64(a.models.tail[i])
	f, _, _ := a.models.fit(i, a.missRatio, a.period)
	e.f64(f.off)
	e.f64(f.top)
}

func (d *stateDec) model(ms *models, i int) {
	n, next := d.u8(), d.u8()
	if d.err != nil {
		return
	}
	if n > residualLen || next >= residualLen || (n < residualLen && next != n) {
		d.fail("residuals of %d with next %d", n, next)
		return
	}
	w := &ms.res[i]
	*w = window{n: n, next: next}
	for j := range w.v[:n] {
		w.v[j] = d.f32()
	}
	w.seen = d.u16()
	ms.mid[i] = d.f64()
	ms.tail[i] = d.f64()
	d.f64() // the fitted offset
	d.f64() // the top residual
}

// AppendState implements Stateful: about 600 bytes once the histories
// are full, less while they fill.
func (a *Auto) AppendState(b []byte) []byte {
	e := stateEnc{b}
	e.u8(stateAuto)
	e.u8(stateVersion)
	sp := a.tracker.spreads() // DPT's; Auto keeps none
	e.tracker(&a.tracker, sp)
	e.f64(a.period)
	e.i64(a.anchor)
	e.model(a, 0)
	e.model(a, 1)
	e.f64(a.off)
	e.f64(a.late)
	e.f64(a.lateN)
	e.f64(a.lostN)
	e.i64(a.missAt)
	e.i64(a.empty)
	e.u16(a.slot)
	e.u16(a.backoff)
	e.u16(a.btries)
	e.u16(a.misses)
	e.f32(a.probe)
	e.f32(a.lower)
	e.u16(a.coldN)
	e.flag(a.grid)
	// The quick retry's flag and, above it, the cycle check's (states
	// saved before it read as 0).
	quick := uint8(0)
	if a.retry&retryQuick != 0 {
		quick = 1
	}
	if a.retry&retryCheck != 0 {
		quick |= 2
	}

	e.u8(quick)
	// The middle-of-the-gap flag and, above it, the batch count (see
	// Auto.gap): states written before the count was kept read as 0.
	half := uint8(0)
	if a.retry&retryHalf != 0 {
		half = 1
	}
	e.u8(half | a.batch<<1)
	e.u8(uint8(a.mode))
	q := &a.quiet
	e.u16(q.lastFrom)
	e.u16(q.lastN)
	e.u16(q.lastDay)
	e.u16(q.from)
	e.u16(q.n)
	e.u8(q.days)
	e.u8(q.woke)
	e.i64(a.plan.at)
	e.i64(a.plan.own)
	e.u8(a.plan.misses)
	e.rng(&a.rng)
	return e.b
}

// RestoreState implements Stateful. The options Auto was built with (miss
// ratio, initial limit, sleep learning) are its own, not the state's.
func (a *Auto) RestoreState(b []byte) error {
	d := stateDec{b: b}
	d.header(stateAuto)
	c := *a
	var sp spreads // a function of the histories: recomputed when needed
	d.tracker(&c.tracker, &sp)
	c.period = d.f64()
	c.anchor = d.i64()
	d.model(&c.models, 0)
	d.model(&c.models, 1)
	c.off = d.f64()
	c.late = d.f64()
	c.lateN = d.f64()
	c.lostN = d.f64()
	c.missAt = d.i64()
	c.empty = d.i64()
	c.slot = d.u16()
	c.backoff = d.u16()
	c.btries = d.u16()
	c.misses = d.u16()
	c.probe = d.f32()
	c.lower = d.f32()
	c.coldN = d.u16()
	c.grid = d.flag()
	c.retry = 0
	qb := d.u8()
	if qb > 3 {
		d.fail("retry flags %d", qb)
	}
	if qb&1 != 0 {
		c.retry |= retryQuick
	}
	if qb&2 != 0 {
		c.retry |= retryCheck
	}
	hb := d.u8()
	if hb&1 != 0 {
		c.retry |= retryHalf
	}
	c.batch = hb >> 1
	if n := c.batch & batchCount; c.batch&^(batchMore|batchCount) != 0 || n > batchHits || n == 0 && c.batch&batchMore != 0 {
		d.fail("batch count %d", c.batch)
	}
	c.mode = d.mode()
	q := &c.quiet
	q.lastFrom = d.u16()
	q.lastN = d.u16()
	q.lastDay = d.u16()
	q.from = d.u16()
	q.n = d.u16()
	q.days = d.u8()
	q.woke = d.u8()
	if q.lastFrom >= minutesPerDay || q.from >= minutesPerDay || q.lastN > minutesPerDay || q.n > minutesPerDay {
		d.fail("sleep window %d+%d, last %d+%d", q.from, q.n, q.lastFrom, q.lastN)
	}
	c.plan.at = d.i64()
	c.plan.own = d.i64()
	c.plan.misses = d.u8()
	d.rng(&c.rng)
	if err := d.end(); err != nil {
		return err
	}
	*a = c
	return nil
}

// AppendState implements Stateful: about 250 bytes once the histories
// are full.
func (p *DPT) AppendState(b []byte) []byte {
	e := stateEnc{b}
	e.u8(stateDPT)
	e.u8(stateVersion)
	e.u8(uint8(p.variant))
	e.flag(p.unimodal)
	e.tracker(&p.tracker, p.sp)
	e.u8(uint8(p.mode))
	e.u16(p.tries)
	e.u16(p.misses)
	e.rng(&p.rng)
	return e.b
}

// RestoreState implements Stateful; the state must come from the same
// variant (with or without bimodal mode).
func (p *DPT) RestoreState(b []byte) error {
	d := stateDec{b: b}
	d.header(stateDPT)
	v, uni := Variant(d.u8()), d.flag()
	if d.err == nil && (v != p.variant || uni != p.unimodal) {
		d.fail("variant %v (unimodal %v), want %v (unimodal %v)", v, uni, p.variant, p.unimodal)
	}
	c := *p
	d.tracker(&c.tracker, &c.sp)
	c.mode = d.mode()
	c.tries = d.u16()
	c.misses = d.u16()
	d.rng(&c.rng)
	if err := d.end(); err != nil {
		return err
	}
	*p = c
	return nil
}

// AppendState implements Stateful: a fixed schedule learns nothing, its
// state is two bytes.
func (f *Fixed) AppendState(b []byte) []byte { return append(b, stateFixed, stateVersion) }

// RestoreState implements Stateful.
func (f *Fixed) RestoreState(b []byte) error {
	d := stateDec{b: b}
	d.header(stateFixed)
	return d.end()
}

// AppendState implements Stateful: a cron schedule learns nothing, its
// state is two bytes.
func (c *Cron) AppendState(b []byte) []byte { return append(b, stateCron, stateVersion) }

// RestoreState implements Stateful.
func (c *Cron) RestoreState(b []byte) error {
	d := stateDec{b: b}
	d.header(stateCron)
	return d.end()
}
