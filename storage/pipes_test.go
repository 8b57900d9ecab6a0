package storage

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// pipeDef is a small pipe definition; storage does not interpret it.
const pipeDef = `{"nodes":[{"id":"a","op":"source","config":{"feed":"sensor/lab-1"}}],"output":{"slug":"x"}}`

// createPipe creates a pipe with this slug and output retention.
func createPipe(t testing.TB, s *Store, slug string, r Retention) (Pipe, Feed) {
	t.Helper()
	p := Pipe{Slug: slug, Def: json.RawMessage(pipeDef)}
	out := Feed{Kind: KindPipe, Slug: slug, Title: "Pipe " + slug, Policy: "pipe", Retention: r}
	if err := s.CreatePipe(&p, &out); err != nil {
		t.Fatalf("CreatePipe(%q): %v", slug, err)
	}
	return p, out
}

// snapshot is everything a failed pipe call must leave unchanged.
type snapshot struct {
	Pipes []Pipe
	Feeds []Feed
	Seq   uint64
}

func takeSnapshot(t testing.TB, s *Store) snapshot {
	t.Helper()
	pipes, err := s.Pipes()
	if err != nil {
		t.Fatal(err)
	}
	feeds, err := s.Feeds()
	if err != nil {
		t.Fatal(err)
	}
	seq, err := s.LastSeq()
	if err != nil {
		t.Fatal(err)
	}
	return snapshot{pipes, feeds, seq}
}

func TestCreatePipe(t *testing.T) {
	s := openTest(t)
	taken, _ := createPipe(t, s, "taken", Retention{})
	if err := s.CreateFeed(&Feed{Kind: KindPipe, Slug: "orphan"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateFeed(&Feed{Kind: KindSensor, Slug: "lab-1"}); err != nil {
		t.Fatal(err)
	}
	out := func(slug string) *Feed { return &Feed{Kind: KindPipe, Slug: slug, Title: "T " + slug} }
	tests := []struct {
		name string
		pipe *Pipe
		out  *Feed
		want error
	}{
		{"pipe", &Pipe{Slug: "regional-mean", Def: json.RawMessage(pipeDef)}, out("regional-mean"), nil},
		{"with state and counters", &Pipe{Slug: "stateful", Def: json.RawMessage(pipeDef), State: json.RawMessage(`{"cursor":7}`), Runs: 3}, out("stateful"), nil},
		{"a sensor's slug", &Pipe{Slug: "lab-1", Def: json.RawMessage(pipeDef)}, out("lab-1"), nil},
		{"slug of another pipe", &Pipe{Slug: "taken", Def: json.RawMessage(pipeDef)}, out("taken"), ErrPipeExists},
		{"slug of a pipe feed", &Pipe{Slug: "orphan", Def: json.RawMessage(pipeDef)}, out("orphan"), ErrFeedExists},
		{"output of another kind", &Pipe{Slug: "k", Def: json.RawMessage(pipeDef)}, &Feed{Kind: KindSensor, Slug: "k"}, ErrInvalid},
		{"output under another slug", &Pipe{Slug: "a", Def: json.RawMessage(pipeDef)}, out("b"), ErrInvalid},
		{"no slug", &Pipe{Def: json.RawMessage(pipeDef)}, out(""), ErrInvalid},
		{"bad slug", &Pipe{Slug: "a/b", Def: json.RawMessage(pipeDef)}, out("a/b"), ErrInvalid},
		{"no definition", &Pipe{Slug: "nodef"}, out("nodef"), ErrInvalid},
		{"blank definition", &Pipe{Slug: "blank", Def: json.RawMessage("  ")}, out("blank"), ErrInvalid},
		{"malformed definition", &Pipe{Slug: "bad", Def: json.RawMessage(`{"nodes":`)}, out("bad"), ErrInvalid},
		{"malformed state", &Pipe{Slug: "bads", Def: json.RawMessage(pipeDef), State: json.RawMessage(`{`)}, out("bads"), ErrInvalid},
		{"too large", &Pipe{Slug: "big", Def: json.RawMessage(`"` + strings.Repeat("d", MaxPipeSize) + `"`)}, out("big"), ErrInvalid},
		{"last error too long", &Pipe{Slug: "err", Def: json.RawMessage(pipeDef), LastError: strings.Repeat("e", MaxPipeErrorLen+1)}, out("err"), ErrInvalid},
		{"negative counter", &Pipe{Slug: "neg", Def: json.RawMessage(pipeDef), Runs: -1}, out("neg"), ErrInvalid},
		{"invalid output feed", &Pipe{Slug: "w", Def: json.RawMessage(pipeDef)}, &Feed{Kind: KindPipe, Slug: "w", Weight: -1}, ErrInvalid},
		{"nil output", &Pipe{Slug: "nil", Def: json.RawMessage(pipeDef)}, nil, ErrInvalid},
		{"nil pipe", nil, out("nil"), ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := takeSnapshot(t, s)
			var p0 Pipe
			var f0 Feed
			if tt.pipe != nil {
				tt.pipe.ID, tt.pipe.FeedID = 999, 998 // ignored
				p0 = *tt.pipe
			}
			if tt.out != nil {
				tt.out.ID = 997
				f0 = *tt.out
			}
			err := s.CreatePipe(tt.pipe, tt.out)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("CreatePipe = %v, want %v", err, tt.want)
			}
			if err != nil {
				if tt.pipe != nil && !reflect.DeepEqual(*tt.pipe, p0) || tt.out != nil && !reflect.DeepEqual(*tt.out, f0) {
					t.Errorf("failed CreatePipe changed its arguments: %+v, %+v", tt.pipe, tt.out)
				}
				if after := takeSnapshot(t, s); !reflect.DeepEqual(after, before) {
					t.Errorf("failed CreatePipe wrote something")
				}
				return
			}
			p, f := tt.pipe, tt.out
			if p.ID == 999 || p.ID == 0 || p.FeedID != f.ID || f.ID == 997 || f.ID == 0 {
				t.Errorf("ids not assigned: pipe %d, feed id %d / %d", p.ID, p.FeedID, f.ID)
			}
			for _, tm := range []time.Time{p.Created, p.Updated, f.Created, f.Updated} {
				if !tm.Equal(t0) {
					t.Errorf("time %v, want %v", tm, t0)
				}
			}
			if got, err := s.Pipe(p.ID); err != nil || !reflect.DeepEqual(got, *p) {
				t.Errorf("Pipe(%d) = %+v, %v; want %+v", p.ID, got, err, *p)
			}
			if got, err := s.PipeBySlug(p.Slug); err != nil || got.ID != p.ID {
				t.Errorf("PipeBySlug = %d, %v", got.ID, err)
			}
			if got, err := s.FeedBySlug(KindPipe, p.Slug); err != nil || got.ID != f.ID || got.Title != f.Title {
				t.Errorf("FeedBySlug = %+v, %v", got, err)
			}
			if n, err := s.CountItems(f.ID); err != nil || n != 0 {
				t.Errorf("output feed: CountItems = %d, %v", n, err)
			}
		})
	}
	// Failed creations consumed no id.
	next, _ := createPipe(t, s, "next", Retention{})
	if want := taken.ID + 4; next.ID != want {
		t.Errorf("next pipe id %d, want %d", next.ID, want)
	}
}

func TestPipeLookups(t *testing.T) {
	s := openTest(t)
	if pipes, err := s.Pipes(); err != nil || len(pipes) != 0 {
		t.Fatalf("Pipes on a new store = %v, %v", pipes, err)
	}
	var want []string
	for _, slug := range []string{"c", "a", "b"} {
		createPipe(t, s, slug, Retention{})
		want = append(want, slug)
	}
	pipes, err := s.Pipes()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, p := range pipes {
		got = append(got, p.Slug)
		if p.ID != uint64(i+1) {
			t.Errorf("Pipes()[%d].ID = %d", i, p.ID)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Pipes slugs %v, want %v (by id)", got, want)
	}
	for _, tt := range []struct {
		name string
		get  func() (Pipe, error)
	}{
		{"unknown id", func() (Pipe, error) { return s.Pipe(42) }},
		{"id 0", func() (Pipe, error) { return s.Pipe(0) }},
		{"unknown slug", func() (Pipe, error) { return s.PipeBySlug("zz") }},
		{"empty slug", func() (Pipe, error) { return s.PipeBySlug("") }},
		{"huge slug", func() (Pipe, error) { return s.PipeBySlug(strings.Repeat("s", bolt.MaxKeySize+1)) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := tt.get(); !errors.Is(err, ErrPipeNotFound) {
				t.Errorf("= %+v, %v; want ErrPipeNotFound", p, err)
			}
		})
	}
}

func TestUpdatePipe(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	p, out := createPipe(t, s, "mean", Retention{})
	other, _ := createPipe(t, s, "other", Retention{})
	if err := s.CreateFeed(&Feed{Kind: KindPipe, Slug: "orphan"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitPipeRun(p.ID, nil, []Item{{ID: "kept", Published: t0}}, PipeRun{At: t0}); err != nil {
		t.Fatal(err)
	}
	newDef := json.RawMessage(`{"nodes":[],"output":{"slug":"renamed"}}`)
	tests := []struct {
		name   string
		change func(p *Pipe)
		want   error
	}{
		{"definition, state and counters", func(p *Pipe) {
			p.Def, p.State, p.Runs, p.LastError, p.ErrorCount = newDef, json.RawMessage(`{"c":1}`), 9, "late", 2
		}, nil},
		{"rename", func(p *Pipe) { p.Slug = "renamed" }, nil},
		{"rename back", func(p *Pipe) { p.Slug = "mean" }, nil},
		{"FeedID and Created are kept", func(p *Pipe) { p.FeedID, p.Created = 77, t0.Add(-time.Hour) }, nil},
		{"another pipe's slug", func(p *Pipe) { p.Slug = "other" }, ErrPipeExists},
		{"a pipe feed's slug", func(p *Pipe) { p.Slug = "orphan" }, ErrFeedExists},
		{"bad slug", func(p *Pipe) { p.Slug = "../x" }, ErrInvalid},
		{"no definition", func(p *Pipe) { p.Def = nil }, ErrInvalid},
		{"malformed state", func(p *Pipe) { p.State = json.RawMessage(`[`) }, ErrInvalid},
		{"last error too long", func(p *Pipe) { p.LastError = strings.Repeat("e", MaxPipeErrorLen+1) }, ErrInvalid},
		{"unknown pipe", func(p *Pipe) { p.ID = 99 }, ErrPipeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Add(time.Minute)
			before := takeSnapshot(t, s)
			old, err := s.Pipe(p.ID)
			if err != nil {
				t.Fatal(err)
			}
			in := old
			tt.change(&in)
			err = s.UpdatePipe(in)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("UpdatePipe = %v, want %v", err, tt.want)
			}
			if err != nil {
				if after := takeSnapshot(t, s); !reflect.DeepEqual(after, before) {
					t.Errorf("failed UpdatePipe changed the store")
				}
				return
			}
			got, err := s.Pipe(p.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := in
			want.FeedID, want.Created, want.Updated = old.FeedID, old.Created, clk.Now()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Pipe after update = %+v\nwant %+v", got, want)
			}
			if bySlug, err := s.PipeBySlug(in.Slug); err != nil || bySlug.ID != p.ID {
				t.Errorf("PipeBySlug(%q) = %d, %v", in.Slug, bySlug.ID, err)
			}
			f, err := s.FeedBySlug(KindPipe, in.Slug)
			if err != nil || f.ID != out.ID {
				t.Errorf("output feed by slug %q = %d, %v; want %d", in.Slug, f.ID, err, out.ID)
			}
			if in.Slug != old.Slug {
				if _, err := s.PipeBySlug(old.Slug); !errors.Is(err, ErrPipeNotFound) {
					t.Errorf("old slug still finds a pipe: %v", err)
				}
				if _, err := s.FeedBySlug(KindPipe, old.Slug); !errors.Is(err, ErrFeedNotFound) {
					t.Errorf("old slug still finds a feed: %v", err)
				}
			}
			if _, err := s.Item(out.ID, "kept"); err != nil {
				t.Errorf("output items lost: %v", err)
			}
		})
	}
	if got, err := s.Pipe(other.ID); err != nil || !reflect.DeepEqual(got, other) {
		t.Errorf("the other pipe changed: %+v, %v", got, err)
	}
}

// UpdatePipeFeed edits the output feed in the pipe's transaction: both
// change, or neither.
func TestUpdatePipeFeed(t *testing.T) {
	s := openTest(t, Options{})
	p, out := createPipe(t, s, "mean", Retention{})
	errEdit := errors.New("edit refused")
	tests := []struct {
		name  string
		slug  string
		edit  func(f *Feed) error
		want  error
		title string // the feed's title afterwards
	}{
		{"title with the definition", "mean", func(f *Feed) error { f.Title = "Regional mean"; return nil }, nil, "Regional mean"},
		{"rename and retitle", "fused", func(f *Feed) error { f.Title = "Fused"; return nil }, nil, "Fused"},
		{"an edit's error", "other", func(f *Feed) error { f.Title = "x"; return errEdit }, errEdit, "Fused"},
		{"an edit may not rename", "fused", func(f *Feed) error { f.Slug = "elsewhere"; return nil }, ErrInvalid, "Fused"},
		{"nor change the kind", "fused", func(f *Feed) error { f.Kind = KindSensor; return nil }, ErrInvalid, "Fused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := takeSnapshot(t, s)
			in, err := s.Pipe(p.ID)
			if err != nil {
				t.Fatal(err)
			}
			in.Slug = tt.slug
			err = s.UpdatePipeFeed(in, tt.edit)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("UpdatePipeFeed = %v, want %v", err, tt.want)
			}
			if err != nil {
				if after := takeSnapshot(t, s); !reflect.DeepEqual(after, before) {
					t.Errorf("failed UpdatePipeFeed changed the store")
				}
			}
			got, err := s.Pipe(p.ID)
			if err != nil {
				t.Fatal(err)
			}
			f, err := s.Feed(out.ID)
			if err != nil {
				t.Fatal(err)
			}
			if f.Slug != got.Slug || f.Title != tt.title {
				t.Errorf("output feed %q %q, pipe %q; want title %q", f.Slug, f.Title, got.Slug, tt.title)
			}
		})
	}
}

func TestSavePipeState(t *testing.T) {
	s := openTest(t)
	p, _ := createPipe(t, s, "p", Retention{})
	tests := []struct {
		name  string
		id    uint64
		state json.RawMessage
		want  error
	}{
		{"state", p.ID, json.RawMessage(`{"cursor":{"a":12}}`), nil},
		{"cleared", p.ID, nil, nil},
		{"again", p.ID, json.RawMessage(`[1,2,3]`), nil},
		{"not JSON", p.ID, json.RawMessage(`{"cursor":`), ErrInvalid},
		{"too large", p.ID, json.RawMessage(`"` + strings.Repeat("s", MaxPipeSize) + `"`), ErrInvalid},
		{"unknown pipe", 7, json.RawMessage(`{}`), ErrPipeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := s.Pipe(p.ID)
			err := s.SavePipeState(tt.id, tt.state)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("SavePipeState = %v, want %v", err, tt.want)
			}
			got, _ := s.Pipe(p.ID)
			want := before
			if err == nil {
				want.State = tt.state
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("pipe = %+v, want %+v", got, want)
			}
		})
	}
}

func TestDeletePipe(t *testing.T) {
	s := openTest(t)
	p, out := createPipe(t, s, "gone", Retention{})
	keep, keepOut := createPipe(t, s, "stays", Retention{})
	for _, pp := range []Pipe{p, keep} {
		if _, err := s.CommitPipeRun(pp.ID, json.RawMessage(`{}`), []Item{{ID: "a", Published: t0}, {ID: "b"}}, PipeRun{At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddObservation(out.ID, Observation{At: t0, Hit: true}); err != nil {
		t.Fatal(err)
	}
	// The output goes with its pipe, never alone.
	if err := s.DeleteFeed(out.ID); !errors.Is(err, ErrPipeOutput) {
		t.Fatalf("DeleteFeed of a pipe's output = %v, want ErrPipeOutput", err)
	}

	if err := s.DeletePipe(p.ID); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"Pipe", func() error { _, err := s.Pipe(p.ID); return err }(), ErrPipeNotFound},
		{"PipeBySlug", func() error { _, err := s.PipeBySlug("gone"); return err }(), ErrPipeNotFound},
		{"Feed", func() error { _, err := s.Feed(out.ID); return err }(), ErrFeedNotFound},
		{"FeedBySlug", func() error { _, err := s.FeedBySlug(KindPipe, "gone"); return err }(), ErrFeedNotFound},
		{"Items", func() error { _, err := s.Items(out.ID, ItemQuery{}); return err }(), ErrFeedNotFound},
		{"Observations", func() error { _, err := s.Observations(out.ID, 0); return err }(), ErrFeedNotFound},
		{"DeletePipe again", s.DeletePipe(p.ID), ErrPipeNotFound},
		{"DeletePipe unknown", s.DeletePipe(99), ErrPipeNotFound},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s after delete: %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check after delete: %v", err)
	}
	if got, err := s.Pipe(keep.ID); err != nil || got.Runs != 1 {
		t.Errorf("other pipe = %+v, %v", got, err)
	}
	if n, err := s.CountItems(keepOut.ID); err != nil || n != 2 {
		t.Errorf("other pipe's output: %d items, %v", n, err)
	}
	// The slug is free again.
	again, _ := createPipe(t, s, "gone", Retention{})
	if n, _ := s.CountItems(again.FeedID); n != 0 {
		t.Errorf("recreated pipe's output holds %d items", n)
	}
}

// A pipe whose output feed is already gone (a damaged file) can still be
// deleted.
func TestDeletePipeWithoutOutputFeed(t *testing.T) {
	s := openTest(t)
	p, out := createPipe(t, s, "p", Retention{})
	if err := s.db.Update(func(tx *bolt.Tx) error { return s.deleteFeedTx(tx, out.ID) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check = %v, want ErrCorrupt", err)
	}
	if _, err := s.CommitPipeRun(p.ID, nil, []Item{{ID: "a"}}, PipeRun{At: t0}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("CommitPipeRun = %v, want ErrCorrupt", err)
	}
	if err := s.DeletePipe(p.ID); err != nil {
		t.Fatal(err)
	}
}

func TestCommitPipeRun(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	p, out := createPipe(t, s, "mean", Retention{})
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	st := func(s string) json.RawMessage { return json.RawMessage(s) }
	long := strings.Repeat("é", MaxPipeErrorLen) // 2 bytes a rune

	// The steps run in order on the same pipe.
	steps := []struct {
		name    string
		id      uint64
		state   json.RawMessage
		out     []Item
		run     PipeRun
		want    error
		added   []string
		stored  []string // output item ids, oldest arrival first
		pState  string
		runs    int64
		lastErr string
		errs    int
	}{
		{"first run", p.ID, st(`{"c":1}`), []Item{{ID: "a", Published: at(1)}, {ID: "b", Published: at(2)}},
			PipeRun{At: at(3)}, nil, []string{"a", "b"}, []string{"a", "b"}, `{"c":1}`, 1, "", 0},
		{"rerun on the same input adds nothing", p.ID, st(`{"c":2}`), []Item{{ID: "a", Published: at(1)}, {ID: "b", Published: at(2)}},
			PipeRun{At: at(4)}, nil, nil, []string{"a", "b"}, `{"c":2}`, 2, "", 0},
		{"failed run adds nothing and keeps the state", p.ID, st(`{"c":3}`), []Item{{ID: "c", Published: at(5)}},
			PipeRun{At: at(5), Err: "node \"mean\": boom"}, nil, nil, []string{"a", "b"}, `{"c":2}`, 3, "node \"mean\": boom", 1},
		{"failed run with invalid items", p.ID, nil, []Item{{}},
			PipeRun{At: at(6), Err: "again"}, nil, nil, []string{"a", "b"}, `{"c":2}`, 4, "again", 2},
		{"invalid item fails the whole commit", p.ID, st(`{"c":4}`), []Item{{ID: "d", Published: at(7)}, {ID: "", Title: "no id"}},
			PipeRun{At: at(7)}, ErrInvalid, nil, []string{"a", "b"}, `{"c":2}`, 4, "again", 2},
		{"invalid state fails the whole commit", p.ID, st(`{"c":`), []Item{{ID: "d", Published: at(7)}},
			PipeRun{At: at(7)}, ErrInvalid, nil, []string{"a", "b"}, `{"c":2}`, 4, "again", 2},
		{"too large state fails the whole commit", p.ID, st(`"` + strings.Repeat("s", MaxPipeSize) + `"`), []Item{{ID: "d", Published: at(7)}},
			PipeRun{At: at(7)}, ErrInvalid, nil, []string{"a", "b"}, `{"c":2}`, 4, "again", 2},
		{"unknown pipe", 99, st(`{}`), []Item{{ID: "d"}}, PipeRun{At: at(7)}, ErrPipeNotFound, nil, []string{"a", "b"}, `{"c":2}`, 4, "again", 2},
		{"success resets the errors; nil state is kept", p.ID, nil, []Item{{ID: "d", Published: at(8)}, {ID: "a", Title: "updated", Published: at(1)}},
			PipeRun{At: at(8)}, nil, []string{"d"}, []string{"a", "b", "d"}, `{"c":2}`, 5, "", 0},
		{"duplicates within one run", p.ID, st(`{"c":5}`), []Item{{ID: "e", Published: at(9)}, {ID: "e", Title: "v2", Published: at(9)}},
			PipeRun{At: at(9)}, nil, []string{"e"}, []string{"a", "b", "d", "e"}, `{"c":5}`, 6, "", 0},
		{"a long error is shortened", p.ID, nil, nil,
			PipeRun{At: at(10), Err: long}, nil, nil, []string{"a", "b", "d", "e"}, `{"c":5}`, 7, long[:MaxPipeErrorLen], 1},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			clk.Add(time.Minute)
			before, _ := s.Pipe(p.ID)
			added, err := s.CommitPipeRun(step.id, step.state, step.out, step.run)
			if !errors.Is(err, step.want) || (err == nil) != (step.want == nil) {
				t.Fatalf("CommitPipeRun = %v, want %v", err, step.want)
			}
			if got := ids(added); !slices.Equal(got, step.added) {
				t.Errorf("added %v, want %v", got, step.added)
			}
			for _, it := range added {
				if it.FeedID != out.ID || it.Seq == 0 {
					t.Errorf("added item %q has feed %d, seq %d", it.ID, it.FeedID, it.Seq)
				}
			}
			items, err := s.Items(out.ID, ItemQuery{Order: ByArrivalAsc})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(items); !slices.Equal(got, step.stored) {
				t.Errorf("output holds %v, want %v", got, step.stored)
			}
			got, err := s.Pipe(p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.State) != step.pState || got.Runs != step.runs || got.LastError != step.lastErr || got.ErrorCount != step.errs {
				t.Errorf("pipe state %s, runs %d, last error %.40q, errors %d; want %s, %d, %.40q, %d",
					got.State, got.Runs, got.LastError, got.ErrorCount, step.pState, step.runs, step.lastErr, step.errs)
			}
			if !got.Updated.Equal(before.Updated) {
				t.Errorf("Updated changed from %v to %v", before.Updated, got.Updated)
			}
			switch {
			case err != nil && !got.LastRun.Equal(before.LastRun):
				t.Errorf("failed commit changed LastRun to %v", got.LastRun)
			case err == nil && step.want == nil && step.id == p.ID && !got.LastRun.Equal(step.run.At):
				t.Errorf("LastRun = %v, want %v", got.LastRun, step.run.At)
			}
		})
	}
	if it, err := s.Item(out.ID, "a"); err != nil || it.Title != "updated" {
		t.Errorf("updated item a = %+v, %v", it, err)
	}
}

// itemErrorIndexes returns the Index of every *ItemError in err's tree.
func itemErrorIndexes(err error) []int {
	var out []int
	var walk func(error)
	walk = func(err error) {
		if ie, ok := err.(*ItemError); ok {
			out = append(out, ie.Index)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// An invalid item fails the whole commit and reports each refused item.
func TestCommitPipeRunItemErrors(t *testing.T) {
	s := openTest(t)
	p, out := createPipe(t, s, "p", Retention{})
	_, err := s.CommitPipeRun(p.ID, json.RawMessage(`{"c":1}`), []Item{{ID: "fine"}, {}, {ID: "\xff"}}, PipeRun{At: t0})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("CommitPipeRun = %v, want ErrInvalid", err)
	}
	if indexes := itemErrorIndexes(err); !slices.Equal(indexes, []int{1, 2}) {
		t.Errorf("refused items %v, want [1 2]: %v", indexes, err)
	}
	if n, _ := s.CountItems(out.ID); n != 0 {
		t.Errorf("output holds %d items", n)
	}

	t.Run("an update that would make an item too large", func(t *testing.T) {
		half := strings.Repeat("l", MaxItemSize/2+100)
		if _, err := s.CommitPipeRun(p.ID, json.RawMessage(`{"c":1}`), []Item{{ID: "grow", Link: half, Title: "v1"}}, PipeRun{At: t0}); err != nil {
			t.Fatal(err)
		}
		before, _ := s.Pipe(p.ID)
		_, err := s.CommitPipeRun(p.ID, json.RawMessage(`{"c":2}`), []Item{{ID: "new"}, {ID: "grow", Title: "v2", Content: half}}, PipeRun{At: t0})
		var ie *ItemError
		if !errors.As(err, &ie) || ie.Index != 1 || !errors.Is(err, ErrInvalid) {
			t.Errorf("err = %v, want an ItemError for index 1", err)
		}
		if after, _ := s.Pipe(p.ID); !reflect.DeepEqual(after, before) {
			t.Errorf("pipe changed: %+v", after)
		}
		if _, err := s.Item(out.ID, "new"); !errors.Is(err, ErrItemNotFound) {
			t.Errorf("item of the failed commit stored: %v", err)
		}
	})
}

func TestCommitPipeRunRetention(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	five := []Item{
		{ID: "a", Title: "keep", Published: at(1)},
		{ID: "b", Published: at(2)},
		{ID: "c", Published: at(3)},
		{ID: "d", Published: at(4)},
		{ID: "e", Published: at(5)},
	}
	tests := []struct {
		name    string
		reducer *fakeReducer
		added   []string
		stored  []string // by publish time, newest first
		wantErr bool
	}{
		{"without reducer", nil, []string{"c", "d", "e"}, []string{"e", "d", "c"}, false},
		{"with reducer", &fakeReducer{}, []string{"a", "c", "d", "e"}, []string{"e", "d", "c", "digest", "a"}, false},
		{"failing reducer keeps the run", &fakeReducer{err: errors.New("boom")}, []string{"a", "b", "c", "d", "e"}, []string{"e", "d", "c", "b", "a"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t)
			if tt.reducer != nil {
				s.SetReducer(tt.reducer)
			}
			p, out := createPipe(t, s, "p", Retention{MaxItems: 3})
			added, err := s.CommitPipeRun(p.ID, json.RawMessage(`{"c":1}`), five, PipeRun{At: t0})
			if (err != nil) != tt.wantErr || errors.Is(err, ErrInvalid) {
				t.Fatalf("CommitPipeRun = %v, want error %v", err, tt.wantErr)
			}
			if got := ids(added); !slices.Equal(got, tt.added) {
				t.Errorf("added %v, want %v", got, tt.added)
			}
			items, _ := s.Items(out.ID, ItemQuery{Order: ByPublished})
			if got := ids(items); !slices.Equal(got, tt.stored) {
				t.Errorf("stored %v, want %v", got, tt.stored)
			}
			if got, _ := s.Pipe(p.ID); string(got.State) != `{"c":1}` || got.Runs != 1 {
				t.Errorf("pipe state %s, runs %d", got.State, got.Runs)
			}
			// An item older than the retained window is not admitted.
			added, _ = s.CommitPipeRun(p.ID, nil, []Item{{ID: "old", Published: at(0)}}, PipeRun{At: t0})
			if len(added) != 0 {
				t.Errorf("item beyond retention added: %v", ids(added))
			}
		})
	}
}

// A data file of schema 1 (before pipes) is migrated: the pipe buckets
// exist and take pipes.
func TestPipesAfterMigrationFromSchema1(t *testing.T) {
	path := copyFixture(t, "schema1.db")
	if v := storedSchema(t, path); v != 1 {
		t.Fatalf("fixture has schema %d", v)
	}
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	if pipes, err := s.Pipes(); err != nil || len(pipes) != 0 {
		t.Errorf("Pipes = %v, %v", pipes, err)
	}
	p, out := createPipe(t, s, "lab-mean", Retention{})
	if out.ID != 3 || p.ID != 1 {
		t.Errorf("pipe %d, output feed %d; want 1, 3", p.ID, out.ID)
	}
	if _, err := s.CommitPipeRun(p.ID, nil, []Item{{ID: "m1"}}, PipeRun{At: t0}); err != nil {
		t.Error(err)
	}
	closeAndCheck(t, s)
	if v := storedSchema(t, path); v != SchemaVersion {
		t.Errorf("schema after Open: %d, want %d", v, SchemaVersion)
	}
}

// writeSchema2Fixture writes the content TestSchema2Fixture expects.
func writeSchema2Fixture(t *testing.T, path string) {
	writeSchema1Fixture(t, path)
	s, err := Open(path, Options{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, _ := createPipe(t, s, "lab-mean", Retention{MaxItems: 50})
	if _, err := s.CommitPipeRun(p.ID, json.RawMessage(`{"cursors":{"a":2}}`),
		[]Item{{ID: "mean-1", Title: "21.4 C", Published: t0, Reading: &Reading{Value: 21.4, Unit: "C"}}},
		PipeRun{At: t0}); err != nil {
		t.Fatal(err)
	}
}

// testdata/schema2.db was written by the schema-2 code (go test -run
// TestSchema2Fixture -update): the content of schema1.db plus a pipe with
// one output item. Every later schema must still open it.
func TestSchema2Fixture(t *testing.T) {
	if *update {
		if SchemaVersion != 2 {
			t.Fatal("schema2.db must stay a schema-2 file: write a new fixture for the new schema instead")
		}
		out := filepath.Join("testdata", "schema2.db")
		if err := os.Remove(out); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		writeSchema2Fixture(t, out)
	}
	s := openFixture(t, "schema2.db")
	p, err := s.PipeBySlug("lab-mean")
	if err != nil || string(p.Def) != pipeDef || string(p.State) != `{"cursors":{"a":2}}` || p.Runs != 1 || !p.LastRun.Equal(t0) {
		t.Fatalf("pipe = %+v, %v", p, err)
	}
	out, err := s.Feed(p.FeedID)
	if err != nil || out.Kind != KindPipe || out.Slug != "lab-mean" || out.Retention.MaxItems != 50 {
		t.Errorf("output feed = %+v, %v", out, err)
	}
	items, err := s.Items(p.FeedID, ItemQuery{})
	if err != nil || len(items) != 1 || items[0].ID != "mean-1" || items[0].Reading == nil || items[0].Reading.Value != 21.4 {
		t.Errorf("output items = %+v, %v", items, err)
	}
	if _, err := s.FeedByURL("https://example.org/sensors.xml"); err != nil {
		t.Errorf("remote feed: %v", err)
	}
	if added, err := s.CommitPipeRun(p.ID, nil, []Item{{ID: "mean-2", Published: t0.Add(time.Minute)}}, PipeRun{At: t0}); err != nil || len(added) != 1 {
		t.Errorf("CommitPipeRun = %+v, %v", added, err)
	}
}

// Check finds each kind of broken pipe invariant.
func TestCheckDetectsBrokenPipes(t *testing.T) {
	setPipe := func(tx *bolt.Tx, id uint64, fn func(p *Pipe)) error {
		p, err := getPipe(tx, id)
		if err != nil {
			return err
		}
		fn(&p)
		raw, _ := json.Marshal(&p)
		return tx.Bucket(bucketPipes).Put(u64(id), raw)
	}
	tests := []struct {
		name    string
		corrupt func(tx *bolt.Tx) error
	}{
		{"slug entry missing", func(tx *bolt.Tx) error { return tx.Bucket(bucketPipeSlug).Delete([]byte("p")) }},
		{"slug entry points elsewhere", func(tx *bolt.Tx) error { return tx.Bucket(bucketPipeSlug).Put([]byte("p"), u64(2)) }},
		{"dangling slug entry", func(tx *bolt.Tx) error { return tx.Bucket(bucketPipeSlug).Put([]byte("ghost"), u64(9)) }},
		{"slug entry of a renamed pipe", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketPipeSlug).Put([]byte("old-name"), u64(1))
		}},
		{"pipe record garbage", func(tx *bolt.Tx) error { return tx.Bucket(bucketPipes).Put(u64(1), []byte("{")) }},
		{"pipe record of another id", func(tx *bolt.Tx) error { return setPipe(tx, 1, func(p *Pipe) { p.ID = 5 }) }},
		{"output feed missing", func(tx *bolt.Tx) error { return new(Store).deleteFeedTx(tx, 1) }},
		{"output feed under another slug", func(tx *bolt.Tx) error { return setPipe(tx, 1, func(p *Pipe) { p.FeedID = 2 }) }},
		{"output feed of another kind", func(tx *bolt.Tx) error { return setPipe(tx, 1, func(p *Pipe) { p.FeedID = 3 }) }},
		{"pipe buckets missing", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPipeSlug) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "slogfeed.db"), Options{NoSync: true, Now: newClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			p, out := createPipe(t, s, "p", Retention{})
			q, _ := createPipe(t, s, "q", Retention{})
			createRemote(t, s, "https://example.org/feed", Retention{})
			if p.ID != 1 || out.ID != 1 || q.FeedID != 2 {
				t.Fatalf("ids: pipe %d, feed %d, q's feed %d", p.ID, out.ID, q.FeedID)
			}
			if _, err := s.CommitPipeRun(p.ID, nil, []Item{{ID: "a"}}, PipeRun{At: t0}); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(); err != nil {
				t.Fatalf("Check before breaking: %v", err)
			}
			if err := s.db.Update(tt.corrupt); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Check = %v, want ErrCorrupt", err)
			} else {
				t.Log(err)
			}
		})
	}
}
