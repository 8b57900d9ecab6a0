package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// spyStore is a Store counting the writes made through it. A write
// naming a key that hold accepts tells entered and waits until release
// is closed; fail, when set, makes PluginApply fail instead.
type spyStore struct {
	Store
	mu      sync.Mutex
	writes  int
	hold    func(key string) bool
	entered chan struct{}
	release chan struct{}
	fail    error
}

func (s *spyStore) write(keys ...string) error {
	s.mu.Lock()
	s.writes++
	fail := s.fail
	var entered, release chan struct{}
	if s.hold != nil && slices.ContainsFunc(keys, s.hold) {
		entered, release = s.entered, s.release
		s.hold = nil // one write only
	}
	s.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
		<-release
	}
	return fail
}

func (s *spyStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// holdWrite makes the next write naming a key hold accepts wait until
// the function returned is called; the channel returned tells when it
// has begun.
// notifyHeld starts s.Notify(outFeed, items("a", 1)) with the first write
// of a key hold accepts held, and returns once the write began: the
// channel closed when the call returns, and the release of its write.
func notifyHeld(s *Service, sp *spyStore, hold func(string) bool) (done <-chan struct{}, release func()) {
	entered, release := sp.holdWrite(hold)
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		s.Notify(outFeed, items("a", 1))
	}()
	<-entered
	return ch, release
}

func (s *spyStore) holdWrite(hold func(string) bool) (entered <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.entered, s.release = hold, make(chan struct{}), make(chan struct{})
	r := s.release
	var once sync.Once
	return s.entered, func() { once.Do(func() { close(r) }) }
}

func (s *spyStore) PluginPut(plugin, key string, value []byte) error {
	if err := s.write(key); err != nil {
		return err
	}
	return s.Store.PluginPut(plugin, key, value)
}

func (s *spyStore) PluginDelete(plugin, key string) error {
	s.write()
	return s.Store.PluginDelete(plugin, key)
}

func (s *spyStore) PluginApply(plugin string, ops []storage.PluginOp) error {
	keys := make([]string, len(ops))
	for i, op := range ops {
		keys[i] = op.Key
	}
	if err := s.write(keys...); err != nil {
		return err
	}
	return s.Store.PluginApply(plugin, ops)
}

// spy builds a service on a spyStore over e's store.
func (e *env) spy(t *testing.T, opt Options) (*Service, *spyStore) {
	t.Helper()
	sp := &spyStore{Store: e.st}
	opt.Store, opt.Now = sp, e.clock.Now
	if opt.Client == nil {
		opt.Client = loopback()
	}
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return s, sp
}

// within runs fn in a goroutine and fails the test unless it returns
// within a few seconds (it waits for s.mu, say, while a held write holds
// it): then it calls release and waits for fn before failing.
func within(t *testing.T, release func(), what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Errorf("%s did not return within 5 s", what)
		release()
		<-done
		t.FailNow()
	}
}

// queueSeqs is hook id's queue as delivery numbers.
func queueSeqs(s *Service, id string) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	for _, d := range s.hooks[id].queue {
		out = append(out, d.seq)
	}
	return out
}

func isDelivery(k string) bool { return strings.HasPrefix(k, "delivery/") }

// A Notify stores the deliveries of all its hooks in one write, and
// trims all its full queues in another.
func TestNotifyOneWrite(t *testing.T) {
	tests := []struct {
		name       string
		hooks      int
		items      int
		full       bool // every queue full (MaxPending 1) before
		bodies     int  // deliveries per hook after
		wantWrites int
	}{
		{"one hook", 1, 1, false, 1, 1},
		{"four hooks", 4, 3, false, 1, 1},
		{"four hooks, three deliveries each", 4, 2*MaxDeliveryItems + 1, false, 3, 1},
		{"four full queues", 4, 1, true, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			opt := Options{}
			if tt.full {
				opt.MaxPending = 1
			}
			s, sp := e.spy(t, opt)
			var ids []string
			for i := range tt.hooks {
				ids = append(ids, mustCreate(t, s, "pipe/out", fmt.Sprintf("http://receiver%d.test/", i)).ID)
			}
			mustCreate(t, s, "pipe/other", "http://other.test/")
			if tt.full {
				s.Notify(outFeed, items("before", 1))
			}
			before := sp.count()
			s.Notify(outFeed, items("a", tt.items))
			if got := sp.count() - before; got != tt.wantWrites {
				t.Errorf("%d store writes, want %d", got, tt.wantWrites)
			}
			for _, id := range ids {
				if got := hookOf(t, s, id); got.Pending != tt.bodies || (got.Dropped != 0) != tt.full {
					t.Errorf("hook %s: %d pending, %d dropped, want %d pending", id, got.Pending, got.Dropped, tt.bodies)
				}
			}
			n := 0
			if err := e.st.PluginList(Name, func(k string, _ []byte) error {
				if isDelivery(k) {
					n++
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if n != tt.hooks*tt.bodies {
				t.Errorf("%d deliveries stored, want %d", n, tt.hooks*tt.bodies)
			}
		})
	}
}

// The API and the delivery loop do not wait for Notify's write: the
// service's lock is free meanwhile, and the deliveries are queued once
// stored.
func TestNotifyWritesWithoutTheLock(t *testing.T) {
	e := newEnv(t)
	s, sp := e.spy(t, Options{})
	h := mustCreate(t, s, "pipe/out", "http://receiver.test/")
	done, release := notifyHeld(s, sp, isDelivery)
	defer release()
	within(t, release, "Hooks during Notify's write", func() {
		if got := s.Hooks(); len(got) != 1 || got[0].Pending != 0 {
			t.Errorf("during the write: %+v, want the hook with nothing pending", got)
		}
	})
	within(t, release, "a delivery step during Notify's write", func() {
		if _, worked := s.step(context.Background()); worked {
			t.Error("a delivery not yet stored was attempted")
		}
	})
	release()
	<-done
	if got := hookOf(t, s, h.ID).Pending; got != 1 {
		t.Errorf("after the write: %d pending, want 1", got)
	}
}

// A hook deleted while Notify stores its deliveries keeps none of them.
func TestNotifyDeleteMeanwhile(t *testing.T) {
	e := newEnv(t)
	s, sp := e.spy(t, Options{})
	gone := mustCreate(t, s, "pipe/out", "http://gone.test/")
	kept := mustCreate(t, s, "pipe/out", "http://kept.test/")
	done, release := notifyHeld(s, sp, isDelivery)
	defer release()
	within(t, release, "Delete during Notify's write", func() {
		if err := s.Delete(gone.ID); err != nil {
			t.Error(err)
		}
	})
	release()
	<-done
	var keys []string
	if err := e.st.PluginList(Name, func(k string, _ []byte) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []string{deliveryKey(kept.ID, 0), hookKey(kept.ID)}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("records %q, want %q", keys, want)
	}
	if got := hookOf(t, s, kept.ID).Pending; got != 1 {
		t.Errorf("the other hook: %d pending, want 1", got)
	}
}

// Concurrent Notify calls queue each hook's deliveries in the order
// they were numbered, whichever write ends first: a later delivery
// waits for an earlier one still being stored.
func TestNotifyConcurrentOrder(t *testing.T) {
	t.Run("a later write ends first", func(t *testing.T) {
		e := newEnv(t)
		rc := newReceiver(t, 200)
		s, sp := e.spy(t, Options{})
		h := mustCreate(t, s, "pipe/out", rc.URL)
		// The first Notify's write (delivery 0) waits; the second's does not.
		first, release := notifyHeld(s, sp, func(k string) bool { return k == deliveryKey(h.ID, 0) })
		defer release()
		within(t, release, "a second Notify during the first one's write", func() { s.Notify(outFeed, items("b", 1)) })
		if got := hookOf(t, s, h.ID).Pending; got != 0 {
			t.Errorf("while the first delivery is being stored: %d pending, want 0 (the second waits for it)", got)
		}
		release()
		<-first
		if got := queueSeqs(s, h.ID); fmt.Sprint(got) != "[0 1]" {
			t.Errorf("queue %v, want [0 1]", got)
		}
		for _, worked := s.step(context.Background()); worked; _, worked = s.step(context.Background()) {
		}
		if rc.count() != 2 || !bytes.Contains(rc.bodies[0], []byte(`"id":"a0"`)) || !bytes.Contains(rc.bodies[1], []byte(`"id":"b0"`)) {
			t.Errorf("%d deliveries, not a0 then b0", rc.count())
		}
	})
	// Many calls at once (for the race detector): every delivery is
	// queued, in number order.
	t.Run("many calls", func(t *testing.T) {
		e := newEnv(t)
		s := e.service(t, Options{MaxPending: 1000})
		var ids []string
		for i := range 3 {
			ids = append(ids, mustCreate(t, s, "pipe/out", fmt.Sprintf("http://receiver%d.test/", i)).ID)
		}
		const workers, calls = 6, 20
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c := range calls {
					s.Notify(outFeed, items(fmt.Sprintf("w%d-%d-", w, c), 1))
				}
			}()
		}
		wg.Wait()
		for _, id := range ids {
			got := queueSeqs(s, id)
			if len(got) != workers*calls {
				t.Fatalf("hook %s: %d queued, want %d", id, len(got), workers*calls)
			}
			for i, seq := range got {
				if seq != uint64(i) {
					t.Fatalf("hook %s: queue %v not in number order", id, got)
				}
			}
		}
	})
}

// A failed write is logged once and queues nothing; the deliveries
// numbered after it are queued.
func TestNotifyWriteFails(t *testing.T) {
	e := newEnv(t)
	var logs bytes.Buffer
	var logMu sync.Mutex
	s, sp := e.spy(t, Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))})
	a := mustCreate(t, s, "pipe/out", "http://a.test/")
	b := mustCreate(t, s, "pipe/out", "http://b.test/")
	sp.mu.Lock()
	sp.fail = errors.New("disk full")
	sp.mu.Unlock()
	s.Notify(outFeed, items("a", 1))
	sp.mu.Lock()
	sp.fail = nil
	sp.mu.Unlock()
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if n := strings.Count(out, "level=ERROR"); n != 1 || !strings.Contains(out, "disk full") {
		t.Errorf("%d errors logged, want 1 with the store's error: %s", n, out)
	}
	for _, id := range []string{a.ID, b.ID} {
		if got := hookOf(t, s, id).Pending; got != 0 {
			t.Errorf("after a failed write: %d pending", got)
		}
	}
	s.Notify(outFeed, items("b", 1))
	for _, id := range []string{a.ID, b.ID} {
		if got := queueSeqs(s, id); fmt.Sprint(got) != "[1]" {
			t.Errorf("hook %s after the next Notify: queue %v, want [1]", id, got)
		}
	}
}

// A failed write lets the deliveries numbered after it be queued, and
// wakes the delivery loop for them.
func TestNotifyWriteFailsReleasesLater(t *testing.T) {
	e := newEnv(t)
	s, sp := e.spy(t, Options{})
	h := mustCreate(t, s, "pipe/out", "http://receiver.test/")
	sp.mu.Lock()
	sp.fail = errors.New("disk full") // the first write, held, fails
	sp.mu.Unlock()
	first, release := notifyHeld(s, sp, isDelivery)
	defer release()
	sp.mu.Lock()
	sp.fail = nil
	sp.mu.Unlock()
	within(t, release, "a second Notify during the first one's write", func() { s.Notify(outFeed, items("b", 1)) })
	select {
	case <-s.wake: // the second Notify's wake: nothing to deliver yet
	default:
	}
	if got := hookOf(t, s, h.ID).Pending; got != 0 {
		t.Fatalf("%d pending before the first write ends, want 0", got)
	}
	release()
	<-first
	if got := queueSeqs(s, h.ID); fmt.Sprint(got) != "[1]" {
		t.Errorf("queue %v, want [1]", got)
	}
	select {
	case <-s.wake:
	default:
		t.Error("the delivery loop was not woken for the delivery queued")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
