package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/celld/celld-operator/internal/cli"
	"github.com/celld/celld-operator/machine"
)

func newDiagram() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "diagram",
		Short: "Export the lifecycle machine the operator runs (--format dot|mermaid)",
		Example: `  celld-operator diagram --format dot | dot -Tsvg > lifecycle.svg
  celld-operator diagram --format mermaid`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var out string
			switch format {
			case "dot":
				out = machine.DOT()
			case "mermaid":
				out = machine.Mermaid()
			default:
				return cli.Usagef("--format %q: want dot or mermaid", format)
			}
			_, err := io.WriteString(c.OutOrStdout(), out)
			return err
		},
	}
	c.Flags().StringVar(&format, "format", "dot", "dot or mermaid")
	_ = c.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"dot", "mermaid"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}
