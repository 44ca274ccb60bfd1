package machine

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s (run go test ./machine -update to create it): %v", path, err)
	}
	if string(want) != got {
		t.Errorf("%s changed; review the diff and run go test ./machine -update to accept it:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

func TestDiagramGolden(t *testing.T) {
	golden(t, "lifecycle.dot", DOT())
	golden(t, "lifecycle.mmd", Mermaid())
}

func TestDiagramHasEveryState(t *testing.T) {
	dot, mmd := DOT(), Mermaid()
	for _, s := range States {
		if !strings.Contains(dot, string(s)) {
			t.Errorf("DOT lacks state %s", s)
		}
		if !strings.Contains(mmd, string(s)) {
			t.Errorf("Mermaid lacks state %s", s)
		}
	}
	if len(States) != 9 {
		t.Fatalf("the lifecycle has %d states, want exactly 9", len(States))
	}
}
