package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// coreResult is one machine benchmark over its -count repeats.
type coreResult struct {
	name      string // e.g. StepConverged/PersistentFleet/members=3
	decisions []float64
	allocs    []float64
	bytes     []float64
}

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// runCore runs the machine's Go benchmarks (machine/bench_test.go) and reads decisions/s and
// allocs/op from their output. A decision runs on one goroutine, so decisions/s is per core.
func (b *bench) runCore(ctx context.Context) ([]*coreResult, error) {
	args := []string{"test", "./machine", "-run", "^$", "-bench", ".", "-benchmem",
		"-count", strconv.Itoa(b.cfg.coreCount), "-benchtime", b.cfg.coreBenchtime}
	b.logf("go %s", strings.Join(args, " "))
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = b.root
	cmd.Stdout = io.MultiWriter(&out, b.log)
	cmd.Stderr = b.log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go test -bench ./machine: %w", err)
	}
	byName := map[string]*coreResult{}
	var order []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		r := byName[m[1]]
		if r == nil {
			r = &coreResult{name: m[1]}
			byName[m[1]] = r
			order = append(order, m[1])
		}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "decisions/s":
				r.decisions = append(r.decisions, v)
			case "allocs/op":
				r.allocs = append(r.allocs, v)
			case "B/op":
				r.bytes = append(r.bytes, v)
			}
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("no benchmark results in the output of go test -bench")
	}
	// Converged first, in the benchmark's own order; then the changes by kind and size (the
	// benchmark ranges over a map, so their order differs from run to run).
	sort.SliceStable(order, func(i, j int) bool {
		ci, cj := strings.HasPrefix(order[i], "StepConverged"), strings.HasPrefix(order[j], "StepConverged")
		if ci || cj {
			return ci && !cj
		}
		ki, ni := changeKey(order[i])
		kj, nj := changeKey(order[j])
		if ki != kj {
			return ki < kj
		}
		return ni < nj
	})
	out2 := make([]*coreResult, 0, len(order))
	for _, n := range order {
		out2 = append(out2, byName[n])
	}
	return out2, nil
}

// changeKey splits "StepChange/grow/members=9" into its kind and size.
func changeKey(name string) (string, int) {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return name, 0
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(parts[2], "members="))
	return parts[1], n
}

// coreSection is what the machine's benchmarks put in the report.
func coreSection(core []*coreResult) section {
	var sec section
	var slowConverged []*coreResult
	for _, c := range core {
		name := strings.TrimPrefix(c.name, "Step")
		allocs := median(c.allocs)
		measured := fmt.Sprintf("%s decisions/s (min %s, max %s); %s allocs, %s per decision",
			si(median(c.decisions)), si(minOf(c.decisions)), si(maxOf(c.decisions)), trim(allocs), bytesStr(median(c.bytes)))
		if strings.HasPrefix(c.name, "StepConverged") {
			ok := median(c.decisions) >= 1e6 && allocs == 0
			v := "met"
			if !ok {
				v = missText(median(c.decisions), 1e6, allocs)
				slowConverged = append(slowConverged, c)
			}
			sec.add("1", "core: "+strings.Replace(name, "Converged/", "converged fleet, ", 1), measured, "≥ 1,000,000/s per core, 0 allocs", v)
		} else {
			sec.add("1", "core: change, "+strings.TrimPrefix(name, "Change/"), measured, "(no target)", "")
		}
	}
	if len(slowConverged) > 0 {
		var names []string
		for _, c := range slowConverged {
			names = append(names, fmt.Sprintf("%s (%.0f ns per decision)", strings.TrimPrefix(c.name, "StepConverged/"), 1e9/median(c.decisions)))
		}
		sec.note("**Core, converged target missed** for %s. A converged step is one comparison: the view's "+
			"fingerprint, which events.Normalize computes once per observation (events/fingerprint.go), against the last quiet "+
			"decision's (machine/fleet.go). A step that costs more than that walks the view again (a fingerprint left unset, "+
			"or computed by the machine), or decides again although nothing changed: the profile of BenchmarkStepConverged "+
			"says which (go test ./machine -run '^$' -bench StepConverged -cpuprofile).",
			strings.Join(names, ", "))
	}
	return sec
}
