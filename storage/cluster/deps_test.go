package cluster

import (
	"os/exec"
	"strings"
	"testing"
)

// corePackages are the packages that must not link NATS: everything
// slogfeed runs on a single node. Only cmd/slogfeed and storage/jetstream
// (with its sub-packages) may.
var corePackages = []string{
	"github.com/slogfeed/slogfeed/aggregator/...",
	"github.com/slogfeed/slogfeed/transform/...",
	"github.com/slogfeed/slogfeed/web/...",
	"github.com/slogfeed/slogfeed/plugins/...",
	"github.com/slogfeed/slogfeed/schedule/...",
	"github.com/slogfeed/slogfeed/reader/...",
	"github.com/slogfeed/slogfeed/feedext",
	"github.com/slogfeed/slogfeed/storage",
	"github.com/slogfeed/slogfeed/storage/cluster",
}

// natsModules are the module paths whose packages the core may not link.
var natsModules = []string{"github.com/nats-io/nats-server/", "github.com/nats-io/nats.go"}

func isNATS(path string) bool {
	for _, m := range natsModules {
		if strings.HasPrefix(path, m) {
			return true
		}
	}
	return false
}

// TestCoreLinksNoNATS lists the dependencies of the core packages (their
// non-test code) with `go list -deps` and fails when any of them links a
// package of nats-server or nats.go, naming the import path that leads
// there.
func TestCoreLinksNoNATS(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	roots, err := exec.Command(gobin, append([]string{"list"}, corePackages...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, corePackages...)
	out, err := exec.Command(gobin, args...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	imports := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	rootList := strings.Fields(string(roots))
	if len(rootList) < len(corePackages) {
		t.Fatalf("go list found %d core packages, want at least %d", len(rootList), len(corePackages))
	}
	for _, root := range rootList {
		if path := pathTo(imports, root, isNATS); path != nil {
			t.Errorf("%s links NATS: %s", root, strings.Join(path, " → "))
		}
	}
}

// pathTo returns an import path from root to a package match accepts,
// breadth first, or nil.
func pathTo(imports map[string][]string, root string, match func(string) bool) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if match(p) {
			var path []string
			for q := p; q != ""; q = prev[q] {
				path = append([]string{q}, path...)
			}
			return path
		}
		for _, d := range imports[p] {
			if _, seen := prev[d]; !seen {
				prev[d] = p
				queue = append(queue, d)
			}
		}
	}
	return nil
}
