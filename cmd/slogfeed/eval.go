package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slogfeed/slogfeed/schedule/eval"
)

// allScenarios is the pseudo-scenario that runs every scenario needing no
// files.
const allScenarios = "all"

// evalFlags are the flags of "slogfeed eval".
type evalFlags struct {
	fs     *flag.FlagSet
	json   *bool
	svg    *string
	seed   *uint64
	runs   *int
	jitter *float64
}

// newEvalFlags builds the flag set of "slogfeed eval"; its help is
// generated from it.
func newEvalFlags() *evalFlags {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &evalFlags{
		fs:     fs,
		json:   fs.Bool("json", false, "write the results as JSON instead of a table (several scenarios: a JSON array)"),
		svg:    fs.String("svg", "", "also draw each figure as `DIR`/NAME.svg"),
		seed:   fs.Uint64("seed", 1, "random seed `N` of the simulations"),
		runs:   fs.Int("runs", 0, "average over `N` runs per point where a scenario averages (0: the scenario's default)"),
		jitter: fs.Float64("jitter", 0, "Laplace jitter scale b in `SECONDS` for model publishers (0: the scenario's default)"),
	}
}

// runEval implements "slogfeed eval SCENARIO [flags] [FILE...]".
func runEval(ctx context.Context, a *app, args []string) error {
	ef := newEvalFlags()
	usage := func(w io.Writer) { evalUsage(w, a) }
	positional, err := parseInterspersed(ef.fs, args)
	if errors.Is(err, flag.ErrHelp) {
		usage(a.stdout)
		return flag.ErrHelp
	}
	if err != nil {
		return &usageError{msg: "eval: " + err.Error(), cmd: "eval"}
	}
	switch {
	case *ef.runs < 0:
		return &usageError{msg: fmt.Sprintf("eval: --runs must not be negative, got %d", *ef.runs), cmd: "eval"}
	case math.IsNaN(*ef.jitter) || math.IsInf(*ef.jitter, 0) || *ef.jitter < 0:
		return &usageError{msg: fmt.Sprintf("eval: --jitter must be a finite number of seconds >= 0, got %v", *ef.jitter), cmd: "eval"}
	case len(positional) == 0:
		return &usageError{msg: "eval: no scenario given", usage: usage}
	}

	name, files := positional[0], positional[1:]
	var todo []eval.Scenario
	if name == allScenarios {
		if len(files) > 0 {
			return &usageError{msg: "eval: all takes no FILE arguments", cmd: "eval"}
		}
		for _, s := range a.scenarios {
			if takesFiles(s) {
				a.log.Debug("eval all: skipping scenario that needs files", "scenario", s.Name)
				continue
			}
			todo = append(todo, s)
		}
	} else {
		s, ok := findScenario(a.scenarios, name)
		if !ok {
			return &usageError{msg: fmt.Sprintf("eval: unknown scenario %s (valid: %s)", quoteArg(name), strings.Join(scenarioNames(a.scenarios), ", ")), cmd: "eval"}
		}
		if len(files) > 0 && !takesFiles(s) {
			return &usageError{msg: fmt.Sprintf("eval: scenario %s takes no FILE arguments, got %s", s.Name, quoteArg(files[0])), cmd: "eval"}
		}
		if len(files) == 0 && takesFiles(s) {
			return &usageError{msg: fmt.Sprintf("eval: scenario %s needs FILE arguments: sensor traces (ULB format, or one Unix timestamp per line)", s.Name), cmd: "eval"}
		}
		todo = []eval.Scenario{s}
	}

	opt := eval.Options{Seed: *ef.seed, Runs: *ef.runs, Jitter: *ef.jitter, Files: files, Log: a.progress}
	out := &evalOutput{a: a, json: *ef.json, array: name == allScenarios, svgDir: *ef.svg}
	var errs []error
	for _, s := range todo {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("eval: interrupted before %s: %w", s.Name, err))
			break
		}
		start := time.Now()
		a.log.Info("running scenario", "scenario", s.Name, "seed", opt.Seed, "runs", opt.Runs, "jitter_s", opt.Jitter, "files", len(opt.Files))
		r, err := s.Run(ctx, opt)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("eval %s: %w", s.Name, err))
			continue
		case r == nil:
			errs = append(errs, fmt.Errorf("eval %s: the scenario returned no report", s.Name))
			continue
		}
		a.log.Info("scenario done", "scenario", s.Name, "rows", len(r.Rows), "elapsed", time.Since(start).Round(time.Millisecond))
		if err := out.write(r); err != nil {
			errs = append(errs, fmt.Errorf("eval %s: %w", s.Name, err))
			if isWriteErr(err) {
				break // stdout is gone; the other scenarios could not be shown either
			}
		}
		// A failed check fails the command (exit status 1), after its
		// report is written, so scripts and CI can rely on the status.
		if f := r.Failures(); len(f) > 0 {
			errs = append(errs, fmt.Errorf("eval %s: %w: %d (first: %s)", s.Name, eval.ErrChecksFailed, len(f), f[0]))
		}
	}
	if err := out.close(); err != nil {
		errs = append(errs, fmt.Errorf("eval: %w", err))
	}
	return errors.Join(errs...)
}

// evalOutput writes reports to stdout as they arrive: tables separated by
// blank lines, one JSON object, or for "eval all --json" a JSON array;
// figures go to the SVG directory when one is given.
type evalOutput struct {
	a      *app
	json   bool
	array  bool // write a JSON array even for one report
	svgDir string

	n int // reports written
}

// errWrite marks a failure to write to stdout.
var errWrite = errors.New("writing results")

func isWriteErr(err error) bool { return errors.Is(err, errWrite) }

// write renders one report.
func (o *evalOutput) write(r *eval.Report) error {
	var buf bytes.Buffer
	switch {
	case o.json && o.array:
		var obj bytes.Buffer
		if err := eval.WriteJSON(&obj, r); err != nil {
			return err
		}
		if o.n == 0 {
			buf.WriteString("[\n  ")
		} else {
			buf.WriteString(",\n  ")
		}
		// Indent the object one level inside the array.
		if err := json.Indent(&buf, bytes.TrimSpace(obj.Bytes()), "  ", "  "); err != nil {
			return err
		}
	case o.json:
		if err := eval.WriteJSON(&buf, r); err != nil {
			return err
		}
	default:
		if o.n > 0 {
			buf.WriteByte('\n')
		}
		if err := eval.WriteTable(&buf, r); err != nil {
			return err
		}
	}
	o.n++
	if _, err := o.a.stdout.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	if o.svgDir == "" {
		return nil
	}
	paths, err := eval.WriteSVG(o.svgDir, r)
	for _, p := range paths {
		fmt.Fprintf(o.a.progress, "wrote %s\n", p)
	}
	return err
}

// close ends the output: the JSON array's closing bracket (an empty array
// when nothing was written).
func (o *evalOutput) close() error {
	if !o.json || !o.array {
		return nil
	}
	end := "\n]\n"
	if o.n == 0 {
		end = "[]\n"
	}
	if _, err := io.WriteString(o.a.stdout, end); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

// fileArg matches the placeholder a scenario's Usage uses for its file
// arguments.
var fileArg = regexp.MustCompile(`\bFILE`)

// takesFiles reports whether s reads FILE arguments, which its Usage says
// by naming them in capitals ("trace FILE...: replay ..."). "eval all"
// skips such scenarios, and the others refuse files.
func takesFiles(s eval.Scenario) bool { return fileArg.MatchString(s.Usage) }

// findScenario returns the scenario called name.
func findScenario(scenarios []eval.Scenario, name string) (eval.Scenario, bool) {
	for _, s := range scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return eval.Scenario{}, false
}

// scenarioNames lists the names "eval" accepts, "all" last.
func scenarioNames(scenarios []eval.Scenario) []string {
	names := make([]string, 0, len(scenarios)+1)
	for _, s := range scenarios {
		names = append(names, s.Name)
	}
	return append(names, allScenarios)
}

// evalUsage writes the help of "slogfeed eval", with the scenarios.
func evalUsage(w io.Writer, a *app) {
	fmt.Fprint(w, `Usage:
  slogfeed eval SCENARIO [flags] [FILE...]

Runs a simulated evaluation of the fetch scheduling policies and prints
its results: a table, or JSON with --json. Progress goes to stderr.

Flags (before or after SCENARIO and FILEs; '--' ends them):
`)
	writeFlagHelp(w, newEvalFlags().fs)
	fmt.Fprint(w, "\nScenarios:\n")
	if len(a.scenarios) == 0 {
		fmt.Fprint(w, "  (none are built in)\n")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range a.scenarios {
		lines := strings.Split(strings.TrimSpace(s.Usage), "\n")
		fmt.Fprintf(tw, "  %s\t%s\n", s.Name, strings.TrimSpace(lines[0]))
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "  \t%s\n", strings.TrimSpace(l))
		}
	}
	fmt.Fprintf(tw, "  %s\t%s\n", allScenarios, "every scenario above that needs no FILE arguments, in turn")
	tw.Flush()
}
