// Command celld-operator runs celld fleets on Kubernetes, and exports and renders the lifecycle
// machine it runs. The simulator is cmd/celld-sim, so this binary does not link it.
package main

import (
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/celld/celld-operator/internal/cli"
)

func main() { os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr)) }

// mainArgs runs one command and returns the process exit code: 0 on success and on -h/--help
// (which never runs the command), 1 when the command failed, 2 on a command line it cannot run.
// Every failure is one line on stderr.
func mainArgs(args []string, stdout, stderr io.Writer) int {
	return execute(args, os.Stdin, stdout, stderr)
}

// execute is mainArgs with the standard input render -f - reads.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Execute(newRoot(stdin, stdout, stderr), args, stderr)
}

func newRoot(in io.Reader, out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "celld-operator",
		Short: "Run celld fleets on Kubernetes, and export and render the lifecycle machine it runs",
		Long: `celld-operator runs celld fleets on Kubernetes (celld-operator run), and shows offline what it
does: the lifecycle machine it runs (diagram) and the objects a fleet renders to (render).`,
		Version: version,
		// A command line without a command is a usage error, as an unknown command is.
		RunE: func(c *cobra.Command, _ []string) error {
			var names []string
			for _, s := range c.Commands() {
				if s.IsAvailableCommand() && s.Name() != "help" {
					names = append(names, s.Name())
				}
			}
			return cli.Usagef("name a command: %s (see %s --help)", strings.Join(names, ", "), c.CommandPath())
		},
	}
	cli.Prepare(root, in, out, errOut)
	// --version prints what the version command prints.
	root.SetVersionTemplate(strings.ReplaceAll(readBuild().String(), "{{", `{{"{{"}}`))
	root.AddCommand(newVersion(), newDiagram(), newRender(), newRun(), newSelftest())
	return root
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit, the build date and the Go version",
		Args:  cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := io.WriteString(c.OutOrStdout(), readBuild().String())
			return err
		},
	}
}
