package feedlist

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

const (
	// DefaultLimit is a page's size when the request names none.
	DefaultLimit = 100
	// MaxLimit is the largest page a request may ask for.
	MaxLimit = 1000
	// maxText bounds the text filter and the policy name, in bytes.
	maxText = 256
	// StarvedLag is how far past its planned fetch a remote feed must be
	// to count as starved: the scheduler is not reaching it (a fetch
	// budget too small for the fleet, or a loop that has stalled).
	StarvedLag = time.Minute
)

// The statuses a filter may ask for.
const (
	Erroring = "erroring"
	Starved  = "starved"
)

// QueryError is Parse's error: what is wrong with which parameter, in
// words fit for the client.
type QueryError struct{ Msg string }

func (e *QueryError) Error() string { return e.Msg }

// Filter is what a request for a page of feeds asks for.
type Filter struct {
	Limit int
	After uint64 // the page starts after this feed ID (0: at the start)
	// Before, when set, asks for the page that ends before this feed ID
	// instead: the last Limit feeds below it, or the first page when no
	// more than Limit feeds come before it. After is then 0.
	Before uint64
	Text   string // text sought, any case, in the title, slug or URL
	Status string // "", Erroring or Starved
	Policy string
	Kind   storage.Kind // "" for every kind
}

// Next tells when a feed's next fetch is planned (ok false: not planned).
type Next func(id uint64) (t time.Time, ok bool)

// Planner tells when the feeds' next fetches are planned
// (aggregator.Service).
type Planner interface {
	NextFetch(id uint64) (t time.Time, ok bool)
}

// OverduePlanner is a Planner that keeps its feeds in order of planned
// fetch (aggregator.Service): Overdue returns, in any order, the feeds
// whose planned fetch is before before and not yet made. The starved
// feeds are then counted and listed at a cost that grows with the
// overdue feeds, not with the fleet.
type OverduePlanner interface {
	Planner
	Overdue(before time.Time) []uint64
}

// nextOf is p's NextFetch, nil without a planner.
func nextOf(p Planner) Next {
	if p == nil {
		return nil
	}
	return p.NextFetch
}

// starvedIDs returns the starved feeds in order of ID, when p keeps its
// feeds in order of planned fetch (ok false otherwise): the feeds
// planned more than StarvedLag before now and not fetched since.
func starvedIDs(p Planner, now time.Time) (ids []uint64, ok bool) {
	o, ok := p.(OverduePlanner)
	if !ok {
		return nil, false
	}
	ids = o.Overdue(now.Add(-StarvedLag))
	slices.Sort(ids)
	return slices.Compact(ids), true
}

// Parse reads a filter from a request's query (limit, cursor or before,
// q, status, policy, kind). Its error is a *QueryError naming the bad
// parameter.
func Parse(q url.Values) (Filter, error) {
	f := Filter{Limit: DefaultLimit}
	bad := func(format string, args ...any) (Filter, error) {
		return f, &QueryError{fmt.Sprintf(format, args...)}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return bad("limit must be an integer from 1 to %d", MaxLimit)
		}
		f.Limit = n
	}
	if s := q.Get("cursor"); s != "" {
		id, ok := decodeCursor(s)
		if !ok {
			return bad("cursor is not one this server gave (take next_cursor from the previous page)")
		}
		f.After = id
	}
	if s := q.Get("before"); s != "" {
		if f.After != 0 {
			return bad("give cursor (the page after) or before (the page before), not both")
		}
		id, ok := decodeCursor(s)
		if !ok {
			return bad("before is not a cursor this server gave (take prev_cursor from the page after)")
		}
		f.Before = id
	}
	if s := strings.TrimSpace(q.Get("q")); s != "" {
		if len(s) > maxText || !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
			return bad("q must be valid UTF-8 of at most %d bytes, without control characters", maxText)
		}
		f.Text = strings.ToLower(s)
	}
	switch s := q.Get("status"); s {
	case "", Erroring, Starved:
		f.Status = s
	default:
		return bad("status must be %s or %s", Erroring, Starved)
	}
	switch k := storage.Kind(q.Get("kind")); k {
	case "", storage.KindRemote, storage.KindSensor, storage.KindPipe:
		f.Kind = k
	default:
		return bad("kind must be %s, %s or %s", storage.KindRemote, storage.KindSensor, storage.KindPipe)
	}
	f.Policy = q.Get("policy")
	if len(f.Policy) > maxText {
		return bad("policy is too long")
	}
	if f.Policy != "" {
		if _, err := schedule.ByName(f.Policy, 0); err != nil {
			return bad("policy %q is not a policy slogfeed knows (%s, fixed-<duration>, cron:<spec>)", f.Policy, strings.Join(schedule.PolicyNames, ", "))
		}
	}
	return f, nil
}

// Query is the filter's query without the page bounds, for links.
func (ff Filter) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"q": ff.Text, "status": ff.Status, "policy": ff.Policy, "kind": string(ff.Kind)} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if ff.Limit != DefaultLimit {
		q.Set("limit", strconv.Itoa(ff.Limit))
	}
	return q
}

// Match reports whether feed f passes the filters (not the page bounds).
// Text is sought in the URL without its credentials, so that a search
// cannot probe a secret (storage.FeedSummary.Text); Policy keeps every
// spelling of the policy (schedule.PolicyKey).
func (ff Filter) Match(f *storage.FeedSummary, next Next, now time.Time) bool {
	if ff.Policy != "" && schedule.PolicyKey(f.Policy) != schedule.PolicyKey(ff.Policy) ||
		ff.Kind != "" && f.Kind != ff.Kind {
		return false
	}
	switch ff.Status {
	case Erroring:
		if !f.Erroring {
			return false
		}
	case Starved:
		if !IsStarved(f, next, now) {
			return false
		}
	}
	return ff.Text == "" || strings.Contains(f.Text, ff.Text)
}

// summaryFilter is ff for storage.Store.MatchFeeds.
func (ff Filter) summaryFilter(next Next, now time.Time) storage.SummaryFilter {
	f := storage.SummaryFilter{Text: ff.Text, Policy: ff.Policy, Kind: ff.Kind, Erroring: ff.Status == Erroring}
	if ff.Status == Starved {
		f.Keep = starved(next, now)
		if ff.Kind == "" {
			f.Kind = storage.KindRemote
		} else if ff.Kind != storage.KindRemote {
			f.Keep = func(uint64) bool { return false } // only remote feeds starve
		}
	}
	return f
}

// starved tells whether a remote feed is starved (IsStarved).
func starved(next Next, now time.Time) func(id uint64) bool {
	return func(id uint64) bool {
		if next == nil {
			return false
		}
		t, ok := next(id)
		return ok && now.Sub(t) > StarvedLag
	}
}

// unfiltered reports whether ff keeps every feed.
func (ff Filter) unfiltered() bool {
	return ff.Text == "" && ff.Status == "" && ff.Policy == "" && ff.Kind == ""
}

// IsStarved reports whether remote feed f is overdue by more than
// StarvedLag: its planned fetch has passed and the scheduler has not
// granted it.
func IsStarved(f *storage.FeedSummary, next Next, now time.Time) bool {
	if f.Kind != storage.KindRemote || next == nil {
		return false
	}
	t, ok := next(f.ID)
	return ok && now.Sub(t) > StarvedLag
}

// Walk calls fn with the summary of every feed in order of ID until fn
// returns false (storage.Store.EachFeedSummary).
type Walk func(fn func(*storage.FeedSummary) bool) error

// FromFeeds walks feeds, which are in order of ID: for a store that
// keeps no summaries.
func FromFeeds(feeds []storage.Feed) Walk {
	return func(fn func(*storage.FeedSummary) bool) error {
		for i := range feeds {
			s := storage.SummaryOf(&feeds[i])
			if !fn(&s) {
				break
			}
		}
		return nil
	}
}

// Index is a store that keeps its feeds' summaries and the fleet's
// aggregates in memory, up to date with its writes (storage.Store): an
// unfiltered page and the aggregates cost the same whatever the number
// of feeds, and a filter walks summaries without reading a record.
type Index interface {
	storage.Summaries
	FeedIDsAfter(after uint64, limit int) (ids []uint64, more bool, err error)
	FeedIDsBefore(before uint64, limit int) (ids []uint64, more bool, err error)
	EachMatchingFeed(f storage.SummaryFilter, fn func(id uint64) bool) error
	FleetStats() (storage.FleetStats, error)
}

// Warm builds the summaries st keeps when it is an Index (they are built
// on its first read, by a walk of every record) and returns how many
// feeds it holds; ok is false for a store that keeps none. A server calls
// it in the background once its feeds are scheduled, so that the first
// page it serves after a start does not wait for the walk.
func Warm(st Lister) (feeds int, ok bool, err error) {
	x, ok := st.(Index)
	if !ok {
		return 0, false, nil
	}
	stats, err := x.FleetStats()
	if err != nil {
		return 0, true, err
	}
	return stats.Feeds, true, nil
}

// Lister is any store: it reads every feed.
type Lister interface {
	Feeds() ([]storage.Feed, error)
	Feed(id uint64) (storage.Feed, error)
}

// WalkOf walks st's feeds: its summaries when it keeps them, else every
// record read whole.
func WalkOf(st Lister) Walk {
	if x, ok := st.(Index); ok {
		return x.EachFeedSummary
	}
	return func(fn func(*storage.FeedSummary) bool) error {
		feeds, err := st.Feeds()
		if err != nil {
			return err
		}
		return FromFeeds(feeds)(fn)
	}
}

// Load reads the page's feeds from st, leaving out any deleted since the
// page was cut.
func Load(st Lister, p Page) ([]storage.Feed, error) {
	out := make([]storage.Feed, 0, len(p.IDs))
	for _, id := range p.IDs {
		f, err := st.Feed(id)
		if errors.Is(err, storage.ErrFeedNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// Page is one page of the feeds that match a filter.
type Page struct {
	IDs []uint64 // the page's feeds, in order
	// Total counts every feed that matches the filter, on all pages.
	Total int
	// Cursor asks for the page after this one; "" on the last page.
	Cursor string
	// Prev asks for the page before this one (Filter.Before); "" on the
	// first page. PrevFirst: that page is the first page (no more than a
	// page's worth of feeds come before this one), which a link may name
	// without a cursor.
	Prev      string
	PrevFirst bool
}

// Fleet sums up every feed.
type Fleet struct {
	Feeds, Remote     int
	Polls, Hits       int64
	Erroring, Starved int
	HitPct            float64 // of all polls; 0 before any
	LatencyFeeds      int     // feeds with a measured latency
	// Quantiles over feeds of each feed's mean use latency, in seconds.
	MeanP50, MeanP90, MeanP99, MeanMax float64
}

// List cuts the page ff asks for from st's feeds, plans telling when they
// are fetched next: from the summaries of an Index (an unfiltered page,
// after a cursor or before one, in time independent of the number of
// feeds, a filtered one by a walk of the summaries in memory, the
// starved feeds alone from an OverduePlanner without a walk), else from
// all its feeds.
func List(st Lister, ff Filter, plans Planner, now time.Time) (Page, error) {
	next := nextOf(plans)
	x, ok := st.(Index)
	if !ok {
		p, _, err := Read(WalkOf(st), ff, next, now, false)
		return p, err
	}
	if ff.Status == Starved {
		if ids, ok := starvedIDs(plans, now); ok {
			return listStarved(x, ff, ids)
		}
	}
	if !ff.unfiltered() {
		return match(x, ff.summaryFilter(next, now), ff)
	}
	stats, err := x.FleetStats()
	if err != nil {
		return Page{}, err
	}
	p, err := listAll(x, ff)
	p.Total = stats.Feeds
	return p, err
}

// listAll cuts the unfiltered page ff asks for from x's IDs, reading
// forward from ff.After or backward from ff.Before, and backward from the
// page's first feed for the page before: a few reads of the index, each
// of a page.
func listAll(x Index, ff Filter) (Page, error) {
	var (
		p        Page
		more     bool // feeds follow the page
		backward bool // the page was read backward from ff.Before
	)
	limit, after := max(1, ff.Limit), ff.After
	if ff.Before != 0 {
		ids, earlier, err := x.FeedIDsBefore(ff.Before, limit)
		if err != nil {
			return Page{}, err
		}
		if earlier {
			if _, more, err = x.FeedIDsAfter(ids[len(ids)-1], 0); err != nil {
				return Page{}, err
			}
			p.IDs, backward = ids, true
		} // else no more than a page before: the first page
	}
	if !backward {
		var err error
		if p.IDs, more, err = x.FeedIDsAfter(after, limit); err != nil {
			return Page{}, err
		}
	}
	if more && len(p.IDs) > 0 {
		p.Cursor = EncodeCursor(p.IDs[len(p.IDs)-1])
	}
	if !backward && after == 0 {
		return p, nil // the first page
	}
	bound := prevBound(p.IDs, after)
	prev, earlier, err := x.FeedIDsBefore(bound, limit)
	if err != nil {
		return Page{}, err
	}
	if len(prev) > 0 {
		p.Prev, p.PrevFirst = EncodeCursor(bound), !earlier
	}
	return p, nil
}

// prevBound is where the page before the page of ids, cut after after,
// ends: at its first feed, or after after when it is empty.
func prevBound(ids []uint64, after uint64) uint64 {
	if len(ids) > 0 {
		return ids[0]
	}
	return max(after+1, after) // not past the largest ID
}

// match cuts the page ff asks for from the feeds sf keeps, by a walk of
// x's summaries.
func match(x Index, sf storage.SummaryFilter, ff Filter) (Page, error) {
	c := newCutter(ff)
	if err := x.EachMatchingFeed(sf, func(id uint64) bool { c.add(id); return true }); err != nil {
		return Page{}, err
	}
	return c.page(), nil
}

// listStarved cuts the page ff (whose status is Starved) asks for from
// the starved feeds ids, in order of ID: directly when ff asks for
// nothing else, else by a walk of x's summaries that keeps those among
// the feeds the other filters keep.
func listStarved(x Index, ff Filter, ids []uint64) (Page, error) {
	if ff.Kind != "" && ff.Kind != storage.KindRemote {
		ids = nil // only remote feeds are planned, and starve
	}
	if ff.Text != "" || ff.Policy != "" {
		sf := ff.summaryFilter(nil, time.Time{})
		sf.Keep = func(id uint64) bool {
			_, found := slices.BinarySearch(ids, id)
			return found
		}
		return match(x, sf, ff)
	}
	c := newCutter(ff)
	for _, id := range ids {
		c.add(id)
	}
	return c.page(), nil
}

// cutter cuts the page a Filter asks for from the IDs of the feeds it
// keeps, handed to add in order of ID, in one pass and in memory bounded
// by the page: after ff.After, the first Limit IDs above it; before
// ff.Before, a ring of the last Limit IDs below it, with the first Limit
// IDs of all for when no more than those come before it (the first
// page). Either way it counts the IDs before the page, for its link to
// the page before.
type cutter struct {
	limit         int
	after, before uint64
	total         int
	ids           []uint64 // the page; before: a ring, its oldest at below%limit once full
	below         int      // IDs up to after; before: IDs below before
	more          bool     // after: an ID follows the page
	first         []uint64 // before: the first limit IDs
}

func newCutter(ff Filter) *cutter {
	return &cutter{limit: max(1, ff.Limit), after: ff.After, before: ff.Before}
}

func (c *cutter) add(id uint64) {
	c.total++
	if c.before == 0 {
		switch {
		case id <= c.after:
			c.below++
		case len(c.ids) < c.limit:
			c.ids = append(c.ids, id)
		default:
			c.more = true
		}
		return
	}
	if len(c.first) < c.limit {
		c.first = append(c.first, id)
	}
	if id < c.before {
		if len(c.ids) < c.limit {
			c.ids = append(c.ids, id)
		} else {
			c.ids[c.below%c.limit] = id
		}
		c.below++
	}
}

// page is the page cut once every ID was added.
func (c *cutter) page() Page {
	ids, preceding, more, after := c.ids, c.below, c.more, c.after
	if c.before != 0 {
		if c.below <= c.limit { // the first page
			ids, preceding, more = c.first, 0, c.total > len(c.first)
		} else {
			k := c.below % c.limit
			ids = append(slices.Clone(c.ids[k:]), c.ids[:k]...)
			preceding, more = c.below-c.limit, c.total > c.below
		}
	}
	p := Page{IDs: ids, Total: c.total}
	if more && len(ids) > 0 {
		p.Cursor = EncodeCursor(ids[len(ids)-1])
	}
	if preceding > 0 {
		p.Prev, p.PrevFirst = EncodeCursor(prevBound(ids, after)), preceding <= c.limit
	}
	return p
}

// StarvedEvery is how long a count of the starved feeds of an Index
// serves (Counter) when the planner does not keep its feeds in order of
// planned fetch: a feed counts as starved a StarvedLag after its planned
// fetch, so a count this much older says the same.
const StarvedEvery = 10 * time.Second

// Counter sums up an Index's fleet. It counts the starved feeds from an
// OverduePlanner at every call; from another Planner, which takes a walk
// of the summaries asking about every remote feed, at most once per
// StarvedEvery. The zero Counter is ready.
type Counter struct {
	mu      sync.Mutex
	at      time.Time
	starved int
	valid   bool
}

// Fleet sums up st's feeds, plans telling when they are fetched next: from
// an Index's aggregates (with the starved feeds counted now from an
// OverduePlanner, else as counted at most StarvedEvery before now), else
// by a walk of all its feeds.
func (c *Counter) Fleet(st Lister, plans Planner, now time.Time) (Fleet, error) {
	next := nextOf(plans)
	x, ok := st.(Index)
	if !ok {
		_, s, err := Read(WalkOf(st), Filter{Limit: 1}, next, now, true)
		return s, err
	}
	stats, err := x.FleetStats()
	if err != nil {
		return Fleet{}, err
	}
	s := Fleet{Feeds: stats.Feeds, Remote: stats.Remote, Polls: stats.Polls, Hits: stats.Hits, Erroring: stats.Erroring,
		LatencyFeeds: stats.LatencyFeeds, MeanP50: stats.LatencyP50, MeanP90: stats.LatencyP90,
		MeanP99: stats.LatencyP99, MeanMax: stats.LatencyMax}
	if s.Polls > 0 {
		s.HitPct = 100 * float64(s.Hits) / float64(s.Polls)
	}
	if o, ok := plans.(OverduePlanner); ok {
		s.Starved = len(o.Overdue(now.Add(-StarvedLag))) // each feed once
		return s, nil
	}
	if s.Starved, err = c.countStarved(x, next, now); err != nil {
		return Fleet{}, err
	}
	return s, nil
}

func (c *Counter) countStarved(x Index, next Next, now time.Time) (int, error) {
	if next == nil {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock() // one count at a time; the others wait for it
	if c.valid && !now.Before(c.at) && now.Sub(c.at) < StarvedEvery {
		return c.starved, nil
	}
	n := 0
	err := x.EachMatchingFeed(storage.SummaryFilter{Kind: storage.KindRemote, Keep: starved(next, now)}, func(uint64) bool { n++; return true })
	if err != nil {
		return 0, err
	}
	c.at, c.starved, c.valid = now, n, true
	return n, nil
}

// Read walks every feed once: the page of those ff keeps (after
// ff.After or before ff.Before, at most ff.Limit of them, with the count
// of all that match) and, with fleet set, the fleet's aggregates, all
// exact.
func Read(walk Walk, ff Filter, next Next, now time.Time, fleet bool) (Page, Fleet, error) {
	var (
		s     Fleet
		means []float64
	)
	c := newCutter(ff)
	err := walk(func(f *storage.FeedSummary) bool {
		if fleet {
			s.add(f, next, now, &means)
		}
		if ff.Match(f, next, now) {
			c.add(f.ID)
		}
		return true
	})
	if err != nil {
		return Page{}, Fleet{}, err
	}
	if fleet {
		s.finish(means)
	}
	return c.page(), s, nil
}

func (s *Fleet) add(f *storage.FeedSummary, next Next, now time.Time, means *[]float64) {
	s.Feeds++
	if f.Kind == storage.KindRemote {
		s.Remote++
	}
	s.Polls += f.Polls
	s.Hits += f.Hits
	if f.Erroring {
		s.Erroring++
	}
	if IsStarved(f, next, now) {
		s.Starved++
	}
	if f.HasLatency {
		*means = append(*means, f.MeanLatencyS)
	}
}

func (s *Fleet) finish(means []float64) {
	if s.Polls > 0 {
		s.HitPct = 100 * float64(s.Hits) / float64(s.Polls)
	}
	if n := len(means); n > 0 {
		slices.Sort(means)
		q := func(p float64) float64 { return means[min(n-1, int(p*float64(n)))] }
		s.LatencyFeeds = n
		s.MeanP50, s.MeanP90, s.MeanP99, s.MeanMax = q(0.5), q(0.9), q(0.99), means[n-1]
	}
}

// A cursor is opaque to clients: the last feed ID of a page, behind a
// prefix that versions the form.
const cursorPrefix = "f1:"

// EncodeCursor is the cursor of the page after the one that ends at id.
func EncodeCursor(id uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatUint(id, 10)))
}

func decodeCursor(s string) (uint64, bool) {
	if len(s) > 64 {
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	return id, err == nil && id > 0
}
