package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/schedule/eval"
)

// testScenarios are the scenarios the CLI tests run instead of the real
// ones: they echo the options they were given, so the tests see how the
// command line reached them.
func testScenarios() []eval.Scenario {
	echo := func(name string) func(context.Context, eval.Options) (*eval.Report, error) {
		return func(_ context.Context, opt eval.Options) (*eval.Report, error) {
			if opt.Log != nil {
				fmt.Fprintf(opt.Log, "%s: working\n", name)
			}
			return &eval.Report{
				Scenario: name,
				Columns:  []string{"seed", "runs", "jitter", "files"},
				Rows: []eval.Row{{
					Policy:         "dpt-l",
					Params:         map[string]any{"seed": opt.Seed, "runs": opt.Runs, "jitter": opt.Jitter, "files": strings.Join(opt.Files, ",")},
					MedianLatencyS: 1.5, MeanLatencyS: 2, P90LatencyS: 3, HitPct: 50, Polls: 2, Items: 1,
				}},
				Notes: []string{"echo"},
			}, nil
		}
	}
	return []eval.Scenario{
		{Name: "fake", Usage: "echoes its options", Run: echo("fake")},
		{Name: "trace", Usage: "trace FILE...: replays\nthe given FILEs", Run: echo("trace")},
		{Name: "figure", Usage: "draws a figure", Run: func(context.Context, eval.Options) (*eval.Report, error) {
			return &eval.Report{Scenario: "figure", Figures: []eval.Figure{{
				Name: "fig", XLabel: "x", YLabel: "y",
				Series: []eval.Series{{Name: "s", X: []float64{1, 2}, Y: []float64{3, 4}}},
			}}}, nil
		}},
	}
}

// failing are scenarios that fail, for the error paths.
func failing() []eval.Scenario {
	return []eval.Scenario{
		{Name: "broken", Usage: "fails", Run: func(context.Context, eval.Options) (*eval.Report, error) {
			return nil, errors.New("boom\nsecond line")
		}},
		{Name: "nil", Usage: "returns nothing", Run: func(context.Context, eval.Options) (*eval.Report, error) {
			return nil, nil
		}},
		{Name: "check", Usage: "fails a check", Run: func(context.Context, eval.Options) (*eval.Report, error) {
			return &eval.Report{Scenario: "check", Notes: []string{"FAIL p=1: too slow", "FAIL p=2: too slow"}}, nil
		}},
	}
}

// fakeTable is the table the echo scenario "fake" prints for seed, runs,
// jitter and files.
func fakeTable(name, seed, runs, jitter, files string) string {
	if files == "" {
		files = `""`
	}
	w := max(len(files), len("files"))
	return fmt.Sprintf("scenario: %s\n", name) +
		fmt.Sprintf("policy  seed  runs  jitter  %-*s  median_latency_s  mean_latency_s  p90_latency_s  hit_pct  polls  items\n", w, "files") +
		fmt.Sprintf("dpt-l   %-4s  %-4s  %-6s  %-*s  1.500             2.000           3.000          50.0     2      1\n", seed, runs, jitter, w, files) +
		"\necho\n"
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs the program with args, the environment env and scenarios.
func runCLI(ctx context.Context, args []string, env map[string]string, scenarios []eval.Scenario) cliResult {
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return env[k] }, scenarios: scenarios}
	code := runWith(ctx, args, a, false)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// quiet silences logging and progress so that stderr holds only errors.
var quiet = map[string]string{"SLOGFEED_LOG_LEVEL": "error"}

func TestRun(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string // nil: quiet
		scenarios []eval.Scenario   // nil: testScenarios()
		code      int
		stdout    *string  // exact stdout; nil: not checked beyond stdoutHas
		stdoutHas []string // substrings of stdout
		stdoutNot []string
		stderr    *string // exact stderr
		stderrHas []string
	}{
		{name: "no arguments", args: nil, code: 2, stdout: ptr(""), stderrHas: []string{"slogfeed: no command given\n", "Usage:\n  slogfeed [global flags] COMMAND"}},
		{name: "help", args: []string{"help"}, code: 0, stderr: ptr(""), stdoutHas: []string{"Commands:\n  serve ", "\n  eval ", "\n  help ", "\n  import ", "--log-level LEVEL", "SLOGFEED_LOG_LEVEL, default info", "--version"}},
		{name: "-h", args: []string{"-h"}, code: 0, stderr: ptr(""), stdoutHas: []string{"Commands:"}},
		{name: "--help", args: []string{"--help"}, code: 0, stderr: ptr(""), stdoutHas: []string{"Commands:"}},
		{name: "version", args: []string{"--version"}, code: 0, stderr: ptr(""), stdoutHas: []string{"slogfeed "}},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stdout: ptr(""), stderrHas: []string{"slogfeed: unknown command \"frobnicate\"\n\nslogfeed is a feed aggregator", "Commands:"}},
		{name: "unknown global flag", args: []string{"--nope", "eval"}, code: 2, stdout: ptr(""), stderrHas: []string{"slogfeed: flag provided but not defined: -nope\n", "Commands:"}},
		{name: "help eval", args: []string{"help", "eval"}, code: 0, stderr: ptr(""), stdoutHas: []string{"slogfeed eval SCENARIO [flags] [FILE...]", "  fake    echoes its options\n", "  trace   trace FILE...: replays\n          the given FILEs\n", "  all     every scenario above", "--seed N", "default 1"}},
		{name: "help unknown", args: []string{"help", "nope"}, code: 2, stdout: ptr(""), stderrHas: []string{"slogfeed: help: unknown command \"nope\"\n"}},
		{name: "help list", args: []string{"help", "list"}, code: 0, stderr: ptr(""), stdoutHas: []string{"slogfeed list [flags]\n", "--limit N        N feeds a page, 1 to 1000, default 100", "--all", "--status STATUS", "--cursor CURSOR", "--server URL", "bearer TOKEN for changes (env SLOGFEED_TOKEN)\n"}},
		{name: "help add", args: []string{"help", "add"}, code: 0, stderr: ptr(""), stdoutHas: []string{"slogfeed add [flags] URL\n", "--source TYPE", "--source-config JSON", "--sleep WINDOWS"}},
		{name: "add --help is help add", args: []string{"add", "--help"}, code: 0, stderr: ptr(""), stdoutHas: []string{"slogfeed add [flags] URL\n", "--source TYPE"}},
		{name: "help import", args: []string{"help", "import"}, code: 0, stderr: ptr(""), stdoutHas: []string{"slogfeed import [flags] FILE.opml\n", "--policy POLICY"}},
		{name: "import with an unknown policy", args: []string{"import", "--server", "http://127.0.0.1:1", "--policy", "bogus", "x.opml"}, code: 2, stdout: ptr(""), stderrHas: []string{"slogfeed: --policy: unknown policy \"bogus\"", "Run 'slogfeed help import'"}},
		{name: "help two", args: []string{"help", "eval", "help"}, code: 2, stderr: ptr("slogfeed: help takes at most one command name\nRun 'slogfeed help help' for usage.\n")},

		{name: "eval alone lists scenarios", args: []string{"eval"}, code: 2, stdout: ptr(""), stderrHas: []string{"slogfeed: eval: no scenario given\n", "Scenarios:\n  fake", "  figure  draws a figure\n"}},
		{name: "eval --help", args: []string{"eval", "--help"}, code: 0, stderr: ptr(""), stdoutHas: []string{"Scenarios:\n  fake"}},
		{name: "eval -h after scenario", args: []string{"eval", "fake", "-h"}, code: 0, stderr: ptr(""), stdoutHas: []string{"Scenarios:\n  fake"}},
		{name: "eval no scenarios built in", args: []string{"eval", "--help"}, scenarios: []eval.Scenario{}, code: 0, stdoutHas: []string{"Scenarios:\n  (none are built in)\n"}},
		{name: "unknown scenario", args: []string{"eval", "nope"}, code: 2, stdout: ptr(""), stderr: ptr("slogfeed: eval: unknown scenario \"nope\" (valid: fake, trace, figure, all)\nRun 'slogfeed help eval' for usage.\n")},
		{name: "unknown scenario hostile name", args: []string{"eval", "\x1b[2J" + strings.Repeat("x", 100)}, code: 2, stderrHas: []string{`unknown scenario "\x1b[2J` + strings.Repeat("x", 60) + `"…`}},

		{name: "eval defaults", args: []string{"eval", "fake"}, code: 0, stderr: ptr(""), stdout: ptr(fakeTable("fake", "1", "0", "0", ""))},
		{name: "flag before scenario", args: []string{"eval", "--seed", "7", "fake"}, code: 0, stdout: ptr(fakeTable("fake", "7", "0", "0", ""))},
		{name: "flag after scenario", args: []string{"eval", "fake", "--seed", "7"}, code: 0, stdout: ptr(fakeTable("fake", "7", "0", "0", ""))},
		{name: "flag with equals, one dash", args: []string{"eval", "fake", "-seed=7", "-runs=3", "--jitter", "2.5"}, code: 0, stdout: ptr(fakeTable("fake", "7", "3", "2.5", ""))},
		{name: "files interspersed with flags", args: []string{"eval", "trace", "a.csv", "--runs", "3", "b.csv", "--seed", "9"}, code: 0, stdout: ptr(fakeTable("trace", "9", "3", "0", "a.csv,b.csv"))},
		{name: "double dash ends flags", args: []string{"eval", "--runs", "4", "trace", "--", "-x.csv", "--json"}, code: 0, stdout: ptr(fakeTable("trace", "1", "4", "0", "-x.csv,--json"))},
		{name: "double dash as a flag value", args: []string{"eval", "trace", "a", "--svg", "--", "b"}, scenarios: []eval.Scenario{{Name: "trace", Usage: "FILE", Run: func(_ context.Context, opt eval.Options) (*eval.Report, error) {
			return &eval.Report{Scenario: strings.Join(opt.Files, "+")}, nil
		}}}, code: 0, stdoutHas: []string{"scenario: a+b\n"}},
		{name: "no files for a scenario of files", args: []string{"eval", "trace"}, code: 2, stdout: ptr(""), stderr: ptr("slogfeed: eval: scenario trace needs FILE arguments: sensor traces (ULB format, or one Unix timestamp per line)\nRun 'slogfeed help eval' for usage.\n")},
		{name: "files for a scenario without files", args: []string{"eval", "fake", "x.csv"}, code: 2, stdout: ptr(""), stderr: ptr("slogfeed: eval: scenario fake takes no FILE arguments, got \"x.csv\"\nRun 'slogfeed help eval' for usage.\n")},
		{name: "negative runs", args: []string{"eval", "fake", "--runs", "-1"}, code: 2, stderrHas: []string{"slogfeed: eval: --runs must not be negative, got -1\n"}},
		{name: "NaN jitter", args: []string{"eval", "fake", "--jitter", "NaN"}, code: 2, stderrHas: []string{"slogfeed: eval: --jitter must be a finite number of seconds >= 0, got NaN\n"}},
		{name: "bad seed", args: []string{"eval", "--seed", "abc", "fake"}, code: 2, stderrHas: []string{"slogfeed: eval: invalid value \"abc\" for flag -seed: parse error\n"}},
		{name: "unknown eval flag", args: []string{"eval", "fake", "--nope"}, code: 2, stderrHas: []string{"slogfeed: eval: flag provided but not defined: -nope\n"}},
		{name: "missing flag value", args: []string{"eval", "fake", "--svg"}, code: 2, stderrHas: []string{"slogfeed: eval: flag needs an argument: -svg\n"}},

		{name: "json", args: []string{"eval", "--json", "fake", "--seed", "3"}, code: 0, stderr: ptr(""), stdout: ptr(`{
  "scenario": "fake",
  "rows": [
    {
      "policy": "dpt-l",
      "seed": 3,
      "runs": 0,
      "jitter": 0,
      "files": "",
      "median_latency_s": 1.5,
      "mean_latency_s": 2,
      "p90_latency_s": 3,
      "std_latency_s": 0,
      "hit_pct": 50,
      "polls": 2,
      "items": 1
    }
  ],
  "notes": [
    "echo"
  ]
}
`)},
		{name: "all runs scenarios without files", args: []string{"eval", "all", "--seed", "5"}, code: 0, stderr: ptr(""), stdout: ptr(fakeTable("fake", "5", "0", "0", "") + "\nscenario: figure\npolicy  median_latency_s  mean_latency_s  p90_latency_s  hit_pct  polls  items\n")},
		{name: "all json is an array", args: []string{"eval", "all", "--json"}, scenarios: testScenarios()[:2], code: 0, stdout: ptr(`[
  {
    "scenario": "fake",
    "rows": [
      {
        "policy": "dpt-l",
        "seed": 1,
        "runs": 0,
        "jitter": 0,
        "files": "",
        "median_latency_s": 1.5,
        "mean_latency_s": 2,
        "p90_latency_s": 3,
        "std_latency_s": 0,
        "hit_pct": 50,
        "polls": 2,
        "items": 1
      }
    ],
    "notes": [
      "echo"
    ]
  }
]
`)},
		{name: "all json with nothing to run", args: []string{"eval", "--json", "all"}, scenarios: testScenarios()[1:2], code: 0, stdout: ptr("[]\n")},
		{name: "all takes no files", args: []string{"eval", "all", "x"}, code: 2, stderrHas: []string{"slogfeed: eval: all takes no FILE arguments\n"}},

		{name: "scenario error", args: []string{"eval", "broken"}, scenarios: failing(), code: 1, stdout: ptr(""), stderr: ptr("slogfeed: eval broken: boom; second line\n")},
		{name: "scenario without report", args: []string{"eval", "nil"}, scenarios: failing(), code: 1, stderr: ptr("slogfeed: eval nil: the scenario returned no report\n")},
		{name: "failed check exits 1", args: []string{"eval", "check"}, scenarios: failing(), code: 1,
			stdoutHas: []string{"FAIL p=1: too slow\nFAIL p=2: too slow\n"},
			stderr:    ptr("slogfeed: eval check: acceptance checks failed: 2 (first: FAIL p=1: too slow)\n")},
		{name: "failed check exits 1 in json", args: []string{"eval", "--json", "check"}, scenarios: failing(), code: 1,
			stdoutHas: []string{`"FAIL p=1: too slow"`}},
		{name: "all goes on after errors", args: []string{"eval", "all"}, scenarios: append(failing()[:2], testScenarios()[0]), code: 1,
			stdout: ptr(fakeTable("fake", "1", "0", "0", "")),
			stderr: ptr("slogfeed: eval broken: boom; second line\nslogfeed: eval nil: the scenario returned no report\n")},

		{name: "progress at info", args: []string{"eval", "fake"}, env: map[string]string{}, code: 0, stderrHas: []string{"fake: working\n", "level=INFO msg=\"running scenario\" scenario=fake seed=1"}},
		{name: "log level flag beats env", args: []string{"--log-level", "warn", "eval", "fake"}, env: map[string]string{"SLOGFEED_LOG_LEVEL": "debug"}, code: 0, stderr: ptr("")},
		{name: "debug level", args: []string{"--log-level=DEBUG", "eval", "all"}, code: 0, stderrHas: []string{"level=DEBUG msg=\"eval all: skipping scenario that needs files\" scenario=trace"}},
		{name: "bad log level env", args: []string{"eval", "fake"}, env: map[string]string{"SLOGFEED_LOG_LEVEL": "loud"}, code: 2, stdout: ptr(""), stderr: ptr("slogfeed: SLOGFEED_LOG_LEVEL: unknown log level \"loud\" (want debug, info, warn or error)\nRun 'slogfeed help' for usage.\n")},
		{name: "bad log level flag", args: []string{"--log-level", "loud", "eval", "fake"}, code: 2, stderrHas: []string{"slogfeed: --log-level: unknown log level \"loud\""}},
		{name: "log level after command is an eval flag", args: []string{"eval", "fake", "--log-level", "debug"}, code: 2, stderrHas: []string{"flag provided but not defined: -log-level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			if env == nil {
				env = quiet
			}
			scenarios := tt.scenarios
			if scenarios == nil {
				scenarios = testScenarios()
			}
			got := runCLI(t.Context(), tt.args, env, scenarios)
			if got.code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", got.code, tt.code, got.stdout, got.stderr)
			}
			if tt.stdout != nil && got.stdout != *tt.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", got.stdout, *tt.stdout)
			}
			if tt.stderr != nil && got.stderr != *tt.stderr {
				t.Errorf("stderr:\n%q\nwant:\n%q", got.stderr, *tt.stderr)
			}
			for _, s := range tt.stdoutHas {
				if !strings.Contains(got.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, got.stdout)
				}
			}
			for _, s := range tt.stdoutNot {
				if strings.Contains(got.stdout, s) {
					t.Errorf("stdout has %q:\n%s", s, got.stdout)
				}
			}
			for _, s := range tt.stderrHas {
				if !strings.Contains(got.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, got.stderr)
				}
			}
			if tt.stdout == nil && tt.code == 0 && strings.HasPrefix(strings.TrimSpace(got.stdout), "{") && !json.Valid([]byte(got.stdout)) {
				t.Errorf("invalid JSON on stdout:\n%s", got.stdout)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestEvalSVG(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "figs")
	got := runCLI(t.Context(), []string{"eval", "figure", "--svg", dir}, map[string]string{}, testScenarios())
	if got.code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", got.code, got.stderr)
	}
	want := filepath.Join(dir, "fig.svg")
	if !strings.Contains(got.stderr, "wrote "+want+"\n") {
		t.Errorf("stderr does not report %s:\n%s", want, got.stderr)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"fig.svg"}) {
		t.Errorf("files %q, want [fig.svg]", names)
	}
}

func TestEvalSVGError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCLI(t.Context(), []string{"eval", "figure", "--svg", file}, quiet, testScenarios())
	if got.code != 1 || !strings.HasPrefix(got.stderr, "slogfeed: eval figure: eval: svg: mkdir ") || strings.Count(got.stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 1 and one line about the directory", got.code, got.stderr)
	}
}

func TestEvalCancelled(t *testing.T) {
	t.Run("scenario sees cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		scenarios := []eval.Scenario{{Name: "slow", Usage: "interrupted while it runs", Run: func(ctx context.Context, _ eval.Options) (*eval.Report, error) {
			cancel() // as SIGINT would
			<-ctx.Done()
			return nil, ctx.Err()
		}}}
		got := runCLI(ctx, []string{"eval", "slow"}, quiet, scenarios)
		if want := "slogfeed: eval slow: context canceled\n"; got.code != 1 || got.stderr != want {
			t.Errorf("exit %d, stderr %q; want 1, %q", got.code, got.stderr, want)
		}
	})
	t.Run("cancelled before the first scenario", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		got := runCLI(ctx, []string{"eval", "all"}, quiet, failing())
		if want := "slogfeed: eval: interrupted before broken: context canceled\n"; got.code != 1 || got.stderr != want {
			t.Errorf("exit %d, stderr %q; want 1, %q", got.code, got.stderr, want)
		}
	})
}

func TestEvalStdoutFails(t *testing.T) {
	var stderr bytes.Buffer
	a := &app{stdout: failWriter{}, stderr: &stderr, getenv: quietEnv, scenarios: testScenarios()}
	if code := runWith(t.Context(), []string{"eval", "all"}, a, false); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if want := "slogfeed: eval fake: writing results: closed pipe\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q (one error, then stop)", stderr.String(), want)
	}
}

func quietEnv(k string) string { return quiet[k] }

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed pipe") }
