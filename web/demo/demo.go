package demo

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/schedule/sim"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
	"github.com/slogfeed/slogfeed/web/publish"
)

// Category marks the feeds the demo subscribes to.
const Category = "demo"

// ulbTrace is mote 20 of the ULB sensorNet trace ulb-library1-R1.txt
// (Université Libre de Bruxelles, Machine Learning Group; see
// plugins/ulb/testdata/README.md).
//
//go:embed ulb-library1-R1-mote20.txt
var ulbTrace []byte

// ulbPath is where the publishers serve the trace, and ulbConfig how the
// demo replays it: 12 times faster, so its 60 s period runs as 5 s, from
// a start (%s) two minutes back, so that a new subscriber finds a backlog
// like the simulated sensors'.
const (
	ulbPath   = "/traces/ulb-library1-R1-mote20.txt"
	ulbConfig = `{"mote": 20, "quantity": "temperature", "speed": 12, "loop": true, "start": %q}`
)

// sensor is one simulated sensor.
type sensor struct {
	name   string
	unit   string
	model  sim.Model
	value  func(t time.Time, r *rand.Rand) float64
	dtn    bool // live 40 s of each minute, batched the other 20 s
	policy []subscription
}

type subscription struct {
	format string // rss, atom, json
	policy string
}

func sensors() []sensor {
	wave := func(base, amp float64, period time.Duration) func(time.Time, *rand.Rand) float64 {
		return func(t time.Time, r *rand.Rand) float64 {
			x := float64(t.UnixNano()%int64(period)) / float64(period)
			return math.Round((base+amp*math.Sin(2*math.Pi*x)+r.NormFloat64()*amp/20)*100) / 100
		}
	}
	return []sensor{
		{
			name: "lab-temperature", unit: "C",
			model:  sim.Model{Period: 5 * time.Second, Pss: 0.95, Pfs: 0.8, JitterScale: 200 * time.Millisecond},
			value:  wave(21, 2, 5*time.Minute),
			policy: []subscription{{"rss", "auto"}, {"atom", "fixed-5s"}},
		},
		{
			name: "greenhouse-humidity", unit: "%",
			model:  sim.Model{Period: 7 * time.Second, Pss: 0.9, Pfs: 0.7, JitterScale: 500 * time.Millisecond},
			value:  wave(62, 8, 7*time.Minute),
			policy: []subscription{{"rss", "auto"}},
		},
		{
			name: "river-level", unit: "m",
			model:  sim.Model{Period: 10 * time.Second, Pss: 1, Pfs: 1, DriftPPM: -20000},
			value:  wave(1.4, 0.3, 10*time.Minute),
			policy: []subscription{{"json", "auto"}},
		},
		{
			name: "buoy-dtn", unit: "C", dtn: true,
			model:  sim.Model{Period: 3 * time.Second, Pss: 1, Pfs: 1, JitterScale: 100 * time.Millisecond},
			value:  wave(14, 1, 4*time.Minute),
			policy: []subscription{{"rss", "auto"}},
		},
	}
}

// Publishers are the running simulated publishers.
type Publishers struct {
	log     *slog.Logger
	dir     string
	store   *storage.Store
	ln      net.Listener
	srv     *http.Server
	base    string
	sensors http.Handler
	owlHour int
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	clockMu sync.Mutex
	seedAt  time.Time // while seeding, the store's clock; zero: real time
}

// now is the sensor store's clock: real time, except while seeding the
// backlog of past readings.
func (p *Publishers) now() time.Time {
	p.clockMu.Lock()
	defer p.clockMu.Unlock()
	if !p.seedAt.IsZero() {
		return p.seedAt
	}
	return time.Now()
}

// backlog is how many past readings each sensor starts with, as a real
// sensor feed shows its recent readings to a new subscriber.
const backlog = 20

// The publishers' desynchronisation interval, compressed like their
// periods (web.DefaultDesyncBase and the others are for periods of
// minutes).
const (
	demoDesyncBase   = 50 * time.Millisecond
	demoDesyncPerRPS = 50 * time.Millisecond
	demoDesyncMax    = time.Second
)

// Start starts the publishers and their sensors; they run until ctx is done
// or Close is called.
func Start(ctx context.Context, log *slog.Logger) (*Publishers, error) {
	dir, err := os.MkdirTemp("", "slogfeed-demo-")
	if err != nil {
		return nil, err
	}
	st, err := storage.Open(filepath.Join(dir, "publishers.db"), storage.Options{LockTimeout: time.Second})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	p := &Publishers{log: log, dir: dir, store: st, ln: ln, base: "http://" + ln.Addr().String(), owlHour: time.Now().UTC().Hour()}
	// Time is compressed, so is the desynchronisation interval the
	// publishers advertise: the sensor store's default of 2 s or more,
	// right for periods of minutes, is half a 5 s period here, and
	// auto's polls, spread over it as the publisher asks, would land
	// later than a 5 s timer's (the fixed poller ignores the hint).
	load := publish.NewLoad(demoDesyncBase, demoDesyncPerRPS, demoDesyncMax)
	p.sensors = web.SensorHandler(st, web.SensorOptions{BaseURL: p.base, Logger: log, Now: p.now, Load: load})
	mux := http.NewServeMux()
	mux.Handle("/sensors/", p.sensors)
	mux.HandleFunc("GET /night-owl.rss", p.owl)
	mux.HandleFunc("GET "+ulbPath, func(w http.ResponseWriter, r *http.Request) {
		// A plain file without validators: the replay source parses every
		// fetch (it is fetched without conditional GET anyway).
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(ulbTrace)
	})
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()

	ctx, p.cancel = context.WithCancel(ctx)
	p.ctx = ctx
	start := time.Now()
	for i, s := range sensors() {
		rng := rand.New(rand.NewPCG(uint64(i)+1, uint64(start.UnixNano())))
		p.seed(s, rng, start)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.run(ctx, s, rng)
		}()
	}
	return p, nil
}

// Endpoint is the address and port the fetcher must be allowed to reach
// (the SSRF guard lets nothing else on loopback through).
func (p *Publishers) Endpoint() netip.AddrPort {
	return netip.MustParseAddrPort(p.ln.Addr().String())
}

// Subscriber is what the demo needs of the aggregator.
type Subscriber interface {
	Subscribe(f storage.Feed) (storage.Feed, error)
	Unsubscribe(id uint64) error
}

// Subscribe subscribes the aggregator to every demo feed, after removing
// demo feeds of earlier runs (their publishers listened elsewhere).
func (p *Publishers) Subscribe(agg Subscriber, existing []storage.Feed) error {
	for _, f := range existing {
		if len(f.Category) == 1 && f.Category[0] == Category && !strings.HasPrefix(f.URL, p.base+"/") {
			if err := agg.Unsubscribe(f.ID); err != nil {
				return err
			}
		}
	}
	var feeds []storage.Feed
	for _, s := range sensors() {
		for _, sub := range s.policy {
			feeds = append(feeds, storage.Feed{
				URL: fmt.Sprintf("%s/sensors/%s.%s", p.base, s.name, sub.format), Policy: sub.policy,
				Title: fmt.Sprintf("%s (%s)", s.name, sub.policy), Category: []string{Category},
			})
		}
	}
	feeds = append(feeds, storage.Feed{URL: p.base + "/night-owl.rss", Policy: "auto", Title: "night-owl (sleeps this hour)", Category: []string{Category}})
	feeds = append(feeds, storage.Feed{
		URL: p.base + ulbPath, Policy: "auto", Title: "ulb-mote-20 (real trace replayed 12x)", Category: []string{Category},
		Source: &storage.SourceSpec{Type: "ulb", Config: json.RawMessage(fmt.Sprintf(ulbConfig, time.Now().Add(-2*time.Minute).UTC().Format(time.RFC3339)))},
	})
	for _, f := range feeds {
		if _, err := agg.Subscribe(f); err != nil && !errors.Is(err, storage.ErrFeedExists) {
			return fmt.Errorf("subscribe %s: %w", f.URL, err)
		}
	}
	return nil
}

// FieldSensors are the demo's sensors that push their readings into
// slogfeed's own sensor store (as sensor/NAME), every FieldPeriod on a
// shared schedule: a small regional network to fuse with a pipe.
var FieldSensors = []string{"field-north", "field-east", "field-south"}

// FieldPeriod is how often the field sensors report.
const FieldPeriod = 10 * time.Second

// Push starts the field sensors, posting to the sensor store h (the
// handler of web.SensorHandler) in process: one reading each at once, so
// that the sensors exist as soon as serve has started (a pipe can name
// them right away), then one per period. They stop with Close.
func (p *Publishers) Push(h http.Handler) {
	for i, name := range FieldSensors {
		rng := rand.New(rand.NewPCG(uint64(i)+101, uint64(time.Now().UnixNano())))
		base := 9.5 + 1.5*float64(i)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			timer := time.NewTimer(0)
			defer timer.Stop()
			for first := true; ; first = false {
				if !first {
					// Each report lands 1 to 3 s into its period.
					next := time.Now().Truncate(FieldPeriod).Add(FieldPeriod + time.Second + time.Duration(rng.Float64()*2*float64(time.Second)))
					timer.Reset(time.Until(next))
				}
				select {
				case <-p.ctx.Done():
					return
				case <-timer.C:
				}
				x := float64(time.Now().UnixNano()%int64(6*time.Minute)) / float64(6*time.Minute)
				v := math.Round((base+3*math.Sin(2*math.Pi*x)+rng.NormFloat64()*0.2)*100) / 100
				body, _ := json.Marshal(map[string]any{"value": v, "unit": "C"})
				req := httptest.NewRequest(http.MethodPost, "/api/v1/sensors/"+name+"/readings", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					p.log.Warn("demo field reading rejected", "sensor", name, "status", rec.Code, "body", strings.TrimSpace(rec.Body.String()))
				}
			}
		}()
	}
}

// Describe says what runs, for the startup message.
func (p *Publishers) Describe() string {
	return fmt.Sprintf("simulated sensors publishing at %s (time compressed: periods of minutes run as seconds): "+
		"lab-temperature (auto vs fixed-5s), greenhouse-humidity, river-level, buoy-dtn (batched), night-owl (skipHours %d UTC), "+
		"ulb-mote-20 (a real sensor trace replayed 12x by the ulb source); "+
		"watch them learn with: curl /api/v1/feeds; "+
		"field-north, field-east and field-south post to this slogfeed's sensor store every %v, ready to fuse with a pipe (README)", p.base, p.owlHour, FieldPeriod)
}

// Close stops the sensors and the publishers and removes their data.
func (p *Publishers) Close() error {
	p.cancel()
	p.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	err := p.store.Close()
	os.RemoveAll(p.dir)
	return err
}

// seed posts the sensor's last backlog readings before start, at their
// own (past) publish times.
func (p *Publishers) seed(s sensor, rng *rand.Rand, start time.Time) {
	from := start.Add(-time.Duration(backlog) * s.model.Period)
	m := s.model
	m.Pss, m.Pfs = 1, 1 // a clean history
	stream := m.Stream(rng, from)
	for stream.Peek().Before(start) {
		it := stream.Pop()
		p.clockMu.Lock()
		p.seedAt = it.Published
		p.clockMu.Unlock()
		p.post(s, reading{Value: s.value(it.Observed, rng), Unit: s.unit, Time: it.Observed.UTC()})
	}
	p.clockMu.Lock()
	p.seedAt = time.Time{}
	p.clockMu.Unlock()
}

// run drives one sensor: readings at the model's publish times; a DTN
// sensor holds the readings of the last 20 s of each minute and posts them
// together when its link comes back.
func (p *Publishers) run(ctx context.Context, s sensor, rng *rand.Rand) {
	stream := s.model.Stream(rng, time.Now())
	var held []reading
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		next := stream.Peek()
		if s.dtn && len(held) > 0 {
			// The link comes back at the next whole minute.
			if up := time.Now().Truncate(time.Minute).Add(time.Minute); up.Before(next) {
				next = up
			}
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		if s.dtn && len(held) > 0 && now.Second() < 40 {
			for _, r := range held {
				p.post(s, r)
			}
			held = held[:0]
		}
		if !stream.Peek().After(now) {
			it := stream.Pop()
			r := reading{Value: s.value(it.Observed, rng), Unit: s.unit, Time: it.Observed.UTC()}
			if s.dtn && now.Second() >= 40 {
				held = append(held, r)
				continue
			}
			p.post(s, r)
		}
	}
}

type reading struct {
	Value float64   `json:"value"`
	Unit  string    `json:"unit"`
	Time  time.Time `json:"time"`
}

// post stores one reading through the sensor store's own API, in process.
func (p *Publishers) post(s sensor, r reading) {
	body, _ := json.Marshal(r)
	req := httptest.NewRequest(http.MethodPost, "/api/v1/sensors/"+s.name+"/readings", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	p.sensors.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		p.log.Warn("demo reading rejected", "sensor", s.name, "status", rec.Code, "body", strings.TrimSpace(rec.Body.String()))
	}
}

// owl serves the night-owl feed: it declares the demo's starting hour in
// <skipHours> and publishes a reading every 6 s outside that hour.
func (p *Publishers) owl(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UTC()
	var items strings.Builder
	if now.Hour() != p.owlHour {
		for i := 0; i < 5; i++ {
			t := now.Truncate(6 * time.Second).Add(-time.Duration(i) * 6 * time.Second)
			if t.Hour() == p.owlHour {
				break
			}
			fmt.Fprintf(&items, "<item><title>night-owl: light %d lx</title><guid isPermaLink=\"false\">owl-%d</guid><pubDate>%s</pubDate></item>",
				t.Unix()%500, t.Unix(), t.Format(time.RFC1123Z))
		}
	}
	w.Header().Set("Content-Type", "application/rss+xml; charset=utf-8")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>night-owl</title><link>%s/night-owl.rss</link><description>A light sensor that sleeps through hour %d UTC.</description>
<skipHours><hour>%d</hour></skipHours>%s</channel></rss>`, p.base, p.owlHour, p.owlHour, items.String())
}
