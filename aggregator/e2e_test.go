package aggregator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
	"github.com/slogfeed/slogfeed/storage"
)

// handlerTransport serves requests in process, so the whole aggregator
// runs on synctest's fake clock.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// modelPublishers serves /p/{i}/{anything}: publisher i's items published
// by now, newest 5, as RSS with second-precision pubDates.
func modelPublishers(items [][]sim.Item) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /p/{i}/{variant}", func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(r.PathValue("i"))
		if err != nil || i < 0 || i >= len(items) {
			http.NotFound(w, r)
			return
		}
		now := time.Now()
		its := items[i]
		n, _ := slices.BinarySearchFunc(its, now, func(it sim.Item, t time.Time) int {
			if it.Published.After(t) {
				return 1
			}
			return -1
		})
		var b strings.Builder
		fmt.Fprintf(&b, `<?xml version="1.0"?><rss version="2.0"><channel><title>publisher %d</title><link>http://pub.test/</link><description>model</description>`, i)
		for k := n - 1; k >= 0 && k >= n-5; k-- {
			fmt.Fprintf(&b, `<item><title>reading %d</title><guid isPermaLink="false">%d-%d</guid><pubDate>%s</pubDate></item>`,
				k, i, k, its[k].Published.UTC().Format(time.RFC1123Z))
		}
		b.WriteString(`</channel></rss>`)
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write([]byte(b.String()))
	})
	return mux
}

// TestAdaptiveBeatsFixedEndToEnd runs the real live loop (scheduler,
// fetcher, parser, bbolt store) against publishers driven by the
// publishing model, on a compressed (fake) clock, with every feed polled
// twice: by auto, the default, and by fixed 5-minute polling. auto's
// median use latency must be at most 30% of fixed polling's with a hit rate
// no more than a point lower.
func TestAdaptiveBeatsFixedEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates hours of polling")
	}
	synctest.Test(t, func(t *testing.T) {
		const publishers = 8
		horizon := 16 * time.Hour
		start := time.Now()
		items := make([][]sim.Item, publishers)
		for i := range items {
			m := sim.Model{Period: 5 * time.Minute, Pss: 0.9, Pfs: 0.8, JitterScale: 5 * time.Second, RandomPhase: true}
			// Publishing began two hours before the subscription: the
			// first fetch sees a history, as with any real feed.
			items[i] = m.Generate(rand.New(rand.NewPCG(uint64(i)+1, 42)), start.Add(-2*time.Hour), start.Add(horizon))
		}
		st, err := storage.Open(filepath.Join(t.TempDir(), "e2e.db"), storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		svc, err := aggregator.NewService(aggregator.ServiceOptions{
			Store:     st,
			Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{modelPublishers(items)}}),
			Scheduler: schedule.Config{Workers: 4},
		})
		if err != nil {
			t.Fatal(err)
		}
		policyOf := map[uint64]string{}
		for i := range publishers {
			// "" is the default policy a new feed gets: auto.
			for _, pol := range []string{"", "fixed-5m"} {
				f, err := svc.Subscribe(storage.Feed{URL: fmt.Sprintf("http://pub.test/p/%d/%s", i, pol+"-feed"), Policy: pol})
				if err != nil {
					t.Fatal(err)
				}
				policyOf[f.ID] = f.Policy
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		time.Sleep(horizon)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		type agg struct {
			polls, hits int
			lat         []float64
		}
		res := map[string]*agg{}
		for id, pol := range policyOf {
			obs, err := st.Observations(id, 0)
			if err != nil {
				t.Fatal(err)
			}
			a := res[pol]
			if a == nil {
				a = &agg{}
				res[pol] = a
			}
			for _, o := range obs {
				a.polls++
				if o.Hit {
					a.hits++
				}
				a.lat = append(a.lat, o.LatencyS...)
			}
		}
		median := func(xs []float64) float64 {
			slices.Sort(xs)
			return xs[len(xs)/2]
		}
		auto, fixed := res["auto"], res["fixed-5m"]
		if auto == nil || fixed == nil || len(auto.lat) == 0 || len(fixed.lat) == 0 {
			t.Fatalf("missing results: %+v", res)
		}
		am, fm := median(auto.lat), median(fixed.lat)
		ah := 100 * float64(auto.hits) / float64(auto.polls)
		fh := 100 * float64(fixed.hits) / float64(fixed.polls)
		t.Logf("auto: median latency %.1f s, hit %.1f%% (%d polls, %d items); fixed-5m: %.1f s, %.1f%% (%d polls, %d items); ratio %.0f%%",
			am, ah, auto.polls, len(auto.lat), fm, fh, fixed.polls, len(fixed.lat), 100*am/fm)
		if am > 0.30*fm {
			t.Errorf("auto median latency %.1f s > 30%% of fixed polling's %.1f s", am, fm)
		}
		if ah < fh-1 {
			t.Errorf("auto hit %.1f%% < fixed polling's %.1f%% − 1", ah, fh)
		}
	})
}
