package wasmhost

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// modulePath is the broker's module; pluginsDir is the folder of the
// shipped guests' sources, and shippedModules the one package under it
// that the broker may import: the guests' built modules, embedded.
const (
	modulePath     = "github.com/warrenmq/warren"
	pluginsDir     = modulePath + "/plugins"
	shippedModules = pluginsDir + "/shipped"
	hostPackage    = modulePath + "/core/wasmhost"
)

// hostImports are the packages of the module that the host's own code
// may import: it knows nothing of the broker but exchanges, messages and
// replies (see the package doc and ARCHITECTURE.md's floors), and its
// locks are ranked in the broker's order (internal/lockorder).
var hostImports = []string{
	modulePath + "/internal/lockorder",
	modulePath + "/core/exchange",
	modulePath + "/core/message",
	modulePath + "/core/reply",
	modulePath + "/protocol",
	modulePath + "/sdk/abi",
}

// TestNoImportRunsBackUp checks the import graph of the module, as
// `go list` reports it: no package under core/ or cmd/ reaches a package
// under plugins/ but plugins/shipped (the guests' sources are guests,
// built for wasip1 against sdk/, not broker code); the host, tests
// included, reaches nothing under plugins/ at all; and the host's own
// code imports nothing of the module above it.
func TestNoImportRunsBackUp(t *testing.T) {
	g := importGraph(t)

	var broker []string
	for p := range g {
		if underAny(p, modulePath+"/core", modulePath+"/cmd") {
			broker = append(broker, p)
		}
	}
	slices.Sort(broker)
	for _, chain := range g.reach(broker, func(p string) bool { return under(p, pluginsDir) && p != shippedModules }) {
		t.Errorf("core and cmd may import only %s of plugins/, but %s", rel(shippedModules), strings.Join(chain, " imports "))
	}

	var host []string
	for p := range g {
		if under(p, hostPackage) {
			host = append(host, p)
		}
	}
	slices.Sort(host)
	if len(host) == 0 {
		t.Fatalf("go list found no package %s", hostPackage)
	}
	for _, chain := range g.reach(host, func(p string) bool { return under(p, pluginsDir) }) {
		t.Errorf("the host may import nothing under plugins/, but %s", strings.Join(chain, " imports "))
	}

	for _, p := range host {
		for _, imp := range g[p].imports {
			if under(imp, modulePath) && !under(imp, hostPackage) && !under(imp, pluginsDir) && !slices.Contains(hostImports, imp) {
				allowed := make([]string, len(hostImports))
				for i, a := range hostImports {
					allowed[i] = rel(a)
				}
				t.Errorf("%s imports %s: the host may import, of Warren's packages, only %s",
					rel(p), rel(imp), strings.Join(allowed, ", "))
			}
		}
	}
}

// pkgImports are a package's imports: those of its code, and those its
// test files add.
type pkgImports struct {
	imports, tests []string
}

// graph is the module's packages, by import path.
type graph map[string]pkgImports

// importGraph lists every package of the module with its imports.
func importGraph(t *testing.T) graph {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "list", "-f",
		`{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = goModRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := graph{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 3 {
			t.Fatalf("go list printed %q", line)
		}
		g[f[0]] = pkgImports{imports: strings.Fields(f[1]), tests: strings.Fields(f[2])}
	}
	return g
}

// reach walks the imports from roots (their tests' too, and their code's
// alone below them) and returns, for each package bad says no to, the
// chain of imports from a root that reaches it first, paths relative to
// the module.
func (g graph) reach(roots []string, bad func(string) bool) [][]string {
	from := map[string]string{}  // a package, and the one that imports it on the way
	byTests := map[string]bool{} // packages only a root's tests import
	var found [][]string
	queue := slices.Clone(roots)
	for _, r := range roots {
		from[r] = ""
	}
	for i := 0; i < len(queue); i++ {
		p := queue[i]
		next := g[p].imports
		if from[p] == "" {
			next = append(slices.Clone(next), g[p].tests...)
		}
		for j, imp := range next {
			if _, seen := from[imp]; seen {
				continue
			}
			from[imp] = p
			byTests[imp] = j >= len(g[p].imports)
			if bad(imp) {
				path := []string{imp}
				for q := p; q != ""; q = from[q] {
					path = append(path, q)
				}
				slices.Reverse(path)
				chain := make([]string, len(path))
				for k, q := range path {
					chain[k] = rel(q)
				}
				if byTests[path[1]] {
					chain[0] += " (its tests)"
				}
				found = append(found, chain)
				continue
			}
			queue = append(queue, imp)
		}
	}
	return found
}

// rel is an import path of the module without the module's path.
func rel(p string) string {
	if r, ok := strings.CutPrefix(p, modulePath+"/"); ok {
		return r
	}
	return p
}

// under reports whether the import path p is dir or a package below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func underAny(p string, dirs ...string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return under(p, d) })
}
