package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func tree(ran *bool) *cobra.Command {
	root := &cobra.Command{Use: "prog"}
	var n int
	sub := &cobra.Command{
		Use:  "sub",
		Args: NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			*ran = true
			switch n {
			case 0:
				return Usagef("--num %d: want at least 1", n)
			case 1:
				return errors.New("it failed\non two lines")
			}
			return nil
		},
	}
	sub.Flags().IntVar(&n, "num", 2, "a number")
	sub.Flags().Bool("x", false, "a long flag of one letter")
	sub.Flags().BoolP("verbose", "v", false, "a flag with a shorthand")
	root.AddCommand(sub)
	return root
}

// TestExecute: the exit status and the one line on stderr for each kind of outcome.
func TestExecute(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		code    int
		ran     bool
		errLine string // "" when stderr must be empty
	}{
		{[]string{"sub"}, 0, true, ""},
		{[]string{"sub", "-h", "--num", "0"}, 0, false, ""},
		{[]string{"sub", "--num", "0"}, 2, true, "prog sub: --num 0: want at least 1\n"},
		{[]string{"sub", "--num", "1"}, 1, true, "prog sub: it failed\non two lines\n"},
		{[]string{"sub", "--num", "x"}, 2, false, `prog sub: invalid argument "x" for "--num" flag: strconv.ParseInt: parsing "x": invalid syntax (see prog sub --help)` + "\n"},
		{[]string{"sub", "-num", "3"}, 2, false, "prog sub: -num: a long flag takes two dashes: --num (see prog sub --help)\n"},
		{[]string{"sub", "-x"}, 2, false, "prog sub: -x: a long flag takes two dashes: --x (see prog sub --help)\n"},
		{[]string{"sub", "-vq"}, 2, false, "prog sub: unknown shorthand flag: 'q' in -q (see prog sub --help)\n"},
		{[]string{"sub", "--m"}, 2, false, "prog sub: unknown flag: --m (see prog sub --help)\n"},
		{[]string{"sub", "arg"}, 2, false, `prog sub: unexpected argument "arg": prog sub takes flags only (see prog sub --help)` + "\n"},
		{[]string{"sup"}, 2, false, `prog: unknown command "sup" (did you mean sub? commands: completion, sub; see prog --help)` + "\n"},
		{[]string{"zzzzzz"}, 2, false, `prog: unknown command "zzzzzz" (commands: completion, sub; see prog --help)` + "\n"},
		{[]string{"completion"}, 2, false, "prog completion: name a shell: bash, fish, powershell, zsh (for example prog completion bash)\n"},
		{[]string{"completion", "tcsh"}, 2, false, `prog completion: unknown shell "tcsh": want bash, fish, powershell, zsh` + "\n"},
	} {
		var ran bool
		var out, errOut bytes.Buffer
		root := tree(&ran)
		Prepare(root, strings.NewReader(""), &out, &errOut)
		code := Execute(root, tc.args, &errOut)
		if code != tc.code || ran != tc.ran || errOut.String() != tc.errLine {
			t.Errorf("%v: exit %d, ran %t, stderr %q; want %d, %t, %q", tc.args, code, ran, errOut.String(), tc.code, tc.ran, tc.errLine)
		}
	}
}
