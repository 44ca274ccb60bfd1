package machine

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeDiagramIsTheExport: the Mermaid block the README shows is the diagram the machine
// exports, byte for byte, so the picture users read cannot drift from the table the operator runs.
func TestReadmeDiagramIsTheExport(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```mermaid\n"
	s := string(b)
	i := strings.Index(s, open)
	if i < 0 {
		t.Fatal("README.md has no mermaid block")
	}
	s = s[i+len(open):]
	j := strings.Index(s, "```")
	if j < 0 {
		t.Fatal("README.md's mermaid block is not closed")
	}
	if got, want := s[:j], Mermaid(); got != want {
		t.Errorf("README.md's mermaid block differs from celld-operator diagram --format mermaid; paste the export:\n--- README\n%s\n--- export\n%s", got, want)
	}
}
