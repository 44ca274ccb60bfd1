// Package cli is what the repository's command-line programs share on top of cobra: one way to
// run a command tree and end it, with exit status 0 on success (and on -h/--help, which never runs
// the command), 1 when the command failed, 2 on a command line it cannot run, and every failure
// as one line on stderr.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// UsageError is a command line the program cannot run (an unknown command or flag, a flag value
// of the wrong type or out of range, an unexpected argument, a missing flag): exit status 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// IsUsage tells whether err is a command line the program cannot run.
func IsUsage(err error) bool {
	var u UsageError
	if errors.As(err, &u) {
		return true
	}
	// The errors cobra makes itself: a command that does not exist (root's own check, or
	// cobra.NoArgs on a command of its own such as completion bash), or a flag marked required
	// and not given.
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command ") || strings.HasPrefix(msg, "required flag")
}

// NoArgs refuses positional arguments, naming the first.
func NoArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected argument %q: %s takes flags only (see %s --help)", args[0], c.CommandPath(), c.CommandPath())
	}
	return nil
}

// Prepare sets what every command tree of the repository does alike: output to out and errOut,
// no usage dump and no error printed by cobra (Execute prints the one line), and flag errors
// made usage errors that say where the help is.
func Prepare(root *cobra.Command, in io.Reader, out, errOut io.Writer) {
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(flagError)
}

// flagError makes a flag the command cannot parse a usage error. A long flag written with one
// dash (-kubeconfig, which Go's flag package took) gets told the two-dash spelling instead of
// pflag's "unknown shorthand flag 'k'".
func flagError(c *cobra.Command, err error) error {
	if strings.HasPrefix(err.Error(), "unknown shorthand flag") {
		if name := singleDashLong(c, err); name != "" {
			return Usagef("-%s: a long flag takes two dashes: --%s (see %s --help)", name, name, c.CommandPath())
		}
	}
	return Usagef("%v (see %s --help)", err, c.CommandPath())
}

// singleDashLong finds, in pflag's "unknown shorthand flag: 'k' in -kubeconfig", a long flag the
// command has (kubeconfig), or "".
func singleDashLong(c *cobra.Command, err error) string {
	_, arg, ok := strings.Cut(err.Error(), " in -")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(arg, "=")
	if c.Flags().Lookup(name) != nil {
		return name
	}
	return ""
}

// Execute runs root with args and returns the process exit status. A failure is printed as
// "COMMAND PATH: error" on errOut, on one line unless the error itself lists several problems.
func Execute(root *cobra.Command, args []string, errOut io.Writer) int {
	if args == nil {
		args = []string{} // nil makes cobra read os.Args
	}
	root.SetArgs(args)
	completionNeedsAShell(root, args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command ") {
		msg = unknownCommand(cmd, msg)
	}
	fmt.Fprintf(errOut, "%s: %s\n", cmd.CommandPath(), msg)
	if IsUsage(err) {
		return 2
	}
	return 1
}

// completionNeedsAShell makes "completion" without a shell, or with one cobra does not know, a
// usage error rather than its help and exit status 0.
func completionNeedsAShell(root *cobra.Command, args []string) {
	root.InitDefaultCompletionCmd(args...) // what ExecuteC does first; it adds the command once
	for _, c := range root.Commands() {
		if c.Name() != "completion" || c.Runnable() {
			continue
		}
		var shells []string
		for _, s := range c.Commands() {
			shells = append(shells, s.Name())
		}
		c.Args = func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return Usagef("unknown shell %q: want %s", args[0], strings.Join(shells, ", "))
			}
			return nil
		}
		c.RunE = func(c *cobra.Command, _ []string) error {
			return Usagef("name a shell: %s (for example %s bash)", strings.Join(shells, ", "), c.CommandPath())
		}
	}
}

// unknownCommand rewrites cobra's "unknown command "x" for "prog"\n\nDid you mean this?\n\t..."
// as one line that lists the commands.
func unknownCommand(cmd *cobra.Command, msg string) string {
	first, _, _ := strings.Cut(msg, "\n")
	var name string
	if _, err := fmt.Sscanf(first, "unknown command %q", &name); err != nil {
		return first
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if !cmd.HasAvailableSubCommands() {
		return fmt.Sprintf("unexpected argument %q: %s takes no arguments (see %s --help)", name, cmd.CommandPath(), cmd.CommandPath())
	}
	hint := ""
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		hint = fmt.Sprintf("did you mean %s? ", strings.Join(s, " or "))
	}
	return fmt.Sprintf("unknown command %q (%scommands: %s; see %s --help)", name, hint, strings.Join(names, ", "), cmd.CommandPath())
}
