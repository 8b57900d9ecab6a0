package schedule_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// publisher returns a feed's publish times: a mote of a real trace.
type publisher struct {
	name string
	pubs []time.Time
}

func tracePublishers(t *testing.T) []publisher {
	t.Helper()
	files, _ := filepath.Glob("sim/testdata/ulb/ulb-library1-R*.txt")
	if len(files) == 0 {
		t.Fatal("no ULB traces under sim/testdata/ulb")
	}
	var out []publisher
	for _, f := range files {
		traces, err := sim.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range traces {
			p := publisher{name: tr.Name + "/" + tr.Sensor}
			for _, it := range tr.Items {
				p.pubs = append(p.pubs, it.Published)
			}
			out = append(out, p)
		}
	}
	return out
}

// sleeper publishes every 10 minutes from 06:00 to 20:00 UTC for a week,
// so that Auto learns a daily sleep.
func sleeper() publisher {
	p := publisher{name: "sleeper"}
	day0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	for d := range 7 {
		for m := 6 * 60; m < 20*60; m += 10 {
			p.pubs = append(p.pubs, day0.Add(time.Duration(d)*24*time.Hour+time.Duration(m)*time.Minute+time.Duration(d*m%7)*time.Second))
		}
	}
	return p
}

// hints returns the hints the publisher sends at poll k of a scenario.
type hintsFunc func(k int, at time.Time) schedule.Hints

func noHints(int, time.Time) schedule.Hints { return schedule.Hints{} }

// planning sends a desynchronisation interval, a cache lifetime, and a
// planned update every third poll (some of them wrong).
func planning(k int, at time.Time) schedule.Hints {
	h := schedule.Hints{Desync: 7 * time.Second, CacheFor: 5 * time.Second}
	if k%3 == 0 {
		h.Due, h.HasDue = time.Duration(40+k%50)*time.Second, true
	}
	return h
}

// drive polls p against the publisher, as the live loop would, and
// returns the observations it made and the answers it gave. With restore,
// p is replaced before every poll by a policy rebuilt from its state
// (through build), so every answer comes from a restored policy.
func drive(t *testing.T, build func() schedule.Policy, pub publisher, h hintsFunc, restore bool, maxPolls int) ([]schedule.Observation, []time.Time, int) {
	t.Helper()
	p := build()
	start := pub.pubs[0].Add(-90 * time.Second)
	end := pub.pubs[len(pub.pubs)-1].Add(time.Hour)
	at := schedule.First(p, start)
	prev, i := start, 0
	var obs []schedule.Observation
	var next []time.Time
	maxBytes := 0
	for k := 0; k < maxPolls && at.Before(end); k++ {
		if restore {
			s, ok := p.(schedule.Stateful)
			if !ok {
				t.Fatalf("%T is not Stateful", p)
			}
			b := s.AppendState(nil)
			maxBytes = max(maxBytes, len(b))
			q := build()
			if err := q.(schedule.Stateful).RestoreState(b); err != nil {
				t.Fatalf("poll %d: restore: %v", k, err)
			}
			if again := q.(schedule.Stateful).AppendState(nil); !bytes.Equal(again, b) {
				t.Fatalf("poll %d: restored state encodes differently:\n%x\n%x", k, b, again)
			}
			p = q
		}
		o := schedule.Observation{At: at, Hints: h(k, at)}
		for i < len(pub.pubs) && !pub.pubs[i].After(at) {
			if pub.pubs[i].After(prev) {
				o.Published = append(o.Published, pub.pubs[i])
			}
			i++
		}
		o.Hit = len(o.Published) > 0
		n := p.Next(o)
		obs, next = append(obs, o), append(next, n)
		prev = at
		if !n.After(at) {
			n = at.Add(time.Second) // "poll again now": a second later
		}
		at = n
	}
	return obs, next, maxBytes
}

// TestRestoredPolicyAnswersAlike replays real sensor traces (and a
// sleeper, a planning publisher) into each stateful policy twice: once
// live, once rebuilt from its saved state before every poll. The answers
// must be equal at every poll, so a policy restored at start-up polls
// exactly as the one that replayed the same observations.
func TestRestoredPolicyAnswersAlike(t *testing.T) {
	pubs := append(tracePublishers(t), sleeper())
	policies := []string{"auto", "dpt-a", "dpt-n", "dpt-l", "dpt-l-unimodal", "fixed-1m", "cron:*/5 * * * *"}
	hints := []struct {
		name string
		fn   hintsFunc
	}{{"plain", noHints}, {"planning", planning}}
	for _, name := range policies {
		maxBytes := 0
		for _, pub := range pubs {
			for _, h := range hints {
				build := func() schedule.Policy {
					p, err := schedule.ByName(name, 42)
					if err != nil {
						t.Fatal(err)
					}
					return p
				}
				wantObs, want, _ := drive(t, build, pub, h.fn, false, 3000)
				gotObs, got, n := drive(t, build, pub, h.fn, true, 3000)
				maxBytes = max(maxBytes, n)
				if len(got) != len(want) {
					t.Fatalf("%s %s %s: %d polls restored, %d live", name, pub.name, h.name, len(got), len(want))
				}
				for k := range want {
					if !got[k].Equal(want[k]) || !gotObs[k].At.Equal(wantObs[k].At) {
						t.Fatalf("%s %s %s: poll %d at %v: restored answers %v, live %v", name, pub.name, h.name, k, gotObs[k].At, got[k], want[k])
					}
				}
			}
		}
		t.Logf("%s: state of at most %d bytes", name, maxBytes)
		if maxBytes > 700 {
			t.Errorf("%s: state of %d bytes, want at most 700", name, maxBytes)
		}
	}
}

// TestAutoStateKeepsLearnedSleep checks that a learned daily sleep
// survives a restore.
func TestAutoStateKeepsLearnedSleep(t *testing.T) {
	build := func() schedule.Policy { return schedule.NewAuto(schedule.WithSeed(7)) }
	p := build().(*schedule.Auto)
	pub := sleeper()
	for i, at := range pub.pubs {
		p.Next(schedule.Observation{At: at.Add(time.Second), Hit: true, Published: pub.pubs[i : i+1]})
	}
	w, ok := p.State().LearnedSleep, p.State().HasLearnedSleep
	if !ok {
		t.Fatal("no sleep learned from a week of nights")
	}
	q := build().(*schedule.Auto)
	if err := q.RestoreState(p.AppendState(nil)); err != nil {
		t.Fatal(err)
	}
	if got := q.State(); !got.HasLearnedSleep || got.LearnedSleep != w {
		t.Fatalf("restored sleep %+v (%v), want %+v", got.LearnedSleep, got.HasLearnedSleep, w)
	}
}

// TestRestoreStateRefuses feeds hostile and mismatched states: each is
// refused with ErrState and leaves the policy as it was.
func TestRestoreStateRefuses(t *testing.T) {
	auto := schedule.NewAuto(schedule.WithSeed(1))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for k := range 40 {
		at := t0.Add(time.Duration(k) * time.Minute)
		auto.Next(schedule.Observation{At: at.Add(2 * time.Second), Hit: true, Published: []time.Time{at}})
	}
	good := auto.AppendState(nil)
	dptL := schedule.NewDPT(schedule.DPTL).AppendState(nil)
	big := append(bytes.Clone(good), make([]byte, schedule.MaxStateSize)...)
	badRing := bytes.Clone(good)
	badRing[2] = 200 // the gap history's length
	cases := []struct {
		name   string
		policy schedule.Stateful
		state  []byte
	}{
		{"empty", schedule.NewAuto(), nil},
		{"truncated", schedule.NewAuto(), good[:len(good)/2]},
		{"one byte short", schedule.NewAuto(), good[:len(good)-1]},
		{"trailing byte", schedule.NewAuto(), append(bytes.Clone(good), 0)},
		{"too large", schedule.NewAuto(), big},
		{"history too long", schedule.NewAuto(), badRing},
		{"other version", schedule.NewAuto(), append([]byte{good[0], 99}, good[2:]...)},
		{"dpt state into auto", schedule.NewAuto(), dptL},
		{"auto state into dpt", schedule.NewDPT(schedule.DPTL), good},
		{"other variant", schedule.NewDPT(schedule.DPTA), dptL},
		{"unimodal into bimodal", schedule.NewDPT(schedule.DPTL), schedule.NewDPT(schedule.DPTL, schedule.WithoutBimodal()).AppendState(nil)},
		{"fixed into cron", mustCron(t), schedule.NewFixed(time.Minute, 0).AppendState(nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.policy.AppendState(nil)
			err := c.policy.RestoreState(c.state)
			if !errors.Is(err, schedule.ErrState) {
				t.Fatalf("RestoreState = %v, want ErrState", err)
			}
			if after := c.policy.AppendState(nil); !bytes.Equal(after, before) {
				t.Fatal("a refused state changed the policy")
			}
		})
	}
}

func mustCron(t *testing.T) *schedule.Cron {
	c, err := schedule.NewCron("*/5 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FuzzRestoreState: no input makes RestoreState panic, and whatever it
// accepts encodes back to the same bytes.
func FuzzRestoreState(f *testing.F) {
	a := schedule.NewAuto()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for k := range 30 {
		at := t0.Add(time.Duration(k) * time.Minute)
		a.Next(schedule.Observation{At: at.Add(time.Second), Hit: k%4 != 0, Published: []time.Time{at}})
	}
	f.Add(a.AppendState(nil))
	f.Add(schedule.NewDPT(schedule.DPTN).AppendState(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range []schedule.Stateful{schedule.NewAuto(), schedule.NewDPT(schedule.DPTN)} {
			if err := p.RestoreState(b); err != nil {
				continue
			}
			if got := p.AppendState(nil); !bytes.Equal(got, b) {
				t.Fatalf("accepted %x, encodes as %x", b, got)
			}
			// A restored policy must answer without panicking.
			p.(schedule.Policy).Next(schedule.Observation{At: t0, Hit: true, Published: []time.Time{t0}})
		}
	})
}
