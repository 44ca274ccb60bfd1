// Command celld-sim runs random lifecycle sequences through the simulator with every contract
// check. It is its own binary so that the operator image links neither the simulator nor the
// property harness.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr)) }

// mainArgs returns the process exit code: 0 when every clause held, 1 on a violation or a failed
// run, 2 on a flag it does not know. Every failure is one line on stderr.
func mainArgs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("celld-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "seed of the sequence: the same seed replays the same story")
	steps := fs.Int("steps", 40, "how many user actions and faults the sequence has")
	quiet := fs.Bool("quiet", false, "print only the summary")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "celld-sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *steps < 1 {
		fmt.Fprintf(stderr, "celld-sim: --steps %d: want at least 1\n", *steps)
		return 1
	}
	if err := simulate(stdout, *seed, *steps, *quiet); err != nil {
		fmt.Fprintf(stderr, "celld-sim: %v\n", err)
		return 1
	}
	return 0
}
