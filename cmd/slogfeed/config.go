package main

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"
)

// A setting is one configuration value that can be given as a command-line
// flag or an environment variable. The flag wins over the environment
// variable, which wins over the default; an empty environment variable
// counts as unset. Every command describes its settings as a table of
// these, so flag name, variable, default and documentation live in one
// place and the help text is generated from them.
//
// The settings every command shares (globalSettings):
//
//	flag          environment variable   default  meaning
//	--log-level   SLOGFEED_LOG_LEVEL     info     least severe log level written to stderr:
//	                                              debug, info, warn or error
type setting struct {
	Name    string             // flag name without dashes, e.g. "log-level"
	Env     string             // environment variable, e.g. "SLOGFEED_LOG_LEVEL"
	Default string             // value when neither flag nor variable is given
	Doc     string             // help text; a `quoted` word names the flag's argument
	Check   func(string) error // validates a value; nil accepts anything
	// Bool makes the flag a switch: --name alone means true, and
	// --name=false is also accepted.
	Bool bool
}

// boolString is a string flag that may be given without a value.
type boolString struct{ v *string }

func (b boolString) String() string {
	if b.v == nil {
		return ""
	}
	return *b.v
}
func (b boolString) Set(s string) error { *b.v = s; return nil }
func (b boolString) IsBoolFlag() bool   { return true }

// globalSettings returns the settings shared by all commands, given before
// the command name.
func globalSettings() []setting {
	return []setting{
		{
			Name:    "log-level",
			Env:     "SLOGFEED_LOG_LEVEL",
			Default: "info",
			Doc:     "least severe log `LEVEL` written to stderr: debug, info, warn or error",
			Check:   func(s string) error { _, err := parseLevel(s); return err },
		},
	}
}

// boundSettings are settings registered on a flag set, ready to be resolved
// once the flag set has parsed its arguments.
type boundSettings struct {
	fs       *flag.FlagSet
	settings []setting
	flags    map[string]*string
}

// bindSettings registers every setting as a string flag on fs. The flag's
// help names the environment variable and the default; the flag itself
// has an empty default because resolve, not the flag, applies it.
func bindSettings(fs *flag.FlagSet, settings []setting) *boundSettings {
	b := &boundSettings{fs: fs, settings: settings, flags: make(map[string]*string, len(settings))}
	for _, s := range settings {
		usage := fmt.Sprintf("%s (env %s, default %s)", s.Doc, s.Env, s.Default)
		if s.Default == "" {
			usage = fmt.Sprintf("%s (env %s)", s.Doc, s.Env)
		}
		if s.Bool {
			v := new(string)
			fs.Var(boolString{v}, s.Name, usage)
			b.flags[s.Name] = v
			continue
		}
		b.flags[s.Name] = fs.String(s.Name, "", usage)
	}
	return b
}

// resolve returns the value of every setting, by name: the flag if it was
// given, else the environment variable read through getenv if it is not
// empty, else the default. A value that fails its setting's check is a
// usage error naming where the value came from.
func (b *boundSettings) resolve(getenv func(string) string) (map[string]string, error) {
	given := make(map[string]bool)
	b.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	out := make(map[string]string, len(b.settings))
	for _, s := range b.settings {
		v, from := s.Default, "default of --"+s.Name
		switch {
		case given[s.Name]:
			v, from = *b.flags[s.Name], "--"+s.Name
		case s.Env != "" && getenv(s.Env) != "":
			v, from = getenv(s.Env), s.Env
		}
		if s.Check != nil {
			if err := s.Check(v); err != nil {
				return nil, &usageError{msg: fmt.Sprintf("%s: %v", from, err)}
			}
		}
		out[s.Name] = v
	}
	return out, nil
}

// parseLevel parses a log level name (debug, info, warn, error, any case).
// Numeric offsets such as "info+2" are not accepted: the four names are
// the documented interface.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %s (want debug, info, warn or error)", quoteArg(s))
}
