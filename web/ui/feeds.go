package ui

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/opml"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform/pack"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web"
	"github.com/slogfeed/slogfeed/web/feedlist"
)

// Sizes of the feed page.
const (
	// chartPolls is how many of the newest polls the timeline chart gets.
	chartPolls = 500
	// chartReadings is how many of the newest readings the values chart
	// gets.
	chartReadings = 1000
	// latencyPolls is how many of the newest polls the latency figures
	// cover (as the JSON API's median_latency_s).
	latencyPolls = 200
	// tablePolls is how many polls the page's table lists.
	tablePolls = 50
	// pageItems is how many of the newest items the page shows.
	pageItems = 20
	// latencyCacheMax bounds the median latencies kept between views of
	// the feeds list (a few MiB).
	latencyCacheMax = 1 << 16
	// maxImportErrors is how many notes an import's result lists:
	// failed outlines, then settings the file gave that were ignored.
	maxImportErrors = 10
)

// policyChoices are the policies the subscribe forms offer (any name
// schedule.ByName knows is accepted).
var policyChoices = []string{"auto", "dpt-l", "dpt-a", "dpt-n", "miniflux", "commafeed", "newsblur", "fixed-5m", "fixed-15m", "fixed-1h"}

// maxShownQuery bounds the search the feeds page shows back in its box:
// the longest the list takes (feedlist's bound) and then some, for a
// search refused as too long, in characters of up to four bytes.
const maxShownQuery = 4 * 256

// listPolicy returns the choice of the list's policy filter that names
// the same policy as policy (schedule.PolicyKey), and the choices; a
// policy none of policyChoices names is added to them.
func listPolicy(policy string) (string, []string) {
	key := schedule.PolicyKey(policy)
	for _, c := range policyChoices {
		if schedule.PolicyKey(c) == key {
			return c, policyChoices
		}
	}
	return policy, append(slices.Clip(policyChoices), policy)
}

// feedRow is one line of the feeds list.
type feedRow struct {
	ID        uint64
	Title     string
	Source    string // URL or slug
	Kind      string
	Policy    string
	LastHit   stamp
	NextFetch stamp
	Gap       string // median gap ± σ
	HitPct    string
	Latency   string // median latency
	LastError string
}

// feedsView is the feeds list's data.
type feedsView struct {
	Feeds    []feedRow
	Policies []string
	CanEdit  bool // an aggregator is there to subscribe
	// The subscribe form's values after an error.
	URL, Title, Policy, Sleep string
	// ErrField names the subscribe form's field the page's error is
	// about ("url", "policy" or "sleep"; "" for none).
	ErrField string

	// The fleet above the list, and the list's filters and pages.
	Fleet      fleetView
	Q          string // the search box
	Status     string // "", "erroring" or "starved"
	Kind       string // "", "remote", "sensor" or "pipe"
	ListPolicy string
	Total      int  // feeds that match the filters
	Filtered   bool // a filter is set
	Pager
}

// fleetView is the fleet's aggregates, formatted.
type fleetView struct {
	Feeds, Remote, Erroring, Starved int
	Polls                            int64
	HitPct                           string
	LatencyFeeds                     int
	MeanP50, MeanP90, MeanP99, Max   string
	ErroringURL, StarvedURL          string
}

func (u *UI) feedsPage(w http.ResponseWriter, r *http.Request) {
	u.renderFeeds(w, r, http.StatusOK, "", feedsView{Policy: schedule.DefaultPolicy})
}

// renderFeeds renders the feeds page with status: the fleet's aggregates
// above one page of the feeds the query's filters (feedlist.Parse) keep.
// errMsg is an error about the forms, form their values.
func (u *UI) renderFeeds(w http.ResponseWriter, r *http.Request, status int, errMsg string, form feedsView) {
	ff, err := feedlist.Parse(r.URL.Query())
	if err != nil {
		if errMsg == "" {
			errMsg = err.Error()
			status = http.StatusBadRequest
		}
		ff = feedlist.Filter{Limit: feedlist.DefaultLimit}
	}
	now := u.now()
	cut, err := feedlist.List(u.opt.Store, ff, u.opt.Aggregator, now)
	if err != nil {
		u.internal(w, r, err)
		return
	}
	fleet, err := u.fleet.Fleet(u.opt.Store, u.opt.Aggregator, now)
	if err != nil {
		u.internal(w, r, err)
		return
	}
	feeds, err := feedlist.Load(u.opt.Store, cut)
	if err != nil {
		u.internal(w, r, err)
		return
	}
	lat, err := u.medianLatencies(feeds)
	if u.unavailable(err) {
		u.internal(w, r, err) // a 503, as the API answers
		return
	}
	if err != nil { // the list still shows, without medians
		u.log.Error("ui: recent latencies", "err", err)
		lat = make([]latencyEntry, len(feeds))
	}
	v := form
	v.Policies = policyChoices
	v.CanEdit = u.opt.Aggregator != nil
	v.Feeds = make([]feedRow, 0, len(feeds))
	for i, f := range feeds {
		v.Feeds = append(v.Feeds, u.feedRow(f, lat[i], now))
	}
	v.Fleet = fleetOf(fleet)
	v.Status, v.Kind, v.ListPolicy, v.Total = ff.Status, string(ff.Kind), ff.Policy, cut.Total
	// The search box shows the search as typed (ff.Text is in lower
	// case), a refused one too, for the user to mend.
	v.Q = strings.TrimSpace(r.URL.Query().Get("q"))
	if len(v.Q) > maxShownQuery {
		v.Q = ""
	}
	if ff.Policy != "" {
		v.ListPolicy, v.Policies = listPolicy(ff.Policy)
	}
	v.Filtered = ff.Text != "" || ff.Status != "" || ff.Policy != "" || ff.Kind != ""
	v.FirstURL, v.PrevURL, v.NextURL = feedsPageURLs(ff, cut)
	v.Label = "Pages of feeds"
	p := u.newPage(w, r, "Feeds", "feeds")
	p.Error = errMsg
	p.Body = v
	u.render(w, r, status, "feeds", p)
}

// feedsPageURLs are the links of page cut of the feeds list to its
// first, previous and next pages, with the same filters and page size:
// "" for the first two on the first page, for the last on the last. The
// previous page is named by the cursor before the page's first feed, or
// as the first page when it is the first.
func feedsPageURLs(ff feedlist.Filter, cut feedlist.Page) (first, prev, next string) {
	q := ff.Query()
	with := func(key, cursor string) string {
		if key != "" {
			q.Set(key, cursor)
			defer q.Del(key)
		}
		if len(q) == 0 {
			return "/ui/feeds"
		}
		return "/ui/feeds?" + q.Encode()
	}
	if cut.Cursor != "" {
		next = with("cursor", cut.Cursor)
	}
	if cut.Prev != "" {
		first, prev = with("", ""), with("before", cut.Prev)
		if cut.PrevFirst {
			prev = first
		}
	}
	return first, prev, next
}

// fleetOf formats the fleet's aggregates for the page.
func fleetOf(s feedlist.Fleet) fleetView {
	v := fleetView{
		Feeds: s.Feeds, Remote: s.Remote, Erroring: s.Erroring, Starved: s.Starved, Polls: s.Polls,
		HitPct: "—", LatencyFeeds: s.LatencyFeeds, MeanP50: "—", MeanP90: "—", MeanP99: "—", Max: "—",
		ErroringURL: "/ui/feeds?status=" + feedlist.Erroring, StarvedURL: "/ui/feeds?status=" + feedlist.Starved,
	}
	if s.Polls > 0 {
		v.HitPct = percent(s.HitPct)
	}
	if s.LatencyFeeds > 0 {
		v.MeanP50, v.MeanP90, v.MeanP99, v.Max = seconds(s.MeanP50), seconds(s.MeanP90), seconds(s.MeanP99), seconds(s.MeanMax)
	}
	return v
}

// latencyEntry is a feed's median latency over its recent polls, as it
// was after its polls-th poll.
type latencyEntry struct {
	polls  int64
	median float64
	ok     bool // false: no latency measured
}

// latencyCache keeps each feed's median latency until the feed is polled
// again, so the feeds list reads only the observations of feeds polled
// since it was last shown.
type latencyCache struct {
	mu      sync.Mutex
	entries map[uint64]latencyEntry
}

// medianLatencies returns the median latency of each feed (in the order
// of feeds) over its latencyPolls newest polls.
func (u *UI) medianLatencies(feeds []storage.Feed) ([]latencyEntry, error) {
	c := &u.latency
	out := make([]latencyEntry, len(feeds))
	cached := make([]bool, len(feeds))
	var stale []uint64
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[uint64]latencyEntry)
	}
	for i, f := range feeds {
		if e, ok := c.entries[f.ID]; ok && e.polls == f.Polls {
			out[i], cached[i] = e, true
		} else {
			stale = append(stale, f.ID)
		}
	}
	c.mu.Unlock()
	if len(stale) == 0 {
		return out, nil
	}
	lat, err := u.opt.Store.RecentLatencies(stale, latencyPolls)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) > latencyCacheMax { // bounded, and forgets deleted feeds
		clear(c.entries)
	}
	for i, f := range feeds {
		if cached[i] {
			continue
		}
		l, had := lat[f.ID]
		e := latencyEntry{polls: f.Polls, ok: had && len(l) > 0}
		if e.ok {
			slices.Sort(l)
			e.median = median(l)
		}
		out[i] = e
		c.entries[f.ID] = e
	}
	return out, nil
}

// feedRow summarises f with its median latency.
func (u *UI) feedRow(f storage.Feed, lat latencyEntry, now time.Time) feedRow {
	row := feedRow{
		ID: f.ID, Title: feedTitle(f), Source: feedSource(f), Kind: string(f.Kind), Policy: f.Policy,
		LastHit: newStamp(f.LastHit, now), Gap: "—", HitPct: "—", Latency: "—", LastError: f.LastError,
	}
	if f.Polls > 0 {
		row.HitPct = percent(100 * float64(f.Hits) / float64(f.Polls))
	}
	if lat.ok {
		row.Latency = seconds(lat.median)
	}
	if a := u.opt.Aggregator; a != nil {
		if st, ok := a.State(f.ID); ok && st.Gaps > 0 {
			row.Gap = seconds(st.Median.Seconds()) + " ± " + seconds(st.Sigma.Seconds())
		}
		if t, ok := a.NextFetch(f.ID); ok {
			row.NextFetch = newStamp(t, now)
		}
	}
	return row
}

// feedTitle is what the UI calls a feed.
func feedTitle(f storage.Feed) string {
	if t := sanitize.Text(f.Title, 0); t != "" {
		return t
	}
	switch {
	case f.Slug != "":
		return f.Slug
	case f.URL != "":
		return sanitize.RedactURL(f.URL)
	}
	return "feed " + strconv.FormatUint(f.ID, 10)
}

// feedSource is where a feed's items come from, as shown.
func feedSource(f storage.Feed) string {
	switch f.Kind {
	case storage.KindSensor:
		return "sensor " + f.Slug
	case storage.KindPipe:
		return "pipe " + f.Slug
	}
	return sanitize.RedactURL(f.URL)
}

// subscribe subscribes to the URL of the form.
func (u *UI) subscribe(w http.ResponseWriter, r *http.Request) {
	form := feedsView{
		URL:    strings.TrimSpace(r.PostForm.Get("url")),
		Title:  strings.TrimSpace(r.PostForm.Get("title")),
		Policy: strings.TrimSpace(r.PostForm.Get("policy")),
		Sleep:  strings.TrimSpace(r.PostForm.Get("sleep")),
	}
	if u.opt.Aggregator == nil {
		u.renderFeeds(w, r, http.StatusServiceUnavailable, "This slogfeed does not fetch feeds, so it cannot subscribe.", form)
		return
	}
	if form.URL == "" {
		form.ErrField = "url"
		u.renderFeeds(w, r, http.StatusUnprocessableEntity, "Give the URL of the feed to subscribe to.", form)
		return
	}
	sleep, err := schedule.ParseSleep(form.Sleep)
	if err != nil {
		form.ErrField = "sleep"
		u.renderFeeds(w, r, http.StatusUnprocessableEntity, "Sleep windows: "+err.Error(), form)
		return
	}
	f, err := u.opt.Aggregator.Subscribe(storage.Feed{URL: form.URL, Title: form.Title, Policy: form.Policy, Sleep: sleep})
	if err != nil {
		form.ErrField = "url"
		if errors.Is(err, schedule.ErrUnknownPolicy) {
			form.ErrField = "policy"
		}
		u.renderFeeds(w, r, http.StatusUnprocessableEntity, subscribeError(form.URL, err), form)
		return
	}
	u.redirect(w, r, "/ui/feeds/"+strconv.FormatUint(f.ID, 10), "ok",
		fmt.Sprintf("Subscribed to %s. slogfeed fetches it shortly and learns when it publishes.", feedTitle(f)))
}

// subscribeError says why subscribing to rawURL failed.
func subscribeError(rawURL string, err error) string {
	rawURL = sanitize.RedactURL(rawURL)
	switch {
	case errors.Is(err, storage.ErrFeedExists):
		return "You are already subscribed to " + rawURL + "."
	case errors.Is(err, aggregator.ErrBadURL):
		return "“" + rawURL + "” is not a feed URL: give an absolute http:// or https:// URL."
	case errors.Is(err, schedule.ErrUnknownPolicy):
		return "Unknown policy: " + err.Error()
	}
	// The fetcher's errors name the URL already.
	msg := strings.TrimPrefix(err.Error(), rawURL+": ")
	return "Could not subscribe to " + rawURL + ": " + msg
}

// importOPML subscribes to every feed of an uploaded OPML file.
func (u *UI) importOPML(w http.ResponseWriter, r *http.Request) {
	// Every answer redirects to the feeds list (Post/Redirect/Get): a
	// reload does not send the file again.
	policy := strings.TrimSpace(r.FormValue("policy"))
	fail := func(msg string) { u.redirect(w, r, "/ui/feeds", "error", msg) }
	if u.opt.Aggregator == nil {
		fail("This slogfeed does not fetch feeds, so it cannot import.")
		return
	}
	file, _, err := r.FormFile("opml")
	if err != nil {
		fail("Choose an OPML file to import.")
		return
	}
	defer file.Close()
	outlines, perr := opml.Parse(file)
	if perr != nil && !errors.Is(perr, opml.ErrSkipped) {
		fail("The file could not be imported: " + importError(perr))
		return
	}
	if policy != "" {
		if _, err := schedule.ByName(policy, 0); err != nil {
			fail("Unknown policy: " + err.Error())
			return
		}
	}
	res := u.subscribeAll(r.Context(), outlines, policy)
	for _, e := range opml.Skipped(perr) {
		res.failed++
		res.note(e.Error())
	}
	res.noteOutlines(outlines)
	kind := "ok"
	if res.failed > 0 {
		kind = "error"
	}
	u.redirect(w, r, "/ui/feeds", kind, res.String())
}

// importError explains a parse error of a whole OPML file.
func importError(err error) string {
	switch {
	case errors.Is(err, opml.ErrTooLarge):
		return fmt.Sprintf("it is larger than %d MiB.", opml.MaxSize>>20)
	case errors.Is(err, opml.ErrNotOPML):
		return "it is not an OPML document (its root element is not <opml>)."
	case errors.Is(err, opml.ErrMalformed):
		return "it is not well-formed XML (" + err.Error() + ")."
	}
	return err.Error() + "."
}

// importResult counts what an import did.
type importResult struct {
	added, skipped, failed int
	// repeated counts the outlines that repeated a feed URL of the file
	// (opml.Outline.Duplicates), which were not subscribed again.
	repeated int
	// ignored counts the outlines' settings that were left out
	// (opml.Outline.Ignored); the outlines imported without them.
	ignored int
	// notes are the first maxImportErrors failures and ignored settings,
	// failures first.
	notes []string
}

func (res *importResult) note(s string) {
	if len(res.notes) < maxImportErrors {
		res.notes = append(res.notes, s)
	}
}

// noteOutlines counts what the parser reported of each outline: the
// settings it ignored, each a note naming the outline as `slogfeed
// import` warns of it, and the outlines repeating its feed URL.
func (res *importResult) noteOutlines(outlines []opml.Outline) {
	for _, o := range outlines {
		res.repeated += o.Duplicates
		for _, ig := range o.Ignored {
			res.ignored++
			ig.Value = sanitize.Clip(ig.Value, opml.MaxIgnoredValue)
			res.note(fmt.Sprintf("%s (%s): %s ignored", sanitize.RedactURL(o.URL), o.Name(), ig))
		}
	}
}

func (res *importResult) String() string {
	feeds := "feeds"
	if res.added == 1 {
		feeds = "feed"
	}
	s := fmt.Sprintf("Imported %d %s; %d already subscribed; %d failed", res.added, feeds, res.skipped, res.failed)
	if res.repeated > 0 {
		s += fmt.Sprintf("; %d repeated in the file", res.repeated)
	}
	switch {
	case res.ignored == 1:
		s += "; 1 setting ignored"
	case res.ignored > 1:
		s += fmt.Sprintf("; %d settings ignored", res.ignored)
	}
	s += "."
	if len(res.notes) > 0 {
		s += " " + strings.Join(res.notes, "; ")
		if more := res.failed + res.ignored - len(res.notes); more > 0 {
			s += fmt.Sprintf("; and %d more", more)
		}
		s += "."
	}
	return s
}

// importWorkers is how many subscriptions of an import are made at once,
// so that their writes share fsyncs.
const importWorkers = 32

// subscribeAll subscribes to each outline until ctx ends, importWorkers
// at a time, their first fetches paced as the API's bulk subscriptions
// pace theirs (web.SubscribePaced).
func (u *UI) subscribeAll(ctx context.Context, outlines []opml.Outline, policy string) *importResult {
	res := &importResult{}
	var mu sync.Mutex
	todo := make(chan opml.Outline)
	var wg sync.WaitGroup
	for range min(importWorkers, len(outlines)) {
		wg.Go(func() {
			for o := range todo {
				err := u.subscribeOutline(o, policy)
				mu.Lock()
				switch {
				case err == nil:
					res.added++
				case errors.Is(err, storage.ErrFeedExists):
					res.skipped++
				default:
					res.failed++
					res.note(sanitize.RedactURL(o.URL) + ": " + err.Error())
				}
				mu.Unlock()
			}
		})
	}
	for i, o := range outlines {
		if ctx.Err() != nil {
			mu.Lock()
			res.failed += len(outlines) - i
			res.note("the request was cancelled")
			mu.Unlock()
			break
		}
		todo <- o
	}
	close(todo)
	wg.Wait()
	return res
}

// subscribeOutline subscribes to one outline of an import, with the
// settings a slogfeed export keeps.
func (u *UI) subscribeOutline(o opml.Outline, policy string) error {
	f := o.Feed(policy)
	if err := pack.CheckFeedPolicy(f.Reduce); err != nil {
		return fmt.Errorf("reduce: %w", err)
	}
	_, err := web.SubscribePaced(u.opt.Aggregator, f)
	return err
}

// feedByPath loads the feed named by the {id} path value, writing a 404
// page when there is none.
func (u *UI) feedByPath(w http.ResponseWriter, r *http.Request) (storage.Feed, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		u.errorPage(w, r, http.StatusNotFound, "There is no feed "+r.PathValue("id")+".")
		return storage.Feed{}, false
	}
	f, err := u.opt.Store.Feed(id)
	if errors.Is(err, storage.ErrFeedNotFound) {
		u.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("There is no feed %d.", id))
		return storage.Feed{}, false
	}
	if err != nil {
		u.internal(w, r, err)
		return storage.Feed{}, false
	}
	return f, true
}

// feedData is the JSON the feed page's charts read (the contract with
// feed.js).
type feedData struct {
	Feed struct {
		ID     uint64 `json:"id"`
		Title  string `json:"title"`
		Policy string `json:"policy"`
		Unit   string `json:"unit"`
	} `json:"feed"`
	Polls    []pollData    `json:"polls"`    // oldest first
	Readings []readingData `json:"readings"` // oldest first
}

type pollData struct {
	T         int64     `json:"t"` // Unix ms
	Hit       bool      `json:"hit"`
	LatencyS  []float64 `json:"latency_s"`
	Published []int64   `json:"published"` // Unix ms
}

type readingData struct {
	T int64   `json:"t"` // Unix ms of the observation
	V float64 `json:"v"`
}

// pollRow is one line of the feed page's table of polls.
type pollRow struct {
	At       stamp
	Hit      bool
	NewItems int
	Latency  string
	Status   int
	Error    string
}

// itemView is one item on the feed page.
type itemView struct {
	Title     string
	Link      string
	Published stamp
	Reading   string
	HTML      template.HTML // sanitised at render
}

// feedView is the feed page's data.
type feedView struct {
	ID        uint64
	Title     string
	Kind      string
	URL       string // remote feeds
	Policy    string
	Mode      string
	Gap       string
	NextFetch stamp
	LastHit   stamp
	LastFetch stamp
	LastError string
	Warning   string // e.g. rows a source adapter skipped
	// Repaired counts what fetches replaced (invalid UTF-8, bad dates),
	// with the last repair; empty when nothing was.
	Repaired   string
	LastRepair string
	Adapter    string // the source adapter's type, for feeds that are not feeds
	Sleep      string // the feed's own sleep windows (schedule.ParseSleep's form)
	Learned    string // the daily sleep its policy learned, when it has one
	Polls      int64
	Hits       int64
	HitPct     string
	Items      int64
	Links      []feedLink // republished URLs (sensor and pipe feeds)
	PipeID     uint64     // the pipe whose output it is, when known

	Latency     latencyStats
	HasLatency  bool
	PollRows    []pollRow
	ItemViews   []itemView
	Data        *feedData
	HasReadings bool
	CanDelete   bool
}

// feedLink is a republished feed URL with its format.
type feedLink struct {
	Format string // "rss", "atom", "json"
	URL    string
}

func (u *UI) feedPage(w http.ResponseWriter, r *http.Request) {
	f, ok := u.feedByPath(w, r)
	if !ok {
		return
	}
	v, err := u.feedView(f, u.now())
	if err != nil {
		u.internal(w, r, err)
		return
	}
	p := u.newPage(w, r, v.Title, "feeds")
	p.Body = v
	p.Styles = []string{u.assets.url("feed.css")}
	p.Scripts = []string{u.assets.url("feed.js")}
	u.render(w, r, http.StatusOK, "feed", p)
}

// feedView gathers everything the feed page shows.
func (u *UI) feedView(f storage.Feed, now time.Time) (*feedView, error) {
	v := &feedView{
		ID: f.ID, Title: feedTitle(f), Kind: string(f.Kind), Policy: f.Policy, Gap: "—", HitPct: "—",
		LastHit: newStamp(f.LastHit, now), LastFetch: newStamp(f.LastFetch, now), LastError: f.LastError,
		Polls: f.Polls, Hits: f.Hits, Items: f.Items, CanDelete: u.opt.Aggregator != nil && f.Kind != storage.KindPipe,
	}
	if f.Kind == storage.KindRemote {
		v.URL = sanitize.RedactURL(f.URL)
	}
	v.Warning = f.Warning
	if utf8Items, badDates := f.RepairCounts(); utf8Items > 0 || badDates > 0 {
		v.Repaired = fmt.Sprintf("%d items with invalid UTF-8, %d items with a bad date (each item counted once)", utf8Items, badDates)
		v.LastRepair = f.LastRepair
	}
	v.Sleep = f.Sleep.SleepText()
	if f.Source != nil {
		v.Adapter = f.Source.Type
	}
	if n, err := u.opt.Store.CountItems(f.ID); err == nil { // Feed.Items counts fetched items only
		v.Items = int64(n)
	}
	if f.Polls > 0 {
		v.HitPct = percent(100 * float64(f.Hits) / float64(f.Polls))
	}
	switch f.Kind {
	case storage.KindSensor:
		v.Links = u.feedLinks("/sensors/" + url.PathEscape(f.Slug))
	case storage.KindPipe:
		v.Links = u.feedLinks("/feeds/" + url.PathEscape(f.Slug))
		v.PipeID = u.pipeOfFeed(f.ID)
	}
	if a := u.opt.Aggregator; a != nil {
		st, ok := a.State(f.ID)
		if ok && st.Gaps > 0 {
			v.Gap = seconds(st.Median.Seconds()) + " ± " + seconds(st.Sigma.Seconds())
			v.Mode = st.Mode.String()
		}
		if ok && st.HasLearnedSleep {
			v.Learned = st.LearnedSleep.String()
		}
		if t, ok := a.NextFetch(f.ID); ok {
			v.NextFetch = newStamp(t, now)
		}
	}

	obs, err := u.opt.Store.Observations(f.ID, chartPolls)
	if err != nil {
		return nil, err
	}
	data := &feedData{Polls: make([]pollData, 0, len(obs)), Readings: []readingData{}}
	data.Feed.ID, data.Feed.Title, data.Feed.Policy = f.ID, v.Title, f.Policy
	var lat []float64
	for i, o := range obs {
		p := pollData{T: o.At.UnixMilli(), Hit: o.Hit, LatencyS: o.LatencyS, Published: make([]int64, len(o.Published))}
		if p.LatencyS == nil {
			p.LatencyS = []float64{}
		}
		for j, t := range o.Published {
			p.Published[j] = t.UnixMilli()
		}
		data.Polls = append(data.Polls, p)
		if i >= len(obs)-latencyPolls {
			lat = append(lat, o.LatencyS...)
		}
	}
	for i := len(obs) - 1; i >= 0 && len(v.PollRows) < tablePolls; i-- {
		o := obs[i]
		row := pollRow{At: newStamp(o.At, now), Hit: o.Hit, NewItems: len(o.Published), Latency: "—", Status: o.Status, Error: o.Err}
		if len(o.LatencyS) > 0 {
			l := slices.Clone(o.LatencyS)
			slices.Sort(l)
			row.Latency = seconds(median(l))
		}
		v.PollRows = append(v.PollRows, row)
	}
	v.Latency, v.HasLatency = summarise(lat)

	items, err := u.opt.Store.Items(f.ID, storage.ItemQuery{Limit: chartReadings, Order: storage.ByArrival})
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if it.Reading == nil {
			continue
		}
		t := it.Reading.Time
		if t.IsZero() {
			t = it.Published
		}
		data.Readings = append(data.Readings, readingData{T: t.UnixMilli(), V: it.Reading.Value})
		if data.Feed.Unit == "" {
			data.Feed.Unit = it.Reading.Unit
		}
	}
	slices.SortStableFunc(data.Readings, func(a, b readingData) int { return int64Cmp(a.T, b.T) })
	v.HasReadings = len(data.Readings) > 0
	v.Data = data

	// The newest items by publish time.
	var newest []storage.Item
	if len(items) == chartReadings { // there may be more: ask the index
		newest, err = u.opt.Store.Items(f.ID, storage.ItemQuery{Limit: pageItems, Order: storage.ByPublished})
		if err != nil {
			return nil, err
		}
	} else {
		newest = slices.Clone(items)
		slices.SortStableFunc(newest, func(a, b storage.Item) int { return itemTime(b).Compare(itemTime(a)) })
	}
	for _, it := range newest[:min(len(newest), pageItems)] {
		v.ItemViews = append(v.ItemViews, u.itemView(it, now))
	}
	return v, nil
}

// itemTime is when an item was published, else fetched (the order of
// storage.ByPublished).
func itemTime(it storage.Item) time.Time {
	if it.Published.IsZero() {
		return it.Fetched
	}
	return it.Published
}

func int64Cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// itemView prepares an item for the page, its HTML sanitised once more.
func (u *UI) itemView(it storage.Item, now time.Time) itemView {
	v := itemView{Title: sanitize.Text(it.Title, parser.MaxTitleRunes), Published: newStamp(it.Published, now)}
	if it.Link != "" {
		if l, err := url.Parse(it.Link); err == nil && (l.Scheme == "http" || l.Scheme == "https") && l.Host != "" {
			v.Link = l.String()
		}
	}
	if it.Reading != nil {
		v.Reading = strconv.FormatFloat(it.Reading.Value, 'g', -1, 64)
		if u := sanitize.Text(it.Reading.Unit, 0); u != "" {
			v.Reading += " " + u
		}
	}
	body := it.Content
	if body == "" {
		body = it.Summary
	}
	if body != "" {
		// sanitize.HTML removes scripts, styles, event handlers and
		// unsafe URLs: what remains is safe to include as HTML. Its
		// remote images become links (imagesAsLinks).
		v.HTML = template.HTML(imagesAsLinks(sanitize.HTML(body, nil))) //nolint:gosec // sanitised just above
	}
	if v.Title == "" {
		v.Title = "(untitled)"
	}
	return v
}

// feedLinks returns the republished URLs of a feed at path (without
// extension).
func (u *UI) feedLinks(path string) []feedLink {
	out := make([]feedLink, 0, 3)
	for _, f := range []string{"rss", "atom", "json"} {
		out = append(out, feedLink{Format: f, URL: u.opt.BaseURL + path + "." + f})
	}
	return out
}

// confirmView is the data of a confirmation page.
type confirmView struct {
	Question string
	Detail   string
	Action   string // the form's action
	Button   string
	Cancel   string // where "Cancel" leads
}

func (u *UI) confirmUnsubscribe(w http.ResponseWriter, r *http.Request) {
	f, ok := u.feedByPath(w, r)
	if !ok {
		return
	}
	id := strconv.FormatUint(f.ID, 10)
	p := u.newPage(w, r, "Delete "+feedTitle(f), "feeds")
	p.Body = confirmView{
		Question: "Delete the feed “" + feedTitle(f) + "”?",
		Detail:   fmt.Sprintf("slogfeed stops fetching it and deletes its %d items and its poll history. This cannot be undone.", f.Items),
		Action:   "/ui/feeds/" + id + "/delete", Button: "Delete feed", Cancel: "/ui/feeds/" + id,
	}
	u.render(w, r, http.StatusOK, "confirm", p)
}

func (u *UI) unsubscribe(w http.ResponseWriter, r *http.Request) {
	f, ok := u.feedByPath(w, r)
	if !ok {
		return
	}
	back := "/ui/feeds/" + strconv.FormatUint(f.ID, 10)
	if u.opt.Aggregator == nil {
		u.redirect(w, r, back, "error", "This slogfeed cannot delete feeds.")
		return
	}
	err := web.Unsubscribe(u.opt.Aggregator, u.opt.Pipes, f.ID)
	switch {
	case errors.Is(err, storage.ErrPipeOutput):
		u.redirect(w, r, back, "error", "This feed is the output of a pipe: delete the pipe instead.")
	case errors.Is(err, runner.ErrFeedInUse):
		u.redirect(w, r, back, "error", "A pipe reads this feed ("+err.Error()+"): take it out of the pipe, or delete the pipe, first.")
	case errors.Is(err, storage.ErrFeedNotFound):
		u.redirect(w, r, "/ui/feeds", "ok", "The feed was already deleted.")
	case err != nil:
		u.internal(w, r, err)
	default:
		u.redirect(w, r, "/ui/feeds", "ok", "Deleted the feed “"+feedTitle(f)+"”.")
	}
}
