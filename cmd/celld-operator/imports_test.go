package main

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/celld/celld-operator"

// TestBinariesCarryNoTestMachinery: the operator image ships this binary and the krew plugin
// ships kubectl-celld, so neither may link what only tests need: Go's testing package, the
// simulator and the property harness (which drive a fake cluster and judge it), the end-to-end
// support (the contract judge, the control plane's scripts, the celld stand-in), the tools of
// hack/, another command, or a property-testing library.
func TestBinariesCarryNoTestMachinery(t *testing.T) {
	for _, bin := range []struct{ pkg, tags string }{
		{"./cmd/celld-operator", ""},
		{"./cmd/celld-operator", "faults"},
		{"./cmd/kubectl-celld", ""},
	} {
		out, err := exec.Command("go", "list", "-C", "../..", "-tags", bin.tags, "-deps", bin.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s (tags %q): %v\n%s", bin.pkg, bin.tags, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed %d packages; want the binary's whole closure", bin.pkg, len(deps))
		}
		self := module + strings.TrimPrefix(bin.pkg, ".")
		for _, d := range deps {
			if reason := testMachinery(d, self); reason != "" {
				t.Errorf("%s (tags %q) links %s: %s", bin.pkg, bin.tags, d, reason)
			}
		}
	}
}

// testMachinery says why the package at path is test machinery in the binary self, "" when it
// is not.
func testMachinery(path, self string) string {
	switch {
	case path == "testing" || strings.HasPrefix(path, "testing/"):
		return "Go's testing package"
	case path == "pgregory.net/rapid" || strings.HasPrefix(path, "github.com/stretchr/testify"):
		return "a test library"
	case path == self || !strings.HasPrefix(path, module+"/"):
		return ""
	}
	rel := strings.TrimPrefix(path, module+"/")
	for _, prefix := range []string{"drivers/sim", "proptest", "e2e", "hack", "cmd"} {
		if rel == prefix || strings.HasPrefix(rel, prefix+"/") {
			return "test machinery or another program (" + prefix + "/)"
		}
	}
	return ""
}

// The check itself: each kind of test machinery is named, and the product is not.
func TestTestMachineryIsTold(t *testing.T) {
	self := module + "/cmd/celld-operator"
	for path, want := range map[string]bool{
		"testing":                       true,
		"testing/fstest":                true,
		"pgregory.net/rapid":            true,
		module + "/drivers/sim":         true,
		module + "/proptest/harness":    true,
		module + "/e2e/contract":        true,
		module + "/e2e/celldstore/load": true,
		module + "/hack/bench":          true,
		module + "/cmd/celld":           true,
		module + "/cmd/celld-sim":       true,
		self:                            false,
		module + "/drivers/kube":        false,
		module + "/machine":             false,
		module + "/internal/cli":        false,
		module + "/e2emodel":            false, // a name that only begins like test machinery
		"k8s.io/client-go/testing":      false, // client-go's own, linked by its typed clients
		"testingx.invalid/pkg":          false,
	} {
		if got := testMachinery(path, self) != ""; got != want {
			t.Errorf("testMachinery(%q) = %v, want %v", path, got, want)
		}
	}
}
