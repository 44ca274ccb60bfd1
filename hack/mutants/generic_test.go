package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseEquivalentsWantsAReason(t *testing.T) {
	good := "# a comment\n\nloop/trace.go ARITHMETIC_BASE x := -d -- d is never negative here\n"
	eq, err := parseEquivalents(good)
	if err != nil || len(eq) != 1 || eq[0] != (equivalent{File: "loop/trace.go", Type: "ARITHMETIC_BASE", Source: "x := -d", Why: "d is never negative here"}) {
		t.Fatalf("parseEquivalents = %+v, %v", eq, err)
	}
	for _, bad := range []string{
		"loop/trace.go ARITHMETIC_BASE x := -d\n",     // no reason
		"loop/trace.go ARITHMETIC_BASE x := -d -- \n", // an empty one
		"loop/trace.go -- why\n",                      // no type or source
	} {
		if _, err := parseEquivalents(bad); err == nil {
			t.Errorf("parseEquivalents(%q) accepted an entry that says nothing", bad)
		}
	}
}

func TestTallyExplainsOnlyTheListedLine(t *testing.T) {
	var r gremlinsReport
	if err := json.Unmarshal([]byte(`{"files":[{"file_name":"a.go","mutations":[
		{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":1,"column":1},
		{"type":"CONDITIONALS_NEGATION","status":"TIMED OUT","line":1,"column":5},
		{"type":"ARITHMETIC_BASE","status":"LIVED","line":2,"column":3},
		{"type":"ARITHMETIC_BASE","status":"LIVED","line":3,"column":3},
		{"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":2,"column":3},
		{"type":"INCREMENT_DECREMENT","status":"NOT COVERED","line":3,"column":1}]}]}`), &r); err != nil {
		t.Fatal(err)
	}
	src := map[string][]string{"pkg/a.go": {"if x {", "\ty := a + b", "\tz := a + b"}}
	read := func(f string) ([]string, error) { return src[f], nil }
	eq := []equivalent{{File: "pkg/a.go", Type: "ARITHMETIC_BASE", Source: "y := a + b", Why: "b is 0"}}
	s, err := tally("pkg", r, eq, read)
	if err != nil {
		t.Fatal(err)
	}
	if s.Killed != 1 || s.TimedOut != 1 || s.Lived != 3 || s.Equivalent != 1 || s.NotCovered != 1 || len(s.Unexplained) != 2 {
		t.Fatalf("tally = %+v", s)
	}
	// The same source elsewhere, or another mutation of the listed line, is not explained by it.
	got := []string{}
	for _, m := range s.Unexplained {
		got = append(got, m.Type+"@"+m.Source)
	}
	if want := "CONDITIONALS_BOUNDARY@y := a + b ARITHMETIC_BASE@z := a + b"; strings.Join(got, " ") != want {
		t.Errorf("unexplained %v, want %s", got, want)
	}
	// Detected 2 of the 4 that can change behavior.
	if sc := s.Score(); sc != 50 {
		t.Errorf("score %.1f, want 50", sc)
	}
}

// Every entry of equivalent.txt names a line its file still has: an entry whose line was edited
// away would explain nothing and hide that the claim was never re-examined.
func TestEquivalentsNameLinesThatExist(t *testing.T) {
	text, err := os.ReadFile("equivalent.txt")
	if err != nil {
		t.Fatal(err)
	}
	eq, err := parseEquivalents(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eq {
		b, err := os.ReadFile(filepath.Join("..", "..", e.File))
		if err != nil {
			t.Errorf("%s: %v", e.File, err)
			continue
		}
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			found = found || strings.TrimSpace(line) == e.Source
		}
		if !found {
			t.Errorf("equivalent.txt: %s no longer has the line %q: re-examine the mutant, then update or drop the entry", e.File, e.Source)
		}
	}
}

func TestGremlinsRunsTestsUncached(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []string
		want string
	}{
		{"no GOFLAGS", []string{"HOME=/root"}, "GOFLAGS=-count=1"},
		{"empty GOFLAGS", []string{"GOFLAGS=", "HOME=/root"}, "GOFLAGS=-count=1"},
		{"flags kept", []string{"GOFLAGS=-mod=mod -tags=faults", "HOME=/root"}, "GOFLAGS=-mod=mod -tags=faults -count=1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := uncachedTests(c.in)
			var flags []string
			for _, kv := range got {
				if strings.HasPrefix(kv, "GOFLAGS=") {
					flags = append(flags, kv)
				}
			}
			if len(flags) != 1 || flags[0] != c.want {
				t.Errorf("GOFLAGS in %q = %q, want exactly [%q]", got, flags, c.want)
			}
			if !slices.Contains(got, "HOME=/root") {
				t.Errorf("%q lost HOME=/root", got)
			}
		})
	}
}
