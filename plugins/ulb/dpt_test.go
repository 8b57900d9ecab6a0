package ulb_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// handlerTransport serves requests in process, so that the whole
// aggregator runs on synctest's fake clock.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// TestSchedulerLearnsReplayedMote replays mote 20 of the real trace at
// its own pace through the live aggregator on a fake clock: the auto
// policy must learn the mote's period of about 60 s (its median within
// ±10%) from the publish times the replay gives.
func TestSchedulerLearnsReplayedMote(t *testing.T) {
	body := fixture(t, excerpt)
	synctest.Test(t, func(t *testing.T) {
		st, err := storage.Open(filepath.Join(t.TempDir(), "dpt.db"), storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		trace := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(body)
		})
		svc, err := aggregator.NewService(aggregator.ServiceOptions{
			Store:     st,
			Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{trace}}),
			Scheduler: schedule.Config{Workers: 1},
			Sources:   plugins.Sources(),
		})
		if err != nil {
			t.Fatal(err)
		}
		f, err := svc.Subscribe(storage.Feed{
			URL: "http://traces.test/ulb.txt", Policy: "auto",
			Source: &storage.SourceSpec{Type: "ulb", Config: []byte(`{"mote": 20}`)},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		time.Sleep(3 * time.Hour)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		state, ok := svc.State(f.ID)
		if !ok {
			t.Fatal("no policy state")
		}
		if state.Median < 54*time.Second || state.Median > 66*time.Second {
			t.Errorf("learned median %v, want 60 s ± 10%%", state.Median)
		}
		stored, err := st.Feed(f.ID)
		if err != nil {
			t.Fatal(err)
		}
		hitPct := 100 * float64(stored.Hits) / float64(stored.Polls)
		t.Logf("3 h of replay: %d polls, %d hits (%.0f%%), %d readings, median %v, σ %v, mode %v",
			stored.Polls, stored.Hits, hitPct, stored.Items, state.Median, state.Sigma, state.Mode)
		// The mote published about 175 readings in 3 h; the replay must
		// deliver nearly all of them (backlog covers missed polls).
		if stored.Items < 150 || stored.LastError != "" {
			t.Errorf("%d readings stored, last error %q", stored.Items, stored.LastError)
		}
	})
}
