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

func TestBadInputIsOneClearLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--steps", "0"}, "--steps 0"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		code, _, errOut := runCLI(tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want a non-zero exit and one line containing %q", tc.args, code, errOut, tc.want)
		}
	}
}
