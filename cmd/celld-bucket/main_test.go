package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"--dir", "/tmp/x", "extra"}, {"--listen"}} {
		var out, errOut bytes.Buffer
		if code := mainArgs(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "celld-bucket") {
			t.Errorf("%v: exit %d, %q", args, code, errOut.String())
		}
	}
}
