package main

import (
	"errors"
	"strings"
	"testing"
)

const (
	quickV1 = "# Benchmarks\n\nquick table 1\n"
	quickV2 = "# Benchmarks\n\nquick table 2\n"
	longV1  = "## Long mode: 500 fleets\n\nlong table 1\n"
	longV2  = "## Long mode: 500 fleets\n\nlong table 2\n"
)

func quickBlock(body string) string {
	return "<!-- bench:quick -->\n" + body + "<!-- /bench:quick -->\n"
}

func longBlock(body string) string {
	return "<!-- bench:long -->\n" + body + "<!-- /bench:long -->\n"
}

// TestMergePart: each mode replaces only its own part of docs/benchmarks.md, in either order, and
// a file written before there were parts is taken as the quick mode's.
func TestMergePart(t *testing.T) {
	both := quickBlock(quickV1) + "\n" + longBlock(longV1)
	for _, c := range []struct {
		name, doc, part, body, want string
	}{
		{"quick into an empty file", "", quickPart, quickV1, quickBlock(quickV1)},
		{"long into an empty file", "", longPart, longV1, longBlock(longV1)},
		{"quick replaces a marker-less file whole", quickV1, quickPart, quickV2, quickBlock(quickV2)},
		{"long keeps a marker-less file as the quick part", quickV1, longPart, longV1, both},
		{"long inserted after the quick part", quickBlock(quickV1), longPart, longV1, both},
		{"quick inserted before the long part", longBlock(longV1), quickPart, quickV1, both},
		{"quick replaced, long kept", both, quickPart, quickV2, quickBlock(quickV2) + "\n" + longBlock(longV1)},
		{"long replaced, quick kept", both, longPart, longV2, quickBlock(quickV1) + "\n" + longBlock(longV2)},
		{"a body without a final line break", both, longPart, strings.TrimSuffix(longV2, "\n"), quickBlock(quickV1) + "\n" + longBlock(longV2)},
		{"what is outside the parts is kept", "intro\n" + both + "outro\n", quickPart, quickV2,
			"intro\n" + quickBlock(quickV2) + "\n" + longBlock(longV1) + "outro\n"},
		{"a part without its end marker is not a part", "<!-- bench:long -->\nhalf\n", quickPart, quickV1, quickBlock(quickV1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := mergePart(c.doc, c.part, c.body); got != c.want {
				t.Errorf("mergePart(%q, %s, %q) =\n%s\nwant\n%s", c.doc, c.part, c.body, got, c.want)
			}
		})
	}

	// Both orders from nothing, and from a marker-less file, end in the same file; writing a part
	// again with the same body changes nothing.
	quickFirst := mergePart(mergePart("", quickPart, quickV1), longPart, longV1)
	longFirst := mergePart(mergePart("", longPart, longV1), quickPart, quickV1)
	if quickFirst != both || longFirst != both {
		t.Errorf("quick then long:\n%s\nlong then quick:\n%s\nwant both:\n%s", quickFirst, longFirst, both)
	}
	if again := mergePart(both, quickPart, quickV1); again != both {
		t.Errorf("the same quick part again changed the file:\n%s", again)
	}
	if again := mergePart(both, longPart, longV1); again != both {
		t.Errorf("the same long part again changed the file:\n%s", again)
	}
}

func TestModePart(t *testing.T) {
	for fleets, want := range map[int]string{50: quickPart, 100: quickPart, 101: longPart, 500: longPart} {
		if got := modePart(fleets); got != want {
			t.Errorf("modePart(%d) = %s, want %s", fleets, got, want)
		}
	}
}

// TestWantScale: the scale phase runs in the long mode, or when -only names it.
func TestWantScale(t *testing.T) {
	for _, c := range []struct {
		fleets int
		only   string
		want   bool
	}{
		{50, "", false}, {500, "", true}, {50, "scale", true}, {500, "steady", false}, {50, "core,scale", true},
	} {
		only := map[string]bool{}
		for _, s := range strings.Split(c.only, ",") {
			if s != "" {
				only[s] = true
			}
		}
		b := &bench{cfg: config{fleets: c.fleets, only: only}}
		if got := b.want("scale"); got != c.want {
			t.Errorf("fleets %d, -only %q: want(scale) = %v, want %v", c.fleets, c.only, got, c.want)
		}
		if c.only == "" && !b.want("steady") {
			t.Errorf("fleets %d: steady does not run by default", c.fleets)
		}
	}
}

// TestFailedScale: a run whose scale phase failed exits non-zero.
func TestFailedScale(t *testing.T) {
	if !(&report{scaleErr: errors.New("boom")}).failed() {
		t.Error("a failed scale phase does not fail the run")
	}
	if (&report{scale: scaleMet()}).failed() {
		t.Error("a scale phase that measured fails the run")
	}
}
