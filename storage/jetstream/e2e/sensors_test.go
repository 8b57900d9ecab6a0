package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
	"github.com/slogfeed/slogfeed/web"
)

// TestReadingsOfOneTimeOnEveryNode: readings of one sensor with the same
// observation time, posted at once to the three nodes of a cluster (a
// sensor not seen before), are all stored: each answer is a 201 and the
// sensor's feed holds every value once.
func TestReadingsOfOneTimeOnEveryNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := jstest.NewCluster(t, 3)
	var handlers []http.Handler
	var backends []web.Store
	for range 3 {
		_, _, b := connect(t, ctx, c, 0)
		backends = append(backends, b)
		handlers = append(handlers, web.SensorHandler(b, web.SensorOptions{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}))
	}
	const posts = 30
	var wg sync.WaitGroup
	codes := make([]int, posts)
	bodies := make([]string, posts)
	for i := range posts {
		wg.Go(func() {
			req := httptest.NewRequest("POST", "/api/v1/sensors/race1/readings",
				strings.NewReader(fmt.Sprintf(`{"value": %d, "time": "2026-12-07T12:00:00Z"}`, i)))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			handlers[i%len(handlers)].ServeHTTP(rec, req)
			codes[i], bodies[i] = rec.Code, rec.Body.String()
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusCreated {
			t.Errorf("reading %d (node %d): %d %s", i, i%len(handlers), code, bodies[i])
		}
	}
	f, err := backends[0].FeedBySlug(storage.KindSensor, "race1")
	if err != nil {
		t.Fatal(err)
	}
	its, err := backends[0].Items(f.ID, storage.ItemQuery{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[float64]int{}
	for _, it := range its {
		if it.Reading != nil {
			seen[it.Reading.Value]++
		}
	}
	for i := range posts {
		if seen[float64(i)] != 1 {
			t.Errorf("value %d stored %d times, want once", i, seen[float64(i)])
		}
	}
	if len(its) != posts {
		t.Errorf("%d readings stored, want %d", len(its), posts)
	}
}
