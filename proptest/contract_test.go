package proptest

import (
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/proptest/harness"
	"github.com/celld/celld-operator/proptest/judge"

	"pgregory.net/rapid"
)

type rapidPicker struct{ t *rapid.T }

func (p rapidPicker) Int(label string, min, max int) int {
	return rapid.IntRange(min, max).Draw(p.t, label)
}

var storyFlag = flag.Bool("story", false, "print the story of every sequence (use with -rapid.seed)")

// TestContract drives random lifecycle sequences (users scaling, changing images, deleting and
// re-creating fleets, clearing status and history; nodes lost and unreachable, members crashing,
// broken rollouts, operator restarts, write conflicts, a noisy watch) through the simulator, and
// checks the safety contract after every round; then faults stop and every fleet must converge.
// A failure prints a seed: go test ./proptest -run TestContract -rapid.seed=N replays it.
func TestContract(t *testing.T) {
	contract(t, harness.Ops, harness.FaultKinds)
}

// TestContractUnderDrains: the same, with node maintenance among the ops (nodes cordoned, their
// members evicted through the disruption budget, uncordoned later or when faults stop). Its own
// test, so that TestContract's fixed sequences, and the mutants they kill, stay what they are.
func TestContractUnderDrains(t *testing.T) {
	contract(t, append(append([]harness.Op{}, harness.Ops...), harness.DrainOps...), harness.DrainFaultKinds)
}

func contract(t *testing.T, ops []harness.Op, required []string) {
	// sequences and rounds count what the property test checked, for `make fuzz` to print.
	var sequences, totalRounds, checks atomic.Int64
	cover := &coverage{clauses: map[string]int{}, extra: map[string]int{}, faults: map[string]int{}, paths: map[string]int{}, required: required}
	rapid.Check(t, func(rt *rapid.T) {
		w := harness.NewWorld(10, rapid.Uint64().Draw(rt, "noise-seed"))
		w.Adversarial = true
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
		for _, op := range ops {
			actions[op.Name] = func(rt *rapid.T) {
				if err := op.Do(w, rapidPicker{rt}); err != nil {
					rt.Fatalf("%s: %v", op.Name, err)
				}
			}
		}
		if err := ops[0].Do(w, p); err != nil {
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
		cover.add(w)
	})
	if t.Failed() {
		return
	}
	t.Logf("contract held over %d sequences, %d rounds, %d judged", sequences.Load(), totalRounds.Load(), checks.Load())
	fmt.Printf("proptest: %d sequences, %d rounds (steps), %d contract checks, 0 violations\n", sequences.Load(), totalRounds.Load(), checks.Load())
	fmt.Print(cover.table())
	if missing := cover.missing(); len(missing) > 0 {
		t.Fatalf("coverage: never judged or never occurred: %s", strings.Join(missing, "; "))
	}
}

// coverage sums, over the sequences of a run, what each clause judged, how often each fault
// kind occurred and each of the status writer's paths was taken.
type coverage struct {
	mu      sync.Mutex
	clauses map[string]int
	extra   map[string]int
	faults  map[string]int
	paths   map[string]int
	// required are the fault kinds the run must see.
	required []string
}

func (c *coverage) add(w *harness.World) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range w.Check.J.Judged {
		c.clauses[k] += n
	}
	for k, n := range w.Check.J.Extra {
		c.extra[k] += n
	}
	for k, n := range w.Faults {
		c.faults[k] += n
	}
	for k, n := range w.Op.Paths() {
		c.paths[k] += n
	}
}

// table prints one line per clause, fault kind and status writer path, "coverage:
// clause|judged|fault|path <count> <name>", so hack/fuzz.sh can sum the workers' tables.
func (c *coverage) table() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, k := range judge.Clauses {
		fmt.Fprintf(&b, "coverage: clause %9d  %s\n", c.clauses[k], k)
	}
	for _, k := range judge.Extras {
		fmt.Fprintf(&b, "coverage: judged %9d  %s\n", c.extra[k], k)
	}
	for _, k := range c.required {
		fmt.Fprintf(&b, "coverage: fault  %9d  %s\n", c.faults[k], k)
	}
	for _, k := range paths() {
		fmt.Fprintf(&b, "coverage: path   %9d  %s\n", c.paths[k], k)
	}
	return b.String()
}

// paths are the status writer's and the loop's paths a run must take.
func paths() []string {
	return append(append([]string{}, loop.StatusPaths...), loop.AnswerPaths...)
}

func (c *coverage) missing() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, k := range judge.Clauses {
		if c.clauses[k] == 0 {
			out = append(out, "clause "+k)
		}
	}
	for _, k := range judge.Extras {
		if c.extra[k] == 0 {
			out = append(out, "judged: "+k)
		}
	}
	for _, k := range c.required {
		if c.faults[k] == 0 {
			out = append(out, "fault "+k)
		}
	}
	for _, k := range paths() {
		if c.paths[k] == 0 {
			out = append(out, "path "+k)
		}
	}
	return out
}
