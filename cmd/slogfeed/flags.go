package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// parseInterspersed parses args with fs but, unlike fs.Parse, lets flags
// appear before, between and after the positional arguments
// ("eval trace --json a.csv --runs 3 b.csv"). It returns the positional
// arguments in order. Everything after a "--" that stands where a flag
// could be is positional, so a file called "-x" is given as "-- -x".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if endedByTerminator(fs, args) {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// endedByTerminator reports whether fs.Parse(args), which succeeded,
// stopped at a "--" rather than at a positional argument or the end. It
// follows the flag package's rules: "-name=value", "-name" for boolean
// flags, "-name value" for the others, one or two dashes alike.
func endedByTerminator(fs *flag.FlagSet, args []string) bool {
	for i := 0; i < len(args); i++ {
		s := args[i]
		if len(s) < 2 || s[0] != '-' {
			return false
		}
		if s == "--" {
			return true
		}
		name := strings.TrimPrefix(s[1:], "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			// Only -h and -help get here without an error, and they stop
			// the parse with flag.ErrHelp.
			return false
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			continue
		}
		i++ // the flag's value
	}
	return false
}

// writeFlagHelp writes one aligned line per flag of fs: "--name ARG",
// then the usage text and the default when it is not the zero value.
// extra lines (name, text) follow, aligned with the flags.
func writeFlagHelp(w io.Writer, fs *flag.FlagSet, extra ...[2]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if arg != "" {
			name += " " + arg
		}
		if !isZeroDefault(f) {
			usage += ", default " + f.DefValue
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
	})
	for _, e := range extra {
		fmt.Fprintf(tw, "  %s\t%s\n", e[0], e[1])
	}
	tw.Flush()
}

// isZeroDefault reports whether f's default is its type's zero value, so
// that it is not worth printing.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false":
		return true
	}
	return false
}

// shellArg quotes s as one word for a POSIX shell, whole, for a command
// the user may paste: as it is when it holds only characters no shell
// treats specially, else in single quotes, a single quote within it
// ending the quoted part, escaped with a backslash, and starting another.
func shellArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// maxQuotedArg bounds how much of a user's argument is echoed in an error.
const maxQuotedArg = 64

// quoteArg quotes a command-line argument for an error message, cut to a
// sane length, so control characters or a pasted novel cannot garble the
// terminal.
func quoteArg(s string) string {
	if len(s) > maxQuotedArg {
		cut := maxQuotedArg
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}
