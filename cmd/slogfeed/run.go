package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/slogfeed/slogfeed/schedule/eval"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // the command line was wrong
)

// version is the release version, set at link time with
// -ldflags "-X main.version=v1.2.3"; empty means "ask the build info".
var version = ""

// app is what a command may use besides its arguments: the standard
// streams, the environment, the built-in scenarios and the logger. Tests
// build their own, so nothing here is read from package state.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	scenarios      []eval.Scenario

	log      *slog.Logger
	progress io.Writer // human progress lines: stderr, or io.Discard above level info
}

// A command is one subcommand of slogfeed.
type command struct {
	name    string
	summary string // one line for "slogfeed help"
	// run executes the command with the arguments after its name. It
	// returns flag.ErrHelp after printing help that was asked for, a
	// *usageError for a wrong command line, any other error for a failure.
	run func(ctx context.Context, a *app, args []string) error
	// usage writes the command's full help.
	usage func(w io.Writer, a *app)
}

// commands returns the subcommands in the order help lists them. The
// remaining commands (serve, add, list, remove, show, import, export) plug
// in here as they are written; help lists only what is in this table.
func commands() []command {
	return []command{
		{name: "serve", summary: "run the aggregator, the JSON API and the sensor store (--demo for simulated publishers)", run: runServe, usage: serveUsage},
		{name: "add", summary: "subscribe to a feed", run: runAdd, usage: clientUsage("add", "URL", "Subscribes the running slogfeed to the feed at URL.", new(addFlags).bind)},
		{name: "list", summary: "list feeds with their schedule status", run: runList, usage: clientUsage("list", "", "Lists the feeds, a page at a time: policy, polls, hit %, median latency, next fetch, last error.", new(listFlags).bind)},
		{name: "remove", summary: "unsubscribe from a feed", run: runRemove, usage: clientUsage("remove", "ID", "Removes the feed, its items and its observations.", nil)},
		{name: "show", summary: "show a feed's schedule state and recent polls", run: runShow, usage: clientUsage("show", "ID", "Shows the feed's learned period and spread, mode, next fetch and recent polls.", nil)},
		{name: "import", summary: "subscribe to the feeds of an OPML file", run: runImport, usage: clientUsage("import", "FILE.opml", "Imports an OPML subscription list (nested folders become categories); - reads standard input.", new(importFlags).bind)},
		{name: "export", summary: "write the subscriptions as OPML", run: runExport, usage: clientUsage("export", "", "Writes every subscription as OPML 2.0 to standard output.", nil)},
		{name: "cluster", summary: "show the cluster's nodes, shards and feeds", run: runCluster, usage: clientUsage("cluster", "", "Shows each node of the cluster (name, address, shards, feeds it polls, last seen) and the unowned shards; a slogfeed without --nats shows itself as one node.", nil)},
		{name: "eval", summary: "run a scheduling evaluation scenario and print its results", run: runEval, usage: evalUsage},
		{name: "help", summary: "show help for slogfeed or for one command", run: runHelp, usage: helpUsage},
	}
}

// lookupCommand returns the command called name.
func lookupCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usageError is a mistake on the command line. runWith prints it as one
// "slogfeed: ..." line, then usage (or a hint where to find it), and exits
// with status 2.
type usageError struct {
	msg   string
	usage func(io.Writer) // full help to print after the message; nil prints a hint
	cmd   string          // the command whose help the hint points to ("" for slogfeed's)
}

func (e *usageError) Error() string { return e.msg }

// run is the program: it parses args (without the program name), runs
// the command and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: os.Getenv, scenarios: eval.All()}
	return runWith(ctx, args, a, true)
}

// runWith is run with everything the program touches passed in: a's
// streams, environment and scenarios (a.log and a.progress are set here).
// setDefault also installs the logger as slog's default, which only the
// real program does, so that tests do not change process state.
func runWith(ctx context.Context, args []string, a *app, setDefault bool) int {
	fs := flag.NewFlagSet("slogfeed", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	showVersion := fs.Bool("version", false, "print the version and exit")
	settings := bindSettings(fs, globalSettings())
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			topUsage(a.stdout)
			return exitOK
		}
		return a.fail(&usageError{msg: err.Error(), usage: topUsage})
	}
	if *showVersion {
		fmt.Fprintf(a.stdout, "slogfeed %s\n", versionString())
		return exitOK
	}
	values, err := settings.resolve(a.getenv)
	if err != nil {
		return a.fail(err)
	}
	level, _ := parseLevel(values["log-level"]) // checked by resolve
	a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
	if setDefault {
		slog.SetDefault(a.log)
	}
	a.progress = a.stderr
	if level > slog.LevelInfo {
		a.progress = io.Discard
	}

	rest := fs.Args()
	if len(rest) == 0 {
		return a.fail(&usageError{msg: "no command given", usage: topUsage})
	}
	cmd, ok := lookupCommand(rest[0])
	if !ok {
		return a.fail(&usageError{msg: "unknown command " + quoteArg(rest[0]), usage: topUsage})
	}
	// A command whose output could not be written (a full disk, a closed
	// pipe) fails, whatever it printed it with.
	out := &errWriter{w: a.stdout}
	a.stdout = out
	err = cmd.run(ctx, a, rest[1:])
	if err == nil && out.err != nil {
		err = fmt.Errorf("writing the output: %w", out.err)
	}
	return a.fail(err)
}

// errWriter writes to w and keeps the first error of a write.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// fail reports err on stderr and returns the exit status it calls for: 0
// for nil or for help that was asked for and printed, 2 for a usage error,
// 1 otherwise. Each error is one "slogfeed: ..." line; joined errors get a
// line each.
func (a *app) fail(err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "slogfeed: %s\n", oneLine(ue.msg))
		if ue.usage != nil {
			fmt.Fprintln(a.stderr)
			ue.usage(a.stderr)
		} else {
			fmt.Fprintf(a.stderr, "Run '%s' for usage.\n", strings.TrimSpace("slogfeed help "+ue.cmd))
		}
		return exitUsage
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			fmt.Fprintf(a.stderr, "slogfeed: %s\n", oneLine(e.Error()))
		}
	} else {
		fmt.Fprintf(a.stderr, "slogfeed: %s\n", oneLine(err.Error()))
	}
	return exitError
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// versionString is the version set at link time, else the module version
// from the build info, with the VCS revision when it is known.
func versionString() string {
	if version != "" {
		return version
	}
	v := "(devel)"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if info.Main.Version != "" {
		v = info.Main.Version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}

// topUsage writes slogfeed's help: the commands and the global flags.
func topUsage(w io.Writer) {
	fmt.Fprint(w, `slogfeed is a feed aggregator for sensor data with adaptive fetch scheduling.

Usage:
  slogfeed [global flags] COMMAND [arguments]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, "\nGlobal flags (before COMMAND):\n")
	fs := flag.NewFlagSet("slogfeed", flag.ContinueOnError)
	fs.Bool("version", false, "print the version and exit")
	bindSettings(fs, globalSettings())
	writeFlagHelp(w, fs, [2]string{"-h, --help", "show this help"})
	fmt.Fprint(w, "\nRun 'slogfeed help COMMAND' for the arguments of one command.\n")
}

// runHelp implements "slogfeed help [COMMAND]".
func runHelp(_ context.Context, a *app, args []string) error {
	switch len(args) {
	case 0:
		topUsage(a.stdout)
		return nil
	case 1:
		c, ok := lookupCommand(args[0])
		if !ok {
			return &usageError{msg: "help: unknown command " + quoteArg(args[0]), usage: topUsage}
		}
		c.usage(a.stdout, a)
		return nil
	}
	return &usageError{msg: "help takes at most one command name", cmd: "help"}
}

// helpUsage writes the help of the help command.
func helpUsage(w io.Writer, _ *app) {
	fmt.Fprint(w, "Usage:\n  slogfeed help [COMMAND]\n\nShows slogfeed's commands, or the arguments and flags of COMMAND.\n")
}
