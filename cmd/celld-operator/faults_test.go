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
		{[]string{"run", "--api-fault-rate", "often"}, `invalid argument "often" for "--api-fault-rate" flag`},
		{[]string{"run", "--api-fault-seed", "-1"}, `invalid argument "-1" for "--api-fault-seed" flag`},
	} {
		code, _, errOut := runCLI(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line containing %q", tc.args, code, errOut, tc.want)
		}
	}
}
