package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/opml"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	"github.com/slogfeed/slogfeed/transform/pack"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web/feedlist"
)

// maxBody caps every JSON request body.
const maxBody = 64 << 10

// Aggregator is what the API needs of the live aggregator
// (aggregator.Service implements it).
type Aggregator interface {
	Subscribe(f storage.Feed) (storage.Feed, error)
	Unsubscribe(id uint64) error
	State(id uint64) (schedule.State, bool)
	NextFetch(id uint64) (time.Time, bool)
}

// api serves /api/v1/feeds and /api/v1/opml.
type api struct {
	store Store
	agg   Aggregator
	pipes Pipes // nil: pipes are off
	auth  *Auth
	log   *slog.Logger
	now   func() time.Time
	// clusterStatus, node and ready: see Options.Cluster, Options.Node
	// and Options.Ready.
	clusterStatus func() cluster.Status
	ready         func() error
	node          string
	// fleetCount sums up the fleet (its starved count is reused for a
	// while).
	fleetCount feedlist.Counter
}

// feedRequest is the body of POST /api/v1/feeds.
type feedRequest struct {
	URL         string               `json:"url"`
	Policy      string               `json:"policy,omitempty"`
	Title       string               `json:"title,omitempty"`
	Weight      float64              `json:"weight,omitempty"`
	Category    []string             `json:"category,omitempty"`
	IgnoreCache bool                 `json:"ignore_cache,omitempty"`
	Retention   storage.Retention    `json:"retention,omitempty"`
	Extract     *storage.ExtractRule `json:"extract,omitempty"`
	// Source selects a source adapter for data that is not a feed
	// (docs/plugins.md).
	Source *storage.SourceSpec `json:"source,omitempty"`
	// Reduce is a PACK reduction policy for the items beyond Retention.
	Reduce json.RawMessage `json:"reduce,omitempty"`
	// Sleep is the feed's own sleep windows in the text form of
	// schedule.ParseSleep: "22:00-06:00" (daily, UTC), one-off
	// "START/END" (RFC 3339), comma-separated.
	Sleep string `json:"sleep,omitempty"`
}

// feed is the subscription req asks for, its weight and sleep checked.
func (req *feedRequest) feed() (storage.Feed, error) {
	if req.Weight < 0 || req.Weight > schedule.MaxWeight {
		return storage.Feed{}, fmt.Errorf("weight must be in (0, %v]", schedule.MaxWeight)
	}
	sleep, err := schedule.ParseSleep(req.Sleep)
	if err != nil {
		return storage.Feed{}, err
	}
	if err := pack.CheckFeedPolicy(req.Reduce); err != nil {
		return storage.Feed{}, fmt.Errorf("reduce: %w", err)
	}
	if r := bytes.TrimSpace(req.Reduce); bytes.Equal(r, []byte("null")) {
		req.Reduce = nil // none, as a feed read back without one shows it
	}
	return storage.Feed{
		URL: req.URL, Policy: req.Policy, Title: req.Title, Weight: req.Weight, Category: req.Category,
		IgnoreCache: req.IgnoreCache, Retention: req.Retention, Extract: req.Extract, Source: req.Source, Reduce: req.Reduce,
		Sleep: sleep,
	}, nil
}

// sleepRequest is the body of PUT /api/v1/feeds/{id}/sleep.
type sleepRequest struct {
	Sleep string `json:"sleep"`
}

// sleepSetter is implemented by aggregators that apply a feed's new sleep
// windows before its next fetch (the store has them either way).
type sleepSetter interface {
	SetSleep(id uint64, p schedule.SleepPlan)
}

// FeedView is a feed as the API shows it.
type FeedView struct {
	ID        uint64     `json:"id"`
	Kind      string     `json:"kind"`
	URL       string     `json:"url,omitempty"`
	Slug      string     `json:"slug,omitempty"`
	Title     string     `json:"title"`
	Site      string     `json:"site,omitempty"`
	Category  []string   `json:"category,omitempty"`
	Policy    string     `json:"policy"`
	Weight    float64    `json:"weight,omitempty"`
	NextFetch *time.Time `json:"next_fetch"`
	Polls     int64      `json:"polls"`
	Hits      int64      `json:"hits"`
	HitPct    float64    `json:"hit_pct"`
	// Items is how many items a remote feed has brought in; for sensor
	// and pipe feeds, which are not fetched, how many items it holds.
	Items          int64      `json:"items"`
	MedianLatencyS *float64   `json:"median_latency_s"`
	MeanLatencyS   *float64   `json:"mean_latency_s"`
	LastFetch      *time.Time `json:"last_fetch,omitempty"`
	LastHit        *time.Time `json:"last_hit,omitempty"`
	LastError      string     `json:"last_error"`
	ErrorCount     int        `json:"error_count,omitempty"`
	RetryAfter     *time.Time `json:"retry_after,omitempty"`
	Created        time.Time  `json:"created"`
	// Source is the feed's source adapter and its normalised
	// configuration, when it has one.
	Source *storage.SourceSpec `json:"source,omitempty"`
	// Warning is what the last fetch left out (skipped rows) or
	// replaced (invalid UTF-8, bad dates), if anything.
	Warning string `json:"warning,omitempty"`
	// InvalidUTF8 and BadDates count the feed's items that needed a
	// repair, each item once however often it is fetched again: items
	// whose text held invalid UTF-8, items whose date was unreadable or
	// implausible. LastRepair is the last such repair; Warning says what
	// the last fetch replaced.
	InvalidUTF8  int64      `json:"invalid_utf8"`
	BadDates     int64      `json:"bad_dates"`
	LastRepair   string     `json:"last_repair,omitempty"`
	LastRepairAt *time.Time `json:"last_repair_at,omitempty"`
	// The feed's settings besides policy and weight, as POST takes them
	// (an OPML export keeps them).
	IgnoreCache bool                 `json:"ignore_cache,omitempty"`
	Retention   *storage.Retention   `json:"retention,omitempty"`
	Extract     *storage.ExtractRule `json:"extract,omitempty"`
	Reduce      json.RawMessage      `json:"reduce,omitempty"`
	Sleep       string               `json:"sleep,omitempty"`
}

// recentLatencyPolls is how many recent polls median_latency_s covers.
const recentLatencyPolls = 200

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func (a *api) view(f storage.Feed) FeedView {
	v, _ := a.viewCounted(f)
	return v
}

// viewCounted is view, with the error of counting a sensor or pipe
// feed's items, whose count is then the record's counter, not what the
// feed holds.
func (a *api) viewCounted(f storage.Feed) (FeedView, error) {
	lat, _ := a.store.RecentLatencies([]uint64{f.ID}, recentLatencyPolls)
	v := a.viewWith(f, lat[f.ID])
	if f.Kind != storage.KindRemote {
		n, err := a.store.CountItems(f.ID)
		if err != nil {
			return v, err
		}
		v.Items = int64(n)
	}
	return v, nil
}

// viewWith is view with the latencies of the feed's recent polls (from
// storage.Store.RecentLatencies) already read; it sorts them.
func (a *api) viewWith(f storage.Feed, lat []float64) FeedView {
	v := FeedView{
		ID: f.ID, Kind: string(f.Kind), URL: sanitize.RedactURL(f.URL), Slug: f.Slug, Title: sanitize.Text(f.Title, 0), Site: f.Site,
		Category: plainList(f.Category), Policy: f.Policy, Weight: f.Weight,
		Polls: f.Polls, Hits: f.Hits, Items: f.Items, LastError: f.LastError, ErrorCount: f.ErrorCount,
		LastFetch: timePtr(f.LastFetch), LastHit: timePtr(f.LastHit), RetryAfter: timePtr(f.RetryAfter),
		Created: f.Created.UTC(), Source: f.Source, Warning: f.Warning,
		LastRepair: f.LastRepair, LastRepairAt: timePtr(f.LastRepairAt),
		IgnoreCache: f.IgnoreCache, Extract: f.Extract, Reduce: f.Reduce, Sleep: f.Sleep.SleepText(),
	}
	v.InvalidUTF8, v.BadDates = f.RepairCounts()
	if f.Retention != (storage.Retention{}) {
		r := f.Retention
		v.Retention = &r
	}
	if f.Polls > 0 {
		v.HitPct = 100 * float64(f.Hits) / float64(f.Polls)
	}
	if f.LatencyCount > 0 {
		m := f.LatencySumS / float64(f.LatencyCount)
		v.MeanLatencyS = &m
	}
	if a.agg != nil {
		if t, ok := a.agg.NextFetch(f.ID); ok {
			v.NextFetch = timePtr(t)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		m := lat[len(lat)/2]
		if len(lat)%2 == 0 {
			m = (lat[len(lat)/2-1] + lat[len(lat)/2]) / 2
		}
		v.MedianLatencyS = &m
	}
	return v
}

func (a *api) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/feeds", a.create)
	mux.HandleFunc("GET /api/v1/feeds", a.list)
	mux.HandleFunc("POST /api/v1/feeds/bulk", a.bulk)
	mux.HandleFunc("GET /api/v1/feeds/{id}", a.get)
	mux.HandleFunc("DELETE /api/v1/feeds/{id}", a.remove)
	mux.HandleFunc("GET /api/v1/feeds/{id}/items", a.items)
	mux.HandleFunc("GET /api/v1/feeds/{id}/schedule", a.schedule)
	mux.HandleFunc("GET /api/v1/opml", a.exportOPML)
	mux.HandleFunc("PUT /api/v1/feeds/{id}/sleep", a.setSleep)
	mux.HandleFunc("GET /api/v1/cluster", a.cluster)
	mux.HandleFunc("GET /api/v1/fleet", a.fleet)
}

// exportOPML writes every remote feed as OPML. The export is a backup:
// unlike every other read it keeps the credentials of feed URLs, so that
// an export imports back to the same subscriptions, and so on a
// token-protected server it needs the token (or a logged-in UI session).
func (a *api) exportOPML(w http.ResponseWriter, r *http.Request) {
	if !a.auth.Owner(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="slogfeed"`)
		respondError(w, http.StatusUnauthorized, "the OPML export keeps the credentials of feed URLs: send Authorization: Bearer TOKEN")
		return
	}
	feeds, err := a.store.Feeds()
	if err != nil {
		a.internal(w, err)
		return
	}
	out := make([]opml.Outline, 0, len(feeds))
	for _, f := range feeds {
		if f.Kind == storage.KindRemote {
			out = append(out, opml.OutlineOf(f))
		}
	}
	var buf bytes.Buffer
	if err := opml.Write(&buf, "slogfeed subscriptions", out, a.now()); err != nil {
		a.internal(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/x-opml; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="slogfeed.opml"`)
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(buf.Bytes())
}

// setSleep replaces the feed's own sleep windows (the publisher's
// skipHours/skipDays stay) and answers with its schedule view.
func (a *api) setSleep(w http.ResponseWriter, r *http.Request) {
	f, ok := a.feed(w, r)
	if !ok {
		return
	}
	var req sleepRequest
	if !decodeBody(w, r, &req) {
		return
	}
	p, err := schedule.ParseSleep(req.Sleep)
	if err != nil {
		respondError(w, http.StatusBadRequest, clientMessage(err))
		return
	}
	f, err = a.store.UpdateFeed(f.ID, func(x *storage.Feed) error {
		x.Sleep.Daily, x.Sleep.Windows = p.Daily, p.Windows
		return nil
	})
	if err != nil {
		a.internal(w, err)
		return
	}
	if ss, ok := a.agg.(sleepSetter); ok {
		ss.SetSleep(f.ID, f.Sleep)
	}
	a.schedule(w, r)
}

func (a *api) create(w http.ResponseWriter, r *http.Request) {
	if a.agg == nil {
		respondError(w, http.StatusServiceUnavailable, "this server does not subscribe to feeds")
		return
	}
	var req feedRequest
	if !decodeBody(w, r, &req) {
		return
	}
	nf, err := req.feed()
	if err != nil {
		respondError(w, http.StatusBadRequest, clientMessage(err))
		return
	}
	f, err := a.agg.Subscribe(nf)
	switch {
	case errors.Is(err, storage.ErrFeedExists):
		respondError(w, http.StatusConflict, "already subscribed to "+sanitize.RedactURL(req.URL))
		return
	case isBadSubscription(err):
		respondError(w, http.StatusBadRequest, clientMessage(err))
		return
	case err != nil:
		a.internal(w, err) // a 503 for a store that cannot answer now, else a 500
		return
	}
	w.Header().Set("Location", "/api/v1/feeds/"+strconv.FormatUint(f.ID, 10))
	respondJSON(w, http.StatusCreated, a.view(f))
}

// badSubscription holds the errors of Subscribe about the subscription
// asked for, which the client can correct; any other is the server's.
var badSubscription = []error{
	aggregator.ErrBadURL, aggregator.ErrBadSettings, aggregator.ErrUnknownSource,
	fetcher.ErrInvalidURL, fetcher.ErrScheme, fetcher.ErrBlocked,
	schedule.ErrUnknownPolicy, schedule.ErrCronSpec, schedule.ErrSleepPlan,
	schedule.ErrWeight, schedule.ErrWeightClasses, schedule.ErrHost,
	storage.ErrInvalid,
}

// packagePrefixes are the names of slogfeed's packages its errors begin
// with ("schedule: unknown policy"): a log names where an error was made,
// a client reads what is wrong.
var packagePrefixes = []string{"aggregator: ", "schedule: ", "fetcher: ", "storage: ", "feedlist: "}

// clientMessage is err's message for a client: without the package
// names it begins with.
func clientMessage(err error) string {
	msg := err.Error()
	for cut := true; cut; {
		cut = false
		for _, p := range packagePrefixes {
			if rest, ok := strings.CutPrefix(msg, p); ok && rest != "" {
				msg, cut = rest, true
			}
		}
	}
	return msg
}

// isBadSubscription reports whether err, from a subscription, is about the
// subscription asked for (a 400) rather than a failure of the server.
func isBadSubscription(err error) bool {
	if err == nil {
		return false
	}
	for _, target := range badSubscription {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		respondError(w, http.StatusBadRequest, "malformed query: "+err.Error())
		return
	}
	ff, err := feedlist.Parse(r.URL.Query())
	if err != nil {
		respondError(w, http.StatusBadRequest, err.Error())
		return
	}
	cut, err := feedlist.List(a.store, ff, a.agg, a.now())
	if err != nil {
		a.internal(w, err)
		return
	}
	feeds, err := feedlist.Load(a.store, cut)
	if err != nil {
		a.internal(w, err)
		return
	}
	ids := make([]uint64, 0, len(feeds))
	var local []uint64
	for _, f := range feeds {
		ids = append(ids, f.ID)
		// Sensor and pipe feeds are not fetched: their items count is
		// what they hold.
		if f.Kind != storage.KindRemote {
			local = append(local, f.ID)
		}
	}
	// One read for the page's latencies and one for its item counts (a
	// page would otherwise take a transaction per feed). A store that
	// cannot answer them now (a cluster without a quorum) makes the page
	// a 503, as any other read would; after another failure the page
	// still answers, without medians or with the counters.
	var lat map[uint64][]float64
	if len(ids) > 0 {
		if lat, err = a.store.RecentLatencies(ids, recentLatencyPolls); isUnavailable(a.store, err) {
			a.internal(w, err)
			return
		} else if err != nil {
			a.log.Error("api: recent latencies", "err", err)
		}
	}
	var held map[uint64]int
	if len(local) > 0 {
		if held, err = a.store.ItemCounts(local); isUnavailable(a.store, err) {
			a.internal(w, err)
			return
		} else if err != nil {
			a.log.Error("api: item counts", "err", err)
		}
	}
	out := FeedPage{Feeds: make([]FeedView, 0, len(feeds)), Total: cut.Total, NextCursor: cut.Cursor, PrevCursor: cut.Prev}
	for _, f := range feeds {
		v := a.viewWith(f, lat[f.ID])
		if n, ok := held[f.ID]; ok {
			v.Items = int64(n)
		}
		out.Feeds = append(out.Feeds, v)
	}
	respondJSON(w, http.StatusOK, out)
}

// FeedPage is GET /api/v1/feeds: one page of the feeds that match the
// request's filters, in order of ID.
type FeedPage struct {
	Feeds []FeedView `json:"feeds"`
	// Total counts every feed that matches the filters, on all pages.
	Total int `json:"total"`
	// NextCursor asks for the page after this one (?cursor=); it is
	// empty on the last page.
	NextCursor string `json:"next_cursor"`
	// PrevCursor asks for the page before this one (?before=); it is
	// empty on the first page.
	PrevCursor string `json:"prev_cursor"`
}

// feed loads the feed named by the {id} path value, writing the error.
func (a *api) feed(w http.ResponseWriter, r *http.Request) (storage.Feed, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		respondError(w, http.StatusBadRequest, "feed id must be a positive integer")
		return storage.Feed{}, false
	}
	f, err := a.store.Feed(id)
	if errors.Is(err, storage.ErrFeedNotFound) {
		respondError(w, http.StatusNotFound, fmt.Sprintf("no feed %d", id))
		return storage.Feed{}, false
	}
	if err != nil {
		a.internal(w, err)
		return storage.Feed{}, false
	}
	return f, true
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	f, ok := a.feed(w, r)
	if !ok {
		return
	}
	// A sensor or pipe feed's items are what it holds: a store that
	// cannot count them now makes the answer a 503, as the feed list's,
	// rather than a count of 0 from the record.
	v, err := a.viewCounted(f)
	if isUnavailable(a.store, err) {
		a.internal(w, err)
		return
	}
	respondJSON(w, http.StatusOK, v)
}

func (a *api) remove(w http.ResponseWriter, r *http.Request) {
	f, ok := a.feed(w, r)
	if !ok {
		return
	}
	if err := Unsubscribe(a.agg, a.pipes, f.ID); err != nil {
		if errors.Is(err, storage.ErrPipeOutput) {
			respondError(w, http.StatusConflict, fmt.Sprintf("feed %d is the output of pipe %q: delete the pipe (DELETE /api/v1/pipes/{id})", f.ID, f.Slug))
			return
		}
		if errors.Is(err, runner.ErrFeedInUse) {
			who := strings.TrimPrefix(err.Error(), runner.ErrFeedInUse.Error()+": ") // `pipe "slug" reads it`
			respondError(w, http.StatusConflict, fmt.Sprintf("feed %d is an input of a pipe (%s): take it out of the pipe or delete the pipe first", f.ID, who))
			return
		}
		a.internal(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) items(w http.ResponseWriter, r *http.Request) {
	f, ok := a.feed(w, r)
	if !ok {
		return
	}
	limit, ok := queryInt(w, r, "limit", 50, 1, 1000)
	if !ok {
		return
	}
	before, err := pageBefore(r)
	if err != nil {
		respondError(w, http.StatusBadRequest, err.Error())
		return
	}
	// Newest arrival first; one more than the page tells whether older
	// items remain, for the next page's link.
	items, err := a.store.Items(f.ID, storage.ItemQuery{Limit: limit + 1, Order: storage.ByArrival, BeforeSeq: before})
	if err != nil {
		a.internal(w, err)
		return
	}
	if next := nextPage(r.URL.Path, &items, limit, true); next != "" {
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	respondJSON(w, http.StatusOK, plainItems(items))
}

// plainItems returns copies of items whose plain-text fields (title,
// author, categories, a reading's unit and sensor) hold no markup, as
// the republished feeds and the web UI show them (sanitize.Text); never
// nil.
func plainItems(items []storage.Item) []storage.Item {
	out := make([]storage.Item, len(items))
	for i, it := range items {
		it.Title, it.Author, it.Categories = sanitize.Text(it.Title, 0), sanitize.Text(it.Author, 0), plainList(it.Categories)
		if r := it.Reading; r != nil {
			c := *r
			c.Unit, c.Sensor = sanitize.Text(c.Unit, 0), sanitize.Text(c.Sensor, 0)
			it.Reading = &c
		}
		out[i] = it
	}
	return out
}

// plainList is list with each string made safe plain text
// (sanitize.Text), the empty ones left out.
func plainList(list []string) []string {
	var out []string
	for _, s := range list {
		if s = sanitize.Text(s, 0); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// PollView is one recent poll in GET /api/v1/feeds/{id}/schedule.
type PollView struct {
	At        time.Time `json:"at"`
	Hit       bool      `json:"hit"`
	NewItems  int       `json:"new_items"`
	LatencyS  []float64 `json:"latency_s,omitempty"`
	Status    int       `json:"status,omitempty"`
	Error     string    `json:"error,omitempty"`
	CacheForS float64   `json:"cache_for_s,omitempty"`
	PhaseS    *float64  `json:"phase_s,omitempty"`
}

// SleepView is a feed's sleep plan as the API shows it, all in UTC: the
// publisher's skip hours (0–23) and days ("Sunday"…), the feed's own
// daily windows ("20:00-06:00") and one-off windows.
type SleepView struct {
	SkipHours []int        `json:"skip_hours"`
	SkipDays  []string     `json:"skip_days"`
	Daily     []string     `json:"daily"`
	Windows   []WindowView `json:"windows"`
}

// WindowView is a one-off sleep window [start, end).
type WindowView struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

func sleepView(p schedule.SleepPlan) SleepView {
	v := SleepView{SkipHours: []int{}, SkipDays: []string{}, Daily: []string{}, Windows: []WindowView{}}
	for h := range 24 {
		if p.SkipHours&(1<<h) != 0 {
			v.SkipHours = append(v.SkipHours, h)
		}
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if p.SkipDays&(1<<d) != 0 {
			v.SkipDays = append(v.SkipDays, d.String())
		}
	}
	for _, w := range p.Daily {
		v.Daily = append(v.Daily, w.String())
	}
	for _, w := range p.Windows {
		v.Windows = append(v.Windows, WindowView{Start: w.Start.UTC(), End: w.End.UTC()})
	}
	return v
}

// ScheduleView is GET /api/v1/feeds/{id}/schedule.
type ScheduleView struct {
	ID             uint64     `json:"id"`
	Policy         string     `json:"policy"`
	Mode           string     `json:"mode,omitempty"`
	MedianS        *float64   `json:"median_s"`
	SigmaS         *float64   `json:"sigma_s"`
	BimodalMedianS *float64   `json:"bimodal_median_s,omitempty"`
	LastPublish    *time.Time `json:"last_publish,omitempty"`
	NextFetch      *time.Time `json:"next_fetch"`
	Sleep          SleepView  `json:"sleep"`
	// SleepText is the feed's own windows as PUT …/sleep takes them.
	SleepText string `json:"sleep_text"`
	// LearnedSleep is the daily window the feed's policy has learned the
	// publisher sleeps through ("20:00-06:00", UTC), when it has one.
	LearnedSleep string     `json:"learned_sleep,omitempty"`
	RecentPolls  []PollView `json:"recent_polls"`
}

func (a *api) schedule(w http.ResponseWriter, r *http.Request) {
	f, ok := a.feed(w, r)
	if !ok {
		return
	}
	n, ok := queryInt(w, r, "polls", 50, 1, 1000)
	if !ok {
		return
	}
	v := ScheduleView{ID: f.ID, Policy: f.Policy, Sleep: sleepView(f.Sleep), SleepText: f.Sleep.SleepText(), RecentPolls: []PollView{}}
	if a.agg != nil {
		st, ok := a.agg.State(f.ID)
		if ok && st.HasLearnedSleep {
			v.LearnedSleep = st.LearnedSleep.String()
		}
		if ok && st.Gaps > 0 {
			md, sg := st.Median.Seconds(), st.Sigma.Seconds()
			v.Mode, v.MedianS, v.SigmaS = st.Mode.String(), &md, &sg
			if st.BimodalMedian > 0 {
				b := st.BimodalMedian.Seconds()
				v.BimodalMedianS = &b
			}
			if st.HasPublish {
				v.LastPublish = timePtr(st.LastPublish)
			}
		}
		if t, ok := a.agg.NextFetch(f.ID); ok {
			v.NextFetch = timePtr(t)
		}
	}
	obs, err := a.store.Observations(f.ID, n)
	if err != nil {
		a.internal(w, err)
		return
	}
	for i := len(obs) - 1; i >= 0; i-- {
		o := obs[i]
		p := PollView{At: o.At.UTC(), Hit: o.Hit, NewItems: len(o.Published), LatencyS: o.LatencyS, Status: o.Status, Error: o.Err, CacheForS: o.Hints.CacheFor.Seconds()}
		if o.Hints.HasPhase {
			ph := o.Hints.Phase.Seconds()
			p.PhaseS = &ph
		}
		v.RecentPolls = append(v.RecentPolls, p)
	}
	respondJSON(w, http.StatusOK, v)
}

func (a *api) internal(w http.ResponseWriter, err error) {
	if isUnavailable(a.store, err) {
		a.log.Warn("api", "err", err)
		respondUnavailable(w)
		return
	}
	a.log.Error("api", "err", err)
	respondError(w, http.StatusInternalServerError, "internal error")
}

// unavailableMsg is the error of a 503 for a store that cannot answer
// now (storage.Unavailabler).
const unavailableMsg = "the store cannot answer now (a cluster electing a leader, or without a quorum); try again"

// isUnavailable reports whether store says err means it cannot answer
// now (storage.Unavailabler).
func isUnavailable(store any, err error) bool {
	u, ok := store.(storage.Unavailabler)
	return ok && err != nil && u.Unavailable(err)
}

// respondUnavailable answers a request the store cannot serve now: a 503
// with Retry-After.
func respondUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	respondError(w, http.StatusServiceUnavailable, unavailableMsg)
}

// decodeBody reads a JSON body (≤ maxBody, no unknown fields) into v, writing
// the error response itself when it fails.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBodyN(w, r, v, maxBody)
}

// decodeBodyN is decodeBody with a body of at most limit bytes.
func decodeBodyN(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONType(ct) {
		respondError(w, http.StatusUnsupportedMediaType, "send application/json")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			respondError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit))
			return false
		}
		respondError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	if dec.More() {
		respondError(w, http.StatusBadRequest, "invalid JSON body: more than one value")
		return false
	}
	return true
}

func isJSONType(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	ct = strings.ToLower(strings.TrimSpace(ct)) // media types ignore case (RFC 9110 §8.3.1)
	return ct == "application/json" || ct == "application/feed+json" || ct == "text/json"
}

// queryInt reads an integer query parameter within [lo, hi].
func queryInt(w http.ResponseWriter, r *http.Request, name string, def, lo, hi int) (int, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		respondError(w, http.StatusBadRequest, fmt.Sprintf("%s must be an integer in [%d, %d]", name, lo, hi))
		return 0, false
	}
	return n, true
}

// RespondJSON writes v as an indented JSON body with status: the form of
// every answer of the API, for plugins' routes too.
func RespondJSON(w http.ResponseWriter, status int, v any) { respondJSON(w, status, v) }

// RespondError writes the API's error body, {"error": msg}, with status.
func RespondError(w http.ResponseWriter, status int, msg string) { respondError(w, status, msg) }

func respondJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func respondError(w http.ResponseWriter, status int, msg string) {
	respondJSON(w, status, map[string]string{"error": msg})
}

var _ Aggregator = (*aggregator.Service)(nil)
