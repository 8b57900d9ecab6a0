package web

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// heldItems is a Store whose Items calls for one feed wait, once armed,
// until released, or fail with err.
type heldItems struct {
	Store
	mu      sync.Mutex
	armed   bool
	err     error
	calls   int
	entered chan struct{}
	release chan struct{}
}

func (s *heldItems) arm(err error) {
	s.mu.Lock()
	s.armed, s.err = true, err
	s.mu.Unlock()
}

func (s *heldItems) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *heldItems) Items(feedID uint64, q storage.ItemQuery) ([]storage.Item, error) {
	s.mu.Lock()
	armed, err := s.armed, s.err
	s.armed = false
	s.calls++
	s.mu.Unlock()
	if armed {
		s.entered <- struct{}{}
		<-s.release
		if err != nil {
			return nil, err
		}
	}
	return s.Store.Items(feedID, q)
}

func newHeldSensors(t *testing.T) (*heldItems, http.Handler) {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "slogfeed.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	held := &heldItems{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	return held, SensorHandler(held, SensorOptions{BaseURL: "https://slog.example.org/"})
}

func sensorDo(h http.Handler, method, path, body string) int {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// within runs f and reports whether it returned within d.
func within(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// A sensor's feed being read from the store does not hold up its other
// readers or its readings.
func TestSensorGetDoesNotHoldTheSensor(t *testing.T) {
	held, h := newHeldSensors(t)
	if code := sensorDo(h, "POST", "/api/v1/sensors/lab-1/readings", `{"value": 1, "unit": "C"}`); code != http.StatusCreated {
		t.Fatalf("first reading: %d", code)
	}
	held.arm(nil)
	slow := make(chan int, 1)
	go func() { slow <- sensorDo(h, "GET", "/sensors/lab-1.rss", "") }()
	<-held.entered // the GET is reading the store

	var postCode, getCode int
	if !within(5*time.Second, func() {
		postCode = sensorDo(h, "POST", "/api/v1/sensors/lab-1/readings", `{"value": 2, "unit": "C"}`)
	}) {
		close(held.release)
		t.Fatal("a reading waited for a GET's store read")
	}
	if !within(5*time.Second, func() { getCode = sensorDo(h, "GET", "/sensors/lab-1.json", "") }) {
		close(held.release)
		t.Fatal("a GET waited for another GET's store read")
	}
	close(held.release)
	if postCode != http.StatusCreated || getCode != http.StatusOK {
		t.Errorf("POST %d, GET %d while a GET read the store", postCode, getCode)
	}
	if code := <-slow; code != http.StatusOK {
		t.Errorf("the held GET: %d", code)
	}
}

// A sensor whose feed is gone by the time its items are read is a 404,
// and its state is rebuilt on its next reading.
func TestSensorGetFeedGone(t *testing.T) {
	held, h := newHeldSensors(t)
	if code := sensorDo(h, "POST", "/api/v1/sensors/lab-1/readings", `{"value": 1}`); code != http.StatusCreated {
		t.Fatalf("first reading: %d", code)
	}
	held.arm(storage.ErrFeedNotFound)
	got := make(chan int, 1)
	go func() { got <- sensorDo(h, "GET", "/sensors/lab-1.rss", "") }()
	<-held.entered
	close(held.release)
	if code := <-got; code != http.StatusNotFound {
		t.Errorf("GET of a sensor deleted meanwhile: %d, want 404", code)
	}
	before := held.count()
	if code := sensorDo(h, "POST", "/api/v1/sensors/lab-1/readings", `{"value": 2}`); code != http.StatusCreated {
		t.Errorf("reading after: %d", code)
	}
	if held.count() == before {
		t.Error("the next reading did not rebuild the sensor's state from the store")
	}
	if code := sensorDo(h, "GET", "/sensors/lab-1.rss", ""); code != http.StatusOK {
		t.Errorf("GET after: %d", code)
	}
}
