package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository's root: this package sits in deploy/.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// tool is the path of a tool cluster/tools.sh builds from pinned source. A missing tool fails
// the test: it never skips.
func tool(t *testing.T, name string) string {
	t.Helper()
	bin := os.Getenv("CLUSTER_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot(t), ".cache", "cluster", "bin")
	}
	path := filepath.Join(bin, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not built (%v): run cluster/tools.sh %s (cluster/build.sh builds it too)", name, err, name)
	}
	return path
}

// run runs a tool and returns its combined output, failing the test when it fails.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// execOut runs a command and returns its output and error, for commands that must fail.
func execOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
