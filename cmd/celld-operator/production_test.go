//go:build !faults

package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionBuildCannotInjectFaults: without -tags faults the binary has neither the flags
// nor the code that fails the operator's own requests, and the test build has both.
func TestProductionBuildCannotInjectFaults(t *testing.T) {
	for _, flag := range []string{"--api-fault-rate=0.5", "--api-fault-seed=3"} {
		code, _, errOut := runCLI("run", flag)
		name, _, _ := strings.Cut(flag, "=")
		if code != 2 || !strings.Contains(errOut, "unknown flag: "+name) {
			t.Errorf("run %s in the production build: exit %d, %q; want the flag unknown", flag, code, errOut)
		}
	}
	files := func(tags ...string) string {
		args := append([]string{"list"}, tags...)
		args = append(args, "-f", "{{join .GoFiles \" \"}}", "github.com/celld/celld-operator/drivers/kube", "github.com/celld/celld-operator/cmd/celld-operator")
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return " " + strings.ReplaceAll(string(out), "\n", " ") + " "
	}
	if prod := files(); strings.Contains(prod, " faults.go ") {
		t.Errorf("the production build compiles faults.go: %s", prod)
	}
	if test := files("-tags", "faults"); strings.Count(test, " faults.go ") != 2 {
		t.Errorf("the test build (-tags faults) lacks faults.go in drivers/kube or cmd/celld-operator: %s", test)
	}
}
