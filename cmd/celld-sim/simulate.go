package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/celld/celld-operator/proptest/harness"
)

func simulate(w io.Writer, seed uint64, steps int, quiet bool) error {
	world := harness.NewWorld(10, seed)
	world.Adversarial = true
	if !quiet {
		world.Trace = func(l string) { fmt.Fprintln(w, l) }
	}
	pick := harness.NewSeeded(seed)
	run := func() error {
		for i := 0; i < steps; i++ {
			op := harness.Ops[pick.Int("op", 0, len(harness.Ops)-1)]
			if err := op.Do(world, pick); err != nil {
				return fmt.Errorf("step %d (%s): %w", i+1, op.Name, err)
			}
		}
		if err := world.StopFaults(); err != nil {
			return err
		}
		return world.Converge()
	}
	err := run()
	fmt.Fprintf(w, "\nseed %d: %d steps, %d operator rounds, %d contract checks\n%s", seed, steps, world.Rounds(), world.Check.Total(), world.Check.Summary())
	var v *harness.Violation
	if errors.As(err, &v) {
		fmt.Fprintf(w, "VIOLATION of clause %s\n  %s\n", v.Clause, v.Detail)
		return fmt.Errorf("contract violated with seed %d", seed)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "every clause held; every fleet converged")
	return nil
}
