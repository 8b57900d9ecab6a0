package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/configuration.md from the settings tables")

// configDocPath is docs/configuration.md, from this package's directory.
var configDocPath = filepath.Join("..", "..", "docs", "configuration.md")

// machineDefaults are the defaults that depend on the machine the help
// runs on, as the page states them.
var machineDefaults = map[string]string{
	"data": "`$XDG_DATA_HOME/slogfeed`, else `~/.local/share/slogfeed`",
	"node": "the host name",
}

// configSection is one table of the page.
type configSection struct {
	title, intro string
	settings     []setting
}

// configSections are the settings tables of every command, in the order
// the page shows them.
func configSections() []configSection {
	cluster := make(map[string]bool)
	for _, s := range clusterSettings() {
		cluster[s.Name] = true
	}
	var serve, clustered []setting
	for _, s := range serveSettings(func(string) string { return "" }) {
		if cluster[s.Name] {
			clustered = append(clustered, s)
		} else {
			serve = append(serve, s)
		}
	}
	return []configSection{
		{
			title:    "Global settings",
			intro:    "Given before the command (`slogfeed --log-level debug serve`). `slogfeed --version` prints the version and exits.",
			settings: globalSettings(),
		},
		{
			title:    "`slogfeed serve`",
			intro:    "The aggregator, the HTTP API, the web UI, the sensor store and the republished feeds.",
			settings: serve,
		},
		{
			title: "`slogfeed serve` on a cluster",
			intro: "Without `--nats` and `--nats-embed`, `serve` is a single node on its bbolt file and these settings " +
				"(but `--node`, which names the node in `GET /api/v1/cluster`) do nothing. See [cluster.md](cluster.md).",
			settings: clustered,
		},
		{
			title:    "Client commands",
			intro:    "`add`, `list`, `remove`, `show`, `import`, `export` and `cluster` talk to a running `slogfeed serve`. Their flags go after the command (`slogfeed list --server URL`).",
			settings: clientSettings(),
		},
	}
}

// renderConfigDoc writes docs/configuration.md from the settings tables.
func renderConfigDoc() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`# Configuration

<!-- Generated from the settings tables of cmd/slogfeed by
     go test ./cmd/slogfeed -run TestConfigurationDoc -update
     Edit the tables, not this page. -->

Every setting of slogfeed is a command-line flag and an environment
variable. The flag wins over the variable, which wins over the default;
an empty variable counts as unset. A value that is out of range is
refused at start with a message that names the setting.
`)
	for _, sec := range configSections() {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", sec.title, sec.intro)
		b.WriteString("| flag | environment variable | default | meaning |\n|---|---|---|---|\n")
		for _, s := range sec.settings {
			arg, usage := unquoteDoc(s.Doc)
			name := "--" + s.Name
			if arg != "" && !s.Bool {
				name += " " + arg
			}
			def, ok := machineDefaults[s.Name]
			switch {
			case ok:
			case s.Default == "":
				def = "(none)"
			default:
				def = "`" + s.Default + "`"
			}
			if strings.Contains(usage, "|") {
				return nil, fmt.Errorf("setting %q: a | in its doc would break the table", s.Name)
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", name, s.Env, def, usage)
		}
	}
	b.WriteString(`
## Command arguments

Arguments that belong to one command rather than to the server, such as
` + "`slogfeed add URL --policy P --sleep 20:00-06:00`" + ` or
` + "`slogfeed eval SCENARIO --json`" + `, are listed by
` + "`slogfeed help COMMAND`" + `.
`)
	return b.Bytes(), nil
}

// unquoteDoc returns the argument name a setting's doc quotes (`NAME`,
// as flag.UnquoteUsage reads it) and the doc without the quotes.
func unquoteDoc(doc string) (arg, usage string) {
	i := strings.IndexByte(doc, '`')
	if i < 0 {
		return "", doc
	}
	j := strings.IndexByte(doc[i+1:], '`')
	if j < 0 {
		return "", doc
	}
	arg = doc[i+1 : i+1+j]
	return arg, doc[:i] + arg + doc[i+1+j+1:]
}

// TestConfigurationDoc fails when docs/configuration.md is not what the
// settings tables give; -update rewrites it.
func TestConfigurationDoc(t *testing.T) {
	for name := range machineDefaults {
		found := false
		for _, sec := range configSections() {
			for _, s := range sec.settings {
				found = found || s.Name == name
			}
		}
		if !found {
			t.Errorf("machineDefaults names %q, which no settings table has", name)
		}
	}
	want, err := renderConfigDoc()
	if err != nil {
		t.Fatal(err)
	}
	if *updateDocs {
		if err := os.WriteFile(configDocPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/slogfeed -run TestConfigurationDoc -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from the settings tables at line %d:\n have: %s\n want: %s\n"+
					"run go test ./cmd/slogfeed -run TestConfigurationDoc -update", configDocPath, i+1, g, w)
			}
		}
	}
}
