package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/celld/celld-operator/machine"
)

// errUsage is returned after a flag set already printed what was wrong.
var errUsage = errors.New("usage")

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("celld-operator "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func init() {
	register("diagram", "export the lifecycle machine (--format dot|mermaid)", func(args []string, stdout, stderr io.Writer) error {
		fs := newFlags("diagram", stderr)
		format := fs.String("format", "dot", "dot or mermaid")
		if err := parse(fs, args); err != nil {
			return err
		}
		switch *format {
		case "dot":
			_, err := io.WriteString(stdout, machine.DOT())
			return err
		case "mermaid":
			_, err := io.WriteString(stdout, machine.Mermaid())
			return err
		}
		return fmt.Errorf("--format %q: want dot or mermaid", *format)
	})
}
