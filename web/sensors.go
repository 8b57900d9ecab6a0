package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web/publish"
)

// Limits of the sensor store's API.
const (
	// MaxReadingBody bounds the body of a posted reading.
	MaxReadingBody = 64 << 10
	// MaxUnitLen bounds a reading's unit, in bytes.
	MaxUnitLen = 32
	// MaxFutureSkew is how far past the arrival a reading's observation
	// time may lie (a sensor clock running fast).
	MaxFutureSkew = time.Hour
	// DefaultSensorLimit is how many readings a sensor feed holds when
	// SensorOptions.Limit is zero; MaxSensorLimit bounds ?limit=.
	DefaultSensorLimit = 50
	MaxSensorLimit     = 500
	// sensorHistory is how many stored readings rebuild a sensor's
	// publish-time model after a restart.
	sensorHistory = 256
	// maxSensorStates bounds the sensors whose model is kept in memory;
	// beyond it one is dropped and rebuilt from the store when needed.
	maxSensorStates = 4096
)

// Default desynchronisation of sensor feeds when SensorOptions.Load is nil:
// 2 s, plus 2 s per request per second over the last minute, at most 2 min.
const (
	DefaultDesyncBase   = 2 * time.Second
	DefaultDesyncPerRPS = 2 * time.Second
	DefaultDesyncMax    = 2 * time.Minute
)

// sensorName is what a sensor may be called; it is also the feed's slug.
var sensorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// SensorOptions configure SensorHandler.
type SensorOptions struct {
	// BaseURL is the public URL of the server (scheme, host, optional path
	// prefix, e.g. "https://slog.example.org"). It makes the feeds' links
	// absolute. When empty, links are relative; the request's Host header
	// is never used, so a forged one cannot reach a cached document.
	BaseURL string
	// IDAuthority is the tag authority of the feeds' ids (IDAuthority
	// returns the installation's): ids are tag URIs of it. When empty,
	// BaseURL's host is used, and without one ids are URNs.
	IDAuthority string
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// Logger receives the store's log records (default: discarded).
	Logger *slog.Logger
	// Limit is how many of the newest readings a feed document holds
	// (default DefaultSensorLimit; a request may ask for up to
	// MaxSensorLimit with ?limit=).
	Limit int
	// Load measures request load for the desynchronisation hint (default:
	// a Load of its own with DefaultDesyncBase, DefaultDesyncPerRPS and
	// DefaultDesyncMax). Pass one Load to all publishers of a server to
	// share its bookkeeping.
	Load *publish.Load
	// Retention is given to sensor feeds created on first use.
	Retention storage.Retention
	// OnNewItems is told about every stored reading (pipes reading the
	// sensor run on it, see runner.Runner.Notify). It runs on the
	// request: keep it short.
	OnNewItems func(feed storage.Feed, items []storage.Item)
	// HubURL, when set, is the WebSub hub the feeds advertise: a
	// rel="hub" link in the document and, with the self link, in a Link
	// response header (see WebSubLinks).
	HubURL string
}

// SensorHandler returns slogfeed's sensor store:
//
//	POST /api/v1/sensors/{sensor}/readings
//	    Store one reading, sent as JSON:
//	    {"value": 21.3, "unit": "C", "time": "2026-11-21T19:30:00Z",
//	     "lat": 50.81, "lon": 4.38}
//	    Only value is required; time is the observation time (RFC 3339,
//	    default: arrival) and may be at most MaxFutureSkew ahead; lat and
//	    lon come together. The sensor's feed is created on first use. The
//	    reply, 201 Created with the stored item as JSON (id, seq,
//	    published…), means the reading is durable.
//	GET /sensors/{sensor}.rss, .atom, .json
//	    The newest readings as RSS 2.0, Atom or JSON Feed 1.1 (?limit=N),
//	    with ETag/Last-Modified, 304s, Cache-Control and slogfeed's hint
//	    headers (package publish), the next publish predicted by a
//	    schedule.Auto model of the sensor's own arrivals.
//	    The documents are paged (RFC 5005): when older readings are
//	    stored, a rel="next" and rel="prev-archive" link (JSON Feed:
//	    next_url) names the page before, ?before=SEQ (readings with a
//	    Seq under SEQ). When a request's If-Modified-Since lies before
//	    the oldest reading of the document and older ones are stored,
//	    the subscriber missed some: the answer carries Slogfeed-More.
//	    The feeds' site link is the sensor's page in the web UI,
//	    /ui/sensors/{sensor}.
//	GET /sensors/{sensor}
//	    A permanent redirect to /ui/sensors/{sensor}.
//
// Errors are JSON objects {"error": "..."} with status 400 (bad input),
// 404 (unknown sensor or path), 405 (another method, with Allow), 413
// (body over MaxReadingBody) or 415 (not JSON).
// The handler matches whole request paths: mount it at "/api/v1/sensors",
// "/api/v1/sensors/" and "/sensors/" without stripping the prefixes
// (GET /api/v1/sensors redirects to the feeds list of kind sensor). It keeps a small model
// per sensor in memory (at most maxSensorStates, rebuilt from the store
// when dropped or after a restart).
func SensorHandler(st Store, opt SensorOptions) http.Handler {
	h := &sensorStore{
		feedServer: feedServer{
			base: strings.TrimRight(opt.BaseURL, "/"), now: opt.Now, log: opt.Logger,
			limit: opt.Limit, load: opt.Load, hub: opt.HubURL,
		}.withDefaults(DefaultSensorLimit, MaxSensorLimit),
		st:     st,
		retain: opt.Retention,
		notify: opt.OnNewItems,
		states: make(map[string]*sensorState),
	}
	h.authority = cmp.Or(opt.IDAuthority, AuthorityOf(h.base))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sensors/{sensor}/readings", h.post)
	mux.HandleFunc("GET /sensors/{file}", h.get)
	// What the routes above do not take is answered in JSON too, as
	// every other route of the API.
	mux.HandleFunc("/api/v1/sensors/{sensor}/readings", notAllowed("POST", "readings are posted"))
	mux.HandleFunc("/sensors/{file}", notAllowed("GET, HEAD", "feeds are read with GET or HEAD"))
	// The sensors are listed as feeds of kind sensor, which page and
	// filter as every feed list does.
	mux.HandleFunc("GET /api/v1/sensors", func(w http.ResponseWriter, r *http.Request) {
		// The query goes as it came, for the list to refuse what it
		// refuses; a kind in it comes after this one, which wins.
		to := "/api/v1/feeds?kind=" + string(storage.KindSensor)
		if r.URL.RawQuery != "" {
			to += "&" + r.URL.RawQuery
		}
		http.Redirect(w, r, to, http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/api/v1/sensors", notAllowed("GET", "the sensors are listed"))
	mux.HandleFunc("/api/v1/sensors/", func(w http.ResponseWriter, r *http.Request) {
		writeSensorError(w, &sensorError{http.StatusNotFound, "no such route: want /api/v1/sensors/{sensor}/readings, or GET /api/v1/feeds?kind=sensor for the list of sensors"})
	})
	mux.HandleFunc("/sensors/", func(w http.ResponseWriter, r *http.Request) {
		writeSensorError(w, &sensorError{http.StatusNotFound, "no such feed: want /sensors/{sensor}.rss, .atom or .json"})
	})
	return mux
}

// notAllowed answers a method a route does not take: 405 with the Allow
// header allow and a JSON error that says why.
func notAllowed(allow, why string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeSensorError(w, &sensorError{http.StatusMethodNotAllowed, "method " + r.Method + " not allowed: " + why + " (" + allow + ")"})
	}
}

type sensorStore struct {
	feedServer
	st        Store
	authority string // the tag authority of the feeds' ids
	retain    storage.Retention
	notify    func(storage.Feed, []storage.Item)

	mu     sync.Mutex
	states map[string]*sensorState
}

// sensorState is what the store keeps in memory about one sensor: its
// feed, the number of its last reading and its publish-time model. Its
// mutex serialises the sensor's readings, so numbers are never reused and
// the model sees arrivals in order.
type sensorState struct {
	mu     sync.Mutex
	loaded bool
	feed   storage.Feed
	n      uint64 // number of the sensor's last reading (the item id's last part)
	policy *schedule.Auto
}

// errNoSensor is returned by state for a sensor without a feed.
var errNoSensor = errors.New("unknown sensor")

// state returns the sensor's state, locked; the caller unlocks it. With
// create set, the sensor's feed is created when it does not exist.
func (h *sensorStore) state(ctx context.Context, name string, create bool) (*sensorState, error) {
	h.mu.Lock()
	s := h.states[name]
	if s == nil {
		if len(h.states) >= maxSensorStates {
			for k := range h.states { // drop one; it is rebuilt when needed
				delete(h.states, k)
				break
			}
		}
		s = &sensorState{}
		h.states[name] = s
	}
	h.mu.Unlock()
	s.mu.Lock()
	if s.loaded {
		return s, nil
	}
	if err := h.loadState(ctx, s, name, create); err != nil {
		s.mu.Unlock()
		h.forget(name, s)
		return nil, err
	}
	return s, nil
}

// forget drops s from memory unless it has been replaced already.
func (h *sensorStore) forget(name string, s *sensorState) {
	h.mu.Lock()
	if h.states[name] == s {
		delete(h.states, name)
	}
	h.mu.Unlock()
}

// loadState reads (or creates) the sensor's feed and rebuilds its reading
// number and publish model from the newest stored readings.
func (h *sensorStore) loadState(ctx context.Context, s *sensorState, name string, create bool) error {
	f, err := h.st.FeedBySlug(storage.KindSensor, name)
	if errors.Is(err, storage.ErrFeedNotFound) && create {
		f = storage.Feed{Kind: storage.KindSensor, Slug: name, Title: name, Policy: "auto", Retention: h.retain}
		err = h.st.CreateFeed(&f)
		if errors.Is(err, storage.ErrFeedExists) {
			// Created meanwhile, maybe on another node of a cluster, whose
			// store writes the slug's index before the feed: the feed may
			// not be found for a moment.
			for attempt := 0; ; attempt++ {
				f, err = h.st.FeedBySlug(storage.KindSensor, name)
				if !errors.Is(err, storage.ErrFeedNotFound) || attempt == sensorAttempts-1 || !pause(ctx, attempt) {
					break
				}
			}
		} else if err == nil {
			h.log.Info("sensor created", "sensor", name, "feed", f.ID)
		}
	}
	if errors.Is(err, storage.ErrFeedNotFound) {
		return errNoSensor
	}
	if err != nil {
		return err
	}
	items, err := h.st.Items(f.ID, storage.ItemQuery{Limit: sensorHistory, Order: storage.ByArrival})
	if err != nil {
		return err
	}
	s.feed, s.n, s.policy = f, 0, schedule.NewAuto()
	if len(items) > 0 {
		// The highest number, not the newest reading's: on a cluster,
		// readings posted to other nodes at the same moment may have
		// arrived in another order than their numbers.
		for _, it := range items {
			s.n = max(s.n, readingNumber(it.ID))
		}
		if s.n == 0 { // no id of ours: count instead
			c, err := h.st.CountItems(f.ID)
			if err != nil {
				return err
			}
			s.n = uint64(c)
		}
	}
	slices.Reverse(items)
	for _, it := range items {
		s.observe(it.Published)
	}
	s.loaded = true
	return nil
}

// observe tells the sensor's model that a reading arrived at t.
func (s *sensorState) observe(t time.Time) {
	s.policy.Next(schedule.Observation{At: t, Hit: true, Published: []time.Time{t}})
}

// next returns the model's earliest expected next reading after now
// (schedule.Auto.EarliestNext), zero when it has none or it is overdue.
func (s *sensorState) next(now time.Time) time.Time {
	t, _ := s.policy.EarliestNext(now)
	return t
}

// readingID is the stable id of the sensor's n-th reading, observed at obs.
func readingID(sensor string, obs time.Time, n uint64) string {
	return sensor + "/" + obs.UTC().Format(time.RFC3339Nano) + "/" + strconv.FormatUint(n, 10)
}

// readingNumber returns n from an id made by readingID (0 when it is not).
func readingNumber(id string) uint64 {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// readingRequest is the body of POST /api/v1/sensors/{sensor}/readings.
type readingRequest struct {
	Value *float64 `json:"value"`
	Unit  string   `json:"unit"`
	Time  string   `json:"time"`
	Lat   *float64 `json:"lat"`
	Lon   *float64 `json:"lon"`
}

// sensorError is an error with the status to answer it with.
type sensorError struct {
	status int
	msg    string
}

func (e *sensorError) Error() string { return e.msg }

func sensorBadRequest(format string, args ...any) error {
	return &sensorError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// parseReading reads and checks a posted reading; arrival is now.
func parseReading(r *http.Request, w http.ResponseWriter, sensor string, now time.Time) (*storage.Reading, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, &sensorError{http.StatusUnsupportedMediaType, "Content-Type must be application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxReadingBody))
	dec.DisallowUnknownFields()
	var req readingRequest
	err = dec.Decode(&req)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	} else if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = errors.New("data after the JSON object")
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &sensorError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", MaxReadingBody)}
	case errors.Is(err, io.EOF):
		return nil, sensorBadRequest("empty body: want a JSON object with a value")
	case err != nil:
		return nil, sensorBadRequest("invalid reading: %v", err)
	}
	if req.Value == nil {
		return nil, sensorBadRequest("value is required")
	}
	if !sensorFinite(*req.Value) {
		return nil, sensorBadRequest("value must be a finite number")
	}
	rd := &storage.Reading{Value: *req.Value, Sensor: sensor, Time: now}
	unit := strings.TrimSpace(req.Unit)
	switch {
	case len(unit) > MaxUnitLen:
		return nil, sensorBadRequest("unit longer than %d bytes", MaxUnitLen)
	case !utf8.ValidString(unit) || strings.ContainsFunc(unit, unicode.IsControl) || publish.Clean(unit) != unit:
		return nil, sensorBadRequest("unit contains invalid characters")
	case sanitize.HasMarkup(unit):
		return nil, sensorBadRequest("unit holds markup (an HTML tag or event handler)")
	}
	rd.Unit = unit
	if req.Time != "" {
		t, err := time.Parse(time.RFC3339Nano, req.Time)
		switch {
		case err != nil:
			return nil, sensorBadRequest("time %q is not RFC 3339 (e.g. 2026-11-21T19:30:00Z)", sanitize.Clip(req.Time, 64))
		case t.Year() < 1970:
			return nil, sensorBadRequest("time %s is before 1970", req.Time)
		case t.After(now.Add(MaxFutureSkew)):
			return nil, sensorBadRequest("time %s is more than %v in the future", req.Time, MaxFutureSkew)
		}
		rd.Time = t.UTC()
	}
	switch {
	case (req.Lat == nil) != (req.Lon == nil):
		return nil, sensorBadRequest("lat and lon go together")
	case req.Lat != nil && (!sensorFinite(*req.Lat) || *req.Lat < -90 || *req.Lat > 90):
		return nil, sensorBadRequest("lat must be within [-90, 90]")
	case req.Lon != nil && (!sensorFinite(*req.Lon) || *req.Lon < -180 || *req.Lon > 180):
		return nil, sensorBadRequest("lon must be within [-180, 180]")
	}
	rd.Lat, rd.Lon = req.Lat, req.Lon
	return rd, nil
}

func sensorFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func (h *sensorStore) post(w http.ResponseWriter, r *http.Request) {
	now := h.now().UTC()
	name := r.PathValue("sensor")
	if !sensorName.MatchString(name) {
		writeSensorError(w, sensorBadRequest("sensor name must match %s", sensorName))
		return
	}
	rd, err := parseReading(r, w, name, now)
	if err != nil {
		writeSensorError(w, err)
		return
	}
	it, err := h.store(r.Context(), name, rd, now)
	if err != nil {
		err = unavailable(h.st, err)
		logFailure(h.log, err, "storing reading", "sensor", name)
		writeSensorError(w, err)
		return
	}
	h.log.Debug("reading stored", "sensor", name, "id", it.ID, "seq", it.Seq)
	respondJSON(w, http.StatusCreated, it)
}

// store appends the reading to the sensor's feed (creating it on first
// use) and feeds its arrival to the sensor's model. The item is durable
// when store returns.
func (h *sensorStore) store(ctx context.Context, name string, rd *storage.Reading, now time.Time) (storage.Item, error) {
	for attempt := 0; ; attempt++ {
		s, err := h.state(ctx, name, true)
		if err != nil {
			return storage.Item{}, err
		}
		it := storage.Item{
			ID:        readingID(name, rd.Time, s.n+1),
			Title:     publish.ReadingTitle(*rd),
			Summary:   html.EscapeString(publish.ReadingSummary(*rd)),
			Published: now,
			Fetched:   now,
			Reading:   rd,
		}
		it.GUID = it.ID
		added, err := h.st.AddItems(s.feed.ID, []storage.Item{it})
		if len(added) == 1 {
			s.n++
			s.observe(now)
			feed := s.feed
			s.mu.Unlock()
			if h.notify != nil {
				h.notify(feed, added)
			}
			if err != nil { // stored; only retention failed (retried on the next call)
				h.log.Warn("sensor retention", "sensor", name, "err", err)
			}
			return added[0], nil
		}
		// Not stored: the feed was deleted, the store failed, the item was
		// refused, or its id was taken (state out of step with the store:
		// on a cluster, another node stored a reading of the same time
		// and number a moment before). Rebuild the state from the store
		// and try again: once after an error, up to sensorAttempts times
		// after a taken id, each after a short random wait so that nodes
		// racing for one number do not meet again.
		s.loaded = false
		s.mu.Unlock()
		h.forget(name, s)
		switch {
		case errors.Is(err, storage.ErrInvalid):
			return storage.Item{}, sensorBadRequest("reading refused: %v", err)
		case err != nil && attempt > 0:
			return storage.Item{}, err
		case err == nil && (attempt == sensorAttempts-1 || !pause(ctx, attempt)):
			return storage.Item{}, errors.New("reading was not stored")
		}
	}
}

// sensorAttempts bounds the tries of storing one reading, and of finding
// a sensor's feed another request has just created.
const sensorAttempts = 8

// pause waits a random time, up to a bound that doubles with attempt
// (from 5 ms to 200 ms), before another try; false when ctx ended first.
func pause(ctx context.Context, attempt int) bool {
	d := rand.N(min(5*time.Millisecond<<attempt, 200*time.Millisecond)) + time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (h *sensorStore) get(w http.ResponseWriter, r *http.Request) {
	now := h.now().UTC()
	file := r.PathValue("file")
	dot := strings.LastIndexByte(file, '.')
	name, ext := file, ""
	if dot >= 0 {
		name, ext = file[:dot], file[dot+1:]
	}
	fi := feedFormatIndex(ext)
	if fi < 0 && sensorName.MatchString(file) {
		h.redirectToPage(w, r, file)
		return
	}
	if fi < 0 || !sensorName.MatchString(name) {
		writeSensorError(w, &sensorError{http.StatusNotFound, "no such feed: want /sensors/{sensor}.rss, .atom or .json"})
		return
	}
	limit, before, err := pageQuery(r, h.limit, MaxSensorLimit)
	if err != nil {
		writeSensorError(w, err)
		return
	}
	s := h.lockedState(w, r, name, "")
	if s == nil {
		return
	}
	// What the document needs of the state, copied under its lock; the
	// items are read without it, so that readers and posts of the sensor
	// do not queue behind one another's store reads.
	feed := s.feed
	next := s.next(now)
	period := s.policy.State().Median
	s.mu.Unlock()
	items, err := h.st.Items(feed.ID, storage.ItemQuery{Limit: limit + 1, Order: storage.ByArrival, BeforeSeq: before})
	if err != nil {
		if errors.Is(err, storage.ErrFeedNotFound) { // deleted meanwhile
			s.mu.Lock()
			stale := s.feed.ID == feed.ID // not already rebuilt on a new feed
			if stale {
				s.loaded = false
			}
			s.mu.Unlock()
			if stale {
				h.forget(name, s)
			}
			writeSensorError(w, &sensorError{http.StatusNotFound, fmt.Sprintf("unknown sensor %q", name)})
			return
		}
		err = unavailable(h.st, err)
		logFailure(h.log, err, "reading sensor items", "sensor", name)
		writeSensorError(w, err)
		return
	}

	self := h.base + "/sensors/" + name + "." + ext
	withLimit := r.URL.Query().Get("limit") != ""
	format := &feedFormats[fi]
	older := nextPage(self, &items, limit, withLimit)
	pageSelf, current, hub := pageLinks(self, before, limit, withLimit, h.hub)
	more := before == 0 && older != "" && missed(r, items[len(items)-1].Published)
	var newest time.Time
	for _, it := range items {
		if it.Published.After(newest) {
			newest = it.Published
		}
	}
	doc, err := format.render(publish.Feed{
		Title:       feed.Title,
		Link:        h.base + sensorPage(name),
		SelfURL:     pageSelf,
		Next:        older,
		Current:     current,
		Description: "Readings of sensor " + name,
		ID:          h.feedID(feed),
		Updated:     feed.Created, // its title and description are the sensor's name; the date of a page without readings
		TTL:         period,       // from the stored arrivals only: the same items give the same document
		Items:       items,
		HubURL:      hub,
	})
	if err != nil {
		h.log.Error("rendering sensor feed", "sensor", name, "format", ext, "err", err)
		writeSensorError(w, err)
		return
	}
	WebSubLinks(w.Header(), hub, self) // an older page is no topic
	d := publish.NewDoc(doc, format.contentType)
	publish.ServeDoc(w, r, d, publish.Hints{
		Newest:  newest,
		Changed: h.changes.Since(docKey("sensor/"+name, ext, limit, before), d.ETag, later(lastChange(items), feed.Created), now),
		Next:    next,
		Desync:  h.load.Hit("sensor/"+name, now),
		More:    more,
	}, now)
}

// sensorPage is the path of the web UI's page of the sensor name: the
// site its feeds link.
func sensorPage(name string) string { return "/ui/sensors/" + url.PathEscape(name) }

// redirectToPage answers /sensors/{sensor}, the site link its feeds once
// had, with a permanent redirect to the sensor's page in the web UI; an
// unknown sensor is a 404.
func (h *sensorStore) redirectToPage(w http.ResponseWriter, r *http.Request, name string) {
	s := h.lockedState(w, r, name, " (no such feed: want /sensors/{sensor}.rss, .atom or .json)")
	if s == nil {
		return
	}
	s.mu.Unlock()
	http.Redirect(w, r, h.base+sensorPage(name), http.StatusMovedPermanently)
}

// lockedState returns the state of the existing sensor name, locked, or
// answers the request and returns nil: a 404 for an unknown sensor (hint
// appended to its message), a 503 when the store cannot answer now.
func (h *sensorStore) lockedState(w http.ResponseWriter, r *http.Request, name, hint string) *sensorState {
	s, err := h.state(r.Context(), name, false)
	if errors.Is(err, errNoSensor) {
		writeSensorError(w, &sensorError{http.StatusNotFound, fmt.Sprintf("unknown sensor %q", name) + hint})
		return nil
	}
	if err != nil {
		err = unavailable(h.st, err)
		logFailure(h.log, err, "loading sensor", "sensor", name)
		writeSensorError(w, err)
		return nil
	}
	return s
}

// WebSubLinks adds the WebSub discovery header to h when hub is set:
// Link: <hub>; rel="hub", <self>; rel="self".
func WebSubLinks(h http.Header, hub, self string) {
	if hub == "" {
		return
	}
	h.Add("Link", "<"+hub+`>; rel="hub"`)
	if self != "" {
		h.Add("Link", "<"+self+`>; rel="self"`)
	}
}

// feedID is the sensor feed's permanent id: a tag URI of the id authority
// and the day the sensor was created, or a URN without an authority.
func (h *sensorStore) feedID(f storage.Feed) string {
	return tagID(h.authority, f, "sensor", "sensor/"+f.Slug)
}

// unavailable returns err as a 503 *sensorError when store says it means
// the store cannot answer now, else err.
func unavailable(store any, err error) error {
	if isUnavailable(store, err) {
		return &sensorError{http.StatusServiceUnavailable, unavailableMsg}
	}
	return err
}

// logFailure logs a failed request's error: a store that cannot answer
// now as a warning (the client is told to try again), anything else as
// an error.
func logFailure(log *slog.Logger, err error, msg string, args ...any) {
	var he *sensorError
	if errors.As(err, &he) && he.status == http.StatusServiceUnavailable {
		log.Warn(msg, append(args, "err", err)...)
		return
	}
	log.Error(msg, append(args, "err", err)...)
}

// writeSensorError answers err as {"error": "..."}: with its own status for
// an *sensorError (a 503 with Retry-After), else 500 without internal
// details.
func writeSensorError(w http.ResponseWriter, err error) {
	status, msg := http.StatusInternalServerError, "internal error"
	var he *sensorError
	if errors.As(err, &he) {
		status, msg = he.status, he.msg
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	respondError(w, status, msg)
}
