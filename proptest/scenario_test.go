package proptest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celld/celld-operator/proptest/harness"
)

var update = flag.Bool("update", false, "rewrite the scenarios' golden files")

// TestScenarios plays every script under testdata/scenarios and compares the story with its
// golden file (regenerate with -update after reviewing the change).
func TestScenarios(t *testing.T) {
	scripts, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scenario scripts: %v", err)
	}
	for _, path := range scripts {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name, func(t *testing.T) {
			in, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			var out bytes.Buffer
			if err := harness.RunScript(in, &out); err != nil {
				t.Fatalf("%v\nstory so far:\n%s", err, out.String())
			}
			golden := strings.TrimSuffix(path, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read %s (run go test ./proptest -run TestScenarios -update): %v", golden, err)
			}
			if !bytes.Equal(want, out.Bytes()) {
				t.Errorf("%s: story changed; review and run go test ./proptest -run TestScenarios -update:\n%s", name, out.String())
			}
		})
	}
}
