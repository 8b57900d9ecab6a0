package schedule_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

var updatePinned = flag.Bool("update-pinned", false, "rewrite testdata/pinned.txt from the current policies")

// pinnedFeeds are the publishers the pinned test drives each policy
// against: losses, outages with and without a phase shift, drift, dates
// to whole seconds, publisher hints, a nightly sleep.
var pinnedFeeds = []struct {
	name  string
	model sim.Model
	// second truncates publish times to whole seconds; night drops the
	// items published 22:00–06:00 UTC; hints sends publisher hints.
	second, night, hints bool
}{
	{name: "steady", model: sim.Model{Period: 5 * time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: 10 * time.Second}},
	{name: "lossy", model: sim.Model{Period: 10 * time.Minute, Pss: 0.6, Pfs: 0.6, JitterScale: 20 * time.Second}},
	{name: "outages", model: sim.Model{Period: 5 * time.Minute, Pss: 0.97, Pfs: 0.9, JitterScale: 5 * time.Second,
		OutageProb: 0.03, OutageMin: time.Hour, OutageMax: 5 * time.Hour}},
	{name: "restarts", model: sim.Model{Period: 15 * time.Minute, Pss: 0.97, Pfs: 0.9, JitterScale: 30 * time.Second,
		OutageProb: 0.02, OutageMin: 2 * time.Hour, OutageMax: 4 * time.Hour, PhaseShiftOnRestart: true}},
	{name: "drift", model: sim.Model{Period: time.Minute, Pss: 1, Pfs: 1, JitterScale: time.Second, DriftPPM: 800}},
	{name: "seconds", model: sim.Model{Period: 2 * time.Minute, Pss: 0.9, Pfs: 0.8, JitterScale: 3 * time.Second}, second: true},
	{name: "hints", model: sim.Model{Period: 20 * time.Minute, Pss: 0.9, Pfs: 0.8, JitterScale: 15 * time.Second}, hints: true},
	{name: "night", model: sim.Model{Period: 10 * time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: 10 * time.Second}, night: true},
}

var pinnedPolicies = []struct {
	name string
	make func(seed uint64) schedule.Policy
}{
	{"auto", func(s uint64) schedule.Policy { return schedule.NewAuto(schedule.WithSeed(s)) }},
	{"auto-miss-0.05", func(s uint64) schedule.Policy {
		return schedule.NewAuto(schedule.WithSeed(s), schedule.WithMissRatio(0.05))
	}},
	{"dpt-a", func(s uint64) schedule.Policy { return schedule.NewDPT(schedule.DPTA, schedule.WithSeed(s)) }},
	{"dpt-l", func(s uint64) schedule.Policy { return schedule.NewDPT(schedule.DPTL, schedule.WithSeed(s)) }},
}

// TestPinnedDecisions drives each policy through six simulated days of
// each publisher above and hashes every decision it makes and what it
// shows (State, Margin, PredictedPublish, the encoded state); every 40
// polls the policy is saved, restored into a fresh one, and the run goes
// on with the restored policy. The hashes in testdata/pinned.txt were
// written by an earlier implementation of the same policies: a change of
// their memory layout must leave every decision, bit for bit, and every
// encoded state as it was. A deliberate change of behaviour rewrites the
// file with -update-pinned.
func TestPinnedDecisions(t *testing.T) {
	got := map[string]string{}
	var keys []string
	for _, pol := range pinnedPolicies {
		for _, f := range pinnedFeeds {
			h := sha256.New()
			for seed := range uint64(6) {
				pinnedRun(t, h, pol.make, seed, f.model, f.second, f.night, f.hints)
			}
			k := pol.name + "/" + f.name
			keys = append(keys, k)
			got[k] = fmt.Sprintf("%x", h.Sum(nil)[:12])
		}
	}
	path := filepath.Join("testdata", "pinned.txt")
	if *updatePinned {
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s %s\n", k, got[k])
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			want[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if want[k] == "" {
			t.Errorf("%s: not pinned in %s", k, path)
		} else if got[k] != want[k] {
			t.Errorf("%s: decisions hash %s, pinned %s", k, got[k], want[k])
		}
	}
}

func pinnedRun(t *testing.T, h interface{ Write([]byte) (int, error) }, newPolicy func(uint64) schedule.Policy,
	seed uint64, m sim.Model, second, night, hints bool) schedule.Policy {
	t.Helper()
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(6 * 24 * time.Hour)
	m.RandomPhase = true
	stream := m.Stream(rand.New(rand.NewPCG(seed, 0x70696e)), start)
	drive := rand.New(rand.NewPCG(seed, 0x64726976))
	p := newPolicy(seed)
	var buf [8]byte
	put := func(v int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	putTime := func(x time.Time, ok bool) {
		if !ok {
			put(-1)
			return
		}
		put(x.UnixNano())
	}
	at := start
	for polls := 0; at.Before(end) && polls < 5000; polls++ {
		var pubs []time.Time
		for !stream.Peek().After(at) {
			pub := stream.Pop().Published
			if night && (pub.Hour() >= 22 || pub.Hour() < 6) {
				continue
			}
			if second {
				pub = pub.Truncate(time.Second)
			}
			pubs = append(pubs, pub)
		}
		obs := schedule.Observation{At: at, Hit: len(pubs) > 0, Published: pubs}
		if hints {
			switch drive.IntN(8) {
			case 0:
				obs.Hints.Desync = 30 * time.Second
			case 1:
				obs.Hints.CacheFor = 10 * time.Minute
			case 2:
				obs.Hints.Due, obs.Hints.HasDue = 20*time.Minute, true
			case 3:
				obs.MoreData = obs.Hit
			case 4:
				if obs.Hit {
					obs.Hints.Phase, obs.Hints.HasPhase = at.Sub(pubs[len(pubs)-1])/2, true
				}
			case 5:
				obs.Hints.Period = time.Hour
			}
		}
		next := p.Next(obs)
		put(next.UnixNano())
		if s, ok := p.(interface{ State() schedule.State }); ok {
			st := s.State()
			for _, v := range []time.Duration{st.Median, st.Sigma, st.BimodalMedian, st.BimodalSigma} {
				put(int64(v))
			}
			put(int64(st.Mode)<<32 | int64(st.Tries)<<8 | int64(st.Gaps))
			putTime(st.LastPublish, st.HasPublish)
		}
		if pr, ok := p.(schedule.Predictor); ok {
			putTime(pr.PredictedPublish())
		}
		if a, ok := p.(*schedule.Auto); ok {
			d, ok := a.Margin(0.05)
			put(int64(d))
			put(map[bool]int64{true: 1, false: 0}[ok])
			putTime(a.EarliestNext(at))
		}
		if polls%40 == 39 {
			sp, ok := p.(schedule.Stateful)
			if !ok {
				t.Fatalf("%T is not Stateful", p)
			}
			b := sp.AppendState(nil)
			h.Write(b)
			q := newPolicy(seed)
			if err := q.(schedule.Stateful).RestoreState(b); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if b2 := q.(schedule.Stateful).AppendState(nil); string(b2) != string(b) {
				t.Fatalf("a restored %T encodes another state", p)
			}
			p = q
		}
		if !next.After(at) {
			next = at.Add(time.Second)
		}
		at = next
	}
	return p
}

// TestRestoresEarlierStates restores Auto and DPT states that an earlier
// implementation encoded (testdata/states.hex, one per line: policy,
// publisher, seed, hex) and checks that each is read whole: encoded again
// it gives the same bytes.
func TestRestoresEarlierStates(t *testing.T) {
	path := filepath.Join("testdata", "states.hex")
	if *updatePinned {
		var b strings.Builder
		for _, pol := range pinnedPolicies {
			for _, f := range pinnedFeeds {
				p := pinnedRun(t, sha256.New(), pol.make, 2, f.model, f.second, f.night, f.hints)
				fmt.Fprintf(&b, "%s %s 2 %x\n", pol.name, f.name, p.(schedule.Stateful).AppendState(nil))
			}
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	makers := map[string]func(uint64) schedule.Policy{}
	for _, pol := range pinnedPolicies {
		makers[pol.name] = pol.make
	}
	n := 0
	for line := range strings.Lines(string(data)) {
		var name, feed, hexState string
		var seed uint64
		if _, err := fmt.Sscan(line, &name, &feed, &seed, &hexState); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		b, err := hex.DecodeString(hexState)
		if err != nil {
			t.Fatal(err)
		}
		mk := makers[name]
		if mk == nil {
			t.Fatalf("unknown policy %q", name)
		}
		p := mk(seed).(schedule.Stateful)
		if err := p.RestoreState(b); err != nil {
			t.Fatalf("%s/%s: %v", name, feed, err)
		}
		if got := p.AppendState(nil); string(got) != string(b) {
			t.Errorf("%s/%s: restored state encodes as\n%x\nwant\n%x", name, feed, got, b)
		}
		n++
	}
	if n < len(pinnedPolicies)*len(pinnedFeeds) {
		t.Fatalf("%d states in %s", n, path)
	}
}
