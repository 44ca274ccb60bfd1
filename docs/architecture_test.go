package docs

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/celld/celld-operator/"

// layers reads the layers block of architecture.md: the first line is the highest layer. A
// trailing "*" allows client-go; a trailing "/..." names every package under a path.
type layer struct {
	index    int
	clientGo bool
	prefix   bool
	entry    string
}

func readLayers(t *testing.T) map[string]layer {
	t.Helper()
	b, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "```layers\n")
	if i < 0 {
		t.Fatal("architecture.md has no layers block")
	}
	s = s[i+len("```layers\n"):]
	j := strings.Index(s, "```")
	if j < 0 {
		t.Fatal("architecture.md's layers block is not closed")
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s[:j]))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	out := map[string]layer{}
	for n, l := range lines {
		for _, p := range strings.Fields(l) {
			ly := layer{index: len(lines) - n, entry: p}
			p, ly.clientGo = strings.CutSuffix(p, "*")
			p, ly.prefix = strings.CutSuffix(p, "/...")
			if _, dup := out[p]; dup {
				t.Errorf("architecture.md lists %s twice", p)
			}
			out[p] = ly
		}
	}
	return out
}

// find is the layer of a package of the module.
func find(layers map[string]layer, pkg string) (layer, bool) {
	if l, ok := layers[pkg]; ok && !l.prefix {
		return l, true
	}
	for p, l := range layers {
		if l.prefix && (pkg == p || strings.HasPrefix(pkg, p+"/")) {
			return l, true
		}
	}
	return layer{}, false
}

type pkg struct {
	path    string
	imports []string
	deps    []string
}

func list(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var ps []pkg
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", l)
		}
		ps = append(ps, pkg{path: strings.TrimPrefix(f[0], module), imports: strings.Fields(f[1]), deps: strings.Fields(f[2])})
	}
	if len(ps) < 15 {
		t.Fatalf("go list found %d packages; want the whole module", len(ps))
	}
	return ps
}

// TestImportGraphIsTheMap: every package is on the map, imports only packages of lower layers,
// and only the packages the map marks import client-go. The packages tests import are not
// judged: a test may use the harness above what it tests.
func TestImportGraphIsTheMap(t *testing.T) {
	layers := readLayers(t)
	for _, p := range list(t) {
		l, ok := find(layers, p.path)
		if !ok {
			t.Errorf("package %s is not on the map: place it in docs/architecture.md's layers", p.path)
			continue
		}
		for _, imp := range p.imports {
			if strings.HasPrefix(imp, "k8s.io/client-go") && !l.clientGo {
				t.Errorf("%s imports %s: only the packages marked * in docs/architecture.md may", p.path, imp)
			}
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			d, ok := find(layers, dep)
			if !ok {
				continue // reported as a package of its own
			}
			if d.index >= l.index && d.entry != l.entry {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go down only", p.path, l.index, dep, d.index)
			}
		}
	}
}

// TestCoreDoesNotLinkClientGo: the decision, rendering and loop packages do not reach client-go
// even through another package, so the same code runs on the simulator with no API server.
func TestCoreDoesNotLinkClientGo(t *testing.T) {
	layers := readLayers(t)
	loop, ok := layers["loop"]
	if !ok {
		t.Fatal("loop is not on the map")
	}
	for _, p := range list(t) {
		l, ok := find(layers, p.path)
		if !ok || l.index > loop.index || l.clientGo {
			continue
		}
		for _, d := range p.deps {
			if strings.HasPrefix(d, "k8s.io/client-go") {
				t.Errorf("%s links %s: the core must not", p.path, d)
				break
			}
		}
	}
}
