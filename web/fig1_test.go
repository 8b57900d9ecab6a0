package web_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web"
)

// The republishing chain of the DPT paper's Fig. 1, end to end on a fake
// clock: 20 temperature sensors publish every 300 s into a sensor store S;
// slogfeed A polls their feeds and republishes each through a "correct"
// pipe (a calibration); slogfeed B polls A's 20 corrected feeds and fuses
// them (a time-aligned join: it runs as each corrected reading arrives and
// fuses a round as soon as its 20th reading is in); slogfeed C subscribes to
// B's fused feed. Every instance is the real thing (scheduler, fetcher,
// parser, bbolt store, pipe runner, republishing handlers) talking HTTP
// in process.

var (
	debugFig1 = false
	fig1All   = flag.Bool("fig1.all", false, "TestFig1RepublishingChain also runs the chain with dpt-n, dpt-l, and auto without planned updates")
)

const (
	fig1Sensors = 20
	fig1Period  = 300 * time.Second
)

// fig1Net routes requests by host to the instances' handlers.
type fig1Net struct {
	mu    sync.Mutex
	hosts map[string]http.Handler
}

func (n *fig1Net) RoundTrip(r *http.Request) (*http.Response, error) {
	n.mu.Lock()
	h := n.hosts[r.URL.Host]
	n.mu.Unlock()
	if h == nil {
		return nil, fmt.Errorf("no host %s", r.URL.Host)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// fig1Instance is one slogfeed: store, aggregator, pipe runner and the
// HTTP handlers that publish its sensors and pipes.
type fig1Instance struct {
	st  *storage.Store
	svc *aggregator.Service
	run *runner.Runner
	h   http.Handler
}

// newFig1Instance builds one instance; with plans its pipes plan their
// updates from its fetch schedule (runner.Options.PlannedFetch).
func newFig1Instance(t *testing.T, host string, net *fig1Net, plans bool) *fig1Instance {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), host+".db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	in := &fig1Instance{st: st}
	opt := runner.Options{Store: st}
	if plans {
		opt.PlannedFetch = func(id uint64, now time.Time) (time.Time, bool) { return in.svc.PlannedFetch(id, now) }
	}
	in.run, err = runner.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	in.svc, err = aggregator.NewService(aggregator.ServiceOptions{
		Store:      st,
		Fetcher:    fetcher.New(fetcher.Options{Transport: net}),
		Scheduler:  schedule.Config{Workers: 8},
		OnNewItems: in.run.Notify,
	})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + host
	in.h = web.New(web.Options{
		Store:      st,
		Aggregator: in.svc,
		Pipes:      in.run,
		Sensors:    web.SensorHandler(st, web.SensorOptions{BaseURL: base, OnNewItems: in.run.Notify}),
		PipeFeeds:  web.PipeFeedHandler(st, web.PipeFeedOptions{BaseURL: base, Hints: in.run.Hints}),
	})
	net.mu.Lock()
	net.hosts[host] = in.h
	net.mu.Unlock()
	return in
}

func (in *fig1Instance) start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(2)
	go func() { defer wg.Done(); _ = in.svc.Run(ctx) }()
	go func() { defer wg.Done(); _ = in.run.Run(ctx) }()
}

func (in *fig1Instance) pipe(t *testing.T, p transform.Pipe) {
	t.Helper()
	if _, err := in.run.Create(context.Background(), p); err != nil {
		t.Fatalf("creating pipe %s: %v", p.Output.Slug, err)
	}
}

// fig1Result is what one run of the chain measured.
type fig1Result struct {
	median, mean float64    // end-to-end latency, s: sensor publish → C has the fused value
	steps        [3]float64 // median publish → fetched at A, B and C
	rounds       int        // fused rounds C received
	readings     int        // latencies measured
	polls        int        // polls made by A, B and C
}

// runFig1 runs the chain for horizon with every subscription on policy,
// its pipes planning their updates when plans is set.
func runFig1(t *testing.T, policy string, plans bool, horizon, warmup time.Duration) fig1Result {
	var res fig1Result
	synctest.Test(t, func(t *testing.T) {
		net := &fig1Net{hosts: map[string]http.Handler{}}
		s := newFig1Instance(t, "s.test", net, plans)
		a := newFig1Instance(t, "a.test", net, plans)
		b := newFig1Instance(t, "b.test", net, plans)
		c := newFig1Instance(t, "c.test", net, plans)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		start := time.Now()

		// The sensors: readings every 300 s, all on the same schedule
		// (a regional network sampling together), each with its own
		// Laplace jitter (b = 5 s) around a 20 s offset.
		published := make([][]time.Time, fig1Sensors) // [sensor][round]
		var pubMu sync.Mutex
		rounds := int(horizon / fig1Period)
		for i := range fig1Sensors {
			rng := rand.New(rand.NewPCG(uint64(i)+1, 7))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < rounds; k++ {
					u := rng.Float64() - 0.5
					j := 20 - 5*math.Copysign(math.Log(1-2*math.Abs(u)), u)
					at := start.Add(time.Duration(k)*fig1Period + time.Duration(min(max(j, 0), 60)*float64(time.Second)))
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Until(at)):
					}
					body := fmt.Sprintf(`{"value": %.2f, "unit": "C"}`, 12+3*math.Sin(float64(k)/12)+float64(i)*0.1)
					req := httptest.NewRequest("POST", fmt.Sprintf("/api/v1/sensors/t%02d/readings", i), strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					s.h.ServeHTTP(rec, req)
					if rec.Code != http.StatusCreated {
						t.Errorf("posting a reading: %d %s", rec.Code, rec.Body)
						return
					}
					pubMu.Lock()
					published[i] = append(published[i], time.Now())
					pubMu.Unlock()
				}
			}()
		}
		// Let every sensor exist before anyone subscribes.
		time.Sleep(fig1Period)

		// Subscriptions start at random moments of one period, so fixed
		// polling gets no lucky or unlucky common phase: A subscribes to
		// the sensors during one period, B to A's outputs during the
		// next, C to B's during the third.
		phase := rand.New(rand.NewPCG(99, 1))
		stagger := func(n int, do func(i int)) {
			base := time.Now()
			offs := make([]time.Duration, n)
			for i := range offs {
				offs[i] = time.Duration(phase.Float64() * float64(fig1Period))
			}
			order := make([]int, n)
			for i := range order {
				order[i] = i
			}
			slices.SortFunc(order, func(x, y int) int { return int(offs[x] - offs[y]) })
			for _, i := range order {
				time.Sleep(time.Until(base.Add(offs[i])))
				do(i)
			}
			time.Sleep(time.Until(base.Add(fig1Period)))
		}
		subscribe := func(in *fig1Instance, url string) storage.Feed {
			f, err := in.svc.Subscribe(storage.Feed{URL: url, Policy: policy})
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		for _, in := range []*fig1Instance{s, a, b, c} {
			in.start(ctx, &wg)
		}
		stagger(fig1Sensors, func(i int) {
			fa := subscribe(a, fmt.Sprintf("http://s.test/sensors/t%02d.rss", i))
			slug := fmt.Sprintf("correct-t%02d", i)
			a.pipe(t, transform.Pipe{
				Nodes: []transform.Node{
					{ID: "in", Op: "source", Config: []byte(fmt.Sprintf(`{"feed":"feed/%d"}`, fa.ID))},
					{ID: "cal", Op: "calibrate", Config: []byte(`{"scale":1.0,"offset":-0.4}`)},
				},
				Edges:  []transform.Edge{{From: "in", To: "cal"}},
				Output: transform.Output{Slug: slug, Title: "corrected " + slug},
			})
		})
		fuseSources := make([]transform.Node, fig1Sensors)
		var fuseEdges []transform.Edge
		stagger(fig1Sensors, func(i int) {
			fb := subscribe(b, fmt.Sprintf("http://a.test/feeds/correct-t%02d.rss", i))
			id := fmt.Sprintf("s%02d", i)
			fuseSources[i] = transform.Node{ID: id, Op: "source", Config: []byte(fmt.Sprintf(`{"feed":"feed/%d"}`, fb.ID))}
			fuseEdges = append(fuseEdges, transform.Edge{From: id, To: "mean"})
		})
		b.pipe(t, transform.Pipe{
			Nodes:  append(fuseSources, transform.Node{ID: "mean", Op: "join", Config: []byte(fmt.Sprintf(`{"by":"sensor","stat":"mean","tolerance":"2m","min":%d,"sensor":"region"}`, fig1Sensors))}),
			Edges:  fuseEdges,
			Output: transform.Output{Slug: "fuse", Title: "regional mean"},
		})
		var fc storage.Feed
		stagger(1, func(int) { fc = subscribe(c, "http://b.test/feeds/fuse.rss") })
		time.Sleep(time.Until(start.Add(horizon)))
		cancel()
		wg.Wait()

		// End to end: C's fetch of each fused round minus the publish
		// time of each of the round's 20 readings.
		items, err := c.st.Items(fc.ID, storage.ItemQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var lat []float64
		for _, it := range items {
			if it.Reading == nil {
				continue
			}
			k := int(it.Reading.Time.Sub(start) / fig1Period)
			if it.Reading.Time.Before(start.Add(warmup)) || k < 0 {
				continue
			}
			res.rounds++
			for i := range fig1Sensors {
				if k < len(published[i]) {
					lat = append(lat, it.Fetched.Sub(published[i][k]).Seconds())
				}
			}
		}
		if len(lat) == 0 {
			t.Fatalf("%s: C received no fused readings after the warm-up (%d items)", policy, len(items))
		}
		res.readings = len(lat)
		// Where the time goes: the round's last reading → B fused it →
		// C fetched it.
		var toFuse, toC []float64
		for _, it := range items {
			k := int(it.Reading.Time.Sub(start) / fig1Period)
			if it.Reading == nil || it.Reading.Time.Before(start.Add(warmup)) {
				continue
			}
			var last time.Time
			for i := range fig1Sensors {
				if k < len(published[i]) && published[i][k].After(last) {
					last = published[i][k]
				}
			}
			toFuse = append(toFuse, it.Published.Sub(last).Seconds())
			toC = append(toC, it.Fetched.Sub(it.Published).Seconds())
		}
		if debugFig1 {
			obs, _ := c.st.Observations(fc.ID, 0)
			for _, o := range obs[max(len(obs)-30, 0):] {
				t.Logf("C poll %s hit=%v pub=%v hints=%+v lat=%v", o.At.Sub(start), o.Hit, o.Published, o.Hints, o.LatencyS)
			}
			for _, it := range items[:min(8, len(items))] {
				t.Logf("C item pub %s fetched %s reading %s", it.Published.Sub(start), it.Fetched.Sub(start), it.Reading.Time.Sub(start))
			}
			bf, _ := b.st.FeedBySlug(storage.KindPipe, "fuse")
			bits, _ := b.st.Items(bf.ID, storage.ItemQuery{Limit: 6})
			for _, it := range bits {
				t.Logf("B fused pub %s reading %s: %s", it.Published.Sub(start), it.Reading.Time.Sub(start), it.Summary)
			}
			feeds, _ := b.st.Feeds()
			for _, f := range feeds[:3] {
				its, _ := b.st.Items(f.ID, storage.ItemQuery{Limit: 4})
				for _, it := range its {
					t.Logf("B input %d fetched %s reading %s id %s", f.ID, it.Fetched.Sub(start), it.Reading.Time.Sub(start), it.ID)
				}
			}
			pl, _ := b.run.List()
			for _, p := range pl {
				t.Logf("B pipe %s runs %d err %q", p.Slug, p.Runs, p.LastError)
			}
		}
		slices.Sort(toFuse)
		slices.Sort(toC)
		t.Logf("%s: last reading → fused at B: median %.1f s (min %.1f, max %.1f); fused → C: median %.1f s", policy,
			toFuse[len(toFuse)/2], toFuse[0], toFuse[len(toFuse)-1], toC[len(toC)/2])
		slices.Sort(lat)
		res.median = lat[len(lat)/2]
		for _, l := range lat {
			res.mean += l
		}
		res.mean /= float64(len(lat))
		for k, in := range []*fig1Instance{a, b, c} {
			var step []float64
			feeds, _ := in.st.Feeds()
			for _, f := range feeds {
				if f.Kind != storage.KindRemote {
					continue
				}
				obs, _ := in.st.Observations(f.ID, 0)
				res.polls += len(obs)
				for _, o := range obs {
					if !o.At.Before(start.Add(warmup)) {
						step = append(step, o.LatencyS...)
					}
				}
			}
			if len(step) > 0 {
				slices.Sort(step)
				res.steps[k] = step[len(step)/2]
			}
		}
	})
	return res
}

// TestFig1RepublishingChain runs the chain twice in one process, once
// with fixed 300 s polling at every step and once with slogfeed's default
// policy (auto) at every step, and compares end-to-end latency: sensor
// publish → C holds the fused value. With auto, B and C poll right after
// the updates A's and B's pipes plan (Slogfeed-Due), and S's sensor feeds
// are tracked from their publish history.
//
// The target: auto's end-to-end median at most 20% of fixed polling's,
// faster at every step, with no more than a quarter more polls and the
// same fused rounds delivered. The measured figures are logged and
// reported in docs/benchmarks.md.
func TestFig1RepublishingChain(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates hours of a three-instance chain")
	}
	horizon, warmup := 8*time.Hour, 2*time.Hour
	fixed := runFig1(t, "fixed-5m", true, horizon, warmup)
	t.Logf("fixed 300 s polling: end-to-end median %.1f s, mean %.1f s (%d rounds, %d readings, %d polls); steps A/B/C median %.1f/%.1f/%.1f s",
		fixed.median, fixed.mean, fixed.rounds, fixed.readings, fixed.polls, fixed.steps[0], fixed.steps[1], fixed.steps[2])
	r := runFig1(t, "auto", true, horizon, warmup)
	t.Logf("auto: end-to-end median %.1f s, mean %.1f s (%d rounds, %d readings, %d polls); steps A/B/C median %.1f/%.1f/%.1f s; %.1f%% of fixed polling",
		r.median, r.mean, r.rounds, r.readings, r.polls, r.steps[0], r.steps[1], r.steps[2], 100*r.median/fixed.median)
	if r.median > 0.20*fixed.median {
		t.Errorf("auto: end-to-end median latency %.1f s > 20%% of fixed polling's %.1f s", r.median, fixed.median)
	}
	for k, name := range []string{"A", "B", "C"} {
		if r.steps[k] >= fixed.steps[k] {
			t.Errorf("step %s: auto median %.1f s, not below fixed polling's %.1f s", name, r.steps[k], fixed.steps[k])
		}
	}
	if r.polls > fixed.polls*5/4 {
		t.Errorf("auto: %d polls, fixed polling %d: more than a quarter more", r.polls, fixed.polls)
	}
	if r.rounds < fixed.rounds*9/10 {
		t.Errorf("auto: C received %d fused rounds, fixed polling %d", r.rounds, fixed.rounds)
	}
	if !*fig1All {
		return
	}
	for _, v := range []struct {
		policy string
		plans  bool
	}{{"auto", false}, {"dpt-n", true}, {"dpt-l", true}} {
		x := runFig1(t, v.policy, v.plans, horizon, warmup)
		t.Logf("%s (planned updates %v): end-to-end median %.1f s, mean %.1f s (%d rounds, %d polls); steps A/B/C median %.1f/%.1f/%.1f s; %.1f%% of fixed polling",
			v.policy, v.plans, x.median, x.mean, x.rounds, x.polls, x.steps[0], x.steps[1], x.steps[2], 100*x.median/fixed.median)
	}
}
