package aggregator

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/storage"
)

// docServer serves one document at a time, without validators (every
// poll reads the whole body).
type docServer struct {
	mu  sync.Mutex
	doc []byte
	srv *httptest.Server
}

func newDocServer(t *testing.T, doc []byte) *docServer {
	t.Helper()
	s := &docServer{doc: doc}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		doc := s.doc
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/atom+xml")
		_, _ = w.Write(doc)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *docServer) set(doc []byte) {
	s.mu.Lock()
	s.doc = doc
	s.mu.Unlock()
}

// newTestService returns a service on a fresh store that may fetch from
// loopback.
func newTestService(t *testing.T) (*Service, *storage.Store) {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := NewService(ServiceOptions{
		Store:   st,
		Fetcher: fetcher.New(fetcher.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc, st
}

// An Atom entry that leaves an element open is read at every poll, not
// only the first; a document that does not parse makes the next poll
// parse the whole document, whatever the last stored one held.
func TestUnclosedElementEveryPoll(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("testdata", "unbalanced", "atom-unclosed.xml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newDocServer(t, doc)
	svc, st := newTestService(t)
	f, err := svc.Subscribe(storage.Feed{URL: srv.srv.URL + "/feed"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seen := func() int {
		g := svc.guard(f.ID)
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.seen)
	}
	for poll := 1; poll <= 3; poll++ {
		if _, err := svc.FetchNow(ctx, f.ID); err != nil {
			t.Fatal(err)
		}
		got, err := st.Feed(f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.LastError != "" || got.Items != 2 {
			t.Fatalf("poll %d: last error %q, %d items; want none and 2", poll, got.LastError, got.Items)
		}
	}
	if seen() != 2 {
		t.Fatalf("%d hashes remembered, want 2", seen())
	}
	srv.set([]byte(`<feed xmlns="http://www.w3.org/2005/Atom"><entry>`))
	if _, err := svc.FetchNow(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Feed(f.ID); got.LastError == "" {
		t.Fatal("a truncated document parsed")
	}
	if seen() != 0 {
		t.Fatalf("after a failed parse %d hashes are still remembered", seen())
	}
}
