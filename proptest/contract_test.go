package proptest

import (
	"flag"
	"fmt"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"
)

type rapidPicker struct{ t *rapid.T }

func (p rapidPicker) Int(label string, min, max int) int {
	return rapid.IntRange(min, max).Draw(p.t, label)
}

// sequences and rounds count what the property tests checked, for `make fuzz` to print.
var sequences, totalRounds, checks atomic.Int64

var storyFlag = flag.Bool("story", false, "print the story of every sequence (use with -rapid.seed)")

// TestContract drives random lifecycle sequences (users scaling, changing images, deleting and
// re-creating fleets, clearing status and history; nodes lost and unreachable, members crashing,
// broken rollouts, operator restarts, write conflicts, a noisy watch) through the simulator, and
// checks the safety contract after every round; then faults stop and every fleet must converge.
// A failure prints a seed: go test ./proptest -run TestContract -rapid.seed=N replays it.
func TestContract(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := NewWorld(10, rapid.Uint64().Draw(rt, "noise-seed"))
		p := rapidPicker{rt}
		if *storyFlag {
			w.Trace = func(l string) { fmt.Println(l) }
		}
		actions := map[string]func(*rapid.T){
			"": func(rt *rapid.T) {
				// The contract is checked after every round inside World.Step; here only that the
				// world is still whole.
				if w.C == nil || w.Op == nil {
					rt.Fatal("world lost")
				}
			},
		}
		for _, op := range Ops {
			op := op
			actions[op.Name] = func(rt *rapid.T) {
				if err := op.Do(w, rapidPicker{rt}); err != nil {
					rt.Fatalf("%s: %v", op.Name, err)
				}
			}
		}
		if err := Ops[0].Do(w, p); err != nil {
			rt.Fatal(err)
		}
		rt.Repeat(actions)
		if err := w.StopFaults(); err != nil {
			rt.Fatal(err)
		}
		if err := w.Converge(); err != nil {
			rt.Fatal(err)
		}
		sequences.Add(1)
		totalRounds.Add(int64(w.Rounds()))
		checks.Add(int64(w.Check.Total()))
	})
	t.Logf("contract held over %d sequences, %d rounds, %d checks", sequences.Load(), totalRounds.Load(), checks.Load())
	fmt.Printf("proptest: %d sequences, %d rounds (steps), %d contract checks, 0 violations\n", sequences.Load(), totalRounds.Load(), checks.Load())
}
