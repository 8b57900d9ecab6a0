package schedule

import (
	"errors"
	"testing"
	"time"
)

func TestByName(t *testing.T) {
	tests := []struct {
		name    string
		want    string // Name() of the policy, "" for an error
		wantErr error
	}{
		{"", "auto", nil},
		{"auto", "auto", nil},
		{"dpt-a", "dpt-a", nil},
		{"dpt-n", "dpt-n", nil},
		{"dpt-l", "dpt-l", nil},
		{"bimodal-dpt-l", "dpt-l", nil},
		{"dpt-l-unimodal", "dpt-l-unimodal", nil},
		{"miniflux", "miniflux", nil},
		{"commafeed", "commafeed", nil},
		{"newsblur", "newsblur", nil},
		{"fixed-15m", "fixed-15m", nil},
		{"fixed-1d", "fixed-24h", nil},
		{"cron:*/5 * * * *", "cron", nil},
		{"fixed-0s", "", ErrUnknownPolicy},
		{"fixed-3d", "", ErrUnknownPolicy},
		{"fixed-soon", "", ErrUnknownPolicy},
		{"cron:not a spec", "", ErrCronSpec},
		{"weekly", "", ErrUnknownPolicy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ByName(tc.name, 1)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n, ok := p.(interface{ Name() string })
			if !ok || n.Name() != tc.want {
				t.Fatalf("policy %T named %v, want %q", p, n, tc.want)
			}
			if next := p.Next(Observation{At: t0}); next.Before(t0) || next.Sub(t0) > MaxDelay {
				t.Fatalf("next %v out of range", next)
			}
		})
	}
}

// TestNameOf: a policy NameOf names is rebuilt by ByName with that name
// and its seed plus its saved state, answering the next observations as
// the original does; a policy ByName would not build as it is is not
// named.
func TestNameOf(t *testing.T) {
	const seed = 42
	teach := func(p Policy) {
		for k := range 12 {
			tp := float64(k) * 617
			p.Next(Observation{At: at(tp + 3), Hit: k%4 != 3, Published: []time.Time{at(tp)}})
		}
	}
	for _, name := range []string{"", "auto", "dpt-a", "dpt-n", "dpt-l", "bimodal-dpt-l", "dpt-l-unimodal", "fixed-10m", "fixed-1d", "fixed-90s"} {
		t.Run("named "+name, func(t *testing.T) {
			p, err := ByName(name, seed)
			if err != nil {
				t.Fatal(err)
			}
			teach(p)
			got, ok := NameOf(p, seed)
			if !ok {
				t.Fatalf("NameOf(ByName(%q)) not named", name)
			}
			q, err := ByName(got, seed)
			if err != nil {
				t.Fatalf("ByName(NameOf) = %q: %v", got, err)
			}
			if err := q.(Stateful).RestoreState(p.(Stateful).AppendState(nil)); err != nil {
				t.Fatalf("%q: %v", got, err)
			}
			for k := 12; k < 40; k++ {
				o := Observation{At: at(float64(k)*617 + 5), Hit: k%5 != 0, Published: []time.Time{at(float64(k) * 617)}}
				if a, b := p.Next(o), q.Next(o); !a.Equal(b) {
					t.Fatalf("observation %d: the original answers %v, the one rebuilt as %q %v", k, a, got, b)
				}
			}
		})
	}
	cron, err := NewCron("*/5 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	unnamed := []struct {
		name string
		p    Policy
	}{
		{"cron", cron},
		{"miniflux", NewMiniflux()},
		{"auto with an initial limit", NewAuto(WithSeed(seed), WithInitial(time.Hour))},
		{"auto without sleep learning", NewAuto(WithSeed(seed), WithoutSleepLearning())},
		{"dpt-l with an initial interval", NewDPT(DPTL, WithSeed(seed), WithInitial(7*time.Minute))},
		{"fixed on another phase", NewFixed(10*time.Minute, fixedPhase(seed, 10*time.Minute)+time.Second)},
	}
	for _, tt := range unnamed {
		if name, ok := NameOf(tt.p, seed); ok {
			t.Errorf("%s: named %q", tt.name, name)
		}
	}
}

// TestPolicyKey: the spellings of one policy share a key, other policies
// do not, and a name ByName refuses is its own key.
func TestPolicyKey(t *testing.T) {
	same := [][]string{
		{"", "auto"},
		{"dpt-l", "bimodal-dpt-l"},
		{"fixed-1m", "fixed-60s", "fixed-60000ms", "fixed-1m0s"},
		{"fixed-1d", "fixed-24h", "fixed-1440m"},
		{"cron:*/5 * * * *", "cron:  */5 *  * * *\t"},
		{"dpt-a"},
		{"fixed-nonsense"},
	}
	keys := map[string]int{}
	for i, names := range same {
		for _, name := range names {
			k := PolicyKey(name)
			if j, ok := keys[k]; ok && j != i {
				t.Errorf("PolicyKey(%q) = %q, the key of %q too", name, k, same[j])
			}
			keys[k] = i
			if k != PolicyKey(names[0]) {
				t.Errorf("PolicyKey(%q) = %q, want %q (the key of %q)", name, k, PolicyKey(names[0]), names[0])
			}
		}
	}
	if got := PolicyKey("fixed-nonsense"); got != "fixed-nonsense" {
		t.Errorf("PolicyKey of a refused name = %q, want the name", got)
	}
}
