// Command celld-sim runs random lifecycle sequences through the simulator with every contract
// check. It is its own binary so that the operator image links neither the simulator nor the
// property harness.
package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/celld/celld-operator/internal/cli"
)

func main() { os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr)) }

// mainArgs returns the process exit code: 0 when every clause held (and on -h/--help, which
// never runs a sequence), 1 on a violation or a failed run, 2 on a command line it cannot run.
// Every failure is one line on stderr.
func mainArgs(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(newRoot(stdout, stderr), args, stderr)
}

func newRoot(out, errOut io.Writer) *cobra.Command {
	var (
		seed  uint64
		steps int
		quiet bool
	)
	root := &cobra.Command{
		Use:   "celld-sim",
		Short: "Run a random lifecycle sequence through the simulator, with every contract check",
		Long: `celld-sim runs one random sequence of user actions and faults against the operator's loop on the
simulator, checking every clause of the contract after each step, then lets the fleets converge.
It prints the story (unless --quiet) and a summary, and exits 1 on a violation.`,
		Example: `  celld-sim --seed 7 --steps 100
  celld-sim --seed 7 --quiet`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if steps < 1 {
				return cli.Usagef("--steps %d: want at least 1", steps)
			}
			return simulate(c.OutOrStdout(), seed, steps, quiet)
		},
	}
	cli.Prepare(root, os.Stdin, out, errOut)
	root.Flags().Uint64Var(&seed, "seed", 1, "seed of the sequence: the same seed replays the same story")
	root.Flags().IntVar(&steps, "steps", 40, "how many user actions and faults the sequence has")
	root.Flags().BoolVar(&quiet, "quiet", false, "print only the summary")
	return root
}
