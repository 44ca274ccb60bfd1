package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryCarriesOnlyTheOperator: the operator image ships this binary, so the simulator and
// the property harness (which drive a fake cluster and judge it) must not be linked into it.
func TestBinaryCarriesOnlyTheOperator(t *testing.T) {
	for _, tags := range []string{"", "faults"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps (tags %q): %v\n%s", tags, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps listed %d packages; want the operator's whole closure", len(deps))
		}
		for _, d := range deps {
			for _, banned := range []string{"/drivers/sim", "/proptest"} {
				if strings.HasPrefix(d, "github.com/celld/celld-operator"+banned) {
					t.Errorf("the operator binary (tags %q) links %s", tags, d)
				}
			}
		}
	}
}
