package main

import (
	"path/filepath"
	"testing"
)

// TestTableApplies: every mutant's original occurs exactly once in its file, so a change to the
// code cannot silently turn a mutant into a no-op; names are unique and every mutant says what
// mistake it models and what it threatens.
func TestTableApplies(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(Table) < 35 {
		t.Errorf("%d mutants; want at least 35", len(Table))
	}
	seen := map[string]bool{}
	for _, m := range Table {
		if seen[m.Name] {
			t.Errorf("mutant %s listed twice", m.Name)
		}
		seen[m.Name] = true
		if m.Mistake == "" || m.Threatens == "" {
			t.Errorf("mutant %s: say what mistake it models and what it threatens", m.Name)
		}
		if err := m.check(root); err != nil {
			t.Errorf("mutant %s: %v", m.Name, err)
		}
	}
}

// Only the suites that need a control plane are left out of the mutants' runs: the support
// packages beside them have tests that need none, and they judge mutants too.
func TestEndToEndSuitesLeftOut(t *testing.T) {
	for dir, want := range map[string]bool{
		"e2e": true, "e2e/realnodes": true, "e2e/realnodes/shipper": true,
		"e2e/contract": false, "e2e/celldstore/load": false, "e2e/testenv": false,
		"machine": false, "e2e2": false,
	} {
		if got := endToEnd(dir); got != want {
			t.Errorf("endToEnd(%q) = %v, want %v", dir, got, want)
		}
	}
}

// A kill by go test's timeout is told from a kill by a failing test.
func TestTimedOutKillsAreNamed(t *testing.T) {
	for out, want := range map[string]bool{
		"panic: test timed out after 10m0s\n\trunning tests:\n\t\tTestContract (9m59s)\n":    true,
		"--- FAIL: TestContract (1.20s)\n    contract_test.go:88: clause 1 violated\nFAIL\n": false,
		"ok  \tgithub.com/celld/celld-operator/machine\t60.1s\n":                             false,
	} {
		if got := timedOut([]byte(out)); got != want {
			t.Errorf("timedOut(%q) = %v, want %v", out, got, want)
		}
	}
}
