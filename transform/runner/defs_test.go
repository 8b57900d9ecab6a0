package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// together runs the calls at once and returns their errors, in order.
func together(calls ...func() error) []error {
	errs := make([]error, len(calls))
	var start, done sync.WaitGroup
	start.Add(1)
	for i, call := range calls {
		done.Go(func() {
			start.Wait()
			errs[i] = call()
		})
	}
	start.Done()
	done.Wait()
	return errs
}

// Changes of definitions made at the same time are checked one after the
// other: two updates that would each close a cycle with the other, or a
// pipe deleted while another is made to read it, or a feed removed while
// a pipe is made to read it, never both succeed.
func TestConcurrentChangesChecked(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, schedule.NewVirtualClock(t0))
	const tries = 40
	tests := []struct {
		name string
		// race returns the two changes to make at once, after set-up.
		race func(t *testing.T, i int) (a, b func() error)
	}{
		{"two updates closing a cycle", func(t *testing.T, i int) (func() error, func() error) {
			in := fmt.Sprintf("pipe/cyc-%d-", i)
			s := e.sensor(t, fmt.Sprint("cyc-in-", i))
			a, err := e.r.Create(ctx, hotPipe(fmt.Sprint("cyc-", i, "-a"), "sensor/"+s.Slug))
			if err != nil {
				t.Fatal(err)
			}
			b, err := e.r.Create(ctx, hotPipe(fmt.Sprint("cyc-", i, "-b"), "sensor/"+s.Slug))
			if err != nil {
				t.Fatal(err)
			}
			return func() error {
					_, err := e.r.Update(ctx, a.ID, hotPipe(a.Slug, in+"b"))
					return err
				}, func() error {
					_, err := e.r.Update(ctx, b.ID, hotPipe(b.Slug, in+"a"))
					return err
				}
		}},
		{"a pipe deleted as another is made to read it", func(t *testing.T, i int) (func() error, func() error) {
			s := e.sensor(t, fmt.Sprint("del-in-", i))
			a, err := e.r.Create(ctx, hotPipe(fmt.Sprint("del-", i), "sensor/"+s.Slug))
			if err != nil {
				t.Fatal(err)
			}
			return func() error { return e.r.Delete(a.ID) }, func() error {
				_, err := e.r.Create(ctx, hotPipe(fmt.Sprint("del-reader-", i), "pipe/"+a.Slug))
				return err
			}
		}},
		{"a feed removed as a pipe is made to read it", func(t *testing.T, i int) (func() error, func() error) {
			s := e.sensor(t, fmt.Sprint("rm-in-", i))
			return func() error {
					return e.r.ReleaseFeed(s.ID, func() error { return e.st.DeleteFeed(s.ID) })
				}, func() error {
					_, err := e.r.Create(ctx, hotPipe(fmt.Sprint("rm-reader-", i), "sensor/"+s.Slug))
					return err
				}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tries {
				errs := together(tt.race(t, i))
				if errs[0] == nil && errs[1] == nil {
					t.Fatalf("try %d: both changes succeeded", i)
				}
				if errs[0] != nil && errs[1] != nil {
					t.Fatalf("try %d: both changes failed: %v; %v", i, errs[0], errs[1])
				}
			}
		})
	}
	// No stored pipe reads a pipe or feed that is gone, and no pipe reads
	// itself.
	list, err := e.r.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		for _, in := range p.Inputs {
			if _, err := e.st.Feed(in.FeedID); err != nil {
				t.Errorf("pipe %q reads feed %d: %v", p.Slug, in.FeedID, err)
			}
		}
		if path := e.r.readsItself(p.ID, p.Inputs); path != "" {
			t.Errorf("pipe %q reads itself: %s", p.Slug, path)
		}
	}
}

// A feed a pipe reads is not removed; once the pipe is gone, it is.
func TestReleaseFeed(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, schedule.NewVirtualClock(t0))
	s := e.sensor(t, "lab-1")
	p, err := e.r.Create(ctx, hotPipe("hot", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	remove := func() error { removed++; return e.st.DeleteFeed(s.ID) }
	if err := e.r.ReleaseFeed(s.ID, remove); !errors.Is(err, ErrFeedInUse) || removed != 0 {
		t.Fatalf("feed a pipe reads: %v, removed %d times", err, removed)
	} else if want := `pipe "hot" reads it`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if err := e.r.Delete(p.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.r.ReleaseFeed(s.ID, remove); err != nil || removed != 1 {
		t.Fatalf("feed no pipe reads: %v, removed %d times", err, removed)
	}
	if _, err := e.st.Feed(s.ID); !errors.Is(err, storage.ErrFeedNotFound) {
		t.Errorf("feed after its removal: %v", err)
	}
	// The pipe cannot be made again on the removed feed.
	if _, err := e.r.Create(ctx, hotPipe("hot", "sensor/lab-1")); !errors.Is(err, transform.ErrInvalid) && !errors.Is(err, ErrInputNotFound) {
		t.Errorf("pipe on a removed feed: %v", err)
	}
}

// The output feed carries the definition's description, and follows it.
func TestOutputDescription(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, schedule.NewVirtualClock(t0))
	e.sensor(t, "lab-1")
	def := hotPipe("hot", "sensor/lab-1")
	for i, desc := range []string{"Readings over 20 °C", "Readings over 20 °C, lab 1", ""} {
		def.Output.Description = desc
		var info Info
		var err error
		if i == 0 {
			info, err = e.r.Create(ctx, def)
		} else {
			info, err = e.r.Update(ctx, 1, def)
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := e.st.Feed(info.FeedID)
		if err != nil {
			t.Fatal(err)
		}
		if f.Description != desc {
			t.Errorf("output feed's description %q, want %q", f.Description, desc)
		}
	}
}

// A change waiting for its pipe's run (a slow one) holds up no other
// change: removing another feed goes ahead meanwhile.
func TestChangeWaitingForItsRunHoldsNoOther(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, schedule.NewVirtualClock(t0))
	e.sensor(t, "lab-1")
	other := e.sensor(t, "lab-2")
	info, err := e.r.Create(ctx, hotPipe("hot", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	e.r.mu.Lock()
	p := e.r.pipes[info.ID]
	e.r.mu.Unlock()
	p.runMu.Lock() // a run of the pipe, taking its time
	updated := make(chan error)
	go func() {
		_, err := e.r.Update(ctx, info.ID, hotPipe("hot", "sensor/lab-1"))
		updated <- err
	}()
	released := make(chan error)
	go func() {
		var err error
		for range 200 { // while the update waits for the run
			if err = e.r.ReleaseFeed(other.ID, func() error { return nil }); err != nil {
				break
			}
			runtime.Gosched()
		}
		released <- err
	}()
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("removing another feed waited for the pipe's run")
	}
	p.runMu.Unlock()
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
}

// A pipe's output that another pipe reads is refused as a pipe's output
// (delete the pipe), not as a feed a pipe reads.
func TestReleasePipeOutput(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, schedule.NewVirtualClock(t0))
	e.sensor(t, "lab-1")
	first, err := e.r.Create(ctx, hotPipe("first", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Create(ctx, hotPipe("second", "pipe/first")); err != nil {
		t.Fatal(err)
	}
	err = e.r.ReleaseFeed(first.FeedID, func() error { return e.st.DeleteFeed(first.FeedID) })
	if !errors.Is(err, storage.ErrPipeOutput) {
		t.Errorf("releasing a pipe's output: %v, want storage.ErrPipeOutput", err)
	}
}

// A pipe another pipe reads does not take another slug: the reader names
// it by the old one. Without readers it does; a run of a pipe deleted
// meanwhile is "not found".
func TestSlugChangeWhileRead(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, schedule.NewVirtualClock(t0))
	e.sensor(t, "lab-1")
	first, err := e.r.Create(ctx, hotPipe("first", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.r.Create(ctx, hotPipe("second", "pipe/first"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Update(ctx, first.ID, hotPipe("renamed", "sensor/lab-1")); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), `pipe "second" reads it`) {
		t.Errorf("renaming a pipe another reads: %v", err)
	}
	if _, err := e.r.Update(ctx, second.ID, hotPipe("second-renamed", "pipe/first")); err != nil {
		t.Errorf("renaming a pipe no pipe reads: %v", err)
	}
	if err := e.r.Delete(second.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.RunNow(ctx, second.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("run of a deleted pipe: %v", err)
	}
}
