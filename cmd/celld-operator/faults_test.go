//go:build faults

package main

import (
	"strings"
	"testing"
)

func TestFaultFlagsRefuseBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--api-fault-rate", "1.5"}, "--api-fault-rate 1.5: want a share from 0 to 1"},
		{[]string{"run", "--api-fault-rate", "-0.1"}, "--api-fault-rate -0.1: want a share from 0 to 1"},
		{[]string{"run", "--api-fault-rate", "NaN"}, "--api-fault-rate NaN: want a share from 0 to 1"},
		{[]string{"run", "--api-fault-rate", "often"}, `invalid value "often" for flag -api-fault-rate`},
		{[]string{"run", "--api-fault-seed", "-1"}, `invalid value "-1" for flag -api-fault-seed`},
	} {
		code, _, errOut := runCLI(tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want a non-zero exit and one line containing %q", tc.args, code, errOut, tc.want)
		}
	}
}
