// Command mutants measures how much of the safety contract the tests really guard: it applies
// each realistic mistake of the table (table.go) to a copy of one source file, runs the tests that
// need no control plane against it, and reports which mistakes the tests kill.
//
// The working tree is never touched: each mutant is a `go test -overlay` that points the file at
// a mutated copy in a temporary directory, so runs are safe beside an editor and in parallel.
// A file other than Go source (a CRD, an admission policy) is mutated the same way when a package
// beside it embeds it: the overlay reaches what a build embeds, not what a test reads at run time.
// Only the packages whose tests link the mutated package run, the mutated package first, then
// the others fastest first (as the baseline run measured them), each with -failfast; the first
// failing package kills the mutant.
//
// It exits non-zero when a mutant survives, when a mutant's original snippet no longer occurs
// exactly once in its file (the table rotted), when a mutant does not build, or when the tests
// fail without any mutant.
//
// With -generic, go-gremlins then mutates the named packages mechanically (generic.go).
//
// Usage: go run ./hack/mutants [-run REGEXP] [-j N] [-timeout D] [-table=false] [-generic all|PKG,...]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	run := flag.String("run", "", "only the mutants whose name matches this regular expression")
	jobs := flag.Int("j", 1, "mutants tested at once")
	timeout := flag.Duration("timeout", 10*time.Minute, "go test -timeout for one package under one mutant (a hang counts as killed)")
	only := flag.String("pkgs", "", "comma-separated package directories to run (all affected ones when empty); a restricted run is for triage, not a score")
	table := flag.Bool("table", true, "run the table's mutants")
	generic := flag.String("generic", "", "comma-separated packages for the generic pass (go-gremlins), after the table; empty: none, all: "+strings.Join(genericPackages, ","))
	flag.Parse()
	code := 0
	if *table {
		code = runAll(*run, *jobs, *timeout, *only)
	}
	if *generic != "" {
		pkgs := genericPackages
		if *generic != "all" {
			pkgs = strings.Split(*generic, ",")
		}
		root, err := repoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutants:", err)
			os.Exit(2)
		}
		code = max(code, runGeneric(root, *jobs, pkgs))
	}
	os.Exit(code)
}

func runAll(pattern string, jobs int, timeout time.Duration, only string) int {
	start := time.Now()
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants: -run:", err)
		return 2
	}
	failed := false
	var todo []Mutant
	for _, m := range Table {
		if !re.MatchString(m.Name) {
			continue
		}
		if err := m.check(root); err != nil {
			fmt.Printf("STALE     %-34s %v\n", m.Name, err)
			failed = true
			continue
		}
		todo = append(todo, m)
	}
	pkgs, err := testedPackages(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	if only != "" {
		keep := map[string]bool{}
		for _, p := range strings.Split(only, ",") {
			keep[strings.TrimPrefix(strings.TrimSpace(p), "./")] = true
		}
		for p := range pkgs.links {
			if !keep[p] {
				delete(pkgs.links, p)
			}
		}
		fmt.Printf("mutants: only %s (triage: not a score)\n", only)
	}
	tmp, err := os.MkdirTemp("", "mutants-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	defer os.RemoveAll(tmp)

	// The baseline: every package a mutant may run must pass as it is, or a kill means nothing.
	need := map[string]bool{}
	for _, m := range todo {
		for _, p := range pkgs.affected(m.pkg()) {
			need[p] = true
		}
	}
	cost := map[string]time.Duration{}
	for _, p := range sortedKeys(need) {
		t0 := time.Now()
		out, err := goTest(root, "", p, timeout, pkgs.rapid[p])
		cost[p] = time.Since(t0)
		if err != nil {
			fmt.Printf("baseline: %s fails without any mutant:\n%s\n", p, tail(out, 30))
			return 1
		}
		fmt.Printf("baseline  %-50s ok %s\n", p, cost[p].Round(time.Second))
	}

	results := make([]result, len(todo))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(jobs, 1))
	var mu sync.Mutex
	for i, m := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := m.run(root, filepath.Join(tmp, fmt.Sprint(i)), pkgs, cost, timeout)
			results[i] = r
			mu.Lock()
			fmt.Println(r.line(m))
			mu.Unlock()
		}()
	}
	wg.Wait()

	killed, survived, broken, byTimeout := 0, 0, 0, 0
	fmt.Printf("\n%-34s %-9s %-24s %s\n", "mutant", "result", "killed by", "threatens")
	for i, m := range todo {
		r := results[i]
		switch r.verdict {
		case "killed":
			killed++
			if r.timedOut {
				byTimeout++
			}
		case "SURVIVED":
			survived++
		default:
			broken++
		}
		fmt.Printf("%-34s %-9s %-24s %s\n", m.Name, r.verdict, r.by, m.Threatens)
	}
	total := killed + survived
	score := 0.0
	if total > 0 {
		score = 100 * float64(killed) / float64(total)
	}
	fmt.Printf("\nmutants: %d killed, %d survived, %d broken, %d stale of %d; score %.1f%%; wall time %s\n",
		killed, survived, broken, len(Table)-len(todo)-skipped(pattern), len(todo), score, time.Since(start).Round(time.Second))
	if byTimeout > 0 {
		fmt.Printf("mutants: %d of the kills were by a timeout (-timeout %s): run them again on a quiet machine (-run)\n", byTimeout, timeout)
	}
	if failed || survived > 0 || broken > 0 || len(todo) == 0 || only != "" {
		return 1
	}
	return 0
}

// skipped counts the mutants -run left out, so that the stale count is the stale ones only.
func skipped(pattern string) int {
	re := regexp.MustCompile(pattern)
	n := 0
	for _, m := range Table {
		if !re.MatchString(m.Name) {
			n++
		}
	}
	return n
}

type result struct {
	verdict, by string
	took        time.Duration
	detail      string
	// timedOut: the kill was the package's tests running past -timeout. A mutant that loops
	// forever is killed so, but so is one whose tests a loaded machine slowed past the limit:
	// the report names these kills apart, for a person to run again on a quiet machine.
	timedOut bool
}

// timedOut reports whether go test's output says its tests ran past -timeout.
func timedOut(out []byte) bool { return bytes.Contains(out, []byte("panic: test timed out after ")) }

func (r result) line(m Mutant) string {
	s := fmt.Sprintf("%-9s %-34s %-24s %s", r.verdict, m.Name, r.by, r.took.Round(time.Second))
	if r.detail != "" {
		s += "\n" + r.detail
	}
	return s
}

// run applies one mutant through an overlay and runs the affected packages until one fails.
func (m Mutant) run(root, dir string, pkgs *packages, cost map[string]time.Duration, timeout time.Duration) result {
	t0 := time.Now()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{verdict: "BROKEN", detail: err.Error()}
	}
	src, err := os.ReadFile(filepath.Join(root, m.File))
	if err != nil {
		return result{verdict: "BROKEN", detail: err.Error()}
	}
	n := 1
	if m.Every {
		n = -1
	}
	mutated := filepath.Join(dir, filepath.Base(m.File))
	if err := os.WriteFile(mutated, []byte(strings.Replace(string(src), m.Original, m.Replacement, n)), 0o644); err != nil {
		return result{verdict: "BROKEN", detail: err.Error()}
	}
	overlay := filepath.Join(dir, "overlay.json")
	b, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, m.File): mutated}})
	if err := os.WriteFile(overlay, b, 0o644); err != nil {
		return result{verdict: "BROKEN", detail: err.Error()}
	}
	// A mutant that does not compile is no realistic mistake: it would be killed by the compiler,
	// not by the tests.
	build := exec.Command("go", "vet", "-overlay="+overlay, "./"+m.pkg())
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return result{verdict: "BROKEN", took: time.Since(t0), detail: tail(out, 10)}
	}
	order := pkgs.affected(m.pkg())
	sort.SliceStable(order, func(i, j int) bool {
		if (order[i] == m.pkg()) != (order[j] == m.pkg()) {
			return order[i] == m.pkg()
		}
		return cost[order[i]] < cost[order[j]]
	})
	for _, p := range order {
		if out, err := goTest(root, overlay, p, timeout, pkgs.rapid[p]); err != nil {
			r := result{verdict: "killed", by: p, took: time.Since(t0)}
			if timedOut(out) {
				r.by, r.timedOut = p+" (timeout)", true
			}
			return r
		}
	}
	return result{verdict: "SURVIVED", took: time.Since(t0)}
}

// goTest runs one package's tests, with the overlay when one is given.
func goTest(root, overlay, pkg string, timeout time.Duration, rapid bool) ([]byte, error) {
	args := []string{"test", "-count=1", "-failfast", "-timeout=" + timeout.String()}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	args = append(args, "./"+pkg)
	if rapid {
		args = append(args, "-args", "-rapid.nofailfile")
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	return cmd.CombinedOutput()
}

// check confirms the mutant still applies: its original occurs exactly once in its file (at least
// once for Every), and the replacement changes something.
func (m Mutant) check(root string) error {
	b, err := os.ReadFile(filepath.Join(root, m.File))
	if err != nil {
		return err
	}
	if m.Original == m.Replacement {
		return fmt.Errorf("the replacement is the original")
	}
	switch n := strings.Count(string(b), m.Original); {
	case m.Every && n == 0:
		return fmt.Errorf("%s: the original snippet does not occur: update the table", m.File)
	case !m.Every && n != 1:
		return fmt.Errorf("%s: the original snippet occurs %d times, want exactly once: update the table", m.File, n)
	}
	return nil
}

// pkg is the mutated file's package directory, relative to the module root.
func (m Mutant) pkg() string { return filepath.ToSlash(filepath.Dir(m.File)) }

// packages maps each package directory with tests (the end-to-end suites left out: they need a
// control plane) to the package directories its test binary links.
type packages struct {
	links map[string]map[string]bool
	// rapid marks the packages whose tests use pgregory.net/rapid: they run with
	// -rapid.nofailfile, or a failing mutant would write testdata/rapid into the tree and every
	// later run would replay it.
	rapid map[string]bool
}

func (p *packages) affected(pkg string) []string {
	var out []string
	for _, t := range sortedKeys(p.links) {
		if t == pkg || p.links[t][pkg] {
			out = append(out, t)
		}
	}
	return out
}

// endToEnd tells the end-to-end suites (the kwok one and the real nodes'), which need a control
// plane, from the support packages beside them (the contract's judge, the celld stand-in's store,
// the test environment), whose tests need none.
func endToEnd(dir string) bool {
	return dir == "e2e" || dir == "e2e/realnodes" || strings.HasPrefix(dir, "e2e/realnodes/")
}

func testedPackages(root string) (*packages, error) {
	cmd := exec.Command("go", "list", "-test", "-json=ImportPath,Dir,Deps,TestGoFiles,XTestGoFiles,ForTest", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	mod, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	rel := func(importPath string) (string, bool) {
		if importPath == mod {
			return ".", true
		}
		r, ok := strings.CutPrefix(importPath, mod+"/")
		return r, ok
	}
	p := &packages{links: map[string]map[string]bool{}, rapid: map[string]bool{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var lp struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&lp); err != nil {
			return nil, err
		}
		// The test main "x.test" links everything the package's tests use.
		base, ok := strings.CutSuffix(lp.ImportPath, ".test")
		if !ok {
			continue
		}
		dir, ok := rel(base)
		if !ok || endToEnd(dir) {
			continue
		}
		links := map[string]bool{}
		for _, d := range lp.Deps {
			d, _, _ = strings.Cut(d, " ")
			if d == "pgregory.net/rapid" {
				p.rapid[dir] = true
			}
			if r, ok := rel(d); ok {
				links[r] = true
			}
		}
		p.links[dir] = links
	}
	return p, nil
}

func modulePath(root string) (string, error) {
	cmd := exec.Command("go", "list", "-m")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the module: run from the repository")
	}
	return filepath.Dir(mod), nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
