// Command celld-load writes to a celld fleet, journaling every acknowledged write, and checks a
// fleet against the journal: the instrument that tells whether acknowledged writes were lost.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/celld/celld-operator/e2e/celldstore/load"
	"github.com/celld/celld-operator/internal/cli"
)

func main() { os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr)) }

// mainArgs returns the exit status: 0 when nothing was lost, 1 when a write was lost or the run
// failed, 2 on a command line it cannot run.
func mainArgs(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(newRoot(stdout, stderr), args, stderr)
}

func newRoot(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "celld-load",
		Short: "Write to a celld fleet with a journal, and check the fleet against it",
	}
	root.AddCommand(newWrite(out), newCheck(out))
	cli.Prepare(root, os.Stdin, out, errOut)
	return root
}

func members(list string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, cli.Usagef("--members is required: client addresses host:port, comma-separated")
	}
	return out, nil
}

func newWrite(out io.Writer) *cobra.Command {
	var (
		list, journal string
		cfg           load.WriteConfig
		duration      time.Duration
	)
	c := &cobra.Command{
		Use:   "write",
		Short: "Write unique keys until signalled or for --duration, journaling every acknowledged write",
		Long: `write sends PUT /v1/keys/<key> to the members in turn, each key new, its value derived from the
key. Every acknowledged write is appended to the journal (one JSON line: key, sha256 of the value,
member, address, time) and fsync'd before it is counted. A host name in --members stands for
every address it resolves to, looked up again every second.`,
		Example: `  celld-load write --members myfleet.ns.svc:7000 --journal /var/tmp/acks.jsonl --duration 10m
  celld-load write --members 127.0.0.1:7000,127.0.0.1:7100 --journal acks.jsonl --rate 200`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var err error
			if cfg.Members, err = members(list); err != nil {
				return err
			}
			if journal == "" {
				return cli.Usagef("--journal is required")
			}
			cfg.Journal = journal
			ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			stats, err := load.Write(ctx, cfg)
			fmt.Fprintln(out, stats)
			if stats.LastError != "" {
				fmt.Fprintln(out, "last refusal:", stats.LastError)
			}
			return err
		},
	}
	c.Flags().StringVar(&list, "members", "", "client addresses host:port, comma-separated")
	c.Flags().StringVar(&journal, "journal", "", "file the acknowledged writes are appended to")
	c.Flags().IntVar(&cfg.Workers, "workers", 4, "concurrent writers")
	c.Flags().Float64Var(&cfg.Rate, "rate", 0, "writes per second, all workers together (0: unbounded)")
	c.Flags().StringVar(&cfg.Prefix, "prefix", "", "key prefix (default: random, new every run)")
	c.Flags().DurationVar(&duration, "duration", 0, "stop after this long (0: until signalled)")
	return c
}

func newCheck(out io.Writer) *cobra.Command {
	var (
		list, journal string
		settle        time.Duration
	)
	c := &cobra.Command{
		Use:   "check",
		Short: "Check every acknowledged write in the journal against the members' keys",
		Long: `check reads the journal and GET /v1/keys of every member, and prints how many acknowledged writes
it checked and each one no member holds with the content written: the key, the member that
acknowledged it and when. It exits 1 if any was lost. Give every member: a write held only by a
member left out counts as lost.`,
		Example: `  celld-load check --members 127.0.0.1:7000,127.0.0.1:7100,127.0.0.1:7200 --journal acks.jsonl`,
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			addrs, err := members(list)
			if err != nil {
				return err
			}
			if journal == "" {
				return cli.Usagef("--journal is required")
			}
			rep, err := load.Check(c.Context(), load.CheckConfig{Journal: journal, Members: addrs, Settle: settle})
			if err != nil {
				return err
			}
			fmt.Fprint(out, rep)
			if len(rep.Lost) > 0 {
				return fmt.Errorf("%d of %d acknowledged writes lost", len(rep.Lost), rep.Checked)
			}
			return nil
		},
	}
	c.Flags().StringVar(&list, "members", "", "client addresses host:port, comma-separated")
	c.Flags().StringVar(&journal, "journal", "", "the journal celld-load write kept")
	c.Flags().DurationVar(&settle, "settle", 0, "keep reading the members this long while writes look lost (members still copying)")
	return c
}
