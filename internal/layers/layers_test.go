package layers

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/slogfeed/slogfeed/"

// rules says, for each package (a path, or a path ending in "/..." for it
// and every package under it), which slogfeed packages it may import
// directly; the first row that matches a package is its row. A package's
// own subtree is not allowed unless listed.
var rules = []struct {
	pkg   string
	allow []string
}{
	{"feedext", nil},
	{"internal/testlog", nil}, // test helpers
	{"reader/sanitize/...", nil},
	{"schedule/...", []string{"schedule/..."}},
	{"storage", []string{"schedule"}},
	{"storage/storagetest", []string{"storage", "schedule"}},
	{"reader/fetcher", []string{"feedext", "reader/sanitize", "schedule"}},
	{"reader/parser/...", []string{"reader/parser", "feedext", "reader/sanitize", "schedule", "storage"}},
	{"reader/opml", []string{"reader/sanitize", "schedule", "storage"}},
	{"storage/cluster/e2e", []string{"storage"}}, // test helpers: a publisher of the end-to-end tests
	{"storage/cluster", []string{"storage", "schedule"}},
	{"storage/jetstream/...", []string{"storage/jetstream/...", "storage", "storage/cluster", "schedule"}},
	{"aggregator/...", []string{"aggregator", "reader/...", "feedext", "schedule", "storage", "storage/cluster"}},
	{"transform/...", []string{"transform/...", "reader/sanitize", "feedext", "schedule", "storage", "storage/cluster"}},
	{"web/publish", []string{"feedext", "reader/sanitize", "schedule", "storage"}},
	{"web/...", []string{"web/...", "aggregator", "transform/...", "reader/...", "feedext", "schedule/...", "storage", "storage/cluster"}},
	{"plugins/...", []string{"plugins/...", "aggregator", "transform/...", "web", "reader/...", "feedext", "schedule", "storage"}},
	{"cmd/...", []string{"..."}},
}

// match reports whether pattern (a path, "path/..." or "...") names pkg.
func match(pattern, pkg string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// imports lists each slogfeed package with the slogfeed packages its
// non-test files import, as `go list` reports them. Tests may import
// more: helpers, and the layers above for end-to-end tests.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		pkgs[pkg] = nil
		for _, imp := range f[1:] {
			if rest, ok := strings.CutPrefix(imp, module); ok && rest != pkg {
				pkgs[pkg] = append(pkgs[pkg], rest)
			}
		}
	}
	return pkgs
}

func TestLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	pkgs := imports(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for pkg, imps := range pkgs {
		if pkg == "internal/layers" {
			continue
		}
		row := -1
		for i, r := range rules {
			if match(r.pkg, pkg) {
				row = i
				break
			}
		}
		if row < 0 {
			t.Errorf("%s has no row in the rules: add one", pkg)
			continue
		}
		for _, imp := range imps {
			ok := false
			for _, a := range rules[row].allow {
				ok = ok || match(a, imp)
			}
			if !ok {
				t.Errorf("%s imports %s, which its row (%s) does not allow", pkg, imp, rules[row].pkg)
			}
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"web/...", "web", true},
		{"web/...", "web/ui", true},
		{"web/...", "webhook", false},
		{"web", "web/ui", false},
		{"...", "anything", true},
	} {
		if got := match(c.pattern, c.pkg); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.pattern, c.pkg, got)
		}
	}
}
