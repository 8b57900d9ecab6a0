package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// clock is a settable fake clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openTest opens a store in a fresh temporary directory with a fake clock
// (unless opt has one). On cleanup it closes the store and checks the file.
func openTest(t testing.TB, opt ...Options) *Store {
	t.Helper()
	var o Options
	if len(opt) > 0 {
		o = opt[0]
	}
	o.NoSync = true
	if o.Now == nil {
		o.Now = newClock().Now
	}
	s, err := Open(filepath.Join(t.TempDir(), "slogfeed.db"), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { closeAndCheck(t, s) })
	return s
}

// closeAndCheck runs Check and closes s.
func closeAndCheck(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// createRemote creates a remote feed with this URL.
func createRemote(t testing.TB, s *Store, url string, r Retention) Feed {
	t.Helper()
	f := Feed{Kind: KindRemote, URL: url, Policy: "auto", Retention: r}
	if err := s.CreateFeed(&f); err != nil {
		t.Fatalf("CreateFeed(%q): %v", url, err)
	}
	return f
}

func TestOpenCreatesFileAndDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "data.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {path, 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got&^c.mode != 0 {
			t.Errorf("%s: mode %v, want at most %v", c.path, got, c.mode)
		}
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check on a new file: %v", err)
	}
}

func TestOpenEmptyPath(t *testing.T) {
	if _, err := Open("", Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open(\"\") = %v, want ErrInvalid", err)
	}
}

// A second Open of a held file fails with ErrLocked. bbolt's flock is per
// open file, so a second Open in the same process conflicts like another
// process would; a timeout shorter than bbolt's retry interval makes it
// fail on the first attempt.
func TestOpenLocked(t *testing.T) {
	s := openTest(t)
	s2, err := Open(s.Path(), Options{LockTimeout: time.Millisecond, NoSync: true})
	if err == nil {
		s2.Close()
		t.Fatal("second Open succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	want := fmt.Sprintf("data file %s is in use by another slogfeed process", s.Path())
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestOpenNotADatabase(t *testing.T) {
	path := copyFixture(t, "not-a-database.txt")
	s, err := Open(path, Options{LockTimeout: time.Millisecond, NoSync: true})
	if err == nil {
		s.Close()
		t.Fatal("Open of a text file succeeded")
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open: %v, want ErrCorrupt", err)
	}
}

// openFixture opens a copy of testdata/name (see copyFixture), migrated
// to the current schema, and checks it when the test ends.
func openFixture(t *testing.T, name string) *Store {
	t.Helper()
	s, err := Open(copyFixture(t, name), Options{NoSync: true, Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAndCheck(t, s) })
	return s
}

// copyFixture copies testdata/name into a temporary directory, so tests
// never modify fixtures, and returns the copy's path.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	src, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), name)
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReopenKeepsEverything(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "slogfeed.db")
	s, err := Open(path, Options{NoSync: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	f := createRemote(t, s, "https://example.org/feed.xml", Retention{MaxItems: 100})
	sensor := Feed{Kind: KindSensor, Slug: "lab-1", Title: "Lab"}
	if err := s.CreateFeed(&sensor); err != nil {
		t.Fatal(err)
	}
	added, err := s.AddItems(f.ID, []Item{
		{ID: "a", Title: "A", Published: t0.Add(-time.Hour), Reading: &Reading{Value: 21.5, Unit: "C"}},
		{ID: "b", Title: "B", Published: t0},
	})
	if err != nil || len(added) != 2 {
		t.Fatalf("AddItems = %d, %v", len(added), err)
	}
	obs := Observation{At: t0, Hit: true, Published: []time.Time{t0}, Status: 200}
	if err := s.AddObservation(f.ID, obs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, Options{NoSync: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAndCheck(t, s)
	feeds, err := s.Feeds()
	if err != nil || len(feeds) != 2 {
		t.Fatalf("Feeds = %d, %v", len(feeds), err)
	}
	if got, err := s.FeedBySlug(KindSensor, "lab-1"); err != nil || got.Title != "Lab" {
		t.Errorf("FeedBySlug = %+v, %v", got, err)
	}
	items, err := s.Items(f.ID, ItemQuery{})
	if err != nil || len(items) != 2 || items[0].ID != "b" || items[1].Reading == nil || items[1].Reading.Value != 21.5 {
		t.Errorf("Items = %+v, %v", items, err)
	}
	if got, err := s.Observations(f.ID, 0); err != nil || len(got) != 1 || !got[0].At.Equal(t0) || got[0].Status != 200 {
		t.Errorf("Observations = %+v, %v", got, err)
	}
	if seq, err := s.LastSeq(); err != nil || seq != 2 {
		t.Errorf("LastSeq = %d, %v", seq, err)
	}
	// New IDs and Seqs continue after the old ones.
	f2 := createRemote(t, s, "https://example.org/2.xml", Retention{})
	if f2.ID != 3 {
		t.Errorf("next feed ID = %d, want 3", f2.ID)
	}
	added, err = s.AddItems(f2.ID, []Item{{ID: "c"}})
	if err != nil || len(added) != 1 || added[0].Seq != 3 {
		t.Errorf("AddItems after reopen = %+v, %v", added, err)
	}
}

func TestConcurrentAddItems(t *testing.T) {
	s := openTest(t)
	const workers, batches, per = 4, 10, 5
	feeds := []Feed{
		createRemote(t, s, "https://example.org/a", Retention{}),
		createRemote(t, s, "https://example.org/b", Retention{MaxItems: 30}),
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*batches)
	for w := range workers {
		wg.Go(func() {
			for b := range batches {
				f := feeds[(w+b)%len(feeds)]
				items := make([]Item, per)
				for i := range items {
					// Half of the ids are shared between workers.
					id := fmt.Sprintf("w%d-b%d-i%d", w, b, i)
					if i%2 == 0 {
						id = fmt.Sprintf("shared-b%d-i%d", b, i)
					}
					items[i] = Item{ID: id, Published: t0.Add(time.Duration(b*per+i) * time.Second)}
				}
				if _, err := s.AddItems(f.ID, items); err != nil {
					errs <- err
				}
				if _, err := s.Items(f.ID, ItemQuery{Limit: 10}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[uint64]bool{}
	for _, f := range feeds {
		items, err := s.Items(f.ID, ItemQuery{})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := s.CountItems(f.ID)
		if n != len(items) {
			t.Errorf("feed %d: CountItems %d, Items %d", f.ID, n, len(items))
		}
		for _, it := range items {
			if seen[it.Seq] {
				t.Errorf("Seq %d given twice", it.Seq)
			}
			seen[it.Seq] = true
		}
	}
	if n, _ := s.CountItems(feeds[1].ID); n != 30 {
		t.Errorf("feed with MaxItems 30 holds %d", n)
	}
}
