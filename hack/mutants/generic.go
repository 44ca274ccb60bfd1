package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// The generic pass: beside the table's realistic mistakes, go-gremlins applies every mechanical
// one (a negated or shifted comparison, an arithmetic operator swapped, an increment turned
// around) to the packages the safety contract's decisions live in, and runs each package's own
// tests against it. The table says which mistakes matter; this pass says what the tests leave
// unguarded that nobody thought to list. A mutant that lives is either killed by a new test or
// listed in equivalent.txt with the reason it cannot change behavior.

// gremlinsVersion is the go-gremlins release the pass builds (cached under .cache/tools, keyed by
// it).
const gremlinsVersion = "v0.6.0"

// genericPackages are the packages the pass mutates: the decisions, then what renders and
// serves them.
var genericPackages = []string{"machine", "capacity", "events", "loop", "reservation", "internal/storagemigration",
	"render", "internal/cli", "cmd/kubectl-celld", "cmd/celld-operator"}

// gremlinsTimeoutCoefficient multiplies a package's test time into a mutant's timeout. The
// packages whose tests take a fraction of a second need a wide margin: a mutant's run also pays
// for its build.
const gremlinsTimeoutCoefficient = 50

// gremlinsReport is the part of go-gremlins' JSON output the pass reads.
type gremlinsReport struct {
	Files []struct {
		FileName  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// genericMutant is one mutation of the report, placed in the repository.
type genericMutant struct {
	File, Type, Status string
	Line, Column       int
	// Source is the mutated line's text, trimmed: what equivalent.txt names, so that an entry
	// outlives edits elsewhere in the file.
	Source string
}

// genericScore is one package's tally.
type genericScore struct {
	Pkg                                             string
	Killed, TimedOut, Lived, Equivalent, NotCovered int
	Unexplained                                     []genericMutant
}

// Score is the share of the mutants that can change behavior (killed, timed out, lived and not
// equivalent) the tests detect. Mutants no test reaches are reported apart, not scored.
func (s genericScore) Score() float64 {
	detected := s.Killed + s.TimedOut
	if d := detected + s.Lived - s.Equivalent; d > 0 {
		return 100 * float64(detected) / float64(d)
	}
	return 100
}

// equivalent is one entry of equivalent.txt: file, mutation type and the trimmed source line,
// then " -- " and why the mutant cannot change what the package does.
type equivalent struct{ File, Type, Source, Why string }

func (e equivalent) matches(m genericMutant) bool {
	return e.File == m.File && e.Type == m.Type && e.Source == m.Source
}

// parseEquivalents reads equivalent.txt: one entry per line, "file TYPE source -- reason";
// blank lines and lines starting with # are skipped. An entry without a reason is an error: an
// equivalent mutant is a claim, and a claim says why.
func parseEquivalents(text string) ([]equivalent, error) {
	var out []equivalent
	sc := bufio.NewScanner(strings.NewReader(text))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		head, why, ok := strings.Cut(line, " -- ")
		if !ok || strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("equivalent.txt:%d: no reason (want: file TYPE source -- why it cannot change behavior)", n)
		}
		parts := strings.SplitN(head, " ", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("equivalent.txt:%d: want file, mutation type and source line before the reason", n)
		}
		out = append(out, equivalent{File: parts[0], Type: parts[1], Source: strings.TrimSpace(parts[2]), Why: strings.TrimSpace(why)})
	}
	return out, sc.Err()
}

// tally scores one package's report against the equivalents; read gives a file's lines.
func tally(pkg string, r gremlinsReport, eq []equivalent, read func(file string) ([]string, error)) (genericScore, error) {
	s := genericScore{Pkg: pkg}
	for _, f := range r.Files {
		file := filepath.ToSlash(filepath.Join(pkg, f.FileName))
		var lines []string
		for _, m := range f.Mutations {
			switch m.Status {
			case "KILLED":
				s.Killed++
			case "TIMED OUT":
				s.TimedOut++
			case "NOT COVERED":
				s.NotCovered++
			case "LIVED":
				s.Lived++
				if lines == nil {
					var err error
					if lines, err = read(file); err != nil {
						return s, err
					}
				}
				gm := genericMutant{File: file, Type: m.Type, Status: m.Status, Line: m.Line, Column: m.Column}
				if m.Line >= 1 && m.Line <= len(lines) {
					gm.Source = strings.TrimSpace(lines[m.Line-1])
				}
				explained := false
				for _, e := range eq {
					if e.matches(gm) {
						explained = true
						break
					}
				}
				if explained {
					s.Equivalent++
				} else {
					s.Unexplained = append(s.Unexplained, gm)
				}
			}
		}
	}
	sort.Slice(s.Unexplained, func(i, j int) bool {
		a, b := s.Unexplained[i], s.Unexplained[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
	})
	return s, nil
}

// gremlinsBinary builds go-gremlins once per version.
func gremlinsBinary(root string) (string, error) {
	dir := filepath.Join(root, ".cache", "tools", "gremlins-"+gremlinsVersion)
	bin := filepath.Join(dir, "gremlins")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.Command("go", "install", "github.com/go-gremlins/gremlins/cmd/gremlins@"+gremlinsVersion)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build go-gremlins %s: %v\n%s", gremlinsVersion, err, tail(out, 20))
	}
	return bin, nil
}

// uncachedTests returns environ with -count=1 added to GOFLAGS. go-gremlins sets every mutant's
// timeout from how long its coverage run of the package's tests took, and a second pass over an
// unchanged tree would find that run's result in Go's test cache: a test that takes seconds
// would be timed at a fraction of one, and the mutants would time out, each counted as detected.
func uncachedTests(environ []string) []string {
	out := make([]string, 0, len(environ)+1)
	flags := "-count=1"
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			if v = strings.TrimSpace(v); v != "" {
				flags = v + " " + flags
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GOFLAGS="+flags)
}

// runGeneric runs the generic pass over pkgs and prints each package's score. It fails when a
// mutant lives that equivalent.txt does not explain.
func runGeneric(root string, workers int, pkgs []string) int {
	bin, err := gremlinsBinary(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	eqText, err := os.ReadFile(filepath.Join(root, "hack", "mutants", "equivalent.txt"))
	if err != nil && !os.IsNotExist(err) {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	eq, err := parseEquivalents(string(eqText))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "gremlins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	defer os.RemoveAll(tmp)
	read := func(file string) ([]string, error) {
		b, err := os.ReadFile(filepath.Join(root, file))
		return strings.Split(string(b), "\n"), err
	}
	var scores []genericScore
	for _, p := range pkgs {
		out := filepath.Join(tmp, strings.ReplaceAll(p, "/", "_")+".json")
		cmd := exec.Command(bin, "unleash", "--silent", "--workers", fmt.Sprint(max(workers, 1)),
			"--timeout-coefficient", fmt.Sprint(gremlinsTimeoutCoefficient), "--output", out, "./"+p)
		cmd.Dir = root
		cmd.Env = uncachedTests(os.Environ())
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Printf("generic: %s: go-gremlins failed: %v\n%s\n", p, err, tail(b, 20))
			return 1
		}
		b, err := os.ReadFile(out)
		if err != nil {
			fmt.Printf("generic: %s: %v\n", p, err)
			return 1
		}
		var r gremlinsReport
		if err := json.Unmarshal(b, &r); err != nil {
			fmt.Printf("generic: %s: read go-gremlins' report: %v\n", p, err)
			return 1
		}
		s, err := tally(p, r, eq, read)
		if err != nil {
			fmt.Printf("generic: %s: %v\n", p, err)
			return 1
		}
		for _, m := range s.Unexplained {
			fmt.Printf("LIVED     %s:%d:%d %s  %s\n", m.File, m.Line, m.Column, m.Type, m.Source)
		}
		scores = append(scores, s)
	}
	fmt.Printf("\n%-26s %7s %9s %6s %10s %11s %12s %7s\n", "package", "killed", "timed out", "lived", "equivalent", "unexplained", "not covered", "score")
	failed := false
	for _, s := range scores {
		fmt.Printf("%-26s %7d %9d %6d %10d %11d %12d %6.1f%%\n", s.Pkg, s.Killed, s.TimedOut, s.Lived, s.Equivalent,
			len(s.Unexplained), s.NotCovered, s.Score())
		failed = failed || len(s.Unexplained) > 0
	}
	if failed {
		fmt.Println("\ngeneric: mutants live that equivalent.txt does not explain: kill each with a test, or list it with the reason it cannot change behavior")
		return 1
	}
	return 0
}
