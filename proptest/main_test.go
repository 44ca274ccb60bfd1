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
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.memprofile"); f == nil || f.Value.String() == "" {
		runtime.MemProfileRate = 0
	}
	os.Exit(m.Run())
}
