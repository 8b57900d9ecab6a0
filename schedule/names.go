package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultPolicy is the policy new feeds get unless the user picks another.
const DefaultPolicy = "auto"

// ErrUnknownPolicy is returned by ByName for a name it does not know.
var ErrUnknownPolicy = errors.New("schedule: unknown policy")

// PolicyNames lists the names ByName accepts besides the parameterised
// fixed-<duration> and cron:<spec>.
var PolicyNames = []string{"auto", "dpt-a", "dpt-n", "dpt-l", "bimodal-dpt-l", "dpt-l-unimodal", "miniflux", "commafeed", "newsblur"}

// CheckNewPolicy checks the policy name of a new subscription: ByName's
// checks, and a cron @every schedule under MinEvery refused (a stored
// feed's is rounded up to it instead).
func CheckNewPolicy(name string) error {
	if _, err := ByName(name, 0); err != nil {
		return err
	}
	if spec, ok := strings.CutPrefix(name, "cron:"); ok {
		return CheckEvery(spec)
	}
	return nil
}

// ByName returns a new policy called name (see the package documentation
// for the names): auto, dpt-a, dpt-n, dpt-l (= bimodal-dpt-l),
// dpt-l-unimodal, miniflux, commafeed, newsblur, fixed-<duration> (a Go
// duration or a whole number of days such as "1d"; each feed polls on its
// own phase of the period, derived from seed, so that feeds sharing a
// period are not all fetched at once) and cron:<spec> (on the clock, as
// cron does). seed seeds the policy's random source; pass the feed's id.
func ByName(name string, seed uint64) (Policy, error) {
	switch name {
	case "", "auto":
		return NewAuto(WithSeed(seed)), nil
	case "dpt-a":
		return NewDPT(DPTA, WithSeed(seed)), nil
	case "dpt-n":
		return NewDPT(DPTN, WithSeed(seed)), nil
	case "dpt-l", "bimodal-dpt-l":
		return NewDPT(DPTL, WithSeed(seed)), nil
	case "dpt-l-unimodal":
		return NewDPT(DPTL, WithSeed(seed), WithoutBimodal()), nil
	case "miniflux":
		return NewMiniflux(), nil
	case "commafeed":
		return NewCommaFeed(), nil
	case "newsblur":
		return NewNewsBlur(), nil
	}
	if spec, ok := strings.CutPrefix(name, "cron:"); ok {
		c, err := NewCron(spec)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	if d, ok := strings.CutPrefix(name, "fixed-"); ok {
		period, err := parsePeriod(d)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrUnknownPolicy, name, err)
		}
		return NewFixed(period, fixedPhase(seed, period)), nil
	}
	return nil, fmt.Errorf("%w %q (known: %s, fixed-<duration>, cron:<spec>)", ErrUnknownPolicy, name, strings.Join(PolicyNames, ", "))
}

// PolicyKey returns what names the same policy as name does, whatever
// its spelling: "" and "auto" are "auto", "bimodal-dpt-l" is "dpt-l", a
// fixed-<duration> is keyed by its period ("fixed-60000ms", "fixed-60s"
// and "fixed-1m" alike), a cron:<spec> by its fields with single spaces
// between them. Any other name, or one ByName refuses, is its own key.
// It reads no more than name's bytes and builds no policy.
func PolicyKey(name string) string {
	switch name {
	case "":
		return DefaultPolicy
	case "bimodal-dpt-l":
		return "dpt-l"
	}
	if d, ok := strings.CutPrefix(name, "fixed-"); ok {
		if period, err := parsePeriod(d); err == nil {
			return "fixed-" + period.String()
		}
		return name
	}
	if spec, ok := strings.CutPrefix(name, "cron:"); ok {
		return "cron:" + strings.Join(strings.Fields(spec), " ")
	}
	return name
}

// parsePeriod reads a Go duration or a whole number of days ("1d").
func parsePeriod(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 1 || days > 2 {
			return 0, fmt.Errorf("period %q: want 1d or 2d, or a duration such as 15m", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("period %q: %w", s, err)
	}
	if d < MinFixedPeriod || d > MaxDelay {
		return 0, fmt.Errorf("period %v outside [%v, %v]", d, MinFixedPeriod, MaxDelay)
	}
	return d, nil
}

// fixedPhase spreads fixed-period feeds over their period: a hash of seed
// (splitmix64), reduced to [0, period) at millisecond resolution.
func fixedPhase(seed uint64, period time.Duration) time.Duration {
	if seed == 0 {
		return 0
	}
	z := seed + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	ms := uint64(period / time.Millisecond)
	if ms == 0 {
		return 0
	}
	return time.Duration(z%ms) * time.Millisecond
}

// NameOf returns the name ByName builds p's kind of policy from, for the
// policies whose learned state (Stateful) is all they hold beyond their
// name and seed: auto, the DPT variants and fixed-<duration>. ByName
// with that name and seed, then RestoreState with p's state, gives p
// back. ok is false for any other policy (cron, the baselines, one built
// with options or a phase ByName does not give).
func NameOf(p Policy, seed uint64) (name string, ok bool) {
	switch p := p.(type) {
	case *Auto:
		if p.initial != float32(MaxDelay.Seconds()) || p.missRatio != defaultMissRatio || p.quiet.off {
			return "", false
		}
		return p.Name(), true
	case *DPT:
		if p.initial != DefaultInitial || (p.unimodal && p.variant != DPTL) {
			return "", false
		}
		return p.Name(), true
	case *Fixed:
		name := p.Name()
		if q, err := ByName(name, seed); err != nil || *q.(*Fixed) != *p {
			return "", false
		}
		return name, true
	}
	return "", false
}
