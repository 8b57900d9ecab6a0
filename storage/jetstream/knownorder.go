package jetstream

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// The index of a feed keeps its stored items ordered twice: by sequence
// (bySeq, entries of sequence and sort time, 16 bytes), where a page by
// arrival starts, and by sort time then sequence (byAt, sequences, 8
// bytes, whose sort times are bySeq's: a search of byAt searches bySeq
// at each step), where the newest by publish time are. Both are sorted
// slices, brought up to date after each change of the index (settle): a
// new item is usually appended (sensor readings arrive in order), a
// removed one is usually the first (retention removes the oldest), and
// both cost O(1) there besides the searches; elsewhere they move the
// shorter side of the slice. Changes of many entries at once (an index
// read from the stream, retention of many items) are merged or filtered
// in one pass.

// knownEntry is a stored item's sequence and sort time.
type knownEntry struct {
	seq uint64 // stream sequence; 0: removed by retention
	at  int64  // sort time (sortNanos)
}

func bySeqOrder(a, b knownEntry) int { return cmp.Compare(a.seq, b.seq) }

func byAtOrder(a, b knownEntry) int {
	if c := cmp.Compare(a.at, b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// Sort times are Unix nanoseconds, which hold the times from minNanos to
// maxNanos (the years 1678 to 2262). A time outside is held as the bound
// it is beyond (math.MinInt64 or math.MaxInt64): its order against the
// times inside is kept, not its order against other times beyond the
// same bound.
var (
	minNanos = time.Unix(0, math.MinInt64)
	maxNanos = time.Unix(0, math.MaxInt64)
)

// sortNanos is t as an index sort time.
func sortNanos(t time.Time) int64 {
	switch {
	case t.Before(minNanos):
		return math.MinInt64
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// bound reports whether the sort time at stands for any time at or
// beyond one end of what Unix nanoseconds hold.
func bound(at int64) bool { return at == math.MinInt64 || at == math.MaxInt64 }

// timeHeader is the ItemTimeHeader value of an item of sort time t. A
// time Unix nanoseconds hold is written as a signed integer with a sign
// ("+5", "-05"): integer parsers read it as before, and its form vouches
// that it is t (parseTimeHeader). A time beyond is written in RFC 3339,
// which readers of integers do not parse: they read the item.
func timeHeader(t time.Time) string {
	ns := sortNanos(t)
	switch {
	case bound(ns):
		return t.UTC().Format(time.RFC3339Nano)
	case ns < 0:
		return "-0" + strconv.FormatInt(-ns, 10)
	}
	return "+" + strconv.FormatInt(ns, 10)
}

// parseTimeHeader reads an ItemTimeHeader value as a sort time; loose
// when the value is an integer without the sign timeHeader writes
// (written by an earlier version of slogfeed, as the time's UnixNano,
// which for a time beyond what Unix nanoseconds hold is another time);
// false when it is neither form.
func parseTimeHeader(v string) (at int64, loose, ok bool) {
	if ns, err := strconv.ParseInt(v, 10, 64); err == nil {
		return ns, !strings.HasPrefix(v, "+") && !strings.HasPrefix(v, "-0"), true
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, false, false
	}
	return sortNanos(t), false, true
}

// span is a window of times [Since, Until) as index sort times: an entry
// whose sort time is in [lo, hi] may hold an item in the window, one
// outside holds none (bounds included: a time beyond maxNanos may be
// before Until only when Until is beyond maxNanos too). A loose entry
// may hold an item in any window.
type span struct{ lo, hi int64 }

// allTime is the span without Since and Until.
var allTime = span{math.MinInt64, math.MaxInt64}

// spanOf is the span of [since, until) (zero: no bound).
func spanOf(since, until time.Time) span {
	sp := allTime
	switch {
	case since.IsZero() || !since.After(minNanos):
	case since.After(maxNanos):
		sp.lo = math.MaxInt64
	default:
		sp.lo = since.UnixNano()
	}
	switch {
	case until.IsZero() || until.After(maxNanos):
	case !until.After(minNanos):
		sp.hi = math.MinInt64
	default:
		sp.hi = until.UnixNano() - 1
	}
	return sp
}

func (sp span) all() bool           { return sp == allTime }
func (sp span) holds(at int64) bool { return sp.lo <= at && at <= sp.hi }

// knownPending are the changes of a feed's index not yet in its orders.
type knownPending struct {
	put, drop []knownEntry
	// at maps the sequences of put to their sort times (the last put of
	// each) once a lookup (knownFeed.atOf) finds put longer than
	// pendingScan; nil until then.
	at map[uint64]int64
	// scanned counts the entries of put that lookups looked through.
	scanned uint64
}

// pendingScan is how many pending entries a lookup of a sort time looks
// through; beyond it, it looks in a map.
const pendingScan = 64

// addPut records e as put.
func (p *knownPending) addPut(e knownEntry) {
	p.put = append(p.put, e)
	if p.at != nil {
		p.at[e.seq] = e.at
	}
}

// atOf returns the sort time of the last entry put at seq.
func (p *knownPending) atOf(seq uint64) (int64, bool) {
	if p.at == nil && len(p.put) > pendingScan {
		p.at = make(map[uint64]int64, len(p.put))
		for _, e := range p.put {
			p.at[e.seq] = e.at
		}
		p.scanned += uint64(len(p.put))
	}
	if p.at != nil {
		at, ok := p.at[seq]
		return at, ok
	}
	for i := len(p.put) - 1; i >= 0; i-- {
		p.scanned++
		if p.put[i].seq == seq {
			return p.put[i].at, true
		}
	}
	return 0, false
}

// settle brings bySeq and byAt up to date with the entries put and
// dropped since.
func (f *knownFeed) settle() {
	put, drop := f.pend.put, f.pend.drop
	f.pend.put, f.pend.drop, f.pend.at = put[:0], drop[:0], nil
	if cap(put) > 64 {
		f.pend.put = nil
	}
	if cap(drop) > 64 {
		f.pend.drop = nil
	}
	if len(drop) > 0 {
		// An entry put and dropped since is in neither slice.
		rest := drop[:0]
		if len(put) <= pendingScan {
			for _, e := range drop {
				if i := slices.Index(put, e); i >= 0 {
					put = slices.Delete(put, i, i+1)
					continue
				}
				rest = append(rest, e)
			}
		} else {
			in := make(map[knownEntry]int, len(put))
			for _, e := range put {
				in[e]++
			}
			both := map[knownEntry]int{}
			for _, e := range drop {
				if in[e] > 0 {
					in[e]--
					both[e]++
					continue
				}
				rest = append(rest, e)
			}
			if len(both) > 0 {
				put = slices.DeleteFunc(put, func(e knownEntry) bool {
					if both[e] > 0 {
						both[e]--
						return true
					}
					return false
				})
			}
		}
		f.dropByAt(rest) // while bySeq holds their sort times
		f.bySeq = dropSorted(f.bySeq, rest, bySeqOrder)
	}
	if len(put) > 0 {
		f.bySeq = putSorted(f.bySeq, put, bySeqOrder)
		f.putByAt(put) // once bySeq holds their sort times
	}
}

// atCmp compares the stored item at seq with e by sort time, then
// sequence.
func (f *knownFeed) atCmp(seq uint64, e knownEntry) int {
	return byAtOrder(knownEntry{seq: seq, at: f.atOf(seq)}, e)
}

// searchAt is where e is or would be in byAt, and whether it is there.
func (f *knownFeed) searchAt(s []uint64, e knownEntry) (int, bool) {
	return slices.BinarySearchFunc(s, e, f.atCmp)
}

// putByAt inserts the entries put into byAt.
func (f *knownFeed) putByAt(put []knownEntry) {
	if len(put) <= 8 {
		for _, e := range put {
			if n := len(f.byAt); n == 0 || f.atCmp(f.byAt[n-1], e) < 0 {
				f.byAt = append(f.byAt, e.seq) // the newest: a reading as it arrives
				continue
			}
			i, _ := f.searchAt(f.byAt, e)
			f.byAt = slices.Insert(f.byAt, i, e.seq)
		}
		return
	}
	put = slices.Clone(put)
	slices.SortFunc(put, byAtOrder)
	s := f.byAt
	if len(s) == 0 || f.atCmp(s[len(s)-1], put[0]) < 0 {
		for _, e := range put {
			s = append(s, e.seq)
		}
		f.byAt = s
		return
	}
	out := make([]uint64, 0, len(s)+len(put))
	i, j := 0, 0
	for i < len(s) && j < len(put) {
		if f.atCmp(s[i], put[j]) > 0 {
			out = append(out, put[j].seq)
			j++
		} else {
			out = append(out, s[i])
			i++
		}
	}
	out = append(out, s[i:]...)
	for _, e := range put[j:] {
		out = append(out, e.seq)
	}
	f.byAt = out
}

// dropByAt removes the entries drop from byAt; entries it does not hold
// are ignored.
func (f *knownFeed) dropByAt(drop []knownEntry) {
	s := f.byAt
	if len(drop) > 8 {
		gone := make(map[uint64]struct{}, len(drop))
		for _, e := range drop {
			gone[e.seq] = struct{}{}
		}
		f.byAt = slices.DeleteFunc(s, func(seq uint64) bool {
			_, ok := gone[seq]
			return ok
		})
		return
	}
	for _, e := range drop {
		if len(s) > 0 && s[0] == e.seq {
			s = s[1:] // the oldest: what retention removes
			continue
		}
		i, ok := f.searchAt(s, e)
		s = dropAt(s, i, ok)
	}
	f.byAt = s
}

// dropAt removes s[i] when ok, the first ones without moving the others
// (the slice starts later).
func dropAt[T any](s []T, i int, ok bool) []T {
	switch {
	case !ok:
	case i < len(s)/2:
		copy(s[1:i+1], s[:i])
		s = s[1:]
	default:
		s = slices.Delete(s, i, i+1)
	}
	return s
}

// putSorted inserts the entries put into s, sorted by order.
func putSorted(s, put []knownEntry, order func(a, b knownEntry) int) []knownEntry {
	if len(put) <= 8 {
		for _, e := range put {
			i, _ := slices.BinarySearchFunc(s, e, order)
			s = slices.Insert(s, i, e)
		}
		return s
	}
	put = slices.Clone(put)
	slices.SortFunc(put, order)
	if len(s) == 0 || order(s[len(s)-1], put[0]) < 0 {
		return append(s, put...)
	}
	out := make([]knownEntry, 0, len(s)+len(put))
	i, j := 0, 0
	for i < len(s) && j < len(put) {
		if order(put[j], s[i]) < 0 {
			out = append(out, put[j])
			j++
		} else {
			out = append(out, s[i])
			i++
		}
	}
	out = append(out, s[i:]...)
	return append(out, put[j:]...)
}

// dropSorted removes the entries drop from s, sorted by order; entries s
// does not hold are ignored. The first entries go without moving the
// others (the slice starts later).
func dropSorted(s, drop []knownEntry, order func(a, b knownEntry) int) []knownEntry {
	if len(drop) > 8 {
		gone := make(map[knownEntry]struct{}, len(drop))
		for _, e := range drop {
			gone[e] = struct{}{}
		}
		return slices.DeleteFunc(s, func(e knownEntry) bool {
			_, ok := gone[e]
			return ok
		})
	}
	for _, e := range drop {
		i, ok := slices.BinarySearchFunc(s, e, order)
		s = dropAt(s, i, ok)
	}
	return s
}

// nthNewest returns the sequence of the n-th newest stored item (by
// sequence) of the feed's index among those below sequence below (no
// bound when 0) that may be in sp (span); false when the index holds
// fewer or the feed has no index. Without a window it is a binary search
// of bySeq; with one it walks bySeq back from below until it has n.
func (k *known) nthNewest(feedID uint64, n int, below uint64, sp span) (uint64, bool) {
	if n <= 0 {
		return 0, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok || len(f.bySeq) < n {
		return 0, false
	}
	end := len(f.bySeq)
	if below != 0 {
		end, _ = slices.BinarySearchFunc(f.bySeq, knownEntry{seq: below}, bySeqOrder)
	}
	if sp.all() {
		if end < n {
			return 0, false
		}
		return f.bySeq[end-n].seq, true
	}
	for i := end - 1; i >= 0; i-- {
		if e := f.bySeq[i]; sp.holds(e.at) || f.isLoose(e.seq) {
			if n--; n == 0 {
				return e.seq, true
			}
		}
	}
	return 0, false
}

// seqRun is a run of a feed's stored items, consecutive in its subject
// as far as the index knows: the sequences in it, of which want are the
// ones a read needs (the others lie between them).
type seqRun struct {
	from uint64 // where a read starts: the first of seqs, or after the index (tail alone)
	seqs []uint64
	want []uint64
	// tail: the run ends with the last item the index holds, and a read
	// of it takes the messages after it too (published since the index
	// was synced).
	tail bool
	// after: of the tail run, the index's own entries after the sequence
	// it is complete up to (this node's items stored since), each of
	// which its read must find.
	after []uint64
}

// runGap is how many items that are not wanted a run may hold between
// two that are: reading them costs less than another request.
const runGap = 8

// newestByTime returns where the items that may be the limit newest by
// sort time (then sequence) in sp (all of them when limit ≤ 0) are in
// the feed's subject, as runs of sequences in order: from byAt, the
// limit newest entries in sp that hold an exact sort time, every entry
// of the upper bound in sp, those of the lower bound when the exact ones
// are fewer than limit, and every loose entry. Beside the entries, the
// items published after the index was synced may be (seqRun.tail). It
// returns false when the index cannot tell: the feed has no index, a
// message may be missing from it (shadow), or more than most entries
// (without a limit, more than half the feed's) would be read. upTo is
// the sequence the index is complete up to: a message of the subject at
// or below it that is not in a run's seqs is not one the index knows;
// the runs hold none after it, where the index has after entries (this
// node's own items, stored since the index was last synced) and the
// subject may have more: the read of the tail takes them all.
func (k *known) newestByTime(feedID uint64, limit int, sp span, most int) (runs []seqRun, upTo uint64, after int, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok || f.shadow {
		return nil, 0, 0, false
	}
	k.touch(f)
	if limit <= 0 {
		most = min(most, len(f.bySeq)/2)
	}
	if len(f.loose) > most {
		return nil, 0, 0, false
	}
	lo, _ := f.searchAt(f.byAt, knownEntry{at: sp.lo})
	hi := len(f.byAt)
	if sp.hi != math.MaxInt64 {
		hi, _ = f.searchAt(f.byAt, knownEntry{at: sp.hi + 1})
	}
	// Whether an entry of a bound is in the window is not known, nor is
	// a loose entry's sort time: they are read, and the limit newest of
	// the others, then the entries of the lower bound only when the
	// others are fewer than limit.
	exactLo, _ := f.searchAt(f.byAt[lo:hi], knownEntry{at: math.MinInt64 + 1})
	exactHi, _ := f.searchAt(f.byAt[lo:hi], knownEntry{at: math.MaxInt64})
	exactLo, exactHi = lo+exactLo, lo+exactHi
	from := lo
	switch {
	case limit <= 0:
	case f.loose == nil:
		if exactHi-exactLo >= limit {
			from = exactHi - limit
		}
	default:
		for i, n := exactHi-1, 0; i >= exactLo; i-- {
			if f.isLoose(f.byAt[i]) {
				continue
			}
			if n++; n == limit {
				from = i
				break
			}
		}
	}
	if hi-from+len(f.loose) > most {
		return nil, 0, 0, false
	}
	// The entries after lastSeq (stored by this node since the last
	// sync) are read with the tail, whatever they are.
	cut, _ := slices.BinarySearchFunc(f.bySeq, knownEntry{seq: f.lastSeq + 1}, bySeqOrder)
	want := make([]uint64, 0, hi-from+len(f.loose))
	for _, seq := range f.byAt[from:hi] {
		if seq <= f.lastSeq {
			want = append(want, seq)
		}
	}
	for seq := range f.loose {
		if seq <= f.lastSeq {
			want = append(want, seq)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	runs, ok = f.runsOf(want, cut, true)
	return runs, f.lastSeq, len(f.bySeq) - cut, ok
}

// newestByArrival is newestByTime for the limit newest items by arrival
// (sequence) below sequence below (no bound when 0) that are in sp when
// the query is windowed (it has Since or Until, which sp may hold as the
// whole range when they lie beyond the years Unix nanoseconds hold): one
// run of every entry from the limit-th newest below below whose sort
// time is exact and in sp (from the first entry when fewer are) up to
// below, and the items published after the index was synced when below
// is past the sequence it is complete up to. Entries whose sort times
// are not known to be in or out of sp (loose ones, the bounds) are in
// the run, as are those out of sp between the others: the read's query
// drops them. It returns false when the index cannot tell, or the run
// would hold more than most entries.
func (k *known) newestByArrival(feedID uint64, limit int, below uint64, sp span, windowed bool, most int) (runs []seqRun, upTo uint64, after int, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.feeds[feedID]
	if !ok || f.shadow || limit <= 0 {
		return nil, 0, 0, false
	}
	k.touch(f)
	cut, _ := slices.BinarySearchFunc(f.bySeq, knownEntry{seq: f.lastSeq + 1}, bySeqOrder)
	end, tail := cut, below == 0 || below > f.lastSeq
	if !tail {
		end, _ = slices.BinarySearchFunc(f.bySeq[:cut], knownEntry{seq: below}, bySeqOrder)
	}
	from := 0
	for i, n := end-1, 0; i >= 0; i-- {
		if end-i > most {
			return nil, 0, 0, false
		}
		e := f.bySeq[i]
		if windowed && (f.isLoose(e.seq) || bound(e.at) || !sp.holds(e.at)) {
			continue
		}
		if n++; n == limit {
			from = i
			break
		}
	}
	if end-from > most {
		return nil, 0, 0, false
	}
	runs, ok = f.runsOf(seqsOf(f.bySeq[from:end]), cut, tail)
	return runs, f.lastSeq, len(f.bySeq) - cut, ok
}

// runsOf cuts want, sequences of entries in bySeq at or below lastSeq
// in order, into runs of consecutive entries, a run going on while the
// gap to the next wanted one is at most runGap entries; cut is where
// bySeq passes lastSeq. With tail, the last run also reads the messages
// published after the index was synced, and those of bySeq after cut
// (this node's own) must be among them. It returns false when a wanted
// sequence is not an entry, which cannot happen while the index is
// consistent.
func (f *knownFeed) runsOf(want []uint64, cut int, tail bool) ([]seqRun, bool) {
	var runs []seqRun
	start, prev := -1, -1
	flush := func(end int, w []uint64) {
		seqs := seqsOf(f.bySeq[start : end+1])
		runs = append(runs, seqRun{from: seqs[0], seqs: seqs, want: w})
	}
	first := 0
	for i, seq := range want {
		at, ok := slices.BinarySearchFunc(f.bySeq[:cut], knownEntry{seq: seq}, bySeqOrder)
		if !ok {
			return nil, false
		}
		if start >= 0 && at-prev > runGap+1 {
			flush(prev, want[first:i])
			start, first = -1, i
		}
		if start < 0 {
			start = at
		}
		prev = at
	}
	if start >= 0 {
		flush(prev, want[first:])
	}
	if !tail {
		return runs, true
	}
	if n := len(runs); n == 0 || prev != cut-1 {
		// Nothing wanted at the end of the index: the tail is read on its own.
		runs = append(runs, seqRun{from: f.lastSeq + 1})
	}
	last := &runs[len(runs)-1]
	last.tail = true
	if cut < len(f.bySeq) {
		last.after = seqsOf(f.bySeq[cut:])
	}
	return runs, true
}

func seqsOf(es []knownEntry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.seq
	}
	return out
}

// vouch sets the sort times of the feed's loose entries from the items
// read whole (with their Seq): the entry of an item's key at its
// sequence holds its sort time and is no longer loose.
func (k *known) vouch(feedID uint64, items []storage.Item) {
	k.mu.Lock()
	f, ok := k.feeds[feedID]
	var loose []*storage.Item
	if ok && f.loose != nil {
		for i := range items {
			if f.isLoose(items[i].Seq) {
				loose = append(loose, &items[i])
			}
		}
	}
	k.mu.Unlock()
	if len(loose) == 0 {
		return
	}
	keys := make([]string, len(loose)) // hashed outside the lock
	for i, it := range loose {
		keys[i] = MsgID(feedID, it.ID)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok = k.feeds[feedID]; !ok {
		return
	}
	for i, it := range loose {
		if seq, ok := f.items[keys[i]]; ok && seq == it.Seq && f.isLoose(it.Seq) {
			f.put(knownItem{key: keys[i], seq: it.Seq, at: sortNanos(sortTime(it))})
		}
	}
	f.settle()
}
