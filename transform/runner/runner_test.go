package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type env struct {
	st    *storage.Store
	r     *Runner
	clock *schedule.VirtualClock
}

func newEnv(t *testing.T, clock schedule.Clock) *env {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Check(); err != nil {
			t.Errorf("store check: %v", err)
		}
		st.Close()
	})
	r, err := New(Options{Store: st, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	e := &env{st: st, r: r}
	e.clock, _ = clock.(*schedule.VirtualClock)
	return e
}

// sensor creates a sensor feed.
func (e *env) sensor(t *testing.T, name string) storage.Feed {
	t.Helper()
	f := storage.Feed{Kind: storage.KindSensor, Slug: name, Title: name, Policy: "auto"}
	if err := e.st.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

// post stores readings in feed f and notifies the runner.
func (e *env) post(t *testing.T, f storage.Feed, at time.Time, values ...float64) []storage.Item {
	t.Helper()
	var its []storage.Item
	for _, v := range values {
		id := fmt.Sprintf("%s/%d/%v", f.Slug, at.UnixNano(), v)
		its = append(its, storage.Item{ID: id, Title: fmt.Sprint(v), Published: at, Fetched: at,
			Reading: &storage.Reading{Value: v, Unit: "C", Sensor: f.Slug, Time: at}})
		at = at.Add(time.Millisecond)
	}
	added, err := e.st.AddItems(f.ID, its)
	if err != nil {
		t.Fatal(err)
	}
	e.r.Notify(f, added)
	return added
}

func (e *env) output(t *testing.T, id uint64) []storage.Item {
	t.Helper()
	in, err := e.r.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	its, err := e.st.Items(in.FeedID, storage.ItemQuery{Order: storage.ByArrivalAsc})
	if err != nil {
		t.Fatal(err)
	}
	return its
}

func hotPipe(slug string, sources ...string) transform.Pipe {
	p := transform.Pipe{Output: transform.Output{Slug: slug}}
	p.Nodes = append(p.Nodes, transform.Node{ID: "hot", Op: "filter", Config: json.RawMessage(`{"rules":[{"field":"value","op":"gt","value":20}]}`)})
	for i, s := range sources {
		id := fmt.Sprint("in", i)
		p.Nodes = append(p.Nodes, transform.Node{ID: id, Op: "source", Config: json.RawMessage(fmt.Sprintf(`{"feed":%q}`, s))})
		p.Nodes[0], p.Nodes[len(p.Nodes)-1] = p.Nodes[len(p.Nodes)-1], p.Nodes[0]
		p.Edges = append(p.Edges, transform.Edge{From: id, To: "hot"})
	}
	if len(sources) > 1 {
		p.Nodes = append(p.Nodes, transform.Node{ID: "u", Op: "union"})
		p.Edges = p.Edges[:0]
		for i := range sources {
			p.Edges = append(p.Edges, transform.Edge{From: fmt.Sprint("in", i), To: "u"})
		}
		p.Edges = append(p.Edges, transform.Edge{From: "u", To: "hot"})
	}
	p.Output.From = "hot"
	return p
}

func TestRunIncremental(t *testing.T) {
	clock := schedule.NewVirtualClock(t0)
	e := newEnv(t, clock)
	lab := e.sensor(t, "lab-1")
	e.post(t, lab, t0.Add(-time.Minute), 18, 22, 25)
	ctx := context.Background()
	info, err := e.r.Create(ctx, hotPipe("hot", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Slug != "hot" || info.Feeds["rss"] != "/feeds/hot.rss" || len(info.Inputs) != 1 || info.Inputs[0].FeedID != lab.ID {
		t.Errorf("info %+v", info)
	}
	res, err := e.r.RunNow(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.In != 3 || res.Out != 2 || res.Added != 2 {
		t.Errorf("first run %+v, want in 3 out 2 added 2", res)
	}
	out := e.output(t, info.ID)
	if len(out) != 2 || out[0].Reading.Value != 22 || !out[0].Published.Equal(t0) {
		t.Fatalf("output %+v", out)
	}
	if want := fmt.Sprintf("%d:", lab.ID); out[0].ID[:len(want)] != want {
		t.Errorf("output id %q is not namespaced by the input feed", out[0].ID)
	}
	clock.Advance(time.Minute)
	e.post(t, lab, t0.Add(time.Minute), 30, 10)
	res, err = e.r.RunNow(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.In != 2 || res.Added != 1 {
		t.Errorf("second run %+v, want only the 2 new items in and 1 added", res)
	}
	res, _ = e.r.RunNow(ctx, info.ID)
	if res.In != 0 || res.Added != 0 {
		t.Errorf("a run with nothing new: %+v", res)
	}
	info, _ = e.r.Get(info.ID)
	if info.Runs != 3 || info.Items != 3 || info.LastError != "" {
		t.Errorf("after three runs: %+v", info)
	}

	t.Run("reload keeps cursors", func(t *testing.T) {
		r2, err := New(Options{Store: e.st, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		if err := r2.Load(); err != nil {
			t.Fatal(err)
		}
		res, err := r2.RunNow(ctx, info.ID)
		if err != nil || res.In != 0 {
			t.Errorf("after a restart: %+v, %v", res, err)
		}
	})
}

func TestCreateErrors(t *testing.T) {
	e := newEnv(t, schedule.NewVirtualClock(t0))
	e.sensor(t, "lab-1")
	ctx := context.Background()
	_, err := e.r.Create(ctx, hotPipe("hot", "sensor/nope"))
	if !errors.Is(err, ErrInputNotFound) || !errors.Is(err, transform.ErrInvalid) {
		t.Fatalf("missing input: %v", err)
	}
	if d := transform.Details(err); len(d) != 1 || d[0].Node != "in0" || d[0].Field != "feed" {
		t.Errorf("details %+v", d)
	}
	p := hotPipe("hot", "sensor/lab-1")
	p.Output.Reduce = json.RawMessage(`{"levels":[{"above":1,"filters":[{"op":"NOPE"}]}]}`)
	if _, err := e.r.Create(ctx, p); !errors.Is(err, transform.ErrInvalid) || len(transform.Details(err)) == 0 ||
		transform.Details(err)[0].Field[:len("output.reduce")] != "output.reduce" {
		t.Errorf("bad reduce policy: %v %+v", err, transform.Details(err))
	}
	p = hotPipe("hot", "sensor/lab-1")
	p.Trigger = transform.Trigger{On: transform.OnCron, Cron: "@every 1ns"}
	if _, err := e.r.Create(ctx, p); !errors.Is(err, transform.ErrInvalid) || len(transform.Details(err)) != 1 ||
		transform.Details(err)[0].Field != "trigger.cron" {
		t.Errorf("a cron trigger under a second: %v %+v", err, transform.Details(err))
	}
	if _, err := e.r.Create(ctx, hotPipe("hot", "sensor/lab-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Create(ctx, hotPipe("hot", "sensor/lab-1")); !errors.Is(err, ErrSlugTaken) {
		t.Errorf("second pipe with the same slug: %v", err)
	}
	if _, err := e.r.Get(999); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(999): %v", err)
	}
}

func TestChainAndDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, schedule.RealClock{})
		lab := e.sensor(t, "lab-1")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.r.Run(ctx) }()
		first, err := e.r.Create(ctx, hotPipe("first", "sensor/lab-1"))
		if err != nil {
			t.Fatal(err)
		}
		second, err := e.r.Create(ctx, hotPipe("second", "pipe/first"))
		if err != nil {
			t.Fatal(err)
		}
		e.post(t, lab, time.Now(), 25, 15, 26)
		synctest.Wait()
		if n := len(e.output(t, second.ID)); n != 2 {
			t.Fatalf("second pipe holds %d items, want 2 (through the first)", n)
		}
		// A cycle through pipes is refused.
		if _, err := e.r.Update(ctx, first.ID, hotPipe("first", "pipe/second")); !errors.Is(err, transform.ErrInvalid) {
			t.Errorf("cycle: %v", err)
		}
		if err := e.r.Delete(first.ID); !errors.Is(err, ErrInUse) {
			t.Errorf("deleting a pipe another reads: %v", err)
		}
		if err := e.r.Delete(second.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.r.Delete(first.ID); err != nil {
			t.Fatal(err)
		}
		if list, _ := e.r.List(); len(list) != 0 {
			t.Errorf("pipes left: %+v", list)
		}
		cancel()
		<-done
	})
}

func TestTriggers(t *testing.T) {
	t.Run("mdpt runs on every arrival", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st, err := storage.Open(filepath.Join(t.TempDir(), "m.db"), storage.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			r, err := New(Options{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			e := &env{st: st, r: r}
			a, b, c := e.sensor(t, "a"), e.sensor(t, "b"), e.sensor(t, "c")
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- e.r.Run(ctx) }()
			p := hotPipe("m", "sensor/a", "sensor/b", "sensor/c")
			p.Trigger = transform.Trigger{On: transform.OnMDPT, M: 3}
			info, err := e.r.Create(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			// Rounds every 5 minutes; a's reading always first.
			for k := range 6 {
				e.post(t, a, time.Now(), 30)
				synctest.Wait()
				e.post(t, b, time.Now().Add(time.Second), 31)
				e.post(t, c, time.Now().Add(2*time.Second), 32)
				synctest.Wait()
				if k < 5 {
					time.Sleep(5 * time.Minute)
				}
			}
			in, _ := e.r.Get(info.ID)
			if in.Items != 18 {
				t.Errorf("output holds %d items, want all 18 (the pipe runs on every arrival)", in.Items)
			}
			f, _ := st.Feed(in.FeedID)
			if h := e.r.Hints(f, time.Now()); h.Next.IsZero() {
				t.Error("no next update predicted after 6 regular rounds")
			}
			cancel()
			<-done
		})
	})
	t.Run("cron", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, schedule.RealClock{})
			e.sensor(t, "a")
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- e.r.Run(ctx) }()
			p := hotPipe("c", "sensor/a")
			p.Trigger = transform.Trigger{On: transform.OnCron, Cron: "@every 10m"}
			info, err := e.r.Create(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(25 * time.Minute)
			synctest.Wait()
			in, _ := e.r.Get(info.ID)
			if in.Runs != 2 {
				t.Errorf("runs after 25 min of @every 10m: %d, want 2", in.Runs)
			}
			f, _ := e.st.Feed(in.FeedID)
			h := e.r.Hints(f, time.Now())
			if !h.Next.Equal(time.Now().Add(5 * time.Minute)) {
				t.Errorf("next update %v, want in 5 min", h.Next)
			}
			if !h.Due.Equal(h.Next.Add(cronMargin)) {
				t.Errorf("planned update %v, want the cron time plus %v", h.Due, cronMargin)
			}
			cancel()
			<-done
		})
	})
}

// A stored pipe whose cron schedule never fires (saved before such a
// schedule was refused) never runs, and the cron pipes beside it keep
// their times.
func TestCronThatNeverFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, schedule.RealClock{})
		e.sensor(t, "a")
		ctx, cancel := context.WithCancel(t.Context())
		var ids []uint64
		for _, slug := range []string{"c", "never"} {
			p := hotPipe(slug, "sensor/a")
			p.Trigger = transform.Trigger{On: transform.OnCron, Cron: "@every 10m"}
			info, err := e.r.Create(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, info.ID)
		}
		sp, err := e.st.Pipe(ids[1])
		if err != nil {
			t.Fatal(err)
		}
		sp.Def = bytes.Replace(sp.Def, []byte(`"@every 10m"`), []byte(`"0 0 31 2 *"`), 1)
		if err := e.st.UpdatePipe(sp); err != nil {
			t.Fatal(err)
		}
		r, err := New(Options{Store: e.st, Clock: schedule.RealClock{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Load(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		time.Sleep(25 * time.Minute)
		synctest.Wait()
		for i, want := range []int64{2, 0} {
			if in, _ := r.Get(ids[i]); in.Runs != want {
				t.Errorf("pipe %s: %d runs in 25 minutes, want %d", in.Slug, in.Runs, want)
			}
		}
		cancel()
		<-done
	})
}

func TestFailedRunKeepsInput(t *testing.T) {
	clock := schedule.NewVirtualClock(t0)
	e := newEnv(t, clock)
	lab := e.sensor(t, "lab-1")
	ctx := context.Background()
	p := hotPipe("w", "sensor/lab-1")
	p.Nodes = append(p.Nodes, transform.Node{ID: "x", Op: "where", Config: json.RawMessage(`{"expr":"int(title) > 0"}`)})
	p.Edges = append(p.Edges, transform.Edge{From: "hot", To: "x"})
	p.Output.From = "x"
	info, err := e.r.Create(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	e.post(t, lab, t0, 25.5)
	if _, err := e.r.RunNow(ctx, info.ID); err == nil {
		t.Fatal("the run succeeded")
	}
	in, _ := e.r.Get(info.ID)
	if in.LastError == "" || in.Items != 0 {
		t.Errorf("after a failed run: %+v", in)
	}
	// Fix the pipe: the item the failed run saw is processed now.
	if _, err := e.r.Update(ctx, info.ID, hotPipe("w", "sensor/lab-1")); err != nil {
		t.Fatal(err)
	}
	res, err := e.r.RunNow(ctx, info.ID)
	if err != nil || res.Added != 1 {
		t.Errorf("after the fix: %+v, %v", res, err)
	}
	if in, _ := e.r.Get(info.ID); in.LastError != "" {
		t.Errorf("last error kept after a good run: %q", in.LastError)
	}
}

func TestPreview(t *testing.T) {
	e := newEnv(t, schedule.NewVirtualClock(t0))
	lab := e.sensor(t, "lab-1")
	e.post(t, lab, t0, 18, 22, 25)
	pv, err := e.r.Preview(context.Background(), hotPipe("", "sensor/lab-1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pv.Nodes) != 2 || pv.Nodes[0].Count != 3 || pv.Nodes[1].Count != 2 || len(pv.Output) != 2 {
		t.Errorf("preview %+v", pv)
	}
	if list, _ := e.r.List(); len(list) != 0 {
		t.Error("a preview created a pipe")
	}
}

// A preview of a definition refuses what saving it would: an @every
// under a second, a source reading the pipe's own output by its slug or
// through another pipe; the saved pipe's own definition still previews.
func TestPreviewChecksAsSave(t *testing.T) {
	e := newEnv(t, schedule.NewVirtualClock(t0))
	lab := e.sensor(t, "lab-1")
	e.post(t, lab, t0, 18, 22, 25)
	ctx := context.Background()
	a, err := e.r.Create(ctx, hotPipe("a", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Create(ctx, hotPipe("b", "pipe/a")); err != nil {
		t.Fatal(err)
	}
	fast := hotPipe("", "sensor/lab-1")
	fast.Trigger = transform.Trigger{On: transform.OnCron, Cron: "@every 1ms"}
	tests := []struct {
		name string
		def  transform.Pipe
		id   uint64
		says string // "" for a preview that runs
	}{
		{"a cron under a second", fast, 0, "trigger.cron"},
		{"its own slug", hotPipe("pb", "pipe/pb"), 0, "would read its own output"},
		{"through another pipe", hotPipe("a", "pipe/b"), a.ID, "would read its own output (a → b → a)"},
		{"an unnamed definition reading a pipe", hotPipe("", "pipe/a"), 0, ""},
		{"the saved definition", transform.Pipe{}, a.ID, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.r.Preview(ctx, tt.def, tt.id)
			if tt.says == "" {
				if err != nil {
					t.Fatalf("preview: %v", err)
				}
				return
			}
			if !errors.Is(err, transform.ErrInvalid) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("preview: %v, want an invalid definition saying %q", err, tt.says)
			}
		})
	}
}

func TestHintsFollowOutput(t *testing.T) {
	clock := schedule.NewVirtualClock(t0)
	e := newEnv(t, clock)
	lab := e.sensor(t, "lab-1")
	ctx := context.Background()
	info, err := e.r.Create(ctx, hotPipe("h", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	for k := range 12 {
		e.post(t, lab, clock.Now(), 25+float64(k))
		if _, err := e.r.RunNow(ctx, info.ID); err != nil {
			t.Fatal(err)
		}
		clock.Advance(5 * time.Minute)
	}
	f, _ := e.st.Feed(info.FeedID)
	h := e.r.Hints(f, clock.Now().Add(-time.Minute))
	next := h.Next
	if len(h.Formats) != 3 {
		t.Errorf("formats %v", h.Formats)
	}
	if !h.Due.IsZero() {
		t.Errorf("planned update %v for a pipe of a posted sensor, want none", h.Due)
	}
	want := clock.Now()
	if d := next.Sub(want); d < -30*time.Second || d > 30*time.Second {
		t.Errorf("next update %v, want about %v", next, want)
	}
}

// OnOutput hears of each run that added output items, and of nothing else.
func TestOnOutput(t *testing.T) {
	clock := schedule.NewVirtualClock(t0)
	e := newEnv(t, clock)
	var got []string
	r, err := New(Options{Store: e.st, Clock: clock, OnOutput: func(f storage.Feed, items []storage.Item) {
		for _, it := range items {
			got = append(got, f.Slug+":"+it.Title)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.r = r
	lab := e.sensor(t, "lab-1")
	ctx := context.Background()
	info, err := r.Create(ctx, hotPipe("hot", "sensor/lab-1"))
	if err != nil {
		t.Fatal(err)
	}
	e.post(t, lab, t0, 18, 22)
	if _, err := r.RunNow(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunNow(ctx, info.ID); err != nil { // nothing new
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "hot:22" {
		t.Errorf("OnOutput heard %q, want [hot:22]", got)
	}
}

// cleanOutput fits a run's output within the store's limits where
// operators allow more: a title is cut at a character's start, an id
// too long is named by its digest, the same each time, so a rerun adds
// nothing.
func TestCleanOutputFitsTheStore(t *testing.T) {
	longID := strings.Repeat("i", storage.MaxIDLen+1)
	tests := []struct {
		name       string
		in         storage.Item
		title, id  string
		idIsDigest bool
	}{
		{"within the limits", storage.Item{ID: "a", Title: "t"}, "t", "a", false},
		{"a title at the limit", storage.Item{ID: "a", Title: strings.Repeat("x", storage.MaxTitleLen)}, strings.Repeat("x", storage.MaxTitleLen), "a", false},
		{"a title over it", storage.Item{ID: "a", Title: strings.Repeat("é", storage.MaxTitleLen)}, strings.Repeat("é", storage.MaxTitleLen/2), "a", false},
		{"an id over it", storage.Item{ID: longID, GUID: longID, Title: "t"}, "t", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := tt.in
			cleanOutput(&it)
			if it.Title != tt.title {
				t.Errorf("title of %d bytes, want %d", len(it.Title), len(tt.title))
			}
			if tt.idIsDigest {
				again := tt.in
				cleanOutput(&again)
				if !strings.HasPrefix(it.ID, "sha256:") || len(it.ID) > storage.MaxIDLen || it.GUID != it.ID || again.ID != it.ID {
					t.Errorf("id %q (guid %q, again %q), want the same digest", it.ID, it.GUID, again.ID)
				}
			} else if it.ID != tt.id {
				t.Errorf("id %q, want %q", it.ID, tt.id)
			}
			if err := storage.ValidateItems(1, []storage.Item{it}, t0); err != nil {
				t.Errorf("the store refuses it: %v", err)
			}
		})
	}
}
