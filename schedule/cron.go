package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrCronSpec is wrapped by every error NewCron returns for a spec it cannot
// use: a syntax error, an unknown time zone, a spec that is too long or one
// that never fires.
var ErrCronSpec = errors.New("schedule: invalid cron spec")

// MaxCronSpecLen bounds the length of a cron spec accepted by NewCron.
const MaxCronSpecLen = 256

// cronSpecParser accepts standard 5-field specs, an optional leading seconds
// field (6 fields) and descriptors such as @hourly or @every 5m.
var cronSpecParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronProbe is the instant at which NewCron checks that a spec fires at all.
var cronProbe = time.Date(1970, time.January, 1, 0, 0, 0, 0, time.UTC)

// Cron polls on the activations of a cron expression, the way crontab-driven
// fetchers (a cron job running a feed fetcher, or a reader's "refresh at
// these times" setting) do. It is parsed by robfig/cron/v3: the standard
// five fields (minute hour day-of-month month day-of-week), an optional
// leading seconds field, and descriptors (@yearly, @monthly, @weekly,
// @daily, @hourly, @every <duration>). Times are interpreted in UTC unless
// the spec starts with CRON_TZ=<zone> (or TZ=<zone>).
//
// Like every policy, Cron never waits longer than MaxDelay: an expression
// whose next activation is further away gets a poll MaxDelay after the
// previous one. @every schedules have no anchor: they poll first when the
// feed is added and then every interval after each poll.
type Cron struct {
	spec  string
	sched cron.Schedule
	every bool
}

// NewCron parses spec. Errors wrap ErrCronSpec.
func NewCron(spec string) (c *Cron, err error) {
	spec = strings.TrimSpace(spec)
	if len(spec) > MaxCronSpecLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrCronSpec, MaxCronSpecLen)
	}
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("%w: %q: %v", ErrCronSpec, spec, r)
		}
	}()
	sched, perr := ParseCron(cronSpecParser, spec)
	if perr != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrCronSpec, spec, perr)
	}
	if NeverFires(sched) {
		return nil, fmt.Errorf("%w: %q never fires", ErrCronSpec, spec)
	}
	_, every := sched.(cron.ConstantDelaySchedule)
	return &Cron{spec: spec, sched: sched, every: every}, nil
}

// NeverFires reports whether schedule s has no activation (a date that
// does not exist, such as February 31): robfig/cron's Next gives the
// zero time for it.
func NeverFires(s cron.Schedule) bool {
	return s.Next(cronProbe).IsZero()
}

// ParseCron parses spec with p in UTC: a spec that does not start with a
// time zone (CRON_TZ=<zone> or TZ=<zone>, then the expression) is parsed as
// if it started with CRON_TZ=UTC, so its activations are the same whatever
// the zone of the machine or of the times given to the schedule. A zone
// with no expression after it is an error, as is a panic of the parser.
// Errors are the parser's, not wrapped.
func ParseCron(p cron.ScheduleParser, spec string) (sched cron.Schedule, err error) {
	spec = strings.TrimSpace(spec)
	full := spec
	switch {
	case spec == "":
		// Nothing to read in any zone; the parser says what is missing.
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		// The parser slices up to the first space; without one it panics.
		if !strings.Contains(spec, " ") {
			return nil, errors.New("time zone without an expression")
		}
	default:
		full = "CRON_TZ=UTC " + spec
	}
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return p.Parse(full)
}

// MinEvery is the shortest interval of an @every cron schedule, the
// shortest period of the fixed policy too: robfig/cron rounds a shorter
// one up to it. NewCron accepts such a spec (a stored feed keeps
// working); new subscriptions and pipes are refused one (CheckEvery,
// CheckNewPolicy).
const MinEvery = time.Second

// CheckEvery returns an error wrapping ErrCronSpec when spec (after an
// optional CRON_TZ= or TZ= zone) is an @every schedule whose interval is
// a valid duration under MinEvery; any other spec is left to the cron
// parser.
func CheckEvery(spec string) error {
	f := strings.Fields(spec)
	if len(f) > 0 && (strings.HasPrefix(f[0], "TZ=") || strings.HasPrefix(f[0], "CRON_TZ=")) {
		f = f[1:]
	}
	if len(f) != 2 || f[0] != "@every" {
		return nil
	}
	if d, err := time.ParseDuration(f[1]); err == nil && d < MinEvery {
		return fmt.Errorf("%w: @every %v is shorter than %v", ErrCronSpec, d, MinEvery)
	}
	return nil
}

// Name returns the eval name, "cron".
func (c *Cron) Name() string { return "cron" }

// Spec returns the expression as given to NewCron (trimmed).
func (c *Cron) Spec() string { return c.spec }

// Start implements Starter: the first activation at or after now (now itself
// for an @every schedule).
func (c *Cron) Start(now time.Time) time.Time {
	if c.every {
		return now
	}
	// Activations fall on whole seconds; Next(t) returns the first one
	// strictly after t, so step back by one nanosecond to include now.
	t := c.sched.Next(now.Add(-time.Nanosecond))
	if t.IsZero() {
		return now.Add(MaxDelay)
	}
	return clampNext(now, t)
}

// Next implements Policy: the first activation strictly after obs.At.
func (c *Cron) Next(obs Observation) time.Time {
	t := c.sched.Next(obs.At)
	if t.IsZero() { // no activation within the parser's five-year horizon
		return obs.At.Add(MaxDelay)
	}
	return clampNext(obs.At, t)
}
