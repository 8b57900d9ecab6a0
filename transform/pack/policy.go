package pack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// Bounds on policies.
const (
	// MaxLevels bounds a policy's levels.
	MaxLevels = 8
	// MaxSteps bounds the filters of a level.
	MaxSteps = 8
	// MaxPolicySize bounds a policy's JSON, in bytes.
	MaxPolicySize = 256 << 10
	// maxAbove bounds a level's fill ratio.
	maxAbove = 1e6
)

// Policy is a PACK data-reduction policy: what to do with the items a
// feed holds beyond its capacity. Its levels are in ascending order of
// Above; the highest level whose Above the buffer's fill ratio reaches
// applies (see Apply).
type Policy struct {
	Levels []Level `json:"levels"`
}

// Level is one level of a Policy.
type Level struct {
	// Above is the fill ratio, (capacity + overflow) / capacity, from
	// which the level applies: 1 whenever anything overflows, 2 when
	// the feed holds twice its capacity.
	Above float64 `json:"above"`
	// Filters run in sequence over the items over capacity; what the
	// last keeps is kept. No filters: nothing is kept.
	Filters []Step `json:"filters,omitempty"`
	// Digest names the digesters (MAX MIN COUNT SUM MEAN) that summarise
	// the dropped items.
	Digest []string `json:"digest,omitempty"`
	// Field is the number field digested (default "value").
	Field string `json:"field,omitempty"`
	// By names a field whose value groups the digests (optional).
	By string `json:"by,omitempty"`

	ops []transform.Operator // the built filters
}

// Step is one filter of a level: a PACK filter's name and its
// configuration.
type Step struct {
	Op     string          `json:"op"`
	Config json.RawMessage `json:"config,omitempty"`
}

// CheckFeedPolicy checks a feed's reduction policy as a subscription
// gives it: none (absent or null) or one ParsePolicy reads.
func CheckFeedPolicy(raw json.RawMessage) error {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	_, err := ParsePolicy(raw)
	return err
}

// ParsePolicy reads a policy from JSON strictly: unknown fields, wrong
// types, unknown filters or digesters and bad configurations are
// *transform.FieldError values naming the field, such as
// "levels[1].filters[0].config.n". A policy has 1 to MaxLevels levels in
// strictly ascending order of above, each with at most MaxSteps filters.
func ParsePolicy(raw json.RawMessage) (*Policy, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, &transform.FieldError{Err: errors.New("empty reduction policy: want {\"levels\":[…]}")}
	}
	if len(raw) > MaxPolicySize {
		return nil, &transform.FieldError{Err: fmt.Errorf("%w: policy is %d bytes, at most %d", transform.ErrLimit, len(raw), MaxPolicySize)}
	}
	if raw[0] != '{' {
		return nil, &transform.FieldError{Err: errors.New("a reduction policy is a JSON object: {\"levels\":[…]}")}
	}
	p, err := transform.Decode[Policy](raw)
	if err != nil {
		return nil, err
	}
	switch {
	case len(p.Levels) == 0:
		return nil, transform.Fieldf("levels", "required: at least one level")
	case len(p.Levels) > MaxLevels:
		return nil, &transform.FieldError{Field: "levels", Err: fmt.Errorf("%w: %d levels, at most %d", transform.ErrLimit, len(p.Levels), MaxLevels)}
	}
	for i := range p.Levels {
		if err := p.Levels[i].check(); err != nil {
			return nil, prefixError(fmt.Sprintf("levels[%d]", i), err)
		}
		if i > 0 && p.Levels[i].Above <= p.Levels[i-1].Above {
			return nil, transform.Fieldf(fmt.Sprintf("levels[%d].above", i), "must be greater than levels[%d].above (%v): levels go in ascending order", i-1, p.Levels[i-1].Above)
		}
	}
	return &p, nil
}

// check validates l and builds its filters.
func (l *Level) check() error {
	if !finite(l.Above) || l.Above < 0 || l.Above > maxAbove {
		return transform.Fieldf("above", "want a fill ratio from 0 to %g (1: whenever the feed is over capacity), got %v", maxAbove, l.Above)
	}
	if len(l.Filters) > MaxSteps {
		return &transform.FieldError{Field: "filters", Err: fmt.Errorf("%w: %d filters, at most %d", transform.ErrLimit, len(l.Filters), MaxSteps)}
	}
	l.ops = make([]transform.Operator, len(l.Filters))
	for j, st := range l.Filters {
		field := fmt.Sprintf("filters[%d]", j)
		spec, ok := filterByName[st.Op]
		if !ok {
			switch {
			case st.Op == "":
				return transform.Fieldf(field+".op", "required: one of %s", strings.Join(Filters, " "))
			case digesterByName[st.Op].name != "":
				return transform.Fieldf(field+".op", "%s is a digester: list it in \"digest\"", st.Op)
			case filterByName[strings.ToUpper(st.Op)].name != "":
				return transform.Fieldf(field+".op", "unknown PACK filter %q: names are upper case (%s)", st.Op, strings.ToUpper(st.Op))
			}
			return transform.Fieldf(field+".op", "unknown PACK filter %q (want one of %s)", st.Op, strings.Join(Filters, " "))
		}
		cfg := bytes.TrimSpace(st.Config)
		if len(cfg) > 0 && cfg[0] != '{' && !bytes.Equal(cfg, []byte("null")) {
			return transform.Fieldf(field+".config", "want a JSON object")
		}
		op, err := spec.build(cfg)
		if err != nil {
			return prefixError(field+".config", err)
		}
		l.ops[j] = op
	}
	if len(l.Digest) > len(Digesters) {
		return &transform.FieldError{Field: "digest", Err: fmt.Errorf("%w: %d digesters, at most %d", transform.ErrLimit, len(l.Digest), len(Digesters))}
	}
	for k, name := range l.Digest {
		field := fmt.Sprintf("digest[%d]", k)
		if _, ok := digesterByName[name]; !ok {
			return transform.Fieldf(field, "unknown digester %q (want one of %s)", name, strings.Join(Digesters, " "))
		}
		if slices.Contains(l.Digest[:k], name) {
			return transform.Fieldf(field, "%s is listed twice", name)
		}
	}
	f, err := checkField("field", l.Field, "value", transform.TypeNumber)
	if err != nil {
		return err
	}
	l.Field = f.Name
	return checkBy("by", l.By)
}

// Level returns the level that applies at fill ratio fill: the highest
// whose Above is at most fill, or nil when none is.
func (p *Policy) Level(fill float64) *Level {
	var lv *Level
	for i := range p.Levels {
		if p.Levels[i].Above <= fill {
			lv = &p.Levels[i]
		}
	}
	return lv
}

// Apply reduces the items over capacity (oldest first) at fill ratio
// fill. The level that applies (see Level) runs its filters in sequence
// over the items; what they keep is returned in keep, and what they drop
// is summarised by the level's digesters, one digest item per digester
// and group. No level applying means plain deletion: nothing is kept or
// digested.
//
// Digest ids are stable per scope (the feed), digester, field and group,
// so a later reduction's digest replaces the earlier one when stored. The
// earlier digest is merged in when it is among items: digests live in
// the same feed as the items and age like them, and when one is itself
// over capacity it is merged into the new digest of its digester and
// group (emitted even when no new item of that group was dropped). Such
// a digest whose digester the level does not run (or of another field)
// is kept as it is; it never goes through the filters. Other items with
// a digest (a pipe's digests, say) are ordinary items here: filtered,
// and merged whole into the new digest when dropped.
func (p *Policy) Apply(c *transform.Context, scope string, fill float64, items []Item) (keep, digests []Item, err error) {
	lv := p.Level(fill)
	if lv == nil || len(items) == 0 {
		return nil, nil, nil
	}
	// Earlier digests of this policy are set aside; the rest are the
	// queue, whose Seq is replaced by the item's index to track it
	// through the filters.
	carry := make([]string, len(items)) // digester whose digest items[i] carries
	own := make([]bool, len(items))     // items[i] is set aside
	work := make([]Item, 0, len(items))
	for i := range items {
		if err := checkErr(c, i); err != nil {
			return nil, nil, err
		}
		it := &items[i]
		if name, ok := ownDigest(c, scope, it); ok {
			own[i] = true
			if it.Digest.Field == lv.Field && slices.Contains(lv.Digest, name) {
				carry[i] = name
			} else {
				keep = append(keep, *it)
			}
			continue
		}
		w := *it
		w.Seq = uint64(i)
		work = append(work, w)
	}
	kept := make([]bool, len(items))
	if len(lv.ops) > 0 {
		cur := work
		for j, op := range lv.ops {
			if d, ok := op.(*delta); ok {
				op = d.fresh()
			}
			if cur, err = op.Apply(c, [][]Item{cur}); err != nil {
				return nil, nil, fmt.Errorf("pack: %s (filter %d of level %v): %w", lv.Filters[j].Op, j, lv.Above, err)
			}
		}
		for _, w := range cur {
			if w.Seq < uint64(len(items)) {
				kept[w.Seq] = true
			}
		}
	}
	for i := range items {
		if kept[i] {
			keep = append(keep, items[i])
		}
	}
	for _, name := range lv.Digest {
		gs := newGrouping(lv.Field, lv.By)
		for i := range items {
			if err := checkErr(c, i); err != nil {
				return nil, nil, err
			}
			if carry[i] == name || !own[i] && !kept[i] {
				if err := gs.add(&items[i]); err != nil {
					return nil, nil, fmt.Errorf("pack: %s digest of level %v: %w", name, lv.Above, err)
				}
			}
		}
		for _, g := range gs.groups {
			digests = append(digests, digestItem(c, name, g, digestID(c, scope, name, lv.Field, g.name)))
		}
	}
	return keep, digests, nil
}

// digestID is the id of the digest item a policy makes in scope.
func digestID(c *transform.Context, scope, name, field, group string) string {
	return c.DeriveID("reduce", scope, name, field, group)
}

// ownDigest reports whether it is a digest item that a policy made in
// scope, and by which digester: its id is the one the digester, field
// and group (its reading's sensor) give.
func ownDigest(c *transform.Context, scope string, it *Item) (string, bool) {
	if it.Digest == nil || it.Reading == nil {
		return "", false
	}
	for _, cat := range it.Categories {
		name, ok := strings.CutPrefix(cat, "digest:")
		if !ok {
			continue
		}
		if _, known := digesterByName[name]; known && it.ID == digestID(c, scope, name, it.Digest.Field, it.Reading.Sensor) {
			return name, true
		}
	}
	return "", false
}

// Fill is the fill ratio of a feed of capacity maxItems holding over
// items beyond it: (maxItems + over) / maxItems, or 1 without a
// capacity.
func Fill(r storage.Retention, over int) float64 {
	if r.MaxItems <= 0 {
		return 1
	}
	return float64(r.MaxItems+over) / float64(r.MaxItems)
}
