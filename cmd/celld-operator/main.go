// Command celld-operator runs celld fleets on Kubernetes, and exports and renders the lifecycle
// machine it runs. The simulator is cmd/celld-sim, so this binary does not link it.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) error) {
	commands[name] = command{summary: summary, run: run}
}

func init() {
	register("version", "print the version", func(_ []string, stdout, _ io.Writer) error {
		_, err := fmt.Fprintln(stdout, version)
		return err
	})
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: celld-operator <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}

func main() { os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr)) }

// mainArgs runs one command and returns the process exit code: 0 on success, 1 when the command
// failed, 2 on a usage error. Every failure is one line on stderr.
func mainArgs(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "celld-operator: unknown command %q (try: %s)\n", args[0], strings.Join(sortedNames(), ", "))
		return 2
	}
	if err := c.run(args[1:], stdout, stderr); err != nil {
		if err == errUsage {
			return 2
		}
		fmt.Fprintf(stderr, "celld-operator %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func sortedNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
