package main

import (
	"bytes"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = mainArgs(args, &o, &e)
	return code, o.String(), e.String()
}

func TestSimulateHoldsTheContract(t *testing.T) {
	code, out, errOut := runCLI("--seed", "3", "--steps", "20", "--quiet")
	if code != 0 || !strings.Contains(out, "every clause held") {
		t.Fatalf("celld-sim: exit %d\n%s%s", code, out, errOut)
	}
}

// TestHelpNeverRunsTheSequence: -h and --help print the help and exit 0 whatever else the
// command line holds, and no sequence runs (no summary).
func TestHelpNeverRunsTheSequence(t *testing.T) {
	for _, args := range [][]string{
		{"-h"},
		{"--help"},
		{"-h", "--steps", "3"},
		{"--seed", "3", "--steps", "3", "--help"},
		{"--steps", "0", "-h"},
	} {
		code, out, errOut := runCLI(args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "Usage:") || !strings.Contains(out, "--steps") {
			t.Errorf("%v: exit %d, stderr %q, stdout:\n%s\nwant exit 0 and the help", args, code, errOut, out)
		}
		if strings.Contains(out, "seed 3:") || strings.Contains(out, "contract checks") || strings.Contains(out, "every clause held") {
			t.Errorf("%v: a sequence ran:\n%s", args, out)
		}
	}
}

// TestBadInputIsOneClearLine: a command line it cannot run exits 2 with one line on stderr, and
// runs nothing.
func TestBadInputIsOneClearLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--steps", "0"}, "--steps 0: want at least 1"},
		{[]string{"--steps", "many"}, `invalid argument "many" for "--steps" flag`},
		{[]string{"--seed", "-1"}, `invalid argument "-1" for "--seed" flag`},
		{[]string{"--quiet=perhaps"}, `invalid argument "perhaps" for "--quiet" flag`},
		{[]string{"--steps"}, "flag needs an argument: --steps"},
		{[]string{"--nope"}, "unknown flag: --nope"},
		{[]string{"-seed", "3"}, "-seed: a long flag takes two dashes: --seed"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--steps", "3", "extra"}, `unexpected argument "extra"`},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "celld-sim: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
