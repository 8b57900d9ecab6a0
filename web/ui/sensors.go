package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/storage"
)

// sensorReadings is how many of a sensor's newest readings its page
// lists.
const sensorReadings = 100

// sensorRow is one line of the sensors list.
type sensorRow struct {
	Name    string
	FeedID  uint64
	Items   int64
	Latest  string // the newest reading
	LatestT stamp
}

// sensorsView is the data of the sensors list.
type sensorsView struct {
	Enabled bool
	Sensors []sensorRow
	Pager
	// The form's values after an error.
	Sensor, Value, Unit string
}

// readingRow is one reading on a sensor's page.
type readingRow struct {
	Time     stamp
	Arrived  stamp
	Value    string
	Unit     string
	Position string
}

// sensorView is the data of a sensor's page.
type sensorView struct {
	Name     string
	FeedID   uint64
	Items    int64
	Links    []feedLink
	Readings []readingRow
	Enabled  bool
}

func (u *UI) sensorsPage(w http.ResponseWriter, r *http.Request) {
	u.renderSensors(w, r, http.StatusOK, "", sensorsView{Sensor: r.URL.Query().Get("sensor")})
}

// sensorsPerPage is how many sensors a page of the sensors list shows.
const sensorsPerPage = 100

// sensorPage is a page of the sensors list.
type sensorPage struct {
	feeds []storage.Feed
	more  bool // more sensors follow
	// prev is where the previous page starts after: the sensor before
	// the limit sensors up to after (0: the first page).
	prev uint64
}

// before keeps, in a ring, the last limit+1 sensor IDs up to a page's
// start, to find where the previous page starts after.
type before struct {
	ring []uint64
	n    int // IDs added
}

func newBefore(limit int) *before { return &before{ring: make([]uint64, limit+1)} }

func (b *before) add(id uint64) {
	b.ring[b.n%len(b.ring)] = id
	b.n++
}

// prev is the ID the previous page starts after: the oldest kept, once
// more than a page's worth came before (else 0, the first page).
func (b *before) prev() uint64 {
	if b.n < len(b.ring) {
		return 0
	}
	return b.ring[b.n%len(b.ring)]
}

// sensorFeeds returns up to limit sensor feeds with an ID above after,
// in ID order, whether more follow and where the previous page starts.
// From the store's summaries when it keeps them (the walk then reads only
// the sensors' records), else from every feed record.
func (u *UI) sensorFeeds(after uint64, limit int) (sensorPage, error) {
	var ids []uint64
	more := false
	back := newBefore(limit)
	if sum, ok := u.opt.Store.(storage.Summaries); ok {
		err := sum.EachFeedSummary(func(f *storage.FeedSummary) bool {
			if f.Kind != storage.KindSensor {
				return true
			}
			if f.ID <= after {
				back.add(f.ID)
				return true
			}
			if len(ids) == limit {
				more = true
				return false
			}
			ids = append(ids, f.ID)
			return true
		})
		if err != nil {
			return sensorPage{}, err
		}
		feeds := make([]storage.Feed, 0, len(ids))
		for _, id := range ids {
			f, err := u.opt.Store.Feed(id)
			if errors.Is(err, storage.ErrFeedNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return sensorPage{}, err
			}
			feeds = append(feeds, f)
		}
		return sensorPage{feeds: feeds, more: more, prev: back.prev()}, nil
	}
	all, err := u.opt.Store.Feeds()
	if err != nil {
		return sensorPage{}, err
	}
	var feeds []storage.Feed
	for _, f := range all {
		if f.Kind != storage.KindSensor {
			continue
		}
		if f.ID <= after {
			back.add(f.ID)
			continue
		}
		if len(feeds) == limit {
			return sensorPage{feeds: feeds, more: true, prev: back.prev()}, nil
		}
		feeds = append(feeds, f)
	}
	return sensorPage{feeds: feeds, prev: back.prev()}, nil
}

// renderSensors renders a page of the sensors list (?after=ID) with
// status, an error about the form and its values.
func (u *UI) renderSensors(w http.ResponseWriter, r *http.Request, status int, errMsg string, form sensorsView) {
	after, ok := u.pageAfter(w, r, "a sensor's")
	if !ok {
		return
	}
	pg, err := u.sensorFeeds(after, sensorsPerPage)
	if err != nil {
		u.internal(w, r, err)
		return
	}
	feeds := pg.feeds
	now := u.now()
	v := form
	v.Enabled = u.opt.Sensors != nil
	v.Label = "Pages of sensors"
	if after != 0 {
		v.FirstURL = "/ui/sensors"
		v.PrevURL = "/ui/sensors"
		if pg.prev != 0 {
			v.PrevURL += "?after=" + strconv.FormatUint(pg.prev, 10)
		}
	}
	if pg.more && len(feeds) > 0 {
		v.NextURL = "/ui/sensors?after=" + strconv.FormatUint(feeds[len(feeds)-1].ID, 10)
	}
	for _, f := range feeds {
		row := sensorRow{Name: f.Slug, FeedID: f.ID, Latest: "—"}
		items, err := u.opt.Store.Items(f.ID, storage.ItemQuery{Limit: 1})
		if errors.Is(err, storage.ErrFeedNotFound) { // deleted meanwhile
			continue
		}
		if err != nil {
			u.internal(w, r, err)
			return
		}
		if n, err := u.opt.Store.CountItems(f.ID); err == nil {
			row.Items = int64(n)
		}
		if len(items) == 1 && items[0].Reading != nil {
			rd := items[0].Reading
			row.Latest = formatValue(rd.Value, rd.Unit)
			row.LatestT = newStamp(rd.Time, now)
		}
		v.Sensors = append(v.Sensors, row)
	}
	p := u.newPage(w, r, "Sensors", "sensors")
	p.Error = errMsg
	p.Body = v
	u.render(w, r, status, "sensors", p)
}

// formatValue writes a reading's value with its unit.
func formatValue(v float64, unit string) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if unit != "" {
		s += " " + unit
	}
	return s
}

// postReading stores the form's reading through the sensor store, so it
// is checked exactly as one posted to the JSON API.
func (u *UI) postReading(w http.ResponseWriter, r *http.Request) {
	form := sensorsView{
		Sensor: strings.TrimSpace(r.PostForm.Get("sensor")),
		Value:  strings.TrimSpace(r.PostForm.Get("value")),
		Unit:   strings.TrimSpace(r.PostForm.Get("unit")),
	}
	if u.opt.Sensors == nil {
		u.renderSensors(w, r, http.StatusServiceUnavailable, "The sensor store is not enabled on this slogfeed.", form)
		return
	}
	if form.Sensor == "" {
		u.renderSensors(w, r, http.StatusUnprocessableEntity, "Give the sensor's name.", form)
		return
	}
	// Typed by a person: a decimal comma or thousands separators are read
	// the way the extract rules read them.
	value, ok := feedext.ParseLocalNumber(form.Value)
	if !ok {
		u.renderSensors(w, r, http.StatusUnprocessableEntity, "The value “"+form.Value+"” is not a number.", form)
		return
	}
	body, err := json.Marshal(map[string]any{"value": value, "unit": form.Unit})
	if err != nil { // a NaN or an infinity
		u.renderSensors(w, r, http.StatusUnprocessableEntity, "The value must be a finite number.", form)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost,
		"/api/v1/sensors/"+url.PathEscape(form.Sensor)+"/readings", bytes.NewReader(body))
	if err != nil {
		u.renderSensors(w, r, http.StatusUnprocessableEntity, "The sensor name “"+form.Sensor+"” cannot be used.", form)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	u.opt.Sensors.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if e.Error == "" {
			e.Error = http.StatusText(rec.Code)
		}
		status := http.StatusUnprocessableEntity
		if rec.Code >= 500 {
			status = http.StatusInternalServerError
		}
		u.renderSensors(w, r, status, "The reading was not stored: "+e.Error+".", form)
		return
	}
	u.redirect(w, r, "/ui/sensors/"+url.PathEscape(form.Sensor), "ok",
		"Stored "+formatValue(value, form.Unit)+" for sensor "+form.Sensor+".")
}

func (u *UI) sensorPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f, err := u.opt.Store.FeedBySlug(storage.KindSensor, name)
	if errors.Is(err, storage.ErrFeedNotFound) {
		u.errorPage(w, r, http.StatusNotFound, "There is no sensor “"+name+"”. Post a reading to create it.")
		return
	}
	if err != nil {
		u.internal(w, r, err)
		return
	}
	items, err := u.opt.Store.Items(f.ID, storage.ItemQuery{Limit: sensorReadings})
	if err != nil {
		u.internal(w, r, err)
		return
	}
	count, err := u.opt.Store.CountItems(f.ID)
	if err != nil {
		u.internal(w, r, err)
		return
	}
	now := u.now()
	v := sensorView{
		Name: f.Slug, FeedID: f.ID, Items: int64(count), Enabled: u.opt.Sensors != nil,
		Links: u.feedLinks("/sensors/" + url.PathEscape(f.Slug)),
	}
	for _, it := range items {
		if it.Reading == nil {
			continue
		}
		rd := it.Reading
		row := readingRow{Time: newStamp(rd.Time, now), Arrived: newStamp(it.Published, now),
			Value: strconv.FormatFloat(rd.Value, 'g', -1, 64), Unit: rd.Unit}
		if rd.Lat != nil && rd.Lon != nil {
			row.Position = strconv.FormatFloat(*rd.Lat, 'f', -1, 64) + ", " + strconv.FormatFloat(*rd.Lon, 'f', -1, 64)
		}
		v.Readings = append(v.Readings, row)
	}
	p := u.newPage(w, r, "Sensor "+f.Slug, "sensors")
	p.Body = v
	u.render(w, r, http.StatusOK, "sensor", p)
}
