package proptest

import (
	"flag"
	"os"
	"runtime"
	"testing"
)

// TestMain turns the heap profiler off unless a profile is asked for. The profiler keeps a bucket
// per distinct allocating stack and walks them all at every GC; random lifecycle sequences reach
// ever more distinct stacks (deep comparisons recurse as deep as the objects), so over a long
// `make fuzz` run that walk came to take a third of the CPU and made each sequence slower than
// the one before it.
//
// It also fixes rapid's seed when none is given: `go test ./proptest` (and so make unit, CI and
// the mutation score) judges the same 100 sequences on every machine, so its coverage table, which
// fails on any clause or fault that was never judged, is the same from run to run, and a mutant
// killed once is killed every time. New sequences come from make fuzz, whose workers each pass
// a seed of their own.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.memprofile"); f == nil || f.Value.String() == "" {
		runtime.MemProfileRate = 0
	}
	if f := flag.Lookup("rapid.seed"); f != nil && f.Value.String() == "0" {
		if err := f.Value.Set(defaultSeed); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// defaultSeed is the seed of the 100 sequences go test runs when -rapid.seed is not given.
const defaultSeed = "20261209"
